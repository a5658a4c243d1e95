//! Progress bars on a terminal; nothing when stderr is a pipe.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use neve_core::write::Progress;

/// Rows read and bytes written, as a spinner with counters.
pub struct Bar {
    bar: ProgressBar,
    bytes: std::sync::atomic::AtomicU64,
}

impl Bar {
    pub fn new(what: &str) -> Self {
        let bar = if std::io::stderr().is_terminal() {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {prefix} {human_pos} rows ({per_sec}) {msg} [{elapsed}]",
            )
            .expect("valid template"),
        );
        bar.set_prefix(what.to_string());
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Self {
            bar,
            bytes: Default::default(),
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Run `work` with a bar named `what`, cleared when it ends, whatever the outcome.
pub async fn with_bar<T, F, Fut>(what: &str, work: F) -> T
where
    F: FnOnce(std::sync::Arc<dyn Progress>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let bar = std::sync::Arc::new(Bar::new(what));
    let out = work(bar.clone()).await;
    bar.finish();
    out
}

impl Progress for Bar {
    fn rows_read(&self, rows: u64) {
        self.bar.inc(rows);
    }
    fn file_written(&self, bytes: u64) {
        let total = self
            .bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed)
            + bytes;
        self.bar.set_message(format!(
            "{} written",
            humansize::format_size(total, humansize::DECIMAL)
        ));
    }
}

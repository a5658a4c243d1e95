//! Crash points for tests: `NEVE_FAILPOINT=<name>` makes the process abort at that point,
//! as a SIGKILL would, so tests can check that a crash there leaves the table intact.

use std::sync::OnceLock;

/// Abort the process if `NEVE_FAILPOINT` names this point.
pub fn hit(name: &str) {
    static ARMED: OnceLock<Option<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| {
        std::env::var("NEVE_FAILPOINT")
            .ok()
            .filter(|s| !s.is_empty())
    });
    if armed.as_deref() == Some(name) {
        tracing::warn!(failpoint = name, "failpoint hit: aborting");
        std::process::abort();
    }
}

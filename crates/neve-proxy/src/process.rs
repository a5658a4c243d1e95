//! The process's own figures (CPU, memory, file descriptors, threads), under the names every
//! Prometheus client library gives them (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, …), so the usual dashboards and alerts work on neve's
//! processes too. Read from the kernel at each scrape; Linux only (elsewhere, none). And
//! `neve_build_info{version}`, which release runs.

use std::sync::LazyLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

/// Reads the process's figures when scraped.
#[derive(Debug)]
struct Process;

/// One reading.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: f64,
    virtual_bytes: f64,
    open_fds: f64,
    max_fds: f64,
    threads: f64,
    start_time_seconds: Option<f64>,
}

#[cfg(target_os = "linux")]
fn sample() -> Option<Sample> {
    // SAFETY: getrusage, getrlimit and sysconf write only into the structs passed.
    let (usage, limit, page, ticks) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0
            || libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0
        {
            return None;
        }
        (
            usage,
            limit,
            libc::sysconf(libc::_SC_PAGESIZE) as f64,
            libc::sysconf(libc::_SC_CLK_TCK) as f64,
        )
    };
    let time = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut pages = statm.split_whitespace().map(|v| v.parse::<f64>().ok());
    let (size, resident) = (pages.next()??, pages.next()??);
    // The fields after the command's name, which may hold spaces and parentheses: the state is
    // field 3, the thread count field 20, the start (clock ticks after boot) field 22.
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .collect::<Vec<_>>();
    let field = |n: usize| after.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())
    });
    Some(Sample {
        cpu_seconds: time(usage.ru_utime) + time(usage.ru_stime),
        resident_bytes: resident * page,
        virtual_bytes: size * page,
        open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as f64,
        max_fds: limit.rlim_cur as f64,
        threads: field(20)?,
        start_time_seconds: boot.zip(field(22)).map(|(b, s)| b + s / ticks),
    })
}

#[cfg(not(target_os = "linux"))]
fn sample() -> Option<Sample> {
    None
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(s) = sample() else { return Ok(()) };
        let cpu = ConstCounter::new(s.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let mut gauge = |name: &str, help: &str, v: f64| -> std::fmt::Result {
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
        };
        gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            s.resident_bytes,
        )?;
        gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            s.virtual_bytes,
        )?;
        gauge(
            "process_open_fds",
            "Open file descriptors (sockets included)",
            s.open_fds,
        )?;
        gauge(
            "process_max_fds",
            "The most file descriptors the process may open",
            s.max_fds,
        )?;
        gauge("process_threads", "Threads of the process", s.threads)?;
        if let Some(start) = s.start_time_seconds {
            gauge(
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                start,
            )?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Build {
    version: &'static str,
}

static PROCESS: LazyLock<Registry> = LazyLock::new(|| {
    let mut r = Registry::default();
    // Which release runs, for a rolling update's dashboards: always 1, the version a label.
    let build = Family::<Build, Gauge>::default();
    build
        .get_or_create(&Build {
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
    r.register(
        "neve_build_info",
        "The neve release this process runs",
        build,
    );
    r.register_collector(Box::new(Process));
    r
});

/// `registry`'s metrics, then the process's, as one OpenMetrics text.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode_registry(&mut out, registry)
        .and_then(|()| prometheus_client::encoding::text::encode_registry(&mut out, &PROCESS))
        .and_then(|()| prometheus_client::encoding::text::encode_eof(&mut out))
        .expect("writing to a String");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample named `name` in a rendered text.
    fn value(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    }

    #[test]
    fn the_process_figures_follow_the_registrys_own() {
        let mut r = Registry::with_prefix("neve");
        let c = prometheus_client::metrics::counter::Counter::<u64>::default();
        c.inc();
        r.register("things", "Things", c);
        // Some CPU, memory and a file to count.
        let held = std::fs::File::open("/proc/self/stat").unwrap();
        let mut spin = 0u64;
        for i in 0..20_000_000u64 {
            spin = spin.wrapping_add(i * i);
        }
        std::hint::black_box(spin);
        let text = render(&r);
        assert!(text.starts_with("# HELP neve_things"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        let build = format!(
            "neve_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&build), "{text}");
        if cfg!(target_os = "linux") {
            let v = |n| value(&text, n).unwrap_or_else(|| panic!("no {n} in {text}"));
            assert!(v("process_cpu_seconds_total") > 0.0);
            assert!(v("process_resident_memory_bytes") > 1e6);
            assert!(v("process_virtual_memory_bytes") >= v("process_resident_memory_bytes"));
            assert!(v("process_open_fds") >= 4.0);
            assert!(v("process_max_fds") >= v("process_open_fds"));
            assert!(v("process_threads") >= 1.0);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let start = v("process_start_time_seconds");
            assert!(
                start <= now + 1.0 && start > now - 86_400.0,
                "{start} {now}"
            );
        }
        drop(held);
    }
}

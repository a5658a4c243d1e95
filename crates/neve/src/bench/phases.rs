//! Where an insert's time goes, for `neve bench ingest`: the write path's per-part trace
//! events ("split batch", "grouped batch", "encoded part", "part statistics": the CPU time of each step on its thread) summed over a run, and the
//! process's CPU time. These give the bound a benchmark states beside its target: however fast
//! the rest gets, an insert cannot finish before its Parquet encoding, spread over the cores.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

static SPLIT_US: AtomicU64 = AtomicU64::new(0);
static GROUP_US: AtomicU64 = AtomicU64::new(0);
static SORT_US: AtomicU64 = AtomicU64::new(0);
static ENCODE_US: AtomicU64 = AtomicU64::new(0);
static STATS_US: AtomicU64 = AtomicU64::new(0);

/// The layer that sums the write path's part timings (registered for `bench ingest` only).
pub struct PartTimings;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PartTimings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Sum;
        impl Visit for Sum {
            fn record_u64(&mut self, field: &Field, value: u64) {
                match field.name() {
                    "split_cpu_us" => SPLIT_US.fetch_add(value, Ordering::Relaxed),
                    "group_cpu_us" => GROUP_US.fetch_add(value, Ordering::Relaxed),
                    "sort_cpu_us" => SORT_US.fetch_add(value, Ordering::Relaxed),
                    "encode_cpu_us" => ENCODE_US.fetch_add(value, Ordering::Relaxed),
                    "stats_cpu_us" => STATS_US.fetch_add(value, Ordering::Relaxed),
                    _ => 0,
                };
            }
            fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
        }
        event.record(&mut Sum);
    }
}

/// The filter [`PartTimings`] goes with: only the write path's trace events reach it.
pub fn part_timings_filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_target("neve_core::write", tracing::Level::TRACE)
}

/// CPU seconds of the write path's steps, summed over its threads, and the
/// process's CPU seconds (user + system), since the last call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    /// Conforming each input batch to the table's schema and assigning its rows' partitions.
    pub split_s: f64,
    /// Reordering each input batch by partition.
    pub group_s: f64,
    /// Sorting each part and gathering its rows in that order.
    pub sort_s: f64,
    /// The Parquet encoder (arrow-rs `ArrowWriter`, zstd).
    pub encode_s: f64,
    /// The log's per-file column statistics.
    pub stats_s: f64,
    pub cpu_s: f64,
}

/// A point to measure [`Phases`] from.
pub struct Mark {
    cpu_s: f64,
}

impl Mark {
    pub fn now() -> Self {
        for c in [&SPLIT_US, &GROUP_US, &SORT_US, &ENCODE_US, &STATS_US] {
            c.store(0, Ordering::Relaxed);
        }
        Self {
            cpu_s: process_cpu_s(),
        }
    }

    pub fn phases(&self) -> Phases {
        let s = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64 / 1e6;
        Phases {
            split_s: s(&SPLIT_US),
            group_s: s(&GROUP_US),
            sort_s: s(&SORT_US),
            encode_s: s(&ENCODE_US),
            stats_s: s(&STATS_US),
            cpu_s: process_cpu_s() - self.cpu_s,
        }
    }
}

/// User + system CPU seconds of this process, all threads.
pub(crate) fn process_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

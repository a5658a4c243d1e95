//! The `neve` command line.

mod bench;
mod cli;
mod commands;
mod error;
mod output;
mod progress;

use std::process::ExitCode;

use clap::Parser;

/// Every allocation of the binary (inserts, merges, syncs, queries, servers), as the Python
/// package's: glibc's malloc was 14% of an Iceberg sync's samples and 7% of the proxy's hot
/// reads (BENCHMARKS.md, issues 16 and 19). Without transparent huge pages (`no_thp`), which
/// made a fresh process's first insert fault in and clear 2 MiB pages.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its value in mimalloc 3's `mimalloc.h`, which the
/// crate's bindings do not name).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Memory freed goes back to the OS after 10 s unused, not mimalloc's 1 s, as in the Python
/// package: a server's or a stream's next batch would otherwise fault its memory in again.
fn tune_allocator() {
    // SAFETY: sets a global option, read by the allocator under its own synchronisation.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 10_000) };
}

fn main() -> ExitCode {
    tune_allocator();
    // A usage error exits 64 (EX_USAGE), as the CLI's own usage errors do, not clap's 2; help
    // and version print to stdout and exit 0.
    let args = match cli::Cli::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 64 } else { 0 });
        }
    };
    let timings = matches!(
        args.command,
        cli::Command::Bench(cli::BenchCommand::Ingest(_))
    );
    init_tracing(args.verbose, args.log_format, timings);
    // Tables on one bucket share a client: everything below runs on one runtime.
    neve_core::storage::share_s3_clients();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Deep (but allowed) expressions are planned by recursion.
        .thread_stack_size(16 << 20)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(70);
        }
    };
    match runtime.block_on(commands::run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// Logs to stderr as `NEVE_LOG` (or `-v`) says, as text or JSON lines; `part_timings` also
/// sums the write path's per-part timings for `bench ingest`.
fn init_tracing(verbose: u8, format: cli::LogFormat, part_timings: bool) {
    use tracing_subscriber::prelude::*;
    // s3s logs every refused S3 request (anonymous ones too) as an error; the proxy logs its
    // own failures, and refusals at info, so a client cannot flood the log at will. So s3s is
    // off unless `NEVE_LOG` names it.
    let default = match verbose {
        0 => "warn,s3s=off",
        1 => "info,neve=debug,neve_core=debug,s3s=off",
        _ => "debug,s3s=off",
    };
    let filter = std::env::var("NEVE_LOG")
        .ok()
        .and_then(|v| match v.contains("s3s") {
            true => tracing_subscriber::EnvFilter::try_new(v).ok(),
            false => tracing_subscriber::EnvFilter::try_new(format!("{v},s3s=off")).ok(),
        })
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default));
    // Never below info: s3s's debug events print whole requests (the `Authorization` header,
    // a presigned URL's signature) and the signature a tenant's secret makes.
    let filter = tracing_subscriber::filter::FilterExt::and(
        filter,
        tracing_subscriber::filter::Targets::new()
            .with_default(tracing::level_filters::LevelFilter::TRACE)
            .with_target("s3s", tracing::level_filters::LevelFilter::INFO),
    );
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false);
    let fmt = match format {
        cli::LogFormat::Text => fmt.with_filter(filter).boxed(),
        // The event's fields at the top level beside `timestamp`, `level` and `message`; the
        // spans it is in (a request's id, method and route) under `spans`.
        cli::LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_target(true)
            .with_filter(filter)
            .boxed(),
    };
    let timings = part_timings
        .then(|| bench::phases::PartTimings.with_filter(bench::phases::part_timings_filter()));
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(timings)
        .try_init();
}

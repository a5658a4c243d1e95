//! The `neve` command line.

mod bench;
mod cli;
mod commands;
mod error;
mod output;
mod progress;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
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

//! `neve bench log`: how long opening a table takes after many commits.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use neve_core::write::NoProgress;
use neve_core::{CreateOptions, InsertOptions, Table};

use super::median;
use crate::cli::BenchLogArgs;
use crate::error::{CliError, Result};

pub async fn run(a: BenchLogArgs) -> Result<()> {
    if !a.reuse {
        build(&a).await?;
    }
    let mut opens = Vec::new();
    let mut version = 0;
    for _ in 0..a.runs {
        let t = Instant::now();
        let s = Table::at(&a.table)?.snapshot().await?;
        opens.push(t.elapsed().as_secs_f64());
        version = s.version;
    }
    let exe = std::env::current_exe()?;
    let mut procs = Vec::new();
    for _ in 0..a.runs {
        let t = Instant::now();
        let out = tokio::process::Command::new(&exe)
            .args(["info", "--json", &a.table])
            .output()
            .await?;
        if !out.status.success() {
            return Err(CliError::Usage(
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ));
        }
        procs.push(t.elapsed().as_secs_f64());
    }
    println!(
        "{}",
        serde_json::json!({
            "bench": "log", "table": a.table, "version": version,
            "open_median_ms": median(opens.clone()) * 1e3,
            "neve_info_process_median_ms": median(procs.clone()) * 1e3,
            "open_runs_ms": opens.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
            "info_runs_ms": procs.iter().map(|s| s * 1e3).collect::<Vec<_>>(),
        })
    );
    Ok(())
}

async fn build(a: &BenchLogArgs) -> Result<()> {
    let table = Arc::new(Table::at(&a.table)?);
    table.create(CreateOptions::default()).await?;
    one_row_commits(table, a.commits, a.writers).await
}

/// `commits` one-row commits (a column `n`) by `writers` concurrent committers, with a
/// progress bar on a terminal.
pub(super) async fn one_row_commits(table: Arc<Table>, commits: u64, writers: usize) -> Result<()> {
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    let bar = indicatif::ProgressBar::new(commits);
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let writers = writers.max(1) as u64;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let n = commits / writers + u64::from(w < commits % writers);
        let table = table.clone();
        let schema = schema.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..n {
                let b = RecordBatch::try_new(
                    schema.clone(),
                    vec![Arc::new(Int64Array::from(vec![(w << 32 | i) as i64]))],
                )
                .map_err(|e| CliError::Core(e.into()))?;
                table
                    .insert_batches(
                        schema.clone(),
                        vec![b],
                        &InsertOptions::default(),
                        Arc::new(NoProgress),
                    )
                    .await?;
                bar.inc(1);
            }
            Ok::<_, CliError>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| CliError::Usage(e.to_string()))??;
    }
    bar.finish_and_clear();
    Ok(())
}

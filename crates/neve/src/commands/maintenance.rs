//! `neve merge`, `neve gc`, `neve drop-partition`, `neve delete`.

use neve_core::gc::GcOptions;
use neve_core::merge::{MergeOptions, MergeOrder};
use neve_core::Table;

use crate::cli::{DeleteArgs, DropPartitionArgs, GcArgs, IcebergCommand, MergeArgs, OrderArg};
use crate::error::Result;
use crate::output::{bytes, count};
use crate::progress::with_bar;

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
}

/// Print to stdout; a closed pipe is an error (exit 74), not a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        writeln!(std::io::stdout().lock(), $($arg)*)?;
    }};
}

fn print_json(v: &impl serde::Serialize) -> Result<()> {
    say!("{}", serde_json::to_string(v).expect("report serializes"));
    Ok(())
}

pub async fn merge(a: MergeArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let opts = MergeOptions {
        target_file_size: a.target_file_size,
        min_files: a.min_files,
        order: match a.order {
            OrderArg::Newest => MergeOrder::Newest,
            OrderArg::Oldest => MergeOrder::Oldest,
        },
        partitions: a.partitions.clone(),
        max_input_bytes: a.max_input_bytes,
        parallelism: a.parallelism.unwrap_or_else(cores).max(1),
        ..Default::default()
    };
    if a.dry_run {
        let plan = table.plan_merge(&opts).await?;
        if a.json {
            print_json(&plan)?;
            return Ok(());
        }
        say!(
            "would merge {} files ({}, {} rows) in {} partitions into about {} files (version {}){}",
            plan.files(),
            bytes(plan.bytes()),
            count(plan.rows()),
            plan.partitions(),
            plan.groups.len(),
            plan.version,
            deferred(plan.deferred_partitions)
        );
        for g in &plan.groups {
            say!(
                "  {:<32} {:>6} files {:>10} {:>12} rows",
                display_partition(&g.partition),
                g.files,
                bytes(g.bytes),
                count(g.rows)
            );
        }
        return Ok(());
    }
    let r = with_bar("merging", |bar| table.merge(&opts, bar)).await?;
    if a.json {
        print_json(&r)?;
        return Ok(());
    }
    match r.version {
        None => say!(
            "nothing to merge (no partition has {} files below {})",
            opts.min_files.max(2),
            bytes(opts.target_file_size)
        ),
        Some(v) => {
            let secs = r.elapsed_ms as f64 / 1000.0;
            say!(
                "merged {} files ({}) into {} files ({}) in {} partitions, {} rows, as version {v} in {secs:.2}s ({}/s){}{}",
                r.files_in,
                bytes(r.bytes_in),
                r.files_out,
                bytes(r.bytes_out),
                r.partitions,
                count(r.rows),
                bytes((r.bytes_out as f64 / secs.max(1e-9)) as u64),
                if r.groups_conflicted > 0 {
                    format!("; {} groups skipped (a concurrent commit removed their files)", r.groups_conflicted)
                } else {
                    String::new()
                },
                deferred(r.deferred_partitions)
            );
            say!("  partitions: {}", list_partitions(&r.partition_names));
        }
    }
    Ok(())
}

fn deferred(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!("; {n} partitions left for the next run (--max-input-bytes)")
    }
}

/// The first and last few partition names.
fn list_partitions(names: &[String]) -> String {
    let shown: Vec<&str> = names.iter().map(|p| display_partition(p)).collect();
    if shown.len() <= 8 {
        return shown.join(", ");
    }
    format!(
        "{}, …, {} ({} in all)",
        shown[..4].join(", "),
        shown[shown.len() - 2..].join(", "),
        shown.len()
    )
}

fn display_partition(p: &str) -> &str {
    if p.is_empty() {
        "(unpartitioned)"
    } else {
        p
    }
}

pub async fn gc(a: GcArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let opts = GcOptions {
        grace_ms: a.grace as i64,
        retention_ms: a.retention.map(|r| r as i64),
        dry_run: a.dry_run,
    };
    let r = table.gc(&opts).await?;
    if a.json {
        print_json(&r)?;
        return Ok(());
    }
    let verb = if r.dry_run { "would delete" } else { "deleted" };
    say!(
        "{verb} {} removed files ({}), {} orphaned files ({}){}, {} log entries; kept {} removed files for time travel and {} recent unreferenced files; oldest readable version {}",
        r.tombstones_deleted,
        bytes(r.tombstone_bytes),
        r.orphans_deleted,
        bytes(r.orphan_bytes),
        if r.interrupted_uploads_deleted > 0 {
            format!(
                ", {} files of interrupted uploads ({})",
                r.interrupted_uploads_deleted,
                bytes(r.interrupted_upload_bytes)
            )
        } else {
            String::new()
        },
        r.log_entries_deleted,
        r.tombstones_kept,
        r.orphans_kept,
        r.oldest_version
    );
    Ok(())
}

pub async fn iceberg(c: IcebergCommand) -> Result<()> {
    use neve_core::iceberg::SyncOptions;
    use neve_core::schema::AlterOp;
    let (table, json, r) = match c {
        IcebergCommand::Enable(a) => {
            let table = Table::at(&a.table)?;
            let on = AlterOp::SetSetting {
                key: "iceberg".into(),
                value: "true".into(),
            };
            // The commit writes the metadata (this process syncs after its commits).
            table.alter(&on).await?;
            let r = table.iceberg_sync(&SyncOptions::default()).await?;
            (a.table, a.json, r)
        }
        IcebergCommand::Disable(a) => {
            let table = Table::at(&a.table)?;
            let off = AlterOp::SetSetting {
                key: "iceberg".into(),
                value: "false".into(),
            };
            let v = table.alter(&off).await?;
            if a.json {
                print_json(&serde_json::json!({"version": v, "iceberg": false}))?;
            } else {
                say!(
                    "{}: no Iceberg metadata after version {v}; metadata/ is left as it was",
                    a.table
                );
            }
            return Ok(());
        }
        IcebergCommand::Sync(a) => {
            let table = Table::at(&a.table)?;
            let opts = SyncOptions {
                full: a.full,
                ..Default::default()
            };
            let r = table.iceberg_sync(&opts).await?;
            (a.table, a.json, r)
        }
    };
    if json {
        print_json(&r)?;
        return Ok(());
    }
    say!(
        "{table}: Iceberg metadata describes version {} in {} ({} snapshots; {} added, {} expired; {} files written, {})",
        r.version,
        r.metadata_file,
        r.snapshots,
        r.snapshots_added,
        r.snapshots_expired,
        r.files_written,
        bytes(r.bytes_written)
    );
    Ok(())
}

pub async fn drop_partition(a: DropPartitionArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let r = table.drop_partitions(&a.partitions).await?;
    if a.json {
        print_json(&r)?;
        return Ok(());
    }
    say!(
        "dropped {} ({} files, {} rows, {}) as version {}",
        r.partitions.join(", "),
        r.files,
        count(r.rows),
        bytes(r.bytes),
        r.version
    );
    Ok(())
}

pub async fn delete(a: DeleteArgs) -> Result<()> {
    let table = Table::at(&a.table)?;
    let parallelism = a.parallelism.unwrap_or_else(cores);
    let r = with_bar("rewriting", |bar| {
        table.delete(&a.predicate, parallelism, bar)
    })
    .await?;
    if a.json {
        print_json(&r)?;
        return Ok(());
    }
    match r.version {
        None => say!("no row matches; nothing committed"),
        Some(v) => say!(
            "deleted {} rows as version {v}: {} files removed, {} rewritten into {} ({} removed, {} written) in {} partitions",
            count(r.rows_deleted),
            r.files_removed,
            r.files_rewritten,
            r.files_added,
            bytes(r.bytes_removed),
            bytes(r.bytes_added),
            r.partitions.len()
        ),
    }
    Ok(())
}

//! Splits of one version's files, for engines that read a table in parallel with neve
//! reading each part (Spark's `neve` data source): the union of the splits' exact reads is
//! the table's exact read.
//!
//! A split never holds files of two partitions. In a table with merge semantics rows merge
//! within a partition, so a partition's files stay in one split; other tables' partitions are
//! cut into splits of about `target_bytes`. A predicate prunes files exactly as `neve sql`
//! does with the same `WHERE` (the log's statistics, merge-aware); the reader of a split must
//! apply it again to the rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, LogicalPlan};
use serde::Serialize;

use super::{query_error, QueryEngine, SendableRecordBatchStream, SnapshotTable};
use crate::error::{Error, Result};
use crate::log::AddFile;
use crate::partition::partition_path;
use crate::table::{AsOf, Table};

/// The name a split's table has in its query.
const NAME: &str = "t";

/// Files read together.
#[derive(Debug, Clone, Serialize)]
pub struct Split {
    /// The partition's folder (`d=2021-08`), empty in an unpartitioned table.
    pub partition: String,
    /// Paths relative to the table, as the log names them.
    pub paths: Vec<String>,
    pub rows: u64,
    pub bytes: u64,
}

/// The splits of one version.
#[derive(Debug, Clone, Serialize)]
pub struct Splits {
    pub version: u64,
    pub splits: Vec<Split>,
}

fn query(predicate: Option<&str>) -> String {
    match predicate {
        Some(p) => format!("SELECT * FROM {NAME} WHERE ({p})"),
        None => format!("SELECT * FROM {NAME}"),
    }
}

/// Split the files of `table` at `at` that a read filtered by `predicate` (a SQL boolean
/// expression over the table's columns) needs.
pub async fn plan_splits(
    table: &Table,
    at: AsOf,
    predicate: Option<&str>,
    target_bytes: u64,
) -> Result<Splits> {
    let snapshot = table.snapshot_as_of(at).await?;
    let version = snapshot.version;
    let fields = snapshot.metadata.partition_by.clone();
    let merges = snapshot.metadata.merge.is_some();
    let mut engine = QueryEngine::new();
    engine.register_snapshot(NAME, table.location().clone(), snapshot)?;
    let plan = engine
        .sql(&query(predicate))
        .await?
        .into_optimized_plan()
        .map_err(query_error)?;
    // The filters the optimizer hands the table, as a scan gets them. A plan without a scan
    // (a predicate that is always false) reads nothing.
    let mut scan: Option<(Arc<dyn datafusion::catalog::TableProvider>, Vec<Expr>)> = None;
    plan.apply(|node| {
        if let LogicalPlan::TableScan(s) = node {
            scan = Some((source_as_provider(&s.source)?, s.filters.clone()));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .map_err(query_error)?;
    let files = match &scan {
        Some((provider, filters)) => {
            provider
                .downcast_ref::<SnapshotTable>()
                .expect("the split query reads one neve table")
                .select_files(filters)
                .await?
        }
        None => Vec::new(),
    };

    let mut by_partition: BTreeMap<String, Vec<Arc<AddFile>>> = BTreeMap::new();
    for f in files {
        let values: Vec<Option<String>> = fields
            .iter()
            .map(|p| f.partition_values.get(&p.name).cloned().flatten())
            .collect();
        by_partition
            .entry(partition_path(&fields, &values))
            .or_default()
            .push(f);
    }
    let mut splits = Vec::new();
    for (partition, files) in by_partition {
        let mut current = Split {
            partition: partition.clone(),
            paths: Vec::new(),
            rows: 0,
            bytes: 0,
        };
        for f in files {
            if !merges && !current.paths.is_empty() && current.bytes + f.size > target_bytes {
                let next = Split {
                    partition: partition.clone(),
                    paths: Vec::new(),
                    rows: 0,
                    bytes: 0,
                };
                splits.push(std::mem::replace(&mut current, next));
            }
            current.paths.push(f.path.clone());
            current.rows += f.rows;
            current.bytes += f.size;
        }
        splits.push(current);
    }
    Ok(Splits { version, splits })
}

/// Read one split of `table` at `version` exactly (merge semantics applied over its files),
/// filtered by `predicate`.
pub async fn scan_split(
    table: &Table,
    version: u64,
    paths: &[String],
    predicate: Option<&str>,
) -> Result<SendableRecordBatchStream> {
    let mut snapshot = table.snapshot_as_of(AsOf::Version(version)).await?;
    let mut files = BTreeMap::new();
    for p in paths {
        let f = snapshot
            .files
            .remove(p)
            .ok_or_else(|| Error::FileNotAlive {
                path: p.clone(),
                version,
            })?;
        files.insert(p.clone(), f);
    }
    snapshot.files = files;
    let mut engine = QueryEngine::new();
    engine.register_snapshot(NAME, table.location().clone(), snapshot)?;
    engine.stream(&query(predicate)).await
}

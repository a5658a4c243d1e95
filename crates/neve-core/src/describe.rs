//! Plain-data views of a table (what `neve info|files|history --json` print and the Python
//! package returns), and per-file statistics as Arrow for engines that prune files themselves.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::{json, Value};

use crate::log::{LoggedCommit, Snapshot};
use crate::partition::format_spec;
use crate::query::stats::FileStats;
use crate::storage::TableLocation;

/// The `neve info --json` object.
pub fn info(location: &str, s: &Snapshot) -> Value {
    let parts = s.partitions();
    json!({
        "location": location,
        "table_id": s.metadata.table_id,
        "version": s.version,
        "timestamp": crate::clock::format_millis(s.timestamp),
        "files": s.files.len(),
        "rows": s.rows(),
        "bytes": s.bytes(),
        "partitions": if s.metadata.partition_by.is_empty() { 0 } else { parts.len() },
        "partition_details": parts.iter().map(|(p, (files, rows))| json!({"partition": p, "files": files, "rows": rows})).collect::<Vec<_>>(),
        "partition_by": format_spec(&s.metadata.partition_by),
        "sort_by": s.metadata.sort_by,
        "merge": s.metadata.merge.as_ref().map(|m| m.to_string()),
        "schema": s.metadata.schema.columns.iter().map(|c| json!({"id": c.id, "name": c.name, "type": c.column_type.to_string(), "nullable": c.nullable})).collect::<Vec<_>>(),
        "schema_ddl": s.metadata.schema.to_string(),
        "settings": s.metadata.settings,
        "format_version": s.protocol.format_version,
    })
}

/// The `neve files --format json` object: every alive file with where engines find it.
pub fn files(loc: &TableLocation, s: &Snapshot) -> Value {
    let files: Vec<_> = s
        .files
        .values()
        .map(|f| {
            json!({
                "path": f.path, "url": loc.file_url(&f.path), "http_url": loc.http_url(&f.path),
                "partition_values": f.partition_values, "rows": f.rows, "size": f.size,
            })
        })
        .collect();
    json!({"version": s.version, "files": files})
}

/// One `neve history --json` line.
pub fn commit(c: &LoggedCommit) -> Value {
    let s = &c.info.summary;
    json!({
        "version": c.version,
        "timestamp": crate::clock::format_millis(c.info.timestamp),
        "operation": c.info.operation,
        "commit_id": c.info.commit_id,
        "writer": c.info.writer,
        "read_version": c.info.read_version,
        "files_added": s.files_added, "files_removed": s.files_removed,
        "rows_added": s.rows_added, "rows_removed": s.rows_removed,
        "bytes_added": s.bytes_added, "bytes_removed": s.bytes_removed,
    })
}

/// One row per alive file: `url`, `rows`, and for each top-level column of a primitive type a
/// struct `{min, max, nulls}` typed as the column (null where the log does not know). Engines
/// that take per-file guarantees (pyarrow datasets) skip files from it without opening them.
pub fn file_stats(loc: &TableLocation, s: &Snapshot) -> crate::Result<RecordBatch> {
    let schema = s.metadata.schema.to_arrow();
    let files: Vec<_> = s.files.values().cloned().collect();
    let urls: StringArray = files.iter().map(|f| Some(loc.file_url(&f.path))).collect();
    let stats = FileStats::new(files, schema.clone());
    let mut fields = vec![
        Field::new("url", DataType::Utf8, false),
        Field::new("rows", DataType::UInt64, false),
    ];
    let mut columns: Vec<ArrayRef> = vec![Arc::new(urls), Arc::new(stats.rows())];
    for field in schema.fields() {
        if field.data_type().is_nested() {
            continue;
        }
        let Some(c) = stats.column(field.name()) else {
            continue;
        };
        let children = vec![
            Field::new("min", field.data_type().clone(), true),
            Field::new("max", field.data_type().clone(), true),
            Field::new("nulls", DataType::UInt64, true),
        ];
        let arrays: Vec<ArrayRef> = vec![
            c.min.clone(),
            c.max.clone(),
            Arc::new(c.nulls.clone()) as ArrayRef,
        ];
        let array = StructArray::try_new(children.clone().into(), arrays, None)?;
        fields.push(Field::new(
            field.name(),
            DataType::Struct(children.into()),
            false,
        ));
        columns.push(Arc::new(array));
    }
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

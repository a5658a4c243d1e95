//! Per-file statistics from the log as Arrow arrays: what DataFusion's pruning needs, and
//! what lets a query answer from metadata without opening a data file.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, BooleanArray, StringArray, UInt64Array};
use arrow::datatypes::SchemaRef;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use serde_json::Value;

use std::collections::BTreeMap;

use arrow::datatypes::{DataType, TimeUnit};

use crate::log::{AddFile, ColumnStats, SnapshotHead};
use crate::partition::{civil_from_days, time_bounds, Transform};
use crate::write::timestamp_string;

/// Min/max/null counts of every alive file of one snapshot, one array element per file, in
/// the order of `files`. Columns are converted on first use and kept.
pub(crate) struct FileStats {
    pub files: Vec<Arc<AddFile>>,
    schema: SchemaRef,
    columns: Mutex<HashMap<String, Arc<ColumnArrays>>>,
    /// Whether a column missing from a file's statistics means the file predates it (all
    /// null). Not so for the stand-ins of a head, where it means unknown.
    complete: bool,
}

/// One column's statistics across files.
pub(crate) struct ColumnArrays {
    /// Null where unknown.
    pub min: ArrayRef,
    pub max: ArrayRef,
    /// Null where the file has no statistics for the column (it predates the column: all null).
    pub nulls: UInt64Array,
}

impl std::fmt::Debug for FileStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStats")
            .field("files", &self.files.len())
            .finish()
    }
}

impl FileStats {
    pub fn new(files: Vec<Arc<AddFile>>, schema: SchemaRef) -> Self {
        Self {
            files,
            schema,
            columns: Mutex::new(HashMap::new()),
            complete: true,
        }
    }

    /// One stand-in file per partition of `head`: its rows and bytes, and the bounds its
    /// partition values imply for their source columns (a month partition holds that month
    /// of its timestamp, an identity partition one value, the null partition only nulls).
    /// Nothing else is known, so only what those decide is answered from it.
    pub fn from_head(head: &SnapshotHead, schema: SchemaRef) -> Self {
        let files =
            head.partitions
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let mut stats = BTreeMap::new();
                    for f in &head.metadata.partition_by {
                        let (Some(value), Ok(field)) =
                            (p.values.get(&f.name), schema.field_with_name(&f.source))
                        else {
                            continue;
                        };
                        let s = match value {
                            None => Some(ColumnStats {
                                min: None,
                                max: None,
                                nulls: p.rows as u64,
                            }),
                            Some(v) => partition_bounds(f.transform, v, field.data_type()).map(
                                |(min, max)| ColumnStats {
                                    min: Some(min),
                                    max: Some(max),
                                    nulls: 0,
                                },
                            ),
                        };
                        // Two levels over one column (year and month, say): keep the first; both
                        // are true bounds.
                        if let Some(s) = s {
                            stats.entry(f.source.clone()).or_insert(s);
                        }
                    }
                    Arc::new(AddFile {
                        path: format!("<partition {i}>"),
                        partition_values: p.values.clone(),
                        size: p.bytes.max(0) as u64,
                        rows: p.rows.max(0) as u64,
                        modification_time: 0,
                        stats,
                        seq: None,
                        merged: false,
                        added_version: None,
                    })
                })
                .collect();
        Self {
            complete: false,
            ..Self::new(files, schema)
        }
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Statistics of a table column; `None` for a name the table does not have.
    pub fn column(&self, name: &str) -> Option<Arc<ColumnArrays>> {
        let field = self.schema.field_with_name(name).ok()?;
        if let Some(c) = self.columns.lock().expect("stats lock").get(name) {
            return Some(c.clone());
        }
        let text = |pick: fn(&crate::log::ColumnStats) -> Option<&Value>| -> StringArray {
            self.files
                .iter()
                .map(|f| f.stats.get(name).and_then(pick).and_then(value_text))
                .collect()
        };
        // The log keeps values as JSON text in the same spelling Arrow's cast parses (numbers,
        // RFC 3339 timestamps, ISO dates), so one cast per column types them all.
        let cast = |a: StringArray| -> ArrayRef {
            let a: ArrayRef = Arc::new(a);
            arrow::compute::cast_with_options(
                &a,
                field.data_type(),
                &arrow::compute::CastOptions {
                    safe: true,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|_| arrow::array::new_null_array(field.data_type(), a.len()))
        };
        let min = cast(text(|s| s.min.as_ref()));
        let max = cast(text(|s| s.max.as_ref()));
        let nulls: UInt64Array = self
            .files
            .iter()
            .map(|f| match f.stats.get(name) {
                Some(s) => Some(s.nulls),
                // A file written before the column existed holds only nulls for it.
                None if f.stats.is_empty() || !self.complete => None,
                None => Some(f.rows),
            })
            .collect();
        let c = Arc::new(ColumnArrays { min, max, nulls });
        self.columns
            .lock()
            .expect("stats lock")
            .insert(name.to_string(), c.clone());
        Some(c)
    }

    pub fn rows(&self) -> UInt64Array {
        self.files.iter().map(|f| Some(f.rows)).collect()
    }
}

/// Lowest and highest value of `dt` a partition value allows, as the log spells statistics.
fn partition_bounds(t: Transform, label: &str, dt: &DataType) -> Option<(Value, Value)> {
    match t {
        // Labels of these types are spelled as the log spells their statistics.
        Transform::Identity => match dt {
            DataType::Utf8
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Date32
            | DataType::Boolean
            | DataType::Decimal128(..)
            | DataType::Time64(TimeUnit::Microsecond)
            | DataType::Timestamp(TimeUnit::Microsecond, _) => {
                Some((Value::from(label), Value::from(label)))
            }
            _ => None,
        },
        // A multiple of W holds the values up to the next one.
        Transform::Truncate(w) if dt.is_integer() => {
            let lo: i128 = label.parse().ok()?;
            Some((
                Value::from(label),
                Value::from((lo + w as i128 - 1).to_string()),
            ))
        }
        Transform::Truncate(w) => match dt {
            DataType::Decimal128(_, scale) => {
                let lo = crate::partition::parse_unscaled(label, *scale)?;
                let hi = lo.checked_add(w as i128 - 1)?;
                let hi = crate::partition::decimal_label(hi, *scale);
                Some((Value::from(label), Value::from(hi)))
            }
            _ => None,
        },
        Transform::Year | Transform::Month | Transform::Day | Transform::Hour => {
            let (lo, hi) = time_bounds(t, label)?;
            match dt {
                DataType::Timestamp(TimeUnit::Microsecond, tz) => Some((
                    Value::from(timestamp_string(lo, tz.is_some())),
                    Value::from(timestamp_string(hi, tz.is_some())),
                )),
                DataType::Date32 => {
                    let day = |us: i64| {
                        let (y, m, d) = civil_from_days(us.div_euclid(86_400_000_000));
                        Value::from(format!("{y:04}-{m:02}-{d:02}"))
                    };
                    Some((day(lo), day(hi)))
                }
                _ => None,
            }
        }
        Transform::Bucket(_) => None,
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

impl PruningStatistics for FileStats {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.column(&column.name).map(|c| c.min.clone())
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.column(&column.name).map(|c| c.max.clone())
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        self.column(&column.name)
            .map(|c| Arc::new(c.nulls.clone()) as ArrayRef)
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(self.rows()))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// Whether each file holds one single non-null value of `column` (min = max, no nulls).
pub(crate) fn single_valued(c: &ColumnArrays) -> BooleanArray {
    let eq = arrow::compute::kernels::cmp::eq(&c.min, &c.max)
        .unwrap_or_else(|_| BooleanArray::from(vec![false; c.min.len()]));
    (0..eq.len())
        .map(|i| {
            Some(
                eq.is_valid(i)
                    && eq.value(i)
                    && c.nulls.is_valid(i)
                    && c.nulls.value(i) == 0
                    && c.min.is_valid(i),
            )
        })
        .collect()
}

//! The per-column statistics the log records for each data file: min, max and null count of
//! every column and struct field. The write path reads them from the footer the Parquet
//! encoder has just built ([`file_stats`]): the encoder computes each page's bounds anyway, and
//! computing them again from the Arrow arrays was 7% of an insert's CPU. [`batch_stats`]
//! computes the same from arrays, for writers that stream many batches into one file.

use std::collections::BTreeMap;

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};
use serde_json::Value;

use crate::log::ColumnStats;
use crate::partition;

/// Longest string kept as a statistic; longer maxima are dropped (a truncated max would be wrong).
const MAX_STAT_STRING: usize = 256;

/// Bytes a string statistic may take in a file's footer before the encoder truncates it:
/// enough for any string of [`MAX_STAT_STRING`] characters, so [`file_stats`] reads exact
/// bounds wherever [`batch_stats`] would keep them.
pub(crate) const STATISTICS_TRUNCATE_BYTES: usize = MAX_STAT_STRING * 4;

/// The statistics [`batch_stats`] computes from `batch`, read from the footer `metadata` the
/// Parquet encoder wrote for it (leaf columns), and from the arrays' null buffers (structs,
/// lists and maps, which have no statistics of their own in Parquet). The one difference:
/// Parquet writes a float bound of zero as -0.0 for a min and +0.0 for a max.
/// `schema` is the table's: `batch` may hold keyed columns (`keys.rs`) in place of its strings.
pub(crate) fn file_stats(
    schema: &SchemaRef,
    batch: &RecordBatch,
    metadata: &parquet::file::metadata::ParquetMetaData,
) -> crate::error::Result<BTreeMap<String, ColumnStats>> {
    walk(schema, batch, |field, a, parent, leaf| {
        // The footer holds the stored type's bounds (stored.rs): the same numbers.
        let stored = super::stored::stored_field(field);
        Ok(match leaf_stats(&stored, leaf, metadata)? {
            // Parquet's bounds leave NaN out, and NaN sorts above every number (DataFusion,
            // Spark, Iceberg): a file holding one has no known max. (A top-level column with
            // a NaN has no footer statistics at all: `encode::tune_dictionary`.)
            Some(mut s)
                if s.max.is_some() && parent.is_some() && has_nan(&with_nulls(a, parent)) =>
            {
                s.max = None;
                s
            }
            Some(s) => s,
            None => column_stats(&with_nulls(
                &super::keys::unkeyed(a, field.data_type())?,
                parent,
            )),
        })
    })
}

/// Per-path statistics of a batch: `leaf_stats(field, array, nulls of the structs above it,
/// Parquet leaf index)` for each primitive column or field, and the null count alone (a null
/// struct counted in each of its fields) for structs, lists and maps.
fn walk(
    schema: &SchemaRef,
    batch: &RecordBatch,
    mut leaf_stats: impl FnMut(
        &arrow::datatypes::Field,
        &ArrayRef,
        Option<&arrow::buffer::NullBuffer>,
        usize,
    ) -> crate::error::Result<ColumnStats>,
) -> crate::error::Result<BTreeMap<String, ColumnStats>> {
    let mut out = BTreeMap::new();
    let mut leaf = 0;
    for (f, a) in schema.fields().iter().zip(batch.columns()) {
        walk_column(f.name(), f, a, None, &mut leaf, &mut leaf_stats, &mut out)?;
    }
    Ok(out)
}

fn walk_column(
    path: &str,
    field: &arrow::datatypes::Field,
    a: &ArrayRef,
    parent: Option<&arrow::buffer::NullBuffer>,
    leaf: &mut usize,
    leaf_stats: &mut impl FnMut(
        &arrow::datatypes::Field,
        &ArrayRef,
        Option<&arrow::buffer::NullBuffer>,
        usize,
    ) -> crate::error::Result<ColumnStats>,
    out: &mut BTreeMap<String, ColumnStats>,
) -> crate::error::Result<()> {
    if !a.data_type().is_nested() {
        out.insert(path.to_string(), leaf_stats(field, a, parent, *leaf)?);
        *leaf += 1;
        return Ok(());
    }
    let nulls = arrow::buffer::NullBuffer::union(parent, a.logical_nulls().as_ref());
    out.insert(
        path.to_string(),
        ColumnStats {
            min: None,
            max: None,
            nulls: nulls.as_ref().map_or(0, |n| n.null_count()) as u64,
        },
    );
    match a.data_type() {
        DataType::Struct(fields) => {
            for (f, c) in fields.iter().zip(a.as_struct().columns()) {
                let path = format!("{path}.{}", f.name());
                walk_column(&path, f, c, nulls.as_ref(), leaf, leaf_stats, out)?;
            }
        }
        // Lists and maps: bounds of their elements say nothing of a row.
        t => *leaf += super::encode::leaves(t),
    }
    Ok(())
}

/// One leaf column's statistics over the file's row groups; `None` when a row group has no
/// null count (then the caller computes them from the array). A bound is unknown when a row
/// group with values (other than NaN) has none for it (a type the encoder keeps no statistics
/// for), or, for a max, when the encoder had to truncate it.
fn leaf_stats(
    field: &arrow::datatypes::Field,
    leaf: usize,
    metadata: &parquet::file::metadata::ParquetMetaData,
) -> crate::error::Result<Option<ColumnStats>> {
    use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
    let groups = metadata.row_groups();
    let converter = StatisticsConverter::from_column_index(
        leaf,
        field,
        metadata.file_metadata().schema_descr(),
    )?
    .with_missing_null_counts_as_zero(false);
    let null_counts = converter.row_group_null_counts(groups)?;
    let mins = converter.row_group_mins(groups)?;
    let maxes = converter.row_group_maxes(groups)?;
    let max_exact = converter.row_group_is_max_value_exact(groups)?;
    let mut nulls = 0u64;
    let (mut min_known, mut max_known) = (true, true);
    for (i, g) in groups.iter().enumerate() {
        if null_counts.is_null(i) {
            return Ok(None);
        }
        let n = null_counts.value(i);
        nulls += n;
        // The encoder keeps no bounds for a row group of floats whose values are all NaN;
        // NaN is left out of bounds, as in `float_min_max`.
        let all_nan = field.data_type().is_floating() && mins.is_null(i) && maxes.is_null(i);
        if n < g.num_rows() as u64 && !all_nan {
            min_known &= mins.is_valid(i);
            max_known &= maxes.is_valid(i) && max_exact.is_valid(i) && max_exact.value(i);
        }
    }
    let (min, max) = if metadata.file_metadata().num_rows() as u64 == nulls {
        (None, None)
    } else {
        (
            min_known.then(|| min_max(&mins).0).flatten(),
            max_known.then(|| min_max(&maxes).1).flatten(),
        )
    };
    Ok(Some(ColumnStats { min, max, nulls }))
}

/// Per-column min/max/null counts of a batch; fields of structs too, at any depth, keyed by
/// their path (`user.plan`), counting a null struct as a null in each of its fields. Lists
/// and maps get null counts only (their elements' bounds say nothing of a row).
pub(crate) fn batch_stats(batch: &RecordBatch) -> BTreeMap<String, ColumnStats> {
    walk(&batch.schema(), batch, |_, a, parent, _| {
        Ok(column_stats(&with_nulls(a, parent)))
    })
    .expect("computing from arrays cannot fail")
}

/// `a` with the nulls of the structs above it added to its own.
fn with_nulls(a: &ArrayRef, parent: Option<&arrow::buffer::NullBuffer>) -> ArrayRef {
    if parent.is_none() {
        return a.clone();
    }
    let nulls = arrow::buffer::NullBuffer::union(parent, a.logical_nulls().as_ref());
    let data = a.to_data().into_builder().nulls(nulls).build();
    data.map(arrow::array::make_array)
        .unwrap_or_else(|_| a.clone())
}

/// The statistics keys of a schema with their types: what [`batch_stats`] produces.
pub(crate) fn stat_paths(schema: &SchemaRef) -> Vec<(String, arrow::datatypes::DataType)> {
    fn walk(
        path: String,
        t: &arrow::datatypes::DataType,
        out: &mut Vec<(String, arrow::datatypes::DataType)>,
    ) {
        if let arrow::datatypes::DataType::Struct(fields) = t {
            for f in fields {
                walk(format!("{path}.{}", f.name()), f.data_type(), out);
            }
        }
        out.push((path, t.clone()));
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        walk(f.name().clone(), f.data_type(), &mut out);
    }
    out
}

fn column_stats(a: &ArrayRef) -> ColumnStats {
    let nulls = a.null_count() as u64;
    let (min, max) = if nulls as usize == a.len() {
        (None, None)
    } else {
        min_max(a)
    };
    ColumnStats { min, max, nulls }
}

fn min_max(a: &ArrayRef) -> (Option<Value>, Option<Value>) {
    use arrow::compute::kernels::aggregate as agg;
    use arrow::datatypes::*;
    macro_rules! prim {
        ($t:ty) => {{
            let arr = a.as_primitive::<$t>();
            (
                agg::min(arr).map(|v| Value::from(v)),
                agg::max(arr).map(|v| Value::from(v)),
            )
        }};
    }
    match a.data_type() {
        DataType::Boolean => {
            let arr = a.as_boolean();
            (
                agg::min_boolean(arr).map(Value::from),
                agg::max_boolean(arr).map(Value::from),
            )
        }
        DataType::Int8 => prim!(Int8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float32 => float_min_max(
            a.as_primitive::<Float32Type>()
                .iter()
                .map(|v| v.map(f64::from)),
        ),
        DataType::Float64 => float_min_max(a.as_primitive::<Float64Type>().iter()),
        DataType::Utf8 => {
            let arr = a.as_string::<i32>();
            let min = agg::min_string(arr).map(|s| {
                // A prefix is still a valid lower bound.
                let end = s
                    .char_indices()
                    .nth(MAX_STAT_STRING)
                    .map(|(i, _)| i)
                    .unwrap_or(s.len());
                Value::from(&s[..end])
            });
            let max = agg::max_string(arr)
                .filter(|s| s.chars().count() <= MAX_STAT_STRING)
                .map(Value::from);
            (min, max)
        }
        DataType::Date32 => {
            let arr = a.as_primitive::<Date32Type>();
            let f = |d: i32| Value::from(date_string(d));
            (agg::min(arr).map(f), agg::max(arr).map(f))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let arr = a.as_primitive::<TimestampMicrosecondType>();
            let z = tz.is_some();
            let f = |us: i64| Value::from(timestamp_string(us, z));
            (agg::min(arr).map(f), agg::max(arr).map(f))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            let arr = a.as_primitive::<Time64MicrosecondType>();
            let f = |us: i64| Value::from(partition::time_of_day_label(us));
            (agg::min(arr).map(f), agg::max(arr).map(f))
        }
        DataType::Decimal128(_, s) => {
            let arr = a.as_primitive::<Decimal128Type>();
            let s = *s;
            let f = |v: i128| Value::from(Decimal128Type::format_decimal(v, 38, s));
            (agg::min(arr).map(f), agg::max(arr).map(f))
        }
        _ => (None, None),
    }
}

/// Whether a float column holds a NaN among its values (not its null slots, which may hold
/// anything).
pub(super) fn has_nan(a: &ArrayRef) -> bool {
    use arrow::datatypes::{Float16Type, Float32Type, Float64Type};
    fn any<T: ArrowPrimitiveType>(a: &PrimitiveArray<T>, nan: impl Fn(&T::Native) -> bool) -> bool {
        // A pass without branches first (it vectorises); the nulls only when it finds one.
        if !a.values().iter().fold(false, |seen, v| seen | nan(v)) {
            return false;
        }
        a.iter().flatten().any(|v| nan(&v))
    }
    match a.data_type() {
        DataType::Float16 => any(a.as_primitive::<Float16Type>(), |v| v.is_nan()),
        DataType::Float32 => any(a.as_primitive::<Float32Type>(), |v| v.is_nan()),
        DataType::Float64 => any(a.as_primitive::<Float64Type>(), |v| v.is_nan()),
        _ => false,
    }
}

/// The bounds of a float column's values. NaN is no bound (as in Parquet), but it sorts above
/// every number where engines compare floats (DataFusion, Spark, Iceberg): with one, the max
/// is unknown, and a filter such as `x > 5` cannot skip the file.
fn float_min_max(values: impl Iterator<Item = Option<f64>>) -> (Option<Value>, Option<Value>) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut any = false;
    let mut nan = false;
    for v in values.flatten() {
        if v.is_nan() {
            nan = true;
            continue;
        }
        any = true;
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !any {
        return (None, None);
    }
    // `min` and `max` may return either zero when both are there: a zero bound is the one
    // that holds the other too (Parquet's rule), or a reader comparing -0.0 < 0.0 (Iceberg's
    // Java) would skip a file with a 0.0 whose bound says -0.0.
    if lo == 0.0 {
        lo = -0.0;
    }
    if hi == 0.0 {
        hi = 0.0;
    }
    (
        serde_json::Number::from_f64(lo).map(Value::Number),
        serde_json::Number::from_f64(hi)
            .filter(|_| !nan)
            .map(Value::Number),
    )
}

fn date_string(days: i32) -> String {
    let (y, m, d) = partition::civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// RFC 3339 with microseconds; `Z` when the column has a time zone (values are UTC instants).
pub(crate) fn timestamp_string(us: i64, zoned: bool) -> String {
    let t = chrono::DateTime::from_timestamp_micros(us)
        .unwrap_or_default()
        .naive_utc();
    let s = t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string();
    if zoned {
        s + "Z"
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::float_min_max;

    /// A zero bound holds both zeros, whichever order they come in.
    #[test]
    fn zero_bounds_cover_both_zeros() {
        for values in [[0.0, -0.0], [-0.0, 0.0], [0.0, 0.0], [-0.0, -0.0]] {
            let (lo, hi) = float_min_max(values.into_iter().map(Some));
            let (lo, hi) = (lo.unwrap().as_f64().unwrap(), hi.unwrap().as_f64().unwrap());
            assert!(lo == 0.0 && lo.is_sign_negative(), "{values:?}: {lo}");
            assert!(hi == 0.0 && hi.is_sign_positive(), "{values:?}: {hi}");
        }
        // NaN sorts above every number: the min holds, the max is unknown.
        let (lo, hi) = float_min_max([Some(-1.5), None, Some(f64::NAN), Some(2.0)].into_iter());
        assert_eq!(lo.unwrap().as_f64(), Some(-1.5));
        assert!(hi.is_none(), "{hi:?}");
    }
}

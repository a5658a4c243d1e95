//! CPU side of the write path: assign rows to partitions, sort each part by the sort keys,
//! choose each column's dictionary and encode Parquet (the log's statistics of the result are
//! in `stats.rs`).

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef, UInt32Type};
use parquet::arrow::{
    add_encoded_arrow_schema_to_metadata, arrow_writer::ArrowWriterOptions, ArrowSchemaConverter,
    ArrowWriter,
};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::SchemaDescriptor;

use super::gather::{gather_column, take_column, warm, Warm};
use crate::error::Result;
use crate::partition::{self, PartitionField};

/// Parse `zstd(3)`, `zstd`, `snappy`, `lz4`, `none`.
pub fn parse_compression(s: &str) -> Result<Compression, String> {
    let s = s.trim().to_ascii_lowercase();
    Ok(match s.as_str() {
        "none" | "uncompressed" => Compression::UNCOMPRESSED,
        "snappy" => Compression::SNAPPY,
        "lz4" => Compression::LZ4_RAW,
        "zstd" => Compression::ZSTD(ZstdLevel::default()),
        _ => {
            let level = s
                .strip_prefix("zstd(")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| "expected zstd(LEVEL), zstd, snappy, lz4 or none".to_string())?;
            let level: i32 = level
                .parse()
                .map_err(|_| format!("'{level}' is not a zstd level"))?;
            Compression::ZSTD(ZstdLevel::try_new(level).map_err(|e| e.to_string())?)
        }
    })
}

/// Each row's partition in one input batch: `codes[row]` indexes `labels`.
pub(crate) fn assign_batch(
    batch: &RecordBatch,
    fields: &[PartitionField],
) -> Result<partition::PartitionAssignment> {
    let sources: Vec<ArrayRef> = fields
        .iter()
        .map(|f| {
            batch
                .column(batch.schema().index_of(&f.source).expect("checked before"))
                .clone()
        })
        .collect();
    partition::assign(fields, &sources, batch.num_rows())
}

/// A partition's rows in a grouped batch: (partition code, first row, row count).
pub(crate) type Run = (u32, usize, usize);

/// Reorder one batch so that each partition's rows are contiguous (a stable counting sort on
/// the partition codes, then one `take` per column). Done per input batch, so the random
/// reads stay within one batch's columns, which fit in cache; gathering each partition
/// straight from the whole chunk missed the cache on nearly every value. With `only`, just
/// the rows of the partitions it marks (a pass over a resident input).
/// Returns the grouped batch and, per code, its `(code, start, len)` run.
pub(crate) fn group_by_partition(
    batch: RecordBatch,
    codes: &[u32],
    num_codes: usize,
    only: Option<&[bool]>,
) -> Result<(RecordBatch, Vec<Run>)> {
    let keep = |c: u32| only.is_none_or(|m| m[c as usize]);
    let mut counts = vec![0usize; num_codes];
    for &c in codes {
        counts[c as usize] += 1;
    }
    let mut runs = Vec::new();
    let mut starts = vec![0usize; num_codes];
    let mut at = 0;
    for (code, &n) in counts.iter().enumerate() {
        if n > 0 && keep(code as u32) {
            runs.push((code as u32, at, n));
            starts[code] = at;
            at += n;
        }
    }
    if at == 0 {
        return Ok((batch.slice(0, 0), runs));
    }
    if at == codes.len() && (runs.len() <= 1 || codes.windows(2).all(|w| w[0] <= w[1])) {
        return Ok((batch, runs));
    }
    let mut perm = vec![0u32; at];
    for (row, &c) in codes.iter().enumerate() {
        if keep(c) {
            let slot = &mut starts[c as usize];
            perm[*slot] = row as u32;
            *slot += 1;
        }
    }
    let perm = arrow::array::UInt32Array::from(perm);
    // A pass that takes a few partitions' rows out of a resident input reads few of its string
    // values, and reading them all first would cost more than it saves. But one row in 16
    // already reads 40% of an 8-byte column's cache lines, one at a time and each from memory,
    // so those columns and the strings' offsets are read in order first (with the part's gather
    // by position, 9% less CPU for a 10M-row insert: BENCHMARKS.md, issue 15, "Fifty-fourth
    // session").
    let warmth = if 2 * at >= codes.len() {
        Some(Warm::All)
    } else if 16 * at >= codes.len() {
        Some(Warm::Fixed)
    } else {
        None
    };
    let columns = batch
        .columns()
        .iter()
        .map(|c| {
            if let Some(w) = warmth {
                warm(c.as_ref(), w);
            }
            take_column(c.as_ref(), &perm)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((
        RecordBatch::try_new_with_options(
            batch.schema(),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(at)),
        )?,
        runs,
    ))
}

/// One partition's rows, given as contiguous slices of the chunk's grouped batches, sorted by
/// the sort keys (`order.rs`), each column by [`gather_column`].
pub(crate) fn gather_sorted(
    schema: &SchemaRef,
    slices: &[RecordBatch],
    sort_cols: &[usize],
) -> Result<RecordBatch> {
    let rows: usize = slices.iter().map(|s| s.num_rows()).sum();
    let sorting = !sort_cols.is_empty() && rows > 1;
    if slices.len() == 1 && !sorting {
        return Ok(slices[0].clone());
    }
    if !sorting {
        return Ok(arrow::compute::concat_batches(schema, slices)?);
    }
    let order = super::order::sort_order(slices, sort_cols)?;
    if slices.len() == 1 && order.iter().enumerate().all(|(i, &r)| i as u32 == r) {
        return Ok(slices[0].clone());
    }
    let order = arrow::array::UInt32Array::from(order);
    // Each row's (slice, row in slice), worked out for the first string column, if any.
    let pairs = std::cell::OnceCell::new();
    let cols = (0..schema.fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = slices.iter().map(|s| s.column(c).as_ref()).collect();
            gather_column(&arrays, &order, &pairs)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        cols,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// Parquet leaf columns an Arrow type is stored as (one per primitive below it).
pub(crate) fn leaves(t: &arrow::datatypes::DataType) -> usize {
    use arrow::datatypes::DataType as D;
    match t {
        D::Struct(fields) => fields.iter().map(|f| leaves(f.data_type())).sum(),
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) | D::Map(f, _) => {
            leaves(f.data_type())
        }
        _ => 1,
    }
}

/// Rows a data page holds at most (ClickHouse's granule). A point read decompresses one page
/// of each column it reads: with parquet's default of 20,000 rows a page, a lookup of one key
/// in 100 unmerged files took 47 ms, with 8,192 18 ms. Scans of whole columns took 0–7%
/// longer.
const PAGE_ROWS: usize = 8192;

/// Writer properties for a table's settings. `sort_cols` are top-level columns of `schema`;
/// Parquet's `sorting_columns` counts leaf columns, which nested columns before them shift.
pub(crate) fn writer_properties(
    compression: Compression,
    row_group_rows: usize,
    schema: &SchemaRef,
    sort_cols: &[usize],
) -> WriterProperties {
    let leaf_of = |top: usize| -> usize {
        schema.fields()[..top]
            .iter()
            .map(|f| leaves(f.data_type()))
            .sum()
    };
    let mut b = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_statistics_truncate_length(Some(super::stats::STATISTICS_TRUNCATE_BYTES))
        .set_created_by(format!("neve version {}", env!("CARGO_PKG_VERSION")));
    if !sort_cols.is_empty() {
        b = b.set_sorting_columns(Some(
            sort_cols
                .iter()
                .map(|&c| SortingColumn {
                    column_idx: leaf_of(c) as i32,
                    descending: false,
                    nulls_first: true,
                })
                .collect(),
        ));
    }
    b.build()
}

/// A part's own writer settings: no statistics for a float column holding a NaN (see the
/// body), and dictionary encoding off where a dictionary only costs hashing and makes the file
/// larger. Each column is judged on up to 1,024 non-null values taken at even steps over the
/// whole part, not its first rows: a column of a few thousand values (fares, distances, taxi
/// ids) looks distinct in its first thousand rows, and there the dictionary makes the file
/// smaller and faster to write. A part of fewer than 4,096 rows is judged on a quarter of
/// them (at least 128): judging every row of the mid-sized parts a 100,000-row insert makes
/// cost as much as the dictionaries it saved (BENCHMARKS.md, "Fifty-second session").
/// - Strings and binaries go without when at least 98% of the sample is distinct (ids, hashes,
///   coordinates as text). A dictionary of long values pays as soon as they repeat: on the
///   taxi data, `taxi_id` (about half of each file's values distinct) went from 28.9 to 18.6 MB
///   with one, and the encoder spent 8% less CPU, as zstd has fewer bytes to compress.
/// - Numbers and times (4- or 8-byte values) go without when at least 90% of the sample is
///   distinct (a sort key, a sequence, event times, measurements with many digits). A
///   dictionary of such a column fills its 1 MiB page before it falls back, and a point lookup
///   must decompress that whole page to read one value. They are stored PLAIN, not
///   `DELTA_BINARY_PACKED` (smaller and faster still for sorted values), because Iceberg's
///   vectorized reader before 1.10 rejects delta pages, and Spark on such a version reads
///   these tables.
pub(crate) fn tune_dictionary(batch: &RecordBatch, props: WriterProperties) -> WriterProperties {
    let mut builder: Option<parquet::file::properties::WriterPropertiesBuilder> = None;
    for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let distinct = match f.data_type() {
            DataType::Utf8 => {
                let a = col.as_string::<i32>();
                bytes_distinct(a, |i| a.value(i).as_bytes())
            }
            DataType::Binary => {
                let a = col.as_binary::<i32>();
                bytes_distinct(a, |i| a.value(i))
            }
            // Keyed strings (`keys.rs`): a key stands for one value (the chunk's dictionary has
            // no repeats), so the keys are judged as the strings would be, and the file is the
            // same either way.
            DataType::Dictionary(..) => match col.as_dictionary_opt::<UInt32Type>() {
                Some(d) => {
                    let k = d.keys();
                    let v = k.values();
                    sample_distinct(k.len(), |i| k.is_valid(i), |i| u64::from(v[i]), (98, 100))
                }
                None => false,
            },
            _ => numbers_distinct(col),
        };
        if distinct {
            let b = builder
                .take()
                .unwrap_or_else(|| props.clone().into_builder());
            builder = Some(b.set_column_dictionary_enabled(
                parquet::schema::types::ColumnPath::from(f.name().as_str()),
                false,
            ));
        }
        // Parquet's float bounds leave NaN out, and readers that prune row groups and pages
        // by them (DataFusion, ClickHouse, Trino) then skip the NaN that `x > 5` or `x != 3`
        // matches: a column holding one gets no statistics in this file.
        if f.data_type().is_floating() && super::stats::has_nan(col) {
            let b = builder
                .take()
                .unwrap_or_else(|| props.clone().into_builder());
            builder = Some(b.set_column_statistics_enabled(
                parquet::schema::types::ColumnPath::from(f.name().as_str()),
                EnabledStatistics::None,
            ));
        }
    }
    builder.map(|b| b.build()).unwrap_or(props)
}

/// Whether a column of strings or binaries is distinct enough to go without a dictionary: at
/// least 98% of the sample. (Fixed-size binaries, such as UUIDs, are left alone: the Parquet
/// writer gave them no dictionary even for 40 distinct values.)
pub(super) fn bytes_distinct<'a>(a: &'a dyn Array, value: impl Fn(usize) -> &'a [u8]) -> bool {
    let hash = |i: usize| twox_hash::XxHash64::oneshot(0, value(i));
    sample_distinct(a.len(), |i| a.is_valid(i), hash, (98, 100))
}

/// Values sampled to judge a column's dictionary: at most [`SAMPLE`], and a quarter of a
/// smaller part's rows, but no fewer than [`SMALL_SAMPLE`] (all of a part that small).
pub(super) const SAMPLE: usize = 1024;
const SMALL_SAMPLE: usize = 128;

/// Whether at least `num/den` of a sample of an array of `len` values are distinct, as 64-bit
/// keys (`key` of a position): the non-null values at the positions of [`sample_steps`], up
/// to its count of them; false when fewer than 64 are taken (too few to judge: the column
/// keeps its dictionary). Counted in an open-addressing table on the stack, as this runs for
/// every column of every file written, and it stops as soon as the repeats seen rule the share
/// out: a column of a few values is judged on its first hundred or so.
pub(super) fn sample_distinct(
    len: usize,
    valid: impl Fn(usize) -> bool,
    key: impl Fn(usize) -> u64,
    (num, den): (usize, usize),
) -> bool {
    const SLOTS: usize = 2 * SAMPLE;
    let (step, size) = sample_steps(len);
    let positions = len.div_ceil(step);
    let mut slots = [0u64; SLOTS];
    let mut used = [false; SLOTS];
    let (mut sampled, mut distinct) = (0, 0);
    for (visited, i) in (1..).zip((0..len).step_by(step)) {
        if sampled == size {
            break;
        }
        if !valid(i) {
            continue;
        }
        sampled += 1;
        let k = key(i);
        let mut at = ((k ^ (k >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 53) as usize;
        loop {
            if !used[at] {
                (used[at], slots[at]) = (true, k);
                distinct += 1;
                break;
            }
            if slots[at] == k {
                // Even if every value still to be taken were new, the share is out of reach.
                let left = (size - sampled).min(positions - visited);
                if (distinct + left) * den < (sampled + left) * num {
                    return false;
                }
                break;
            }
            at = (at + 1) % SLOTS;
        }
    }
    sampled >= 64 && distinct * den >= sampled * num
}

/// How a sample of an array of `len` values is taken: the step between the positions it
/// visits, from the first, and how many non-null values it takes at most: [`SAMPLE`], a quarter
/// of a smaller array but at least [`SMALL_SAMPLE`] (every value of an array that small). An
/// array of 4,096 values or more is sampled as it always was, so large parts are written
/// exactly as before.
pub(super) fn sample_steps(len: usize) -> (usize, usize) {
    let size = (len / 4).clamp(SMALL_SAMPLE, SAMPLE);
    ((len / size).max(1), size)
}

/// Whether a column of 4- or 8-byte numbers (integers, floats, dates, times, timestamps) is
/// distinct enough to go without a dictionary: at least 90% of the sample ([`sample_distinct`],
/// keyed by their bits); false for other columns. Drawn from K values at random,
/// a sample of 1,024 is 90% distinct only when K is above about 5,000, so a column of a few
/// hundred or thousand values keeps its dictionary.
fn numbers_distinct(a: &ArrayRef) -> bool {
    let width = match a.data_type().primitive_width() {
        Some(w @ (4 | 8)) if !a.data_type().is_nested() => w,
        _ => return false,
    };
    let data = a.to_data();
    let Some(bytes) = data.buffers().first().map(|b| b.as_slice()) else {
        return false;
    };
    let key = |i: usize| {
        let i = i + data.offset();
        let v = &bytes[i * width..(i + 1) * width];
        if width == 8 {
            u64::from_le_bytes(v.try_into().expect("8 bytes"))
        } else {
            u64::from(u32::from_le_bytes(v.try_into().expect("4 bytes")))
        }
    };
    sample_distinct(a.len(), |i| data.is_valid(i), key, (9, 10))
}

/// What every file of one insert is written with, worked out once for all of them: the
/// writer properties with the table's arrow schema already in their footer metadata, and the
/// Parquet schema converted from it. An `ArrowWriter` otherwise converts and IPC-encodes the
/// schema again for each file, and an insert writes one file per partition (132 on the taxi
/// data). The files' bytes are the same either way.
pub(crate) struct FileFormat {
    props: WriterProperties,
    parquet: SchemaDescriptor,
    schema: SchemaRef,
    /// The types the files store (stored.rs): their Parquet schema and footer say these.
    stored: super::stored::Stored,
}

impl FileFormat {
    pub(crate) fn new(schema: &SchemaRef, mut props: WriterProperties) -> Result<Self> {
        let stored = super::stored::Stored::new(schema);
        let parquet = ArrowSchemaConverter::new()
            .with_coerce_types(props.coerce_types())
            .convert(&stored.schema)?;
        add_encoded_arrow_schema_to_metadata(&stored.schema, &mut props);
        Ok(Self {
            props,
            parquet,
            schema: schema.clone(),
            stored,
        })
    }

    /// The schema every part written with this format has.
    pub(crate) fn schema(&self) -> &SchemaRef {
        &self.schema
    }
}

/// Encode one part (of `format`'s schema, or its keyed form: `keys.rs`) as a Parquet file in
/// memory; returns its bytes and its footer. A keyed column is written as the strings it
/// stands for: the Parquet schema and the Arrow schema in the footer are the table's, in
/// their stored types (stored.rs).
pub(crate) fn encode_parquet(
    batch: &RecordBatch,
    format: &FileFormat,
) -> Result<(Vec<u8>, parquet::file::metadata::ParquetMetaData)> {
    debug_assert!(
        batch
            .schema()
            .fields()
            .iter()
            .zip(format.schema.fields())
            .all(|(b, f)| {
                b.name() == f.name()
                    && match b.data_type() {
                        DataType::Dictionary(_, v) => v.as_ref() == f.data_type(),
                        t => t == f.data_type(),
                    }
            }),
        "a part of another schema"
    );
    let stored = format.stored.batch(batch)?;
    let batch = stored.as_ref();
    let options = ArrowWriterOptions::new()
        .with_properties(tune_dictionary(batch, format.props.clone()))
        .with_parquet_schema(format.parquet.clone())
        .with_skip_arrow_metadata(true);
    let mut buf = Vec::with_capacity(batch.get_array_memory_size() / 4 + 4096);
    let mut w = ArrowWriter::try_new_with_options(&mut buf, batch.schema(), options)?;
    w.write(batch)?;
    let metadata = w.close()?;
    Ok((buf, metadata))
}

//! Writing one position delete file (`file_path`, `pos`): its two column chunks are encoded
//! here, page by page, and the parquet crate writes the pages' headers, the chunks' metadata
//! and the footer.
//!
//! Why not the crate's arrow writer, as for data files: a worst-case `replace` insert writes
//! 132 delete files of about 750 rows, and the arrow writer spent about 15 µs a file setting up
//! its encoders and 40 ns a row interning each row's 100-byte path into the column's
//! dictionary, though the rows come grouped by path: 8.75 of a sync's 15.6 ms of
//! position-delete work (BENCHMARKS.md, issue 19, "Seventy-fourth session"). Here the
//! dictionary is the distinct paths in order and its indices one RLE run a path, so a file
//! costs its paths, not its rows; the positions are the same DELTA_BINARY_PACKED as before. A
//! property test reads every file back through the crate's reader, against the rows it was
//! written from.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::{Compression, Encoding};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::{ColumnDescPtr, SchemaDescriptor};

use super::deletes::{DeletedRows, Known, FILE_PATH_FIELD, POS_FIELD};
use super::varint::{uvarint, zigzag};
use crate::error::Result;

/// Writes position delete files: the schema and the writer's settings made once a sync, not
/// once a file.
#[derive(Debug)]
pub(crate) struct DeleteFiles {
    schema: Arc<SchemaDescriptor>,
    props: Arc<WriterProperties>,
    /// Nanoseconds spent writing files, summed over the threads (see `encode_ms` in the log).
    pub(crate) busy: std::sync::atomic::AtomicU64,
}

impl DeleteFiles {
    pub(crate) fn new() -> Self {
        let id = |f: Field, id: i32| {
            f.with_metadata([(crate::schema::FIELD_ID_KEY.to_string(), id.to_string())].into())
        };
        let schema = Schema::new(vec![
            id(
                Field::new("file_path", DataType::Utf8, false),
                FILE_PATH_FIELD,
            ),
            id(Field::new("pos", DataType::Int64, false), POS_FIELD),
        ]);
        let schema = ArrowSchemaConverter::new()
            .convert(&schema)
            .expect("the position delete schema converts to Parquet");
        // The footer only: the pages are encoded below, so the writer's encoding settings do
        // not apply. No arrow schema in the footer, so readers see the columns Iceberg names.
        let props = WriterProperties::builder()
            .set_created_by("neve".to_string())
            .build();
        Self {
            schema: Arc::new(schema),
            props: Arc::new(props),
            busy: Default::default(),
        }
    }

    /// A position delete file: `(file_path, pos)` sorted by path, then position, as Iceberg
    /// asks (each path's positions come sorted). What a manifest says of it (its rows, size and
    /// the paths it names), and its bytes.
    pub(crate) fn bytes(&self, mut rows: DeletedRows<'_>) -> Result<(Known, Vec<u8>)> {
        let t = std::time::Instant::now();
        debug_assert!(
            rows.iter().all(|(_, p)| p.is_sorted()),
            "positions come sorted"
        );
        rows.retain(|(_, p)| !p.is_empty());
        rows.sort_by(|a, b| a.0.cmp(b.0));
        let bounds = rows
            .first()
            .zip(rows.last())
            .map(|((first, _), (last, _))| Arc::new((first.to_string(), last.to_string())));
        let n: usize = rows.iter().map(|(_, p)| p.len()).sum();
        let mut bytes = Vec::new();
        let mut file = SerializedFileWriter::new(
            &mut bytes,
            self.schema.root_schema_ptr(),
            self.props.clone(),
        )?;
        let mut group = file.next_row_group()?;
        let (chunk, close) = paths_chunk(self.schema.column(0), &rows, n)?;
        group.append_column(&chunk, close)?;
        let (chunk, close) = positions_chunk(self.schema.column(1), &rows, n)?;
        group.append_column(&chunk, close)?;
        group.close()?;
        file.close()?;
        self.busy.fetch_add(
            t.elapsed().as_nanos() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        let known = Known {
            rows: n as u64,
            size: bytes.len() as u64,
            paths: bounds,
        };
        Ok((known, bytes))
    }
}

/// `file_path`: a dictionary page of the paths (PLAIN), and a data page of their indices, one
/// RLE run a path; both compressed with Snappy (the paths share their table's prefix; zstd
/// cost more to set up than it saved on a few hundred bytes: BENCHMARKS.md, "Forty-sixth
/// session"). No statistics: a row group's paths span its partition's data files, so bounds
/// would let a reader skip little, and Iceberg's Java reader, which filters by path, skips by
/// the dictionary ("Fifty-first session"). One page a column and no page index: readers read
/// a delete file whole.
fn paths_chunk(
    column: ColumnDescPtr,
    rows: &DeletedRows<'_>,
    n: usize,
) -> Result<(Bytes, ColumnCloseResult)> {
    let mut dictionary = Vec::new();
    for (path, _) in rows {
        dictionary.extend_from_slice(&(path.len() as u32).to_le_bytes());
        dictionary.extend_from_slice(path.as_bytes());
    }
    // At least one bit: a width of 0 is valid, but not every reader has met it.
    let width = (usize::BITS - rows.len().saturating_sub(1).leading_zeros()).max(1) as u8;
    let mut indices = vec![width];
    for (i, (_, positions)) in rows.iter().enumerate() {
        rle_run(i as u32, positions.len(), width, &mut indices);
    }
    let mut snappy = snap::raw::Encoder::new();
    let pages = [
        Page::DictionaryPage {
            buf: Bytes::from(snappy.compress_vec(&dictionary).map_err(snappy_error)?),
            num_values: rows.len() as u32,
            encoding: Encoding::PLAIN,
            is_sorted: false,
        },
        data_page(
            snappy.compress_vec(&indices).map_err(snappy_error)?,
            n,
            Encoding::RLE_DICTIONARY,
        ),
    ];
    let sizes = [dictionary.len(), indices.len()];
    let builder = ColumnChunkMetaData::builder(column)
        .set_compression(Compression::SNAPPY)
        .set_encodings(vec![
            Encoding::PLAIN,
            Encoding::RLE,
            Encoding::RLE_DICTIONARY,
        ]);
    chunk(builder, pages.into_iter().zip(sizes), n)
}

/// `pos`: one data page, DELTA_BINARY_PACKED, uncompressed (the deltas are a few bits each),
/// with the chunk's bounds.
fn positions_chunk(
    column: ColumnDescPtr,
    rows: &DeletedRows<'_>,
    n: usize,
) -> Result<(Bytes, ColumnCloseResult)> {
    let mut values = Vec::with_capacity(n);
    for (_, positions) in rows {
        values.extend(positions.iter().map(|&p| p as i64));
    }
    // Each path's positions are sorted: the bounds are among their firsts and lasts.
    let min = rows.iter().filter_map(|(_, p)| p.first()).min();
    let max = rows.iter().filter_map(|(_, p)| p.last()).max();
    let (min, max) = (min.map(|&p| p as i64), max.map(|&p| p as i64));
    let mut encoded = Vec::new();
    delta_binary_packed(&values, &mut encoded);
    let size = encoded.len();
    let builder = ColumnChunkMetaData::builder(column)
        .set_compression(Compression::UNCOMPRESSED)
        .set_encodings(vec![Encoding::RLE, Encoding::DELTA_BINARY_PACKED])
        .set_statistics(Statistics::int64(min, max, None, Some(0), false));
    let page = data_page(encoded, n, Encoding::DELTA_BINARY_PACKED);
    chunk(builder, [(page, size)], n)
}

/// A v1 data page of a required column: its values only, no levels.
fn data_page(buf: Vec<u8>, n: usize, encoding: Encoding) -> Page {
    Page::DataPage {
        buf: Bytes::from(buf),
        num_values: n as u32,
        encoding,
        def_level_encoding: Encoding::RLE,
        rep_level_encoding: Encoding::RLE,
        statistics: None,
    }
}

/// The column chunk of `pages` (each with its size before compression), as the row group
/// writer splices it: its bytes, and its metadata with offsets into them.
fn chunk(
    builder: parquet::file::metadata::ColumnChunkMetaDataBuilder,
    pages: impl IntoIterator<Item = (Page, usize)>,
    n: usize,
) -> Result<(Bytes, ColumnCloseResult)> {
    let mut sink = TrackedWrite::new(Vec::new());
    let (mut dictionary_offset, mut data_offset, mut uncompressed) = (None, 0, 0);
    {
        let mut writer = SerializedPageWriter::new(&mut sink);
        for (page, size) in pages {
            let dictionary = matches!(page, Page::DictionaryPage { .. });
            let spec = writer.write_page(CompressedPage::new(page, size))?;
            if dictionary {
                dictionary_offset = Some(spec.offset as i64);
            } else {
                data_offset = spec.offset as i64;
            }
            uncompressed += spec.uncompressed_size as i64;
        }
    }
    let bytes = sink.into_inner()?;
    let metadata = builder
        .set_num_values(n as i64)
        .set_total_compressed_size(bytes.len() as i64)
        .set_total_uncompressed_size(uncompressed)
        .set_dictionary_page_offset(dictionary_offset)
        .set_data_page_offset(data_offset)
        .build()?;
    let close = ColumnCloseResult {
        bytes_written: bytes.len() as u64,
        rows_written: n as u64,
        metadata,
        bloom_filter: None,
        column_index: None,
        offset_index: None,
    };
    Ok((Bytes::from(bytes), close))
}

fn snappy_error(e: snap::Error) -> parquet::errors::ParquetError {
    parquet::errors::ParquetError::External(Box::new(e))
}

/// One run of the RLE/bit-packed hybrid: `count` times `value`, in `width` bits rounded up to
/// whole bytes, little-endian.
fn rle_run(value: u32, count: usize, width: u8, out: &mut Vec<u8>) {
    uvarint((count as u64) << 1, out);
    out.extend_from_slice(&value.to_le_bytes()[..usize::from(width).div_ceil(8)]);
}

/// Parquet's DELTA_BINARY_PACKED: blocks of 128 deltas in 4 miniblocks of 32, each bit-packed
/// (least significant bit first) at the width its largest delta above the block's least needs.
fn delta_binary_packed(values: &[i64], out: &mut Vec<u8>) {
    const BLOCK: usize = 128;
    const MINIBLOCKS: usize = 4;
    const MINI: usize = BLOCK / MINIBLOCKS;
    uvarint(BLOCK as u64, out);
    uvarint(MINIBLOCKS as u64, out);
    uvarint(values.len() as u64, out);
    let Some((&first, mut rest)) = values.split_first() else {
        uvarint(0, out);
        return;
    };
    uvarint(zigzag(first), out);
    let (mut deltas, mut previous) = ([0i64; BLOCK], first);
    while !rest.is_empty() {
        let n = rest.len().min(BLOCK);
        for (delta, &v) in deltas.iter_mut().zip(&rest[..n]) {
            *delta = v.wrapping_sub(previous);
            previous = v;
        }
        rest = &rest[n..];
        let min = *deltas[..n].iter().min().expect("n > 0");
        uvarint(zigzag(min), out);
        // Widths of miniblocks past the last value are 0, and those miniblocks are not written.
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, width) in widths.iter_mut().enumerate().take(used) {
            let most = deltas[m * MINI..((m + 1) * MINI).min(n)]
                .iter()
                .map(|&d| d.wrapping_sub(min) as u64)
                .max()
                .expect("a used miniblock has a value");
            *width = (u64::BITS - most.leading_zeros()) as u8;
        }
        out.extend_from_slice(&widths);
        // The last miniblock is padded to 32 values, of 0 above the least.
        deltas[n..used * MINI].fill(min);
        for (m, &width) in widths.iter().enumerate().take(used) {
            let (mut bits, mut held) = (0u128, 0u32);
            for &delta in &deltas[m * MINI..(m + 1) * MINI] {
                bits |= u128::from(delta.wrapping_sub(min) as u64) << held;
                held += u32::from(width);
                while held >= 8 {
                    out.push(bits as u8);
                    bits >>= 8;
                    held -= 8;
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "delete_file_tests.rs"]
mod tests;

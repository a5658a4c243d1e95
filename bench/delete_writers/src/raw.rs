//! Prototype: a position delete file from pages encoded here, assembled by the crate.
use bytes::Bytes;
use parquet::basic::{Compression, Encoding};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::Statistics;
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::SchemaDescriptor;
use std::sync::Arc;

fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn delta_binary_packed(values: &[i64], out: &mut Vec<u8>) {
    const BLOCK: usize = 128;
    const MINIS: usize = 4;
    const MINI: usize = BLOCK / MINIS;
    uvarint(BLOCK as u64, out);
    uvarint(MINIS as u64, out);
    uvarint(values.len() as u64, out);
    uvarint(zigzag(values.first().copied().unwrap_or(0)), out);
    let mut deltas = [0i64; BLOCK];
    let mut rest = values.get(1..).unwrap_or(&[]);
    let mut prev = values.first().copied().unwrap_or(0);
    while !rest.is_empty() {
        let n = rest.len().min(BLOCK);
        for (d, &v) in deltas.iter_mut().zip(&rest[..n]) {
            *d = v.wrapping_sub(prev);
            prev = v;
        }
        rest = &rest[n..];
        let min = *deltas[..n].iter().min().unwrap();
        uvarint(zigzag(min), out);
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let chunk = &deltas[m * MINI..((m + 1) * MINI).min(n)];
            let max = chunk.iter().map(|&d| d.wrapping_sub(min) as u64).max().unwrap();
            *w = (64 - max.leading_zeros()) as u8;
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            let lo = m * MINI;
            let hi = ((m + 1) * MINI).min(n);
            let (mut acc, mut bits) = (0u128, 0u32);
            for i in lo..lo + MINI {
                let v = if i < hi { deltas[i].wrapping_sub(min) as u64 } else { 0 };
                acc |= (v as u128) << bits;
                bits += w as u32;
                while bits >= 8 {
                    out.push(acc as u8);
                    acc >>= 8;
                    bits -= 8;
                }
            }
            debug_assert_eq!(bits, 0);
        }
    }
}

pub fn write(
    schema: &Arc<SchemaDescriptor>,
    props: &Arc<WriterProperties>,
    rows: &[(&str, Vec<u64>)],
) -> Vec<u8> {
    let n: usize = rows.iter().map(|(_, p)| p.len()).sum();
    let mut out = Vec::new();
    let mut w = SerializedFileWriter::new(&mut out, schema.root_schema_ptr(), props.clone()).unwrap();
    let mut rg = w.next_row_group().unwrap();
    // file_path: a dictionary page of the paths, a data page of one RLE run a path.
    {
        let mut dict = Vec::new();
        for (p, _) in rows {
            dict.extend_from_slice(&(p.len() as u32).to_le_bytes());
            dict.extend_from_slice(p.as_bytes());
        }
        let width = (usize::BITS - rows.len().saturating_sub(1).leading_zeros()).max(1) as u8;
        let mut idx = vec![width];
        for (i, (_, p)) in rows.iter().enumerate() {
            uvarint((p.len() as u64) << 1, &mut idx);
            idx.extend_from_slice(&(i as u32).to_le_bytes()[..(width as usize).div_ceil(8)]);
        }
        let mut enc = snap::raw::Encoder::new();
        let cdict = enc.compress_vec(&dict).unwrap();
        let cidx = enc.compress_vec(&idx).unwrap();
        let mut chunk = TrackedWrite::new(Vec::new());
        let mut pw = SerializedPageWriter::new(&mut chunk);
        let d = pw
            .write_page(CompressedPage::new(
                Page::DictionaryPage { buf: Bytes::from(cdict), num_values: rows.len() as u32, encoding: Encoding::PLAIN, is_sorted: false },
                dict.len(),
            ))
            .unwrap();
        let p = pw
            .write_page(CompressedPage::new(
                Page::DataPage { buf: Bytes::from(cidx), num_values: n as u32, encoding: Encoding::RLE_DICTIONARY, def_level_encoding: Encoding::RLE, rep_level_encoding: Encoding::RLE, statistics: None },
                idx.len(),
            ))
            .unwrap();
        drop(pw);
        let bytes = chunk.into_inner().unwrap();
        let meta = ColumnChunkMetaData::builder(schema.column(0))
            .set_compression(Compression::SNAPPY)
            .set_encodings(vec![Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY])
            .set_num_values(n as i64)
            .set_total_compressed_size(bytes.len() as i64)
            .set_total_uncompressed_size((d.uncompressed_size + p.uncompressed_size) as i64)
            .set_dictionary_page_offset(Some(0))
            .set_data_page_offset(d.bytes_written as i64)
            .build()
            .unwrap();
        rg.append_column(&Bytes::from(bytes), ColumnCloseResult { bytes_written: 0, rows_written: n as u64, metadata: meta, bloom_filter: None, column_index: None, offset_index: None }).unwrap();
    }
    {
        let mut vals = Vec::with_capacity(n);
        for (_, p) in rows {
            vals.extend(p.iter().map(|&x| x as i64));
        }
        let mut buf = Vec::new();
        delta_binary_packed(&vals, &mut buf);
        let (min, max) = (vals.iter().min().copied(), vals.iter().max().copied());
        let mut chunk = TrackedWrite::new(Vec::new());
        let mut pw = SerializedPageWriter::new(&mut chunk);
        let len = buf.len();
        let p = pw
            .write_page(CompressedPage::new(
                Page::DataPage { buf: Bytes::from(buf), num_values: n as u32, encoding: Encoding::DELTA_BINARY_PACKED, def_level_encoding: Encoding::RLE, rep_level_encoding: Encoding::RLE, statistics: None },
                len,
            ))
            .unwrap();
        drop(pw);
        let bytes = chunk.into_inner().unwrap();
        let meta = ColumnChunkMetaData::builder(schema.column(1))
            .set_compression(Compression::UNCOMPRESSED)
            .set_encodings(vec![Encoding::RLE, Encoding::DELTA_BINARY_PACKED])
            .set_num_values(n as i64)
            .set_total_compressed_size(bytes.len() as i64)
            .set_total_uncompressed_size(p.uncompressed_size as i64)
            .set_data_page_offset(0)
            .set_statistics(Statistics::int64(min, max, None, Some(0), false))
            .build()
            .unwrap();
        rg.append_column(&Bytes::from(bytes), ColumnCloseResult { bytes_written: 0, rows_written: n as u64, metadata: meta, bloom_filter: None, column_index: None, offset_index: None }).unwrap();
    }
    rg.close().unwrap();
    w.close().unwrap();
    out
}

//! Iceberg position delete files (`file_path`, `pos`), as `iceberg::deletes::DeleteFiles`
//! writes them: through the parquet crate's arrow writer (a dictionary of paths), through its
//! column writers (a `ByteArray` per row), and the arrow writer with positions PLAIN instead of
//! as deltas. Prints each way's time per file over 2,000 files, three rounds; the argument is
//! the rows per file (spread over 10 data files' paths).
use arrow::array::*;
use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::basic::{Compression, Encoding};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let id = |f: Field, id: i32| {
        f.with_metadata(HashMap::from([(
            "PARQUET:field_id".to_string(),
            id.to_string(),
        )]))
    };
    let schema = Arc::new(Schema::new(vec![
        id(
            Field::new(
                "file_path",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                false,
            ),
            2147483546,
        ),
        id(Field::new("pos", DataType::Int64, false), 2147483545),
    ]));
    let props = WriterProperties::builder()
        .set_created_by("neve".to_string())
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .set_column_statistics_enabled("file_path".into(), EnabledStatistics::None)
        .set_column_compression("file_path".into(), Compression::SNAPPY)
        .set_column_compression("pos".into(), Compression::UNCOMPRESSED)
        .set_column_dictionary_enabled("pos".into(), false)
        .set_column_encoding("pos".into(), Encoding::DELTA_BINARY_PACKED)
        .build();
    let props_c = WriterProperties::builder()
        .set_created_by("neve".to_string())
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .set_column_statistics_enabled("file_path".into(), EnabledStatistics::None)
        .set_column_compression("file_path".into(), Compression::SNAPPY)
        .set_column_compression("pos".into(), Compression::UNCOMPRESSED)
        .set_column_dictionary_enabled("pos".into(), false)
        .set_column_encoding("pos".into(), Encoding::PLAIN)
        .build();
    let pschema = ArrowSchemaConverter::new().convert(&schema).unwrap();
    let rows_per: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(750);
    let nfiles = 10usize;
    let paths: Vec<String> = (0..nfiles).map(|i| format!("file:///dev/shm/ibc/iceberg-1796519290368/commit-100000/iceberg/_data/d=2020-{i:02}/part-00000-6f1c2a7e-{i:04}-4b7e-9d1a-1234567890ab.parquet")).collect();
    let per = rows_per / nfiles;
    let mut rows: Vec<(&str, Vec<u64>)> = paths
        .iter()
        .map(|p| (p.as_str(), (0..per as u64).map(|x| x * 7 + 3).collect()))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    let iters = 2000;
    // (a) as neve does now
    let a = |rows: &Vec<(&str, Vec<u64>)>, props: &WriterProperties| -> Vec<u8> {
        let n: usize = rows.iter().map(|(_, p)| p.len()).sum();
        let (mut keys, mut pos) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, (_, p)) in (0i32..).zip(rows) {
            keys.extend(std::iter::repeat_n(i, p.len()));
            pos.extend(p.iter().map(|&x| x as i64));
        }
        let names = StringArray::from_iter_values(rows.iter().map(|(p, _)| *p));
        let paths =
            DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), Arc::new(names)).unwrap();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(paths), Arc::new(Int64Array::from(pos))],
        )
        .unwrap();
        let options = ArrowWriterOptions::new()
            .with_properties(props.clone())
            .with_parquet_schema(pschema.clone())
            .with_skip_arrow_metadata(true);
        let mut bytes = Vec::new();
        let mut w = ArrowWriter::try_new_with_options(&mut bytes, schema.clone(), options).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        bytes
    };
    let root = pschema.root_schema_ptr();
    let props_arc = Arc::new(props.clone());
    let b = |rows: &Vec<(&str, Vec<u64>)>| -> Vec<u8> {
        let n: usize = rows.iter().map(|(_, p)| p.len()).sum();
        let mut vals = Vec::with_capacity(n);
        let mut pos = Vec::with_capacity(n);
        for (path, p) in rows {
            let ba = ByteArray::from(bytes::Bytes::copy_from_slice(path.as_bytes()));
            vals.extend(std::iter::repeat_n(ba, p.len()));
            pos.extend(p.iter().map(|&x| x as i64));
        }
        let mut out = Vec::new();
        let mut w = SerializedFileWriter::new(&mut out, root.clone(), props_arc.clone()).unwrap();
        let mut rg = w.next_row_group().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<ByteArrayType>()
            .write_batch(&vals, None, None)
            .unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int64Type>()
            .write_batch(&pos, None, None)
            .unwrap();
        c.close().unwrap();
        rg.close().unwrap();
        w.close().unwrap();
        out
    };
    let (x, y) = (a(&rows, &props), b(&rows));
    println!("sizes a {} b {}", x.len(), y.len());
    for round in 0..3 {
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(a(&rows, &props));
        }
        let ta = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(b(&rows));
        }
        let tb = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        let t = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(a(&rows, &props_c));
        }
        let tc = t.elapsed().as_secs_f64() * 1e6 / iters as f64;
        println!("pos plain {tc:.1} us, size {}", a(&rows, &props_c).len());
        println!(
            "round {round}: rows {rows_per} arrow writer {ta:.1} us, column writers {tb:.1} us"
        );
    }
}

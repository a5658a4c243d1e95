//! Helpers shared by the integration tests.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use neve_core::log::Snapshot;
use neve_core::{Table, TableLocation};
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub fn neve_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_neve"))
}

/// The MinIO bucket `make test` created. Panics (fails the test) when MinIO is not configured.
pub fn bucket() -> String {
    std::env::var("NEVE_TEST_BUCKET").expect(
        "NEVE_TEST_BUCKET/AWS_ENDPOINT_URL are not set: run the integration tests with `make test`, which starts MinIO",
    )
}

/// A fresh table address on MinIO.
pub fn s3_table(name: &str) -> String {
    format!("s3://{}/it/{name}-{}", bucket(), uuid::Uuid::new_v4())
}

/// A fresh table address in a local temporary folder (kept alive by the returned guard).
pub fn local_table(name: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let addr = dir.path().join(name).display().to_string();
    (dir, addr)
}

/// Run the neve binary.
pub fn neve(args: &[&str]) -> Output {
    Command::new(neve_bin())
        .args(args)
        .output()
        .expect("run neve")
}

/// Run neve and require success; returns stdout.
pub fn neve_ok(args: &[&str]) -> String {
    let out = neve(args);
    assert!(
        out.status.success(),
        "neve {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `neve info --json` as JSON.
pub fn info(table: &str) -> serde_json::Value {
    serde_json::from_str(&neve_ok(&["info", "--json", table])).unwrap()
}

/// Read every alive file of a snapshot (through the table's own store).
pub async fn read_files(loc: &TableLocation, snap: &Snapshot) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for f in snap.files.values() {
        let bytes = loc
            .store
            .get(&loc.child(&f.path))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        assert_eq!(
            bytes.len() as u64,
            f.size,
            "size in the log matches {}",
            f.path
        );
        let rdr = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let mut rows = 0;
        for b in rdr {
            let b = b.unwrap();
            rows += b.num_rows() as u64;
            out.push(b);
        }
        assert_eq!(rows, f.rows, "row count in the log matches {}", f.path);
    }
    out
}

/// Values of an int64 column across batches (nulls skipped), counted.
pub fn int_counts(batches: &[RecordBatch], column: &str) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for b in batches {
        let Ok(i) = b.schema().index_of(column) else {
            continue;
        };
        let a = arrow::compute::cast(b.column(i), &arrow::datatypes::DataType::Int64).unwrap();
        let a = a.as_primitive::<Int64Type>();
        for j in 0..a.len() {
            if a.is_valid(j) {
                *m.entry(a.value(j)).or_insert(0) += 1;
            }
        }
    }
    m
}

/// Open a table by address.
pub fn table(addr: &str) -> Table {
    Table::at(addr).unwrap()
}

/// Write an NDJSON file of `{"id": i, "writer": w, "ts": ...}` rows.
pub fn write_ndjson(path: &std::path::Path, ids: impl Iterator<Item = i64>, writer: u32) {
    use std::fmt::Write;
    let mut s = String::new();
    for id in ids {
        let month = (id.rem_euclid(12)) + 1;
        let _ = writeln!(
            s,
            r#"{{"id": {id}, "writer": {writer}, "ts": "2021-{month:02}-15T10:00:00"}}"#
        );
    }
    std::fs::write(path, s).unwrap();
}

/// Write one batch as a Parquet file (inputs for tests).
pub fn write_parquet(path: &std::path::Path, batch: &RecordBatch) {
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

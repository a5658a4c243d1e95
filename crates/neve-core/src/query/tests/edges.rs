//! Values at the edges of what statistics and merged reads assume: NaN among floats, a null
//! key, a deleted flag still of type null, sums beyond their type, a warehouse read at a time
//! before some of its tables existed.

use arrow::array::{ArrayRef, BooleanArray, Decimal128Array, NullArray};

use super::*;
use crate::error::ErrorKind;

/// The answer of `sql` as text, one string per row (columns joined by `|`).
async fn answer(e: &QueryEngine, sql: &str) -> Vec<String> {
    let batches = e.collect(sql).await.unwrap();
    let mut out = Vec::new();
    for b in &batches {
        for r in 0..b.num_rows() {
            let row: Vec<String> = b
                .columns()
                .iter()
                .map(|c| arrow::util::display::array_value_to_string(c, r).unwrap())
                .collect();
            out.push(row.join("|"));
        }
    }
    out
}

/// Merge every partition of `t` with two files or more.
async fn merge_all(t: &Table) -> crate::Result<crate::merge::MergeReport> {
    let opts = crate::merge::MergeOptions {
        min_files: 2,
        ..Default::default()
    };
    t.merge(&opts, Arc::new(NoProgress)).await
}

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

/// The one NaN of `t.x` is read by a filter above every number, and found by `isnan`.
async fn the_nan_is_found(e: &QueryEngine) {
    assert_eq!(answer(e, "SELECT count(*) FROM t WHERE x > 5").await, ["1"]);
    assert_eq!(
        answer(e, "SELECT count(*) FROM t WHERE isnan(x)").await,
        ["1"]
    );
}

/// NaN sorts above every number where DataFusion compares floats: a file holding one is read
/// for `x > 5`, its column is not taken as single-valued, and counts by value are not
/// answered from bounds that leave it out.
#[tokio::test]
async fn nan_is_found_by_filters_and_counts() {
    let t = created("nan", 1, CreateOptions::default()).await;
    let x = Float64Array::from(vec![1.0, f64::NAN, 1.0]);
    insert(&t, batch(vec![("x", Arc::new(x))])).await;
    // Not in the log's bounds, and not in the file's (row groups and pages are pruned by
    // those, by DataFusion and other readers alike).
    let s = t.snapshot().await.unwrap();
    let f = s.files.values().next().unwrap();
    assert_eq!(f.stats["x"].max, None, "{:?}", f.stats);
    let bytes = t
        .location()
        .store
        .get(&t.location().child(&f.path))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let footer = parquet::file::reader::SerializedFileReader::new(bytes).unwrap();
    let chunk = parquet::file::reader::FileReader::metadata(&footer)
        .row_group(0)
        .column(0)
        .clone();
    assert!(
        chunk
            .statistics()
            .is_none_or(|s| s.max_bytes_opt().is_none()),
        "{chunk:?}"
    );
    let e = engine(&t).await;
    the_nan_is_found(&e).await;
    assert_eq!(
        answer(&e, "SELECT count(*) FROM t WHERE x < 100").await,
        ["2"]
    );
    assert_eq!(
        answer(&e, "SELECT x, count(*) FROM t GROUP BY x ORDER BY x").await,
        ["1.0|2", "NaN|1"]
    );
    // The min still holds: `x < 0` skips the file, and finds nothing.
    assert_eq!(
        answer(&e, "SELECT count(*) FROM t WHERE x < 0").await,
        ["0"]
    );
}

/// A table of `spec` over the columns `fields`, sorted by `k`.
fn merged_table(spec: &str, fields: Vec<Field>) -> CreateOptions {
    CreateOptions {
        sort_by: vec!["k".into()],
        schema: crate::schema::TableSchema::from_arrow(&Schema::new(fields)).unwrap(),
        merge: Some(spec.parse().unwrap()),
        ..Default::default()
    }
}

fn field(name: &str, t: DataType) -> Field {
    Field::new(name, t, true)
}

/// A null key is one key: a merged file holding it and a newer file holding it overlap,
/// whatever their ranges of other keys, so the newer row replaces the older one.
#[tokio::test]
async fn a_null_key_in_two_files_is_one_key() {
    let t = created(
        "nullkey",
        1,
        merged_table(
            "replace(key = [k])",
            vec![field("k", DataType::Int64), field("v", DataType::Utf8)],
        ),
    )
    .await;
    let rows = |k: Vec<Option<i64>>, v: Vec<&str>| {
        batch(vec![
            ("k", Arc::new(Int64Array::from(k)) as ArrayRef),
            ("v", Arc::new(StringArray::from(v))),
        ])
    };
    insert(&t, rows(vec![None, Some(1)], vec!["a", "x"])).await;
    insert(&t, rows(vec![Some(1)], vec!["y"])).await;
    merge_all(&t).await.unwrap();
    insert(&t, rows(vec![None, Some(10)], vec!["b", "z"])).await;
    let e = engine(&t).await;
    assert_eq!(
        answer(&e, "SELECT v FROM t WHERE k IS NULL").await,
        ["b"],
        "the newer null key's row, once"
    );
    assert_eq!(answer(&e, "SELECT count(*) FROM t").await, ["3"]);
    assert_eq!(
        answer(&e, "SELECT k, v FROM t ORDER BY k NULLS FIRST").await,
        ["|b", "1|y", "10|z"]
    );
}

/// A deleted column inferred as null (no row has set it yet) deletes nothing: merged reads,
/// merges and Iceberg's position deletes take it as all false, and a later boolean works.
#[tokio::test]
async fn a_deleted_flag_of_type_null_deletes_nothing() {
    let t = created(
        "nulldel",
        1,
        merged_table(
            "replace(key = [k], deleted = del)",
            vec![
                field("k", DataType::Int64),
                field("v", DataType::Utf8),
                field("del", DataType::Null),
            ],
        ),
    )
    .await;
    let rows = |k: Vec<i64>, del: ArrayRef| {
        let n = k.len();
        batch(vec![
            ("k", Arc::new(Int64Array::from(k)) as ArrayRef),
            ("v", Arc::new(StringArray::from(vec!["a"; n]))),
            ("del", del),
        ])
    };
    insert(&t, rows(vec![1, 2], Arc::new(NullArray::new(2)))).await;
    insert(&t, rows(vec![2, 3], Arc::new(NullArray::new(2)))).await;
    let e = engine(&t).await;
    assert_eq!(
        answer(&e, "SELECT k FROM t ORDER BY k").await,
        ["1", "2", "3"]
    );
    merge_all(&t).await.unwrap();
    // The flag becomes boolean with its first value, and deletes.
    let del = Arc::new(BooleanArray::from(vec![Some(true)]));
    insert(&t, rows(vec![1], del)).await;
    let e = engine(&t).await;
    assert_eq!(answer(&e, "SELECT k FROM t ORDER BY k").await, ["2", "3"]);
}

/// A sum beyond its type, in a merged read, is the data's fault (BadInput), not the
/// engine's; a decimal sum beyond the column's precision too, where the integer beneath it
/// would still hold it, and a merge refuses to write it.
#[tokio::test]
async fn sums_beyond_their_type_are_refused_as_bad_input() {
    let t = created(
        "overflow",
        1,
        merged_table(
            "aggregate(key = [k], sum = [n])",
            vec![field("k", DataType::Int64), field("n", DataType::Int64)],
        ),
    )
    .await;
    for n in [i64::MAX, 1] {
        let b = batch(vec![
            ("k", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("n", Arc::new(Int64Array::from(vec![n]))),
        ]);
        insert(&t, b).await;
    }
    let e = engine(&t).await;
    let err = e.collect("SELECT * FROM t").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    assert!(err.to_string().contains("overflows"), "{err}");

    let t = created(
        "decimal",
        1,
        merged_table(
            "aggregate(key = [k], sum = [amount])",
            vec![
                field("k", DataType::Int64),
                field("amount", DataType::Decimal128(9, 2)),
            ],
        ),
    )
    .await;
    for _ in 0..3 {
        let amount = Decimal128Array::from(vec![999_999_999])
            .with_precision_and_scale(9, 2)
            .unwrap();
        let b = batch(vec![
            ("k", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("amount", Arc::new(amount)),
        ]);
        insert(&t, b).await;
    }
    let e = engine(&t).await;
    let err = e.collect("SELECT * FROM t").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    assert!(err.to_string().contains("amount"), "{err}");
    let before = t.snapshot().await.unwrap().version;
    let err = merge_all(&t).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadInput, "{err}");
    assert!(err.to_string().contains("precision 9"), "{err}");
    assert_eq!(
        t.snapshot().await.unwrap().version,
        before,
        "nothing merged"
    );
}

/// A warehouse read at a time (or version) before one of its tables existed leaves that table
/// out, as its listing at that time would have, and reads the others.
#[tokio::test]
async fn a_warehouse_as_of_a_time_leaves_out_younger_tables() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().display().to_string();
    let old = Table::at(&format!("{w}/old")).unwrap();
    old.create(CreateOptions::default()).await.unwrap();
    let b = || {
        batch(vec![(
            "id",
            Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef,
        )])
    };
    insert(&old, b()).await;
    insert(&old, b()).await;
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let then = chrono::Utc::now().timestamp_millis();
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let young = Table::at(&format!("{w}/young")).unwrap();
    young.create(CreateOptions::default()).await.unwrap();
    insert(&young, b()).await;

    for (as_of, rows) in [(AsOf::Timestamp(then), "4"), (AsOf::Version(2), "4")] {
        let mut e = QueryEngine::new();
        let names = e.register_warehouse(&w, Some(as_of)).await.unwrap();
        assert_eq!(names, ["old"], "{as_of:?}");
        assert_eq!(answer(&e, "SELECT count(*) FROM old").await, [rows]);
        // Naming the younger table says why it is not there.
        let err = e
            .collect("SELECT * FROM young")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("'young' could not be opened"), "{err}");
    }
    let mut e = QueryEngine::new();
    let names = e.register_warehouse(&w, None).await.unwrap();
    assert_eq!(names, ["old", "young"]);
}

/// A NULL partition and the string `__HIVE_DEFAULT_PARTITION__` share a folder name; a merge
/// keeps their rows apart, each file labelled with its own values, so neither is hidden by
/// pruning on the other's label.
#[tokio::test]
async fn a_null_partition_and_its_folder_names_twin_merge_apart() {
    let t = created(
        "hive",
        1,
        CreateOptions {
            partition_by: parse_spec("region").unwrap(),
            ..Default::default()
        },
    )
    .await;
    for region in [
        None,
        Some("__HIVE_DEFAULT_PARTITION__"),
        None,
        Some("__HIVE_DEFAULT_PARTITION__"),
    ] {
        insert(
            &t,
            batch(vec![
                ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
                ("region", Arc::new(StringArray::from(vec![region]))),
            ]),
        )
        .await;
    }
    merge_all(&t).await.unwrap();
    let s = t.snapshot().await.unwrap();
    assert_eq!(s.files.len(), 2, "one merged file per partition's values");
    let e = engine(&t).await;
    assert_eq!(
        answer(&e, "SELECT count(*) FROM t WHERE region IS NULL").await,
        ["2"]
    );
    assert_eq!(
        answer(
            &e,
            "SELECT count(*) FROM t WHERE region = '__HIVE_DEFAULT_PARTITION__'"
        )
        .await,
        ["2"]
    );
}

/// A merge whose NaN comes in a later batch than the first still writes no statistics for the
/// column (the inputs' log says a NaN may be there), so row-group pruning cannot drop it.
#[tokio::test]
async fn a_nan_in_a_later_batch_of_a_merge_is_found() {
    let t = created("nanmerge", 1, CreateOptions::default()).await;
    let rows = |n: usize, nan_last: bool| {
        let mut x = vec![1.0; n];
        if nan_last {
            x[n - 1] = f64::NAN;
        }
        batch(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
            ),
            ("x", Arc::new(Float64Array::from(x))),
        ])
    };
    insert(&t, rows(20_000, false)).await;
    insert(&t, rows(30_000, true)).await;
    merge_all(&t).await.unwrap();
    assert_eq!(t.snapshot().await.unwrap().files.len(), 1, "merged");
    let e = engine(&t).await;
    the_nan_is_found(&e).await;
}

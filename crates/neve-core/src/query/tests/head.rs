//! The head of the log: counts and totals answered from the latest commits' partition totals,
//! without the file list, and when that falls back to the list.

use super::*;

/// Inserts, a merge, a delete and a partition drop, checkpointing every 2 versions.
async fn maintained_table() -> Table {
    let t = created(
        "h",
        5,
        CreateOptions {
            partition_by: parse_spec("month(ts) as m").unwrap(),
            sort_by: vec!["kind".into(), "ts".into()],
            settings: crate::log::TableSettings {
                checkpoint_interval: 2,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    for (i, b) in [
        rows(0, 0, 100, 10),
        rows(10_000, 212, 31, 10),
        rows(20_000, 30, 40, 3),
    ]
    .into_iter()
    .enumerate()
    {
        insert(&t, b).await;
        if i == 1 {
            let opts = crate::merge::MergeOptions {
                min_files: 2,
                ..Default::default()
            };
            t.merge(&opts, Arc::new(NoProgress)).await.unwrap();
        }
    }
    t.delete("id < 50 OR id >= 20100", 2, Arc::new(NoProgress))
        .await
        .unwrap();
    t.drop_partitions(&["2021-03".to_string()]).await.unwrap();
    t
}

#[tokio::test]
async fn the_head_totals_match_the_file_list() {
    let t = maintained_table().await;
    let head = t.log().load_head().await.unwrap().expect("a head");
    let snapshot = t.snapshot().await.unwrap();
    assert_eq!(head.version, snapshot.version);
    assert_eq!(head.metadata, snapshot.metadata);
    assert_eq!(head.partitions, snapshot.partition_totals());
    assert!(head
        .partitions
        .iter()
        .all(|p| p.values["m"].as_deref() != Some("2021-03")));
    // Read from a checkpoint (version 6 here) and the commits after it.
    assert!(t.log().read_pointer().await.unwrap().is_some());
}

#[tokio::test]
async fn counts_by_month_come_from_the_head_without_the_file_list() {
    let t = maintained_table().await;
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let provider = e.ctx.table_provider("t").await.unwrap();
    let table = provider.downcast_ref::<SnapshotTable>().unwrap();
    let by_month =
        "SELECT date_trunc('month', ts) AS m, count(*) AS n FROM t GROUP BY 1 ORDER BY 1";
    let from_head = e.collect(by_month).await.unwrap();
    let total = e.collect("SELECT count(*) FROM t").await.unwrap();
    let august = e
        .collect("SELECT count(*) FROM t WHERE ts >= '2021-08-01'")
        .await
        .unwrap();
    assert!(table.snapshot().is_none(), "the file list was read");
    assert_eq!(e.reads().bytes(), 0, "a data file was read");

    // The same sums computed from the rows (this reads the file list and the data).
    let summed = e
        .collect("SELECT date_trunc('month', ts) AS m, sum(1) AS n FROM t GROUP BY 1 ORDER BY 1")
        .await
        .unwrap();
    assert!(table.snapshot().is_some());
    assert!(e.reads().bytes() > 0);
    assert_eq!(int(&from_head, 1), int(&summed, 1));
    assert_eq!(
        int(&from_head, 1).len(),
        4,
        "Jan, Feb, Apr, Aug: March was dropped"
    );
    assert_eq!(int(&total, 0), vec![int(&summed, 1).iter().sum::<i64>()]);
    assert_eq!(int(&august, 0), vec![310]);
}

#[tokio::test]
async fn a_count_the_head_cannot_answer_reads_the_file_list_first() {
    let t = maintained_table().await;
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let provider = e.ctx.table_provider("t").await.unwrap();
    let table = provider.downcast_ref::<SnapshotTable>().unwrap();
    let n = e
        .collect("SELECT count(*) FROM t WHERE kind = 'a'")
        .await
        .unwrap();
    assert!(table.snapshot().is_some());
    let summed = e
        .collect("SELECT sum(CASE WHEN kind = 'a' THEN 1 ELSE 0 END) FROM t")
        .await
        .unwrap();
    assert_eq!(int(&n, 0), int(&summed, 0));
}

#[tokio::test]
async fn commits_without_partition_totals_fall_back_to_the_file_list() {
    let t = table().await;
    // A commit as a writer from before per-partition totals wrote it.
    let snapshot = t.snapshot().await.unwrap();
    let file = snapshot.files.values().next().unwrap().as_ref().clone();
    let old = crate::log::Action::Remove(crate::log::RemoveFile {
        path: file.path.clone(),
        deletion_timestamp: snapshot.timestamp + 1,
        size: Some(file.size),
        rows: Some(file.rows),
    });
    let info = crate::log::Action::CommitInfo(crate::log::CommitInfo {
        timestamp: snapshot.timestamp + 1,
        operation: "DELETE".into(),
        commit_id: "old-writer".into(),
        writer: "neve/0.0".into(),
        read_version: Some(snapshot.version),
        summary: crate::log::CommitSummary::of(std::slice::from_ref(&old)),
        requests: Vec::new(),
    });
    let body = crate::log::actions::to_json_lines(&[info, old]);
    let path = t.log().commit_path(snapshot.version + 1);
    t.location().store.put(&path, body.into()).await.unwrap();
    assert!(t.log().load_head().await.unwrap().is_none());

    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let n = e.collect("SELECT count(*) FROM t").await.unwrap();
    assert_eq!(int(&n, 0), vec![(1000 + 310 - file.rows) as i64]);
}

#[tokio::test]
async fn the_head_reads_only_the_start_of_big_commits() {
    let t = created(
        "big",
        9,
        CreateOptions {
            partition_by: parse_spec("day(ts)").unwrap(),
            ..Default::default()
        },
    )
    .await;
    // 300 day partitions: a commit of well over 64 KiB.
    insert(&t, rows(0, 0, 300, 2)).await;
    let big = t.log().commit_path(1);
    assert!(t.location().store.head(&big).await.unwrap().size > 64 << 10);
    // Then a new column, in a commit of the same size: its metadata line must be seen.
    let base = rows(1_000, 0, 300, 2);
    let mut fields = schema().fields().to_vec();
    fields.push(Arc::new(Field::new("extra", DataType::Int64, true)));
    let extra: Arc<dyn arrow::array::Array> = Arc::new(Int64Array::from(vec![7; base.num_rows()]));
    let mut cols = base.columns().to_vec();
    cols.push(extra);
    let wider = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    insert(&t, wider).await;
    let head = t.log().load_head().await.unwrap().expect("a head");
    let snapshot = t.snapshot().await.unwrap();
    assert_eq!(head.metadata, snapshot.metadata);
    assert!(head.metadata.schema.column("extra").is_some());
    assert_eq!(head.partitions, snapshot.partition_totals());
    assert_eq!(head.partitions.len(), 300);
}

#[tokio::test]
async fn a_commit_info_longer_than_the_prefix_is_read_whole() {
    let t = created(
        "wide",
        11,
        CreateOptions {
            partition_by: parse_spec("id").unwrap(),
            ..Default::default()
        },
    )
    .await;
    // 1,500 identity partitions: the commit info alone is over 64 KiB.
    insert(&t, rows(0, 0, 1_500, 1)).await;
    let commit = t.log().read_commit(1).await.unwrap().unwrap();
    let info_len = serde_json::to_vec(&commit.info).unwrap().len();
    assert!(info_len > 64 << 10, "commit info is {info_len} bytes");
    let head = t.log().load_head().await.unwrap().expect("a head");
    assert_eq!(
        head.partitions,
        t.snapshot().await.unwrap().partition_totals()
    );
    assert_eq!(head.partitions.len(), 1_500);

    // An identity partition decides equality on its column from the head alone.
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    let n = e
        .collect("SELECT count(*) FROM t WHERE id = 42")
        .await
        .unwrap();
    assert_eq!(int(&n, 0), vec![1]);
    assert_eq!(e.reads().bytes(), 0);
}

/// Truncated integers and decimals, identity decimals, times and timestamps: a filter that
/// holds for whole partitions is counted from the head, and the counts are the rows'.
#[tokio::test]
async fn counts_over_truncate_and_identity_partitions_come_from_the_head() {
    use arrow::array::{Decimal128Array, Int64Array, TimestampMicrosecondArray};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
    let t = created(
        "h2",
        3,
        CreateOptions {
            partition_by: parse_spec(
                "truncate(10, n) as nb, price, identity(ts) as tsi, truncate(100, amount) as ab",
            )
            .unwrap(),
            ..Default::default()
        },
    )
    .await;
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::Int64, true),
        Field::new("price", DataType::Decimal128(5, 2), true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("amount", DataType::Decimal128(9, 2), true),
    ]));
    let n: Vec<i64> = (0..60).map(|i| i * 7 % 45 - 12).collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(n.clone())),
            Arc::new(
                Decimal128Array::from_iter((0..60).map(|i| [Some(150), Some(-225), None][i % 3]))
                    .with_precision_and_scale(5, 2)
                    .unwrap(),
            ),
            Arc::new(
                TimestampMicrosecondArray::from_iter(
                    (0..60).map(|i| Some(1_629_035_100_000_000 + (i % 2) as i64)),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(
                Decimal128Array::from_iter((0..60).map(|i| Some(i as i128 * 37 - 900)))
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
        ],
    )
    .unwrap();
    insert(&t, batch).await;
    let filters = [
        ("n >= 10", n.iter().filter(|&&v| v >= 10).count()),
        ("n < -10", n.iter().filter(|&&v| v < -10).count()),
        ("price = 1.50", 20),
        ("price < 0", 20),
        ("ts = '2021-08-15T13:45:00.000001Z'", 30),
        (
            "amount >= 1.00",
            (0..60).filter(|i| i * 37 - 900 >= 100).count(),
        ),
    ];
    for (filter, want) in filters {
        let mut e = QueryEngine::new();
        e.register_table("t", &t, None).await.unwrap();
        let provider = e.ctx.table_provider("t").await.unwrap();
        let table = provider.downcast_ref::<SnapshotTable>().unwrap();
        let got = e
            .collect(&format!("SELECT count(*) FROM t WHERE {filter}"))
            .await
            .unwrap();
        assert!(
            table.snapshot().is_none(),
            "{filter}: the file list was read"
        );
        assert_eq!(int(&got, 0), vec![want as i64], "{filter}");
    }
    // Filters on a partition's last values: the bounds must reach them.
    let mut e = QueryEngine::new();
    e.register_table("t", &t, None).await.unwrap();
    for (filter, want) in [
        ("n > 18", n.iter().filter(|&&v| v > 18).count()),
        (
            "n >= -11 AND n < -10",
            n.iter().filter(|&&v| v == -11).count(),
        ),
        (
            "amount > 0.99",
            (0..60).filter(|i| i * 37 - 900 > 99).count(),
        ),
    ] {
        let got = e
            .collect(&format!("SELECT count(*) FROM t WHERE {filter}"))
            .await
            .unwrap();
        assert_eq!(int(&got, 0), vec![want as i64], "{filter}");
    }
}

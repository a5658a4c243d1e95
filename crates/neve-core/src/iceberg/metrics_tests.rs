//! What a data file's manifest entry says of its columns (value and null counts, bounds), as
//! the table's `iceberg_metrics` setting asks, through alters.

use std::collections::BTreeMap;

use apache_avro::types::Value;

use super::tests::{insert, key_of, long, newest, read, records, string, table, T0};
use crate::clock::ManualClock;
use crate::storage::TableLocation;
use crate::table::Table;

/// The field ids of one of a data file's per-field maps (`lower_bounds`, …), with the values.
fn by_field(v: &Value) -> BTreeMap<i32, Value> {
    match v {
        Value::Union(_, b) => by_field(b),
        Value::Null => BTreeMap::new(),
        Value::Array(items) => items
            .iter()
            .map(|r| match r {
                Value::Record(kv) => (long(&kv[0].1) as i32, kv[1].1.clone()),
                v => panic!("{v:?}"),
            })
            .collect(),
        v => panic!("{v:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8(b.clone()).unwrap(),
        v => panic!("{v:?}"),
    }
}

async fn metrics_setting(t: &Table) -> Option<String> {
    t.snapshot()
        .await
        .unwrap()
        .metadata
        .settings
        .iceberg_metrics
}

#[tokio::test]
async fn entries_carry_the_counts_and_bounds_the_metrics_setting_asks_for() {
    let location = TableLocation::memory("t");
    let clock = ManualClock::new(T0);
    let t = table(&location, clock.clone(), true).await;
    insert(&t, &clock, 0, 5).await;
    let before = t.snapshot().await.unwrap().version;
    // A column the table does not have is refused, and nothing changes.
    let err = t
        .alter(&crate::schema::AlterOp::SetSetting {
            key: "iceberg_metrics".into(),
            value: "none, k=full, nope=full".into(),
        })
        .await;
    assert!(
        err.as_ref()
            .is_err_and(|e| e.to_string().contains("no column 'nope' (")),
        "{err:?}"
    );
    assert_eq!(t.snapshot().await.unwrap().version, before);
    let meta = newest(&location).await;
    assert_eq!(meta.properties["write.metadata.metrics.default"], "full");
    t.alter(&crate::schema::AlterOp::SetSetting {
        key: "iceberg_metrics".into(),
        value: "none, k=full, s=truncate(2)".into(),
    })
    .await
    .unwrap();
    insert(&t, &clock, 100, 30).await;
    let meta = newest(&location).await;
    assert_eq!(meta.properties["write.metadata.metrics.default"], "none");
    assert_eq!(meta.properties["write.metadata.metrics.column.k"], "full");
    assert_eq!(
        meta.properties["write.metadata.metrics.column.s"],
        "truncate(2)"
    );
    let version = meta.snapshots.last().unwrap().snapshot_id;
    let snap = t.log().load_version(version as u64).await.unwrap();
    let rel = |url: &str| key_of(&location, url);
    let current = meta.snapshots.last().unwrap();
    let mut seen = 0;
    for m in records(&read(&location, &rel(&current.manifest_list)).await) {
        for e in records(&read(&location, &rel(&string(&m["manifest_path"]))).await) {
            let Value::Record(df) = &e["data_file"] else {
                panic!()
            };
            let df: BTreeMap<_, _> = df.iter().cloned().collect();
            // Every file, the earlier version's too, is described by the table's setting now.
            let (g, k, s) = (1, 2, 3);
            let counts = by_field(&df["value_counts"]);
            let nulls = by_field(&df["null_value_counts"]);
            let lower = by_field(&df["lower_bounds"]);
            let upper = by_field(&df["upper_bounds"]);
            assert_eq!(counts.keys().copied().collect::<Vec<_>>(), vec![k, s]);
            assert_eq!(nulls.keys().copied().collect::<Vec<_>>(), vec![k, s]);
            assert!(!lower.contains_key(&g) && !upper.contains_key(&g));
            assert!(lower.contains_key(&k) && upper.contains_key(&k));
            // The string bounds are cut to 2 characters and still hold the file's values.
            let path = string(&df["file_path"]);
            let f = &snap.files[&rel(&path)];
            let stats = &f.stats["s"];
            let (min, max) = (stats.min.as_ref().unwrap(), stats.max.as_ref().unwrap());
            let (lo, hi) = (text(&lower[&s]), text(&upper[&s]));
            assert!(
                lo.chars().count() <= 2 && hi.chars().count() <= 2,
                "{lo} {hi}"
            );
            assert!(lo.as_str() <= min.as_str().unwrap(), "{lo} > {min}");
            assert!(hi.as_str() >= max.as_str().unwrap(), "{hi} < {max}");
            seen += 1;
        }
    }
    assert_eq!(seen, snap.files.len());
    // The setting follows a column it names through a rename, and forgets it once dropped.
    t.alter(&crate::schema::AlterOp::RenameColumn {
        from: "s".into(),
        to: "label".into(),
    })
    .await
    .unwrap();
    assert_eq!(
        metrics_setting(&t).await.as_deref(),
        Some("none, k=full, label=truncate(2)")
    );
    let meta = newest(&location).await;
    assert_eq!(
        meta.properties["write.metadata.metrics.column.label"],
        "truncate(2)"
    );
    assert!(!meta
        .properties
        .contains_key("write.metadata.metrics.column.s"));
    t.alter(&crate::schema::AlterOp::DropColumn("label".into()))
        .await
        .unwrap();
    assert_eq!(metrics_setting(&t).await.as_deref(), Some("none, k=full"));
    t.alter(&crate::schema::AlterOp::SetSetting {
        key: "log_retention_hours".into(),
        value: "2".into(),
    })
    .await
    .unwrap();
}

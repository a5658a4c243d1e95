//! Inputs prepared ahead of their commit (`neve serve`'s queue) against a table that changes
//! meanwhile.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};

use crate::schema::AlterOp;
use crate::storage::TableLocation;
use crate::table::{CreateOptions, InsertOptions, TableBuilder};
use crate::write::input::{InputFormat, OpenedInput};
use crate::write::NoProgress;

fn opened(name: &str, cols: Vec<(&str, ArrayRef)>) -> OpenedInput {
    let b = RecordBatch::try_from_iter(cols).unwrap();
    OpenedInput {
        name: name.into(),
        format: InputFormat::Arrow,
        schema: b.schema(),
        batches: Box::new(vec![Ok(b)].into_iter()),
    }
}

/// A request prepared before a column it did not send was dropped (or renamed) commits
/// without bringing the column back, strict table or not; one that sent it adds it as a new
/// column, as an insert after the drop would.
#[tokio::test]
async fn a_column_dropped_while_a_request_waits_stays_dropped() {
    for strict in [false, true] {
        let t = TableBuilder::new(TableLocation::memory("prepared")).build();
        t.create(CreateOptions::default()).await.unwrap();
        let first = opened(
            "first",
            vec![
                ("id", Arc::new(Int64Array::from(vec![1]))),
                ("region", Arc::new(StringArray::from(vec!["eu"]))),
                ("zone", Arc::new(StringArray::from(vec!["a"]))),
            ],
        );
        t.insert_batches(
            first.schema.clone(),
            first.batches.map(Result::unwrap).collect(),
            &InsertOptions::default(),
            Arc::new(NoProgress),
        )
        .await
        .unwrap();
        if strict {
            t.alter(&AlterOp::SetSetting {
                key: "strict_schema".into(),
                value: "true".into(),
            })
            .await
            .unwrap();
        }
        let meta = t.metadata().await.unwrap();
        let waiting = t
            .prepare(
                &meta,
                opened("waiting", vec![("id", Arc::new(Int64Array::from(vec![2])))]),
            )
            .unwrap();
        t.alter(&AlterOp::DropColumn("region".into()))
            .await
            .unwrap();
        t.alter(&AlterOp::RenameColumn {
            from: "zone".into(),
            to: "area".into(),
        })
        .await
        .unwrap();
        let report = t
            .insert_prepared(&[waiting], &InsertOptions::default())
            .await
            .unwrap();
        assert_eq!(report.rows, 1);
        let s = t.snapshot().await.unwrap();
        let cols: Vec<&str> = s
            .metadata
            .schema
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(cols, ["id", "area"], "strict: {strict}");
    }
}

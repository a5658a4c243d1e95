//! Weighing against a model: the losers of every prefix of a group's files are the rows a
//! reader drops, whatever the versions' type and however the best rows are laid out.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit};
use proptest::prelude::*;

use super::weigh::Weighed;

#[derive(Debug, Clone)]
struct Row {
    key: usize,
    version: Option<i64>,
    deleted: Option<bool>,
}

/// How a test's group weighs: the merge semantics and the version column's type.
#[derive(Debug, Clone, Copy)]
enum Form {
    Dedupe,
    /// `replace` without a version: the later row wins.
    Position,
    Int32,
    Timestamp,
    /// Row format.
    Float64,
}

impl Form {
    fn version_type(self) -> Option<DataType> {
        match self {
            Form::Dedupe | Form::Position => None,
            Form::Int32 => Some(DataType::Int32),
            Form::Timestamp => Some(DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("+01:00".into()),
            )),
            Form::Float64 => Some(DataType::Float64),
        }
    }

    fn column(self, rows: &[Row]) -> Option<ArrayRef> {
        let v = rows.iter().map(|r| r.version);
        Some(match self {
            Form::Dedupe | Form::Position => return None,
            Form::Int32 => Arc::new(Int32Array::from_iter(v.map(|v| v.map(|v| v as i32)))),
            Form::Timestamp => {
                Arc::new(TimestampMicrosecondArray::from_iter(v).with_timezone("+01:00"))
            }
            Form::Float64 => Arc::new(Float64Array::from_iter(v.map(|v| v.map(|v| v as f64)))),
        })
    }
}

/// The rows a reader drops from files read in merge order: all but each key's winner (the
/// first under dedupe; else the highest version, a null lowest, and the later on a tie), and
/// the winner too when it hides its key.
fn model(files: &[Vec<Row>], form: Form) -> BTreeSet<(u32, u64)> {
    let mut winner: HashMap<usize, (u32, u64)> = HashMap::new();
    let mut all = BTreeSet::new();
    for (f, file) in files.iter().enumerate() {
        for (p, r) in file.iter().enumerate() {
            let at = (f as u32, p as u64);
            all.insert(at);
            let row = |(f, p): (u32, u64)| &files[f as usize][p as usize];
            let wins = match (winner.get(&r.key), form) {
                (None, _) => true,
                (Some(_), Form::Dedupe) => false,
                (Some(_), Form::Position) => true,
                (Some(&w), _) => r.version >= row(w).version,
            };
            if wins {
                winner.insert(r.key, at);
            }
        }
    }
    for &(f, p) in winner.values() {
        if files[f as usize][p as usize].deleted != Some(true) {
            all.remove(&(f, p));
        }
    }
    all
}

fn row() -> impl Strategy<Value = Row> {
    (
        0usize..20,
        prop::option::weighted(0.9, -3i64..4),
        prop::option::of(prop::bool::weighted(0.2)),
    )
        .prop_map(|(key, version, deleted)| Row {
            key,
            version,
            deleted,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// After each file, the losers given so far are the model's for the files so far, each
    /// given once. Keys 0–9 have small ids and 10–19 ids in the hundreds of thousands, so a
    /// group's rows start in slots by id and move to a hash table when the far ids come.
    #[test]
    fn losers_are_the_models(
        files in prop::collection::vec(
            (prop::bool::weighted(0.7), prop::collection::vec(row(), 0..30)),
            1..8,
        ),
        near in prop::collection::btree_set(0u32..20, 10),
        far in prop::collection::btree_set(0u32..400_000, 10),
        form in prop_oneof![
            Just(Form::Dedupe),
            Just(Form::Position),
            Just(Form::Int32),
            Just(Form::Timestamp),
            Just(Form::Float64),
        ],
    ) {
        let id_of: Vec<u32> = near.into_iter().chain(far.into_iter().map(|i| 1000 + i)).collect();
        let files: Vec<Vec<Row>> = files
            .into_iter()
            .map(|(only_near, mut rows)| {
                if only_near {
                    rows.iter_mut().for_each(|r| r.key %= 10);
                }
                if matches!(form, Form::Dedupe) {
                    rows.iter_mut().for_each(|r| r.deleted = None);
                }
                rows
            })
            .collect();
        let mut best = Weighed::new(form.version_type().as_ref()).unwrap();
        let mut given = BTreeSet::new();
        for (f, rows) in files.iter().enumerate() {
            let ids: Vec<u32> = rows.iter().map(|r| id_of[r.key]).collect();
            let deleted: BooleanArray = rows.iter().map(|r| r.deleted).collect();
            let version = form.column(rows);
            let dedupe = matches!(form, Form::Dedupe);
            let lost = best
                .step(f as u32, &ids, version.as_ref(), Some(&deleted), dedupe)
                .unwrap();
            for (file, positions) in lost {
                prop_assert!(positions.is_sorted());
                for p in positions {
                    prop_assert!(given.insert((file, p)), "({file}, {p}) given twice");
                }
            }
            prop_assert_eq!(&given, &model(&files[..=f], form));
            let keys: BTreeSet<usize> = files[..=f].iter().flatten().map(|r| r.key).collect();
            prop_assert_eq!(best.rows(), keys.len());
        }
    }
}

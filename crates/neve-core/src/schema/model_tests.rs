//! Random schemas, random evolutions and random data against a reference model: every version
//! of the table, read back through the SQL engine, holds exactly the rows and columns the
//! model says. The model keeps values by column id, so renames, drops and re-adds are checked
//! for reading old files by id, never by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::{parse_schema, AlterOp, ColumnType};
use crate::merge::MergeOptions;
use crate::query::QueryEngine;
use crate::storage::TableLocation;
use crate::table::{AsOf, CreateOptions, InsertOptions, TableBuilder};
use crate::write::NoProgress;

#[derive(Debug, Clone)]
enum Kind {
    Int(u8),
    Str,
    Struct(Vec<ModelField>),
    /// A list of values of the inner kind (a struct's fields grow by insert).
    List(Box<Kind>),
    /// `map<string, int{bits}>` (declared only: JSON objects are inferred as structs).
    Map(u8),
}

/// A struct field: renamed and dropped by the model as columns are, tracked by its model id.
#[derive(Debug, Clone)]
struct ModelField {
    mid: u32,
    name: String,
    kind: Kind,
}

impl Kind {
    /// The kind JSON inference gives a value of this kind.
    fn inferred(self) -> Kind {
        match self {
            Kind::Int(_) => Kind::Int(64),
            Kind::Str => Kind::Str,
            Kind::Struct(f) => Kind::Struct(
                f.into_iter()
                    .map(|f| ModelField {
                        kind: f.kind.inferred(),
                        ..f
                    })
                    .collect(),
            ),
            Kind::List(inner) => Kind::List(Box::new(inner.inferred())),
            Kind::Map(b) => Kind::Map(b),
        }
    }

    fn ddl(&self) -> String {
        match self {
            Kind::Int(b) => format!("int{b}"),
            Kind::Str => "string".into(),
            Kind::Struct(f) => format!(
                "struct<{}>",
                f.iter()
                    .map(|f| format!("{} {}", f.name, f.kind.ddl()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Kind::List(inner) => format!("list<{}>", inner.ddl()),
            Kind::Map(b) => format!("map<string, int{b}>"),
        }
    }

    /// A value of this kind from a seed: always one the type can hold. `all`: a struct value
    /// has every field (so an insert that adds one is seen by inference). Returned twice: as
    /// the input says it (fields by name) and as the model keeps it (fields by model id).
    fn value(&self, seed: u64, all: bool) -> (Value, Value) {
        match self {
            Kind::Int(b) => {
                let max = (1i128 << (b - 1)) - 1;
                let v = (seed as i128 % (2 * max + 1)) - max;
                (json!(v as i64), json!(v as i64))
            }
            Kind::Str => {
                let v = json!(format!("s{}", seed % 1000));
                (v.clone(), v)
            }
            Kind::Struct(fields) => {
                let (mut by_name, mut by_mid) = (Map::new(), Map::new());
                for (i, f) in fields.iter().enumerate() {
                    if all || (seed >> i) & 1 == 0 {
                        let (n, m) = f.kind.value(seed.wrapping_mul(31) + i as u64, all);
                        by_name.insert(f.name.clone(), n);
                        by_mid.insert(f.mid.to_string(), m);
                    }
                }
                (Value::Object(by_name), Value::Object(by_mid))
            }
            Kind::List(inner) => {
                // With `all`, two elements (so inference sees the element's kind), each whole.
                let n = if all { 2 } else { seed % 4 };
                let (given, kept) = (0..n)
                    .map(|j| inner.value(seed.wrapping_mul(17).wrapping_add(j), all))
                    .unzip();
                (Value::Array(given), Value::Array(kept))
            }
            Kind::Map(b) => {
                let n = if all { 2 } else { seed % 3 };
                let entries: Map<String, Value> = (0..n)
                    .map(|j| {
                        let v = Kind::Int(*b).value(seed.wrapping_add(j * 13), all).0;
                        (format!("k{}", (seed + j) % 5), v)
                    })
                    .collect();
                (Value::Object(entries.clone()), Value::Object(entries))
            }
        }
    }

    /// A kept value as the table must return it now: fields under their current names.
    fn expected(&self, kept: Value) -> Value {
        match (self, kept) {
            (Kind::Struct(fields), Value::Object(given)) => Value::Object(
                fields
                    .iter()
                    .map(|f| {
                        let v = given
                            .get(&f.mid.to_string())
                            .cloned()
                            .unwrap_or(Value::Null);
                        (f.name.clone(), f.kind.expected(v))
                    })
                    .collect(),
            ),
            (Kind::List(inner), Value::Array(kept)) => {
                Value::Array(kept.into_iter().map(|v| inner.expected(v)).collect())
            }
            (_, v) => v,
        }
    }

    fn has_fields(&self) -> bool {
        match self {
            Kind::Struct(_) => true,
            Kind::List(inner) => inner.has_fields(),
            _ => false,
        }
    }

    /// How `neve alter` names the struct this kind holds, after the column's name: nothing for
    /// a struct, `[]` for each list around it.
    fn fields_path(&self) -> String {
        match self {
            Kind::List(inner) => format!("[]{}", inner.fields_path()),
            _ => String::new(),
        }
    }

    /// The struct fields of this kind, if it is a struct or a list of structs (where an insert
    /// may add fields).
    fn fields_mut(&mut self) -> Option<&mut Vec<ModelField>> {
        match self {
            Kind::Struct(f) => Some(f),
            Kind::List(inner) => inner.fields_mut(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct ModelColumn {
    /// The model's own id (the table's ids are checked through behaviour, not compared).
    mid: u32,
    name: String,
    kind: Kind,
}

#[derive(Debug, Default)]
struct Model {
    columns: Vec<ModelColumn>,
    /// Each row: `k`, and values by model id.
    rows: Vec<(i64, BTreeMap<u32, Value>)>,
    next_mid: u32,
    names: u32,
    /// Names of dropped columns, which a later add may take again.
    dropped: Vec<String>,
    /// Names of dropped struct fields (column model id, name), which a later insert brings
    /// again.
    dropped_fields: Vec<(u32, String)>,
}

impl Model {
    fn fresh_name(&mut self) -> String {
        self.names += 1;
        format!("c{}", self.names)
    }

    fn mid(&mut self) -> u32 {
        self.next_mid += 1;
        self.next_mid
    }

    /// Kind `n` of the five the tests use, with fresh model ids for struct fields.
    fn kind_of(&mut self, n: u8) -> Kind {
        match n % 5 {
            0 => Kind::Int(16),
            1 => Kind::Str,
            3 => Kind::List(Box::new(self.kind_of(2))),
            4 => Kind::Map(16),
            _ => Kind::Struct(vec![
                ModelField {
                    mid: self.mid(),
                    name: "a".into(),
                    kind: Kind::Int(8),
                },
                ModelField {
                    mid: self.mid(),
                    name: "b".into(),
                    kind: Kind::Str,
                },
            ]),
        }
    }

    fn add(&mut self, name: String, kind: Kind) -> u32 {
        self.next_mid += 1;
        self.columns.push(ModelColumn {
            mid: self.next_mid,
            name,
            kind,
        });
        self.next_mid
    }

    /// What `SELECT *` must return, as JSON objects keyed by the current names.
    fn expected(&self) -> Vec<Value> {
        let mut rows: Vec<_> = self.rows.clone();
        rows.sort_by_key(|(k, _)| *k);
        rows.iter()
            .map(|(k, values)| {
                let mut o = Map::new();
                o.insert("k".into(), json!(k));
                for c in &self.columns {
                    let v = values.get(&c.mid).cloned().unwrap_or(Value::Null);
                    o.insert(c.name.clone(), c.kind.expected(v));
                }
                Value::Object(o)
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Rows with values for columns picked by the seed; maybe a new column or a new struct
    /// field that the insert brings (evolution by insert).
    Insert {
        rows: u8,
        seed: u64,
        new_column: bool,
        new_field: bool,
    },
    AddColumn {
        kind: u8,
    },
    Rename {
        pick: u8,
    },
    Drop {
        pick: u8,
    },
    /// Rename or drop a field of a struct column.
    RenameField {
        pick: u8,
    },
    DropField {
        pick: u8,
    },
    Widen {
        pick: u8,
    },
    /// Widen an integer field of a struct column or of a list's struct elements (`user.a`,
    /// `events[].a`: int8 to int16).
    WidenField {
        pick: u8,
    },
    /// `neve alter add column` of a field to a struct column or to a list's struct elements:
    /// rows written before read it as null.
    AddField {
        pick: u8,
        string: bool,
    },
    Merge,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..6, any::<u64>(), any::<bool>(), any::<bool>()).prop_map(|(rows, seed, new_column, new_field)| Op::Insert { rows, seed, new_column, new_field }),
        1 => (0u8..10).prop_map(|kind| Op::AddColumn { kind }),
        1 => any::<u8>().prop_map(|pick| Op::Rename { pick }),
        1 => any::<u8>().prop_map(|pick| Op::Drop { pick }),
        1 => any::<u8>().prop_map(|pick| Op::RenameField { pick }),
        1 => any::<u8>().prop_map(|pick| Op::DropField { pick }),
        1 => any::<u8>().prop_map(|pick| Op::Widen { pick }),
        1 => any::<u8>().prop_map(|pick| Op::WidenField { pick }),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(pick, string)| Op::AddField { pick, string }),
        1 => Just(Op::Merge),
    ]
}

/// The struct column (or list of structs) `p` picks, if any, with its model id, the path `neve
/// alter` names its fields under (`user`, `events[]`), and its fields: where an insert may
/// bring a new field, and an alter may add or widen one.
fn pick_fields(p: u8, m: &mut Model) -> Option<(u32, String, &mut Vec<ModelField>)> {
    let with: Vec<usize> = (0..m.columns.len())
        .filter(|&i| m.columns[i].kind.has_fields())
        .collect();
    let i = *with.get(p as usize % with.len().max(1))?;
    let c = &mut m.columns[i];
    let (mid, path) = (c.mid, format!("{}{}", c.name, c.kind.fields_path()));
    Some((mid, path, c.kind.fields_mut()?))
}

/// The struct column `p` picks, if any, with its name and fields.
fn pick_struct(p: u8, m: &mut Model) -> Option<(u32, String, &mut Vec<ModelField>)> {
    let structs: Vec<usize> = (0..m.columns.len())
        .filter(|&i| matches!(m.columns[i].kind, Kind::Struct(_)))
        .collect();
    let i = *structs.get(p as usize % structs.len().max(1))?;
    let c = &mut m.columns[i];
    let Kind::Struct(fields) = &mut c.kind else {
        unreachable!()
    };
    Some((c.mid, c.name.clone(), fields))
}

async fn query_all(table: &crate::Table, version: u64) -> Vec<Value> {
    let mut engine = QueryEngine::new();
    engine
        .register_table("t", table, Some(AsOf::Version(version)))
        .await
        .unwrap();
    let batches = engine.collect("SELECT * FROM t ORDER BY k").await.unwrap();
    let mut w = arrow::json::WriterBuilder::new()
        .with_explicit_nulls(true)
        .build::<_, arrow::json::writer::JsonArray>(Vec::new());
    for b in &batches {
        w.write(b).unwrap();
    }
    w.finish().unwrap();
    let bytes = w.into_inner();
    if bytes.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice(&bytes).unwrap()
}

async fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let table = TableBuilder::new(TableLocation::memory("model"))
        .with_seed(7)
        .build();
    table
        .create(CreateOptions {
            schema: parse_schema("k int64").unwrap(),
            sort_by: vec!["k".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let mut next_k = 0i64;
    let mut versions: Vec<(u64, Vec<Value>)> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        let pick = |p: u8, m: &Model| -> Option<usize> {
            (!m.columns.is_empty()).then(|| p as usize % m.columns.len())
        };
        let version = match op {
            Op::Insert {
                rows,
                seed,
                new_column,
                new_field,
            } => {
                if new_column {
                    // A column an insert brings is inferred: JSON integers as int64, objects
                    // as structs (so never a map).
                    let name = model.fresh_name();
                    let kind = model.kind_of(seed as u8 % 4).inferred();
                    model.add(name, kind);
                }
                if new_field {
                    let mid = model.mid();
                    let dropped = std::mem::take(&mut model.dropped_fields);
                    if let Some((cmid, _, fields)) = pick_fields((seed >> 8) as u8, &mut model) {
                        // The name of a dropped field when there is one: a new field all the
                        // same, which must not see the old values.
                        let name = match dropped.iter().position(|(c, _)| *c == cmid) {
                            Some(i) => dropped[i].1.clone(),
                            None => format!("f{step}"),
                        };
                        fields.retain(|f| f.name != name);
                        fields.push(ModelField {
                            mid,
                            name: name.clone(),
                            kind: Kind::Int(64),
                        });
                        model.dropped_fields = dropped
                            .into_iter()
                            .filter(|(c, n)| !(*c == cmid && *n == name))
                            .collect();
                    } else {
                        model.dropped_fields = dropped;
                    }
                }
                let mut text = String::new();
                for r in 0..rows as u64 {
                    let s = seed.wrapping_add(r * 7919);
                    let mut o = Map::new();
                    o.insert("k".into(), json!(next_k));
                    let mut values = BTreeMap::new();
                    for (i, c) in model.columns.iter().enumerate() {
                        // The first row brings every column, so a new one is always seen.
                        if r == 0 || (s >> (i % 60)) & 1 == 0 {
                            let (given, kept) = c.kind.value(s.wrapping_add(i as u64), r == 0);
                            o.insert(c.name.clone(), given);
                            values.insert(c.mid, kept);
                        }
                    }
                    text.push_str(&Value::Object(o).to_string());
                    text.push('\n');
                    model.rows.push((next_k, values));
                    next_k += 1;
                }
                let path = dir.path().join(format!("{step}.ndjson"));
                std::fs::write(&path, text).unwrap();
                let report = table
                    .insert_files(
                        &[path.display().to_string()],
                        &InsertOptions::default(),
                        Arc::new(NoProgress),
                    )
                    .await
                    .map_err(|e| TestCaseError::fail(format!("insert: {e}")))?;
                report.version.unwrap()
            }
            Op::AddColumn { kind } => {
                // Half the time, the name of a dropped column: it must not see the old values.
                let name = match (kind >= 5, model.dropped.pop()) {
                    (true, Some(n)) => n,
                    (_, other) => {
                        model.dropped.extend(other);
                        model.fresh_name()
                    }
                };
                let k = model.kind_of(kind % 5);
                let def = format!("{name} {}", k.ddl());
                model.add(name, k);
                table
                    .alter(&AlterOp::parse(&["add".into(), "column".into(), def]).unwrap())
                    .await
                    .map_err(|e| TestCaseError::fail(format!("add: {e}")))?
            }
            Op::Rename { pick: p } => {
                let Some(i) = pick(p, &model) else { continue };
                let to = model.fresh_name();
                let from = std::mem::replace(&mut model.columns[i].name, to.clone());
                table
                    .alter(&AlterOp::RenameColumn { from, to })
                    .await
                    .map_err(|e| TestCaseError::fail(format!("rename: {e}")))?
            }
            Op::Drop { pick: p } => {
                let Some(i) = pick(p, &model) else { continue };
                let c = model.columns.remove(i);
                model.dropped.push(c.name.clone());
                table
                    .alter(&AlterOp::DropColumn(c.name))
                    .await
                    .map_err(|e| TestCaseError::fail(format!("drop: {e}")))?
            }
            Op::RenameField { pick: p } => {
                let to = model.fresh_name();
                let Some((_, column, fields)) = pick_struct(p, &mut model) else {
                    continue;
                };
                let n = fields.len();
                let f = &mut fields[(p as usize / 7) % n];
                let from = format!("{column}.{}", std::mem::replace(&mut f.name, to.clone()));
                table
                    .alter(&AlterOp::RenameColumn { from, to })
                    .await
                    .map_err(|e| TestCaseError::fail(format!("rename field: {e}")))?
            }
            Op::DropField { pick: p } => {
                let Some((cmid, column, fields)) = pick_struct(p, &mut model) else {
                    continue;
                };
                if fields.len() < 2 {
                    continue;
                }
                let f = fields.remove((p as usize / 7) % fields.len());
                model.dropped_fields.push((cmid, f.name.clone()));
                table
                    .alter(&AlterOp::DropColumn(format!("{column}.{}", f.name)))
                    .await
                    .map_err(|e| TestCaseError::fail(format!("drop field: {e}")))?
            }
            Op::Widen { pick: p } => {
                let Some(i) = pick(p, &model) else { continue };
                let Kind::Int(b) = model.columns[i].kind else {
                    continue;
                };
                if b == 64 {
                    continue;
                }
                model.columns[i].kind = Kind::Int(b * 2);
                let to: ColumnType = format!("int{}", b * 2).parse().unwrap();
                table
                    .alter(&AlterOp::Widen {
                        column: model.columns[i].name.clone(),
                        to,
                    })
                    .await
                    .map_err(|e| TestCaseError::fail(format!("widen: {e}")))?
            }
            Op::WidenField { pick: p } => {
                let Some((_, column, fields)) = pick_fields(p, &mut model) else {
                    continue;
                };
                let Some(f) = fields
                    .iter_mut()
                    .find(|f| matches!(f.kind, Kind::Int(b) if b < 64))
                else {
                    continue;
                };
                let Kind::Int(b) = f.kind else { unreachable!() };
                f.kind = Kind::Int(b * 2);
                let to: ColumnType = format!("int{}", b * 2).parse().unwrap();
                table
                    .alter(&AlterOp::Widen {
                        column: format!("{column}.{}", f.name),
                        to,
                    })
                    .await
                    .map_err(|e| TestCaseError::fail(format!("widen field: {e}")))?
            }
            Op::AddField { pick: p, string } => {
                let (mid, name) = (model.mid(), model.fresh_name());
                let Some((_, path, fields)) = pick_fields(p, &mut model) else {
                    continue;
                };
                let kind = if string { Kind::Str } else { Kind::Int(16) };
                let def = format!("{path}.{name} {}", kind.ddl());
                fields.push(ModelField { mid, name, kind });
                table
                    .alter(&AlterOp::parse(&["add".into(), "column".into(), def]).unwrap())
                    .await
                    .map_err(|e| TestCaseError::fail(format!("add field: {e}")))?
            }
            Op::Merge => {
                let opts = MergeOptions {
                    min_files: 2,
                    ..Default::default()
                };
                let report = table
                    .merge(&opts, Arc::new(NoProgress))
                    .await
                    .map_err(|e| TestCaseError::fail(format!("merge: {e}")))?;
                match report.version {
                    Some(v) => v,
                    None => continue,
                }
            }
        };
        versions.push((version, model.expected()));
    }
    // Every version, not only the last, reads back as the model says (time travel included).
    for (version, want) in versions {
        let got = query_all(&table, version).await;
        prop_assert_eq!(got, want, "version {}", version);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn every_version_reads_back_as_the_model_says(ops in proptest::collection::vec(op(), 1..10)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(ops))?;
    }
}

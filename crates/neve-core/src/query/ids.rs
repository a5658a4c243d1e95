//! Reading data files by field id: a file's column is the table column with the same Parquet
//! field id, whatever name it was written under. A renamed column is found under its old name
//! in old files; a dropped column's values are never read again, not even by a new column of
//! the same name. Files written before ids existed (no field ids) are matched by the names
//! the column has had, for the columns that existed then (`TableSchema::name_mapped_ids`).
//!
//! DataFusion's default adapter matches columns by name. This one renames the file's fields to
//! the table's names by id, lets the default adapter do the rest (casts, missing columns as
//! nulls), then gives the column references their names in the file back, which the Parquet
//! reader's statistics pruning looks up.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{make_array, ArrayData};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapter, PhysicalExprAdapter, PhysicalExprAdapterFactory,
};

use crate::schema::{field_id, TableSchema};

/// Matches file columns to table columns by field id.
#[derive(Debug, Clone)]
pub(crate) struct FieldIdAdapterFactory {
    /// Names (current and former) of the columns that files without ids may hold, to their id.
    name_mapped: HashMap<String, u32>,
}

impl FieldIdAdapterFactory {
    pub fn new(schema: &TableSchema) -> Self {
        let name_mapped = schema
            .name_owners()
            .into_iter()
            .filter(|&(_, id)| id <= schema.name_mapped_ids)
            .map(|(n, id)| (n.to_string(), id))
            .collect();
        Self { name_mapped }
    }

    /// The file schema with each field named as the table column it holds (by id), or a name
    /// no table column has when it holds none; nested fields too. Also, per file column, the
    /// nested names its arrays must be given when they differ from the file's.
    fn renamed(&self, logical: &Schema, physical: &Schema) -> Option<(SchemaRef, Relabels)> {
        let by_id: HashMap<u32, &str> = logical
            .fields()
            .iter()
            .filter_map(|f| Some((field_id(f)?, f.name().as_str())))
            .collect();
        let logical_by_id: HashMap<u32, &FieldRef> = logical
            .fields()
            .iter()
            .filter_map(|f| Some((field_id(f)?, f)))
            .collect();
        let mut changed = false;
        let mut relabels = Relabels::new();
        let fields: Vec<Field> = physical
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let id = field_id(f).or_else(|| self.name_mapped.get(f.name()).copied());
                let name = match id.and_then(|id| by_id.get(&id)) {
                    Some(n) => n.to_string(),
                    None => format!("\u{0}neve unread {}", f.name()),
                };
                if name != *f.name() {
                    changed = true;
                }
                let mut out = f.as_ref().clone().with_name(name);
                if let Some(l) = id.and_then(|id| logical_by_id.get(&id)) {
                    let names = Names::of(f.data_type(), l.data_type());
                    if !names.is_identity(f.data_type()) {
                        out = out.with_data_type(names.apply(f.data_type()));
                        relabels.insert(i, Arc::new(names));
                        changed = true;
                    }
                }
                out
            })
            .collect();
        changed.then(|| {
            (
                Arc::new(Schema::new_with_metadata(
                    fields,
                    physical.metadata().clone(),
                )),
                relabels,
            )
        })
    }
}

impl PhysicalExprAdapterFactory for FieldIdAdapterFactory {
    fn create(
        &self,
        logical_file_schema: SchemaRef,
        physical_file_schema: SchemaRef,
    ) -> DfResult<Arc<dyn PhysicalExprAdapter>> {
        let (renamed, relabels) = match self.renamed(&logical_file_schema, &physical_file_schema) {
            Some((s, r)) => (Some(s), r),
            None => (None, Relabels::new()),
        };
        let inner = DefaultPhysicalExprAdapter::new(
            logical_file_schema,
            renamed
                .clone()
                .unwrap_or_else(|| physical_file_schema.clone()),
        );
        Ok(Arc::new(FieldIdAdapter {
            inner,
            physical: renamed.map(|_| physical_file_schema),
            relabels,
        }))
    }
}

#[derive(Debug)]
struct FieldIdAdapter {
    inner: DefaultPhysicalExprAdapter,
    /// The file's own schema when its names differ from the table's.
    physical: Option<SchemaRef>,
    /// File columns whose nested fields are named differently in the table.
    relabels: Relabels,
}

impl PhysicalExprAdapter for FieldIdAdapter {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> DfResult<Arc<dyn PhysicalExpr>> {
        let expr = self.inner.rewrite(expr)?;
        let Some(physical) = &self.physical else {
            return Ok(expr);
        };
        expr.transform(|e| {
            if let Some(c) = e.downcast_ref::<Column>() {
                if let Some(f) = physical.fields().get(c.index()) {
                    let relabel = self.relabels.get(&c.index());
                    if f.name() != c.name() || relabel.is_some() {
                        let column =
                            Arc::new(Column::new(f.name(), c.index())) as Arc<dyn PhysicalExpr>;
                        return Ok(Transformed::yes(match relabel {
                            Some(names) => Arc::new(Relabel {
                                child: column,
                                names: names.clone(),
                            }),
                            None => column,
                        }));
                    }
                }
            }
            Ok(Transformed::no(e))
        })
        .data()
    }
}

type Relabels = HashMap<usize, Arc<Names>>;

/// The table's names for the nested fields of one file column, matched by field id: a renamed
/// struct field is read under its new name, a dropped one under a name no table field has (so
/// the struct cast that follows leaves it out, and a new field of the old name reads nulls).
#[derive(Debug, PartialEq, Eq, Hash)]
enum Names {
    Leaf,
    /// Per file field its table name; and, when no file field is a table field, a table
    /// field's name to add as an all-null field: DataFusion's struct cast needs one name in
    /// common, and then reads every table field the file lacks as null.
    Struct(Vec<(String, Names)>, Option<String>),
    /// The element of a list, or the entries of a map.
    Item(Box<Names>),
}

impl Names {
    fn of(file: &DataType, table: &DataType) -> Names {
        match (file, table) {
            (DataType::Struct(ff), DataType::Struct(tf)) => {
                let by_id: HashMap<u32, &FieldRef> =
                    tf.iter().filter_map(|f| Some((field_id(f)?, f))).collect();
                let names: Vec<(String, Names)> = ff
                    .iter()
                    .map(|f| match field_id(f).and_then(|id| by_id.get(&id)) {
                        Some(t) => (t.name().clone(), Names::of(f.data_type(), t.data_type())),
                        None => (format!("\u{0}neve unread {}", f.name()), Names::Leaf),
                    })
                    .collect();
                let shared = names.iter().any(|(n, _)| tf.iter().any(|t| t.name() == n));
                let pad = match (shared, tf.first()) {
                    (false, Some(t)) => Some(t.name().clone()),
                    _ => None,
                };
                Names::Struct(names, pad)
            }
            (
                DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _),
                DataType::List(t) | DataType::LargeList(t) | DataType::Map(t, _),
            ) => Names::Item(Box::new(Names::of(f.data_type(), t.data_type()))),
            _ => Names::Leaf,
        }
    }

    fn is_identity(&self, t: &DataType) -> bool {
        self.apply(t) == *t
    }

    /// `t` with its nested fields renamed; same shape, same leaf types.
    fn apply(&self, t: &DataType) -> DataType {
        match (self, t) {
            (Names::Struct(names, pad), DataType::Struct(fields))
                if names.len() == fields.len() =>
            {
                DataType::Struct(Fields::from_iter(
                    fields
                        .iter()
                        .zip(names)
                        .map(|(f, (name, inner))| {
                            f.as_ref()
                                .clone()
                                .with_name(name)
                                .with_data_type(inner.apply(f.data_type()))
                        })
                        .chain(pad.iter().map(|p| Field::new(p, DataType::Null, true))),
                ))
            }
            (Names::Item(inner), DataType::List(f)) => DataType::List(item(f, inner)),
            (Names::Item(inner), DataType::LargeList(f)) => DataType::LargeList(item(f, inner)),
            (Names::Item(inner), DataType::Map(f, sorted)) => {
                DataType::Map(item(f, inner), *sorted)
            }
            _ => t.clone(),
        }
    }

    fn relabel(&self, data: ArrayData) -> ArrayData {
        let to = self.apply(data.data_type());
        if to == *data.data_type() {
            return data;
        }
        let children: Vec<ArrayData> = match self {
            Names::Struct(names, pad) => data
                .child_data()
                .iter()
                .zip(names)
                .map(|(c, (_, inner))| inner.relabel(c.clone()))
                // Children are read at the parent's offset.
                .chain(
                    pad.iter()
                        .map(|_| ArrayData::new_null(&DataType::Null, data.offset() + data.len())),
                )
                .collect(),
            Names::Item(inner) => vec![inner.relabel(data.child_data()[0].clone())],
            Names::Leaf => return data,
        };
        data.into_builder()
            .data_type(to)
            .child_data(children)
            .build()
            .expect("renaming fields keeps an array valid")
    }
}

fn item(f: &FieldRef, inner: &Names) -> FieldRef {
    Arc::new(
        f.as_ref()
            .clone()
            .with_data_type(inner.apply(f.data_type())),
    )
}

/// A file column read with the table's nested field names.
#[derive(Debug)]
struct Relabel {
    child: Arc<dyn PhysicalExpr>,
    names: Arc<Names>,
}

impl PartialEq for Relabel {
    fn eq(&self, other: &Self) -> bool {
        self.child.as_ref() == other.child.as_ref() && self.names == other.names
    }
}

impl Eq for Relabel {}

impl std::hash::Hash for Relabel {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.child.as_ref().hash(state);
        self.names.hash(state);
    }
}

impl std::fmt::Display for Relabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "relabel({})", self.child)
    }
}

impl PhysicalExpr for Relabel {
    fn return_field(&self, input_schema: &Schema) -> DfResult<FieldRef> {
        let f = self.child.return_field(input_schema)?;
        let t = self.names.apply(f.data_type());
        Ok(Arc::new(f.as_ref().clone().with_data_type(t)))
    }

    fn evaluate(&self, batch: &RecordBatch) -> DfResult<ColumnarValue> {
        Ok(match self.child.evaluate(batch)? {
            ColumnarValue::Array(a) => {
                ColumnarValue::Array(make_array(self.names.relabel(a.to_data())))
            }
            ColumnarValue::Scalar(s) => {
                let a = s.to_array()?;
                ColumnarValue::Scalar(datafusion::scalar::ScalarValue::try_from_array(
                    &make_array(self.names.relabel(a.to_data())),
                    0,
                )?)
            }
        })
    }

    fn children(&self) -> Vec<&Arc<dyn PhysicalExpr>> {
        vec![&self.child]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn PhysicalExpr>>,
    ) -> DfResult<Arc<dyn PhysicalExpr>> {
        Ok(Arc::new(Relabel {
            child: children.remove(0),
            names: self.names.clone(),
        }))
    }

    fn fmt_sql(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.child.fmt_sql(f)
    }
}

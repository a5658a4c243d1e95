//! How a table's types are stored in its data files. Iceberg has no unsigned integers, and
//! Iceberg's Java reader (Spark, Trino, Flink) refuses Parquet's unsigned annotations
//! ("Unsupported logical type: UINT_8"), so `uint8` and `uint16` are written as Parquet INT32
//! and `uint32` as INT64: the signed types that hold every value, which are Iceberg's `int`
//! and `long` of those columns. Values are unchanged; readers cast them back to the table's
//! type (the field-id adapter, query/ids.rs, as for any widened column). `uint64` has no wider
//! integer and stays UINT_64 (Iceberg refuses the type). Files written before keep their
//! unsigned columns, and are read as before.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef};

use crate::error::Result;

/// The type `t` is stored as in a data file, `None` when it is stored as itself.
pub(crate) fn stored_type(t: &DataType) -> Option<DataType> {
    let field = |f: &FieldRef| stored_type(f.data_type()).map(|t| with_type(f, t));
    match t {
        DataType::UInt8 | DataType::UInt16 => Some(DataType::Int32),
        DataType::UInt32 => Some(DataType::Int64),
        DataType::Struct(fields) => {
            let stored: Vec<Option<FieldRef>> = fields.iter().map(field).collect();
            stored.iter().any(Option::is_some).then(|| {
                DataType::Struct(
                    fields
                        .iter()
                        .zip(stored)
                        .map(|(f, s)| s.unwrap_or_else(|| f.clone()))
                        .collect(),
                )
            })
        }
        DataType::List(f) => field(f).map(DataType::List),
        DataType::LargeList(f) => field(f).map(DataType::LargeList),
        DataType::FixedSizeList(f, n) => field(f).map(|f| DataType::FixedSizeList(f, *n)),
        DataType::Map(f, sorted) => field(f).map(|f| DataType::Map(f, *sorted)),
        _ => None,
    }
}

fn with_type(f: &FieldRef, t: DataType) -> FieldRef {
    Arc::new(f.as_ref().clone().with_data_type(t))
}

/// The field `f` is stored as.
pub(crate) fn stored_field(f: &Field) -> std::borrow::Cow<'_, Field> {
    match stored_type(f.data_type()) {
        Some(t) => std::borrow::Cow::Owned(f.clone().with_data_type(t)),
        None => std::borrow::Cow::Borrowed(f),
    }
}

/// A table schema's stored form (the same `Arc` when no column changes), and which of its
/// columns change.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub schema: SchemaRef,
    /// Per column, the type it is stored as when that differs from the table's.
    changed: Vec<(usize, DataType)>,
}

impl Stored {
    pub(crate) fn new(table: &SchemaRef) -> Self {
        let changed: Vec<(usize, DataType)> = table
            .fields()
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((i, stored_type(f.data_type())?)))
            .collect();
        let schema = if changed.is_empty() {
            table.clone()
        } else {
            let mut fields: Vec<FieldRef> = table.fields().iter().cloned().collect();
            for (i, t) in &changed {
                fields[*i] = with_type(&fields[*i], t.clone());
            }
            Arc::new(Schema::new_with_metadata(fields, table.metadata().clone()))
        };
        Self { schema, changed }
    }

    /// `batch` (of the table's columns; a column may be in its keyed form: keys.rs) with the
    /// columns whose stored type differs cast to it. Every value fits: a cast cannot fail
    /// but on a batch of another schema. Borrowed as it is when no column changes (most
    /// tables): every part and every merged batch passes here.
    pub(crate) fn batch<'a>(&self, batch: &'a RecordBatch) -> Result<Cow<'a, RecordBatch>> {
        if self.changed.is_empty() {
            return Ok(Cow::Borrowed(batch));
        }
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        let mut fields: Vec<FieldRef> = batch.schema().fields().iter().cloned().collect();
        for (i, t) in &self.changed {
            columns[*i] = arrow::compute::cast(&columns[*i], t)?;
            fields[*i] = with_type(&fields[*i], t.clone());
        }
        let schema = Schema::new_with_metadata(fields, batch.schema().metadata().clone());
        Ok(Cow::Owned(RecordBatch::try_new(Arc::new(schema), columns)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        Array, AsArray, Int64Array, ListArray, StructArray, UInt32Array, UInt64Array, UInt8Array,
    };
    use arrow::datatypes::{Fields, Int32Type, Int64Type, UInt16Type};

    #[test]
    fn unsigned_columns_are_stored_signed_and_wider_at_any_depth() {
        let inner = Fields::from(vec![
            Field::new("a", DataType::UInt32, true),
            Field::new("b", DataType::Int64, true),
        ]);
        let table: SchemaRef = Arc::new(Schema::new(vec![
            Field::new("u8", DataType::UInt8, false),
            Field::new("i", DataType::Int64, true),
            Field::new("s", DataType::Struct(inner.clone()), true),
            Field::new_list("l", Field::new_list_field(DataType::UInt16, true), true),
            Field::new("u64", DataType::UInt64, true),
        ]));
        let stored = Stored::new(&table);
        let t: Vec<&DataType> = stored
            .schema
            .fields()
            .iter()
            .map(|f| f.data_type())
            .collect();
        assert_eq!(t[0], &DataType::Int32);
        assert_eq!(t[1], &DataType::Int64);
        let DataType::Struct(s) = t[2] else { panic!() };
        assert_eq!(s[0].data_type(), &DataType::Int64);
        assert_eq!(s[1].data_type(), &DataType::Int64);
        let DataType::List(e) = t[3] else { panic!() };
        assert_eq!(e.data_type(), &DataType::Int32);
        assert_eq!(t[4], &DataType::UInt64, "no wider integer: stays unsigned");

        let batch = RecordBatch::try_new(
            table.clone(),
            vec![
                Arc::new(UInt8Array::from(vec![0, 255])),
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(StructArray::new(
                    inner,
                    vec![
                        Arc::new(UInt32Array::from(vec![u32::MAX, 7])),
                        Arc::new(Int64Array::from(vec![1, 2])),
                    ],
                    None,
                )),
                Arc::new(ListArray::from_iter_primitive::<UInt16Type, _, _>(vec![
                    Some(vec![Some(u16::MAX)]),
                    None,
                ])),
                Arc::new(UInt64Array::from(vec![u64::MAX, 0])),
            ],
        )
        .unwrap();
        let out = stored.batch(&batch).unwrap();
        let out = out.into_owned();
        assert_eq!(out.schema(), stored.schema);
        let c0 = out.column(0).as_primitive::<Int32Type>();
        assert_eq!(c0.values(), &[0, 255]);
        let c2 = out
            .column(2)
            .as_struct()
            .column(0)
            .as_primitive::<Int64Type>();
        assert_eq!(c2.values(), &[i64::from(u32::MAX), 7]);
        let l = out.column(3).as_list::<i32>();
        assert_eq!(l.value(0).as_primitive::<Int32Type>().value(0), 65535);
        assert!(l.is_null(1));
        assert_eq!(out.column(4), batch.column(4));
    }

    #[test]
    fn a_table_without_unsigned_columns_is_stored_as_itself() {
        let table: SchemaRef = Arc::new(Schema::new(vec![Field::new("x", DataType::Int8, true)]));
        let stored = Stored::new(&table);
        assert!(Arc::ptr_eq(&stored.schema, &table));
    }
}

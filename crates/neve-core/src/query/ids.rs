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

use arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::error::Result as DfResult;
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
        let mut name_mapped = HashMap::new();
        for c in &schema.columns {
            if c.id <= schema.name_mapped_ids {
                for n in std::iter::once(&c.name).chain(&c.aliases) {
                    name_mapped.insert(n.clone(), c.id);
                }
            }
        }
        Self { name_mapped }
    }

    /// The file schema with each field named as the table column it holds (by id), or a name
    /// no table column has when it holds none.
    fn renamed(&self, logical: &Schema, physical: &Schema) -> Option<SchemaRef> {
        let by_id: HashMap<u32, &str> = logical
            .fields()
            .iter()
            .filter_map(|f| Some((field_id(f)?, f.name().as_str())))
            .collect();
        let mut changed = false;
        let fields: Vec<Field> = physical
            .fields()
            .iter()
            .map(|f| {
                let id = field_id(f).or_else(|| self.name_mapped.get(f.name()).copied());
                let name = match id.and_then(|id| by_id.get(&id)) {
                    Some(n) => n.to_string(),
                    None => format!("\u{0}neve unread {}", f.name()),
                };
                if name != *f.name() {
                    changed = true;
                }
                f.as_ref().clone().with_name(name)
            })
            .collect();
        changed.then(|| {
            Arc::new(Schema::new_with_metadata(
                fields,
                physical.metadata().clone(),
            ))
        })
    }
}

impl PhysicalExprAdapterFactory for FieldIdAdapterFactory {
    fn create(
        &self,
        logical_file_schema: SchemaRef,
        physical_file_schema: SchemaRef,
    ) -> DfResult<Arc<dyn PhysicalExprAdapter>> {
        let renamed = self.renamed(&logical_file_schema, &physical_file_schema);
        let inner = DefaultPhysicalExprAdapter::new(
            logical_file_schema,
            renamed
                .clone()
                .unwrap_or_else(|| physical_file_schema.clone()),
        );
        Ok(Arc::new(FieldIdAdapter {
            inner,
            physical: renamed.map(|_| physical_file_schema),
        }))
    }
}

#[derive(Debug)]
struct FieldIdAdapter {
    inner: DefaultPhysicalExprAdapter,
    /// The file's own schema when its names differ from the table's.
    physical: Option<SchemaRef>,
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
                    if f.name() != c.name() {
                        return Ok(Transformed::yes(
                            Arc::new(Column::new(f.name(), c.index())) as Arc<dyn PhysicalExpr>
                        ));
                    }
                }
            }
            Ok(Transformed::no(e))
        })
        .data()
    }
}

//! What statements about the catalog (`DESCRIBE t`, `information_schema`, `SHOW COLUMNS`) see:
//! each table's own column types.
//!
//! Scans read string and binary columns as views (`provider::scan_schema`), so the providers
//! DataFusion holds report `Utf8View`. Results are cast back to the tables' types; these
//! statements read the providers' schemas instead, so their plans are rewritten here to read
//! schemas with the views mapped back.

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::information_schema::{InformationSchemaProvider, INFORMATION_SCHEMA};
use datafusion::catalog::{
    CatalogProvider, CatalogProviderList, SchemaProvider, Session, TableProvider,
};
use datafusion::common::not_impl_err;
use datafusion::common::tree_node::{Transformed, TreeNodeRecursion};
use datafusion::datasource::provider_as_source;
use datafusion::error::Result;
use datafusion::execution::SessionState;
use datafusion::logical_expr::{DescribeTable, Expr, LogicalPlan, TableScan, TableType};
use datafusion::physical_plan::ExecutionPlan;

use super::provider;

/// `plan` with `DESCRIBE` and scans of `information_schema` reading the tables' own types.
pub(crate) async fn own_types(state: &SessionState, plan: LogicalPlan) -> Result<LogicalPlan> {
    match plan {
        LogicalPlan::DescribeTable(d) => Ok(LogicalPlan::DescribeTable(DescribeTable {
            schema: plain_schema(&d.schema),
            output_schema: d.output_schema,
        })),
        plan => {
            // Subqueries too: `... WHERE x IN (SELECT ... FROM information_schema.columns)`.
            let mut tables = Vec::new();
            plan.apply_with_subqueries(|p| {
                if let LogicalPlan::TableScan(s) = p {
                    if is_information_schema(s) {
                        tables.push(s.table_name.table().to_string());
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })?;
            if tables.is_empty() {
                return Ok(plan);
            }
            let info = InformationSchemaProvider::new(Arc::new(PlainCatalogs(
                state.catalog_list().clone(),
            )))
            .with_table_functions(state.table_functions().clone());
            let mut providers = Vec::new();
            for t in tables {
                if let Some(p) = info.table(&t).await? {
                    providers.push((t, p));
                }
            }
            plan.transform_up_with_subqueries(|p| match p {
                LogicalPlan::TableScan(s) if is_information_schema(&s) => {
                    match providers.iter().find(|(t, _)| t == s.table_name.table()) {
                        Some((_, p)) => Ok(Transformed::yes(LogicalPlan::TableScan(TableScan {
                            source: provider_as_source(p.clone()),
                            ..s
                        }))),
                        None => Ok(Transformed::no(LogicalPlan::TableScan(s))),
                    }
                }
                p => Ok(Transformed::no(p)),
            })
            .map(|t| t.data)
        }
    }
}

fn is_information_schema(scan: &TableScan) -> bool {
    scan.table_name.schema() == Some(INFORMATION_SCHEMA)
}

/// `schema` with view types as the plain types they stand for.
pub(crate) fn plain_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema
        .fields()
        .iter()
        .any(|f| provider::is_view(f.data_type()))
    {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            f.as_ref()
                .clone()
                .with_data_type(provider::plain(f.data_type()))
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The session's catalogs, their tables reporting plain types. Only read for schemas.
#[derive(Debug)]
struct PlainCatalogs(Arc<dyn CatalogProviderList>);

impl CatalogProviderList for PlainCatalogs {
    fn register_catalog(
        &self,
        _: String,
        _: Arc<dyn CatalogProvider>,
    ) -> Option<Arc<dyn CatalogProvider>> {
        None
    }

    fn catalog_names(&self) -> Vec<String> {
        self.0.catalog_names()
    }

    fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
        self.0
            .catalog(name)
            .map(|c| Arc::new(PlainCatalog(c)) as Arc<dyn CatalogProvider>)
    }
}

#[derive(Debug)]
struct PlainCatalog(Arc<dyn CatalogProvider>);

impl CatalogProvider for PlainCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.0.schema_names()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.0
            .schema(name)
            .map(|s| Arc::new(PlainTables(s)) as Arc<dyn SchemaProvider>)
    }
}

#[derive(Debug)]
struct PlainTables(Arc<dyn SchemaProvider>);

#[async_trait]
impl SchemaProvider for PlainTables {
    fn table_names(&self) -> Vec<String> {
        self.0.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.0.table(name).await?.map(|t| {
            let schema = plain_schema(&t.schema());
            Arc::new(SchemaOnly { schema, inner: t }) as Arc<dyn TableProvider>
        }))
    }

    async fn table_type(&self, name: &str) -> Result<Option<TableType>> {
        self.0.table_type(name).await
    }

    fn table_exist(&self, name: &str) -> bool {
        self.0.table_exist(name)
    }
}

/// A table as `information_schema` sees it: its schema and kind, never scanned.
#[derive(Debug)]
struct SchemaOnly {
    schema: SchemaRef,
    inner: Arc<dyn TableProvider>,
}

#[async_trait]
impl TableProvider for SchemaOnly {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        _: &dyn Session,
        _: Option<&Vec<usize>>,
        _: &[Expr],
        _: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        not_impl_err!("a catalog view of a table is not scanned")
    }
}

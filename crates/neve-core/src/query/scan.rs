//! Reading a set of a table's data files as one ordered stream, for rewrites (merge, delete).
//!
//! Each file is sorted by the table's sort keys, so DataFusion's streaming k-way merge
//! (`SortPreservingMergeExec`) yields the rows of many files in order while holding about one
//! batch per file. Files written before a column existed, or with a narrower type, are read in
//! the table schema (missing columns as nulls, types widened) by DataFusion's schema adapter.

use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties};
use datafusion::prelude::{SessionConfig, SessionContext};

use super::query_error;
use crate::error::{Error, Result};
use crate::log::AddFile;
use crate::storage::TableLocation;

/// Rows per batch while rewriting: small enough that a merge of hundreds of files holds little
/// memory, large enough to keep the kernels efficient.
const BATCH_ROWS: usize = 4096;

/// The rows of `files` in the table schema, merged in `sort_by` order (in file order when the
/// table has no sort keys), keeping only rows for which `keep` is true when given.
pub(crate) fn ordered_rows(
    location: &TableLocation,
    schema: SchemaRef,
    ids: Arc<super::FieldIdAdapterFactory>,
    files: &[AddFile],
    sort_by: &[String],
    keep: Option<&Expr>,
) -> Result<SendableRecordBatchStream> {
    let config = SessionConfig::new().with_batch_size(BATCH_ROWS);
    let ctx = SessionContext::new_with_config(config);
    let url = url::Url::parse("neve://rewrite").expect("valid url");
    ctx.register_object_store(&url, location.store.clone());
    let store_url = ObjectStoreUrl::parse("neve://rewrite").map_err(query_error)?;

    let file = |f: &AddFile| crate::query::table_file(location, &f.path, f.size);
    let ordering = LexOrdering::new(
        sort_by
            .iter()
            .map(|name| -> Result<PhysicalSortExpr> {
                let idx = schema.index_of(name).map_err(|_| Error::InvalidSortKey {
                    column: name.clone(),
                    reason: "not a column of the table".into(),
                })?;
                Ok(PhysicalSortExpr::new(
                    Arc::new(Column::new(name, idx)),
                    // The write path's order: ascending, nulls first.
                    SortOptions {
                        descending: false,
                        nulls_first: true,
                    },
                ))
            })
            .collect::<Result<Vec<_>>>()?,
    );
    // Sorted: one scan partition per file, merged. Unsorted: one partition, files in order.
    let groups: Vec<FileGroup> = match &ordering {
        Some(_) => files
            .iter()
            .map(|f| FileGroup::new(vec![file(f)]))
            .collect(),
        None => vec![FileGroup::new(files.iter().map(file).collect())],
    };
    let source =
        ParquetSource::new(schema.clone()).with_metadata_size_hint(super::provider::FOOTER_HINT);
    let mut builder = FileScanConfigBuilder::new(store_url, Arc::new(source))
        .with_file_groups(groups)
        .with_expr_adapter(Some(ids));
    if let Some(o) = &ordering {
        builder = builder.with_output_ordering(vec![o.clone()]);
    }
    let mut plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(builder.build());
    if let Some(keep) = keep {
        let predicate =
            super::constant::physical(keep, schema.clone()).ok_or_else(|| Error::InvalidQuery {
                message: format!("cannot evaluate the predicate {keep} on the table's columns"),
            })?;
        plan = Arc::new(FilterExec::try_new(predicate, plan).map_err(query_error)?);
    }
    if let Some(o) = ordering {
        if plan.output_partitioning().partition_count() > 1 {
            // Equal rows in file order (the files come in commit order): merge semantics
            // give ties to the later commit.
            plan =
                Arc::new(SortPreservingMergeExec::new(o, plan).with_round_robin_repartition(false));
        }
    }
    plan.execute(0, ctx.task_ctx()).map_err(query_error)
}

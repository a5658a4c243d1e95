//! Applying a table's merge spec to rows sorted by its key: one pass, one group in memory.
//!
//! The input holds a partition's rows ordered by key, and within a key by where they come
//! from: older files first (by [`crate::log::AddFile::seq`]), and in file order within a file.
//! So "the later commit" is "the later row" here, for ties of `replace` and for `last`.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{
    downcast_primitive_array, make_comparator, new_null_array, Array, ArrayRef, ArrowNativeTypeOp,
    ArrowPrimitiveType, AsArray, BooleanArray, PrimitiveArray, PrimitiveBuilder, RecordBatch,
    UInt32Array,
};
use arrow::compute::kernels::partition::partition;
use arrow::compute::{concat_batches, filter_record_batch, take, take_record_batch, SortOptions};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

use super::spec::{Fold, MergeSpec};
use crate::error::{Error, Result};

/// A merge spec bound to a stream's schema.
#[derive(Debug, Clone)]
pub(crate) struct Reducer {
    spec: MergeSpec,
    schema: SchemaRef,
    key: Vec<usize>,
    version: Option<usize>,
    deleted: Option<usize>,
    /// Drop keys whose winning row is deleted (reads, and merges that include a partition's
    /// oldest rows); else they stay as tombstones that hide older rows elsewhere.
    drop_deleted: bool,
    folds: Vec<Fold>,
}

impl Reducer {
    /// `schema` must hold the key columns and every column the spec needs for the columns
    /// present (the version and deleted flag of `replace`).
    pub(crate) fn new(spec: &MergeSpec, schema: SchemaRef, drop_deleted: bool) -> Result<Self> {
        let find = |name: &str| {
            schema.index_of(name).map_err(|_| Error::InvalidMergeSpec {
                spec: spec.to_string(),
                reason: format!("column '{name}' is not in the rows being merged"),
            })
        };
        let key = spec.key().iter().map(|k| find(k)).collect::<Result<_>>()?;
        let (version, deleted) = match spec {
            MergeSpec::Replace {
                version, deleted, ..
            } => (
                version.as_deref().map(find).transpose()?,
                deleted.as_deref().map(find).transpose()?,
            ),
            _ => (None, None),
        };
        let folds = schema
            .fields()
            .iter()
            .map(|f| spec.fold(f.name()))
            .collect();
        Ok(Self {
            spec: spec.clone(),
            schema,
            key,
            version,
            deleted,
            drop_deleted,
            folds,
        })
    }

    /// The groups of equal keys in `batch`, in order.
    fn groups(&self, batch: &RecordBatch) -> Result<Vec<Range<usize>>> {
        let keys: Vec<ArrayRef> = self.key.iter().map(|&i| batch.column(i).clone()).collect();
        Ok(partition(&keys)?.ranges())
    }

    /// Reduce `batch`, whose last group is whole.
    pub(crate) fn reduce(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        if batch.num_rows() == 0 {
            return Ok(batch.clone());
        }
        let groups = self.groups(batch)?;
        let out = match &self.spec {
            MergeSpec::Dedupe { .. } => {
                let firsts = UInt32Array::from_iter_values(groups.iter().map(|r| r.start as u32));
                take_record_batch(batch, &firsts)?
            }
            MergeSpec::Replace { .. } => {
                let winners = match self.version {
                    None => UInt32Array::from_iter_values(groups.iter().map(|r| r.end as u32 - 1)),
                    Some(v) => {
                        let col = batch.column(v);
                        let cmp = make_comparator(col, col, SortOptions::default())?;
                        UInt32Array::from_iter_values(groups.iter().map(|r| {
                            // The highest version; on a tie the later row.
                            let mut best = r.start;
                            for i in r.start + 1..r.end {
                                if cmp(i, best).is_ge() {
                                    best = i;
                                }
                            }
                            best as u32
                        }))
                    }
                };
                take_record_batch(batch, &winners)?
            }
            MergeSpec::Aggregate { .. } => self.aggregate(batch, &groups)?,
        };
        match (self.deleted, self.drop_deleted) {
            // A deleted column still of type null (no flag yet) deletes nothing.
            (Some(d), true) if out.column(d).as_boolean_opt().is_some() => {
                let flag = out.column(d).as_boolean();
                let keep: BooleanArray = (0..flag.len())
                    .map(|i| Some(!(flag.is_valid(i) && flag.value(i))))
                    .collect();
                Ok(filter_record_batch(&out, &keep)?)
            }
            _ => Ok(out),
        }
    }

    fn aggregate(&self, batch: &RecordBatch, groups: &[Range<usize>]) -> Result<RecordBatch> {
        let firsts = UInt32Array::from_iter_values(groups.iter().map(|r| r.start as u32));
        let lasts = UInt32Array::from_iter_values(groups.iter().map(|r| r.end as u32 - 1));
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (i, fold) in self.folds.iter().enumerate() {
            let col = batch.column(i);
            let name = self.schema.field(i).name();
            columns.push(match fold {
                Fold::Key | Fold::Any => take(col, &firsts, None)?,
                Fold::Last => take(col, &lasts, None)?,
                Fold::Sum => sum_groups(col, groups, false, name)?,
                Fold::Count => sum_groups(col, groups, true, name)?,
                Fold::Min | Fold::Max => {
                    let cmp = make_comparator(col, col, SortOptions::default())?;
                    let want = if *fold == Fold::Min {
                        std::cmp::Ordering::Less
                    } else {
                        std::cmp::Ordering::Greater
                    };
                    let picks: UInt32Array = groups
                        .iter()
                        .map(|r| {
                            let mut best: Option<usize> = None;
                            for i in r.clone().filter(|&i| col.is_valid(i)) {
                                if best.is_none_or(|b| cmp(i, b) == want) {
                                    best = Some(i);
                                }
                            }
                            best.map(|b| b as u32)
                        })
                        .collect();
                    take(col, &picks, None)?
                }
            });
        }
        Ok(RecordBatch::try_new(batch.schema(), columns)?)
    }

    /// Whether row `i` of `a` and row `j` of `b` have the same key.
    fn same_key(&self, a: &RecordBatch, i: usize, b: &RecordBatch, j: usize) -> Result<bool> {
        for &k in &self.key {
            let cmp = make_comparator(a.column(k), b.column(k), SortOptions::default())?;
            if cmp(i, j).is_ne() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Apply the spec to `input`, sorted by the key.
    pub(crate) fn stream(self, input: SendableRecordBatchStream) -> SendableRecordBatchStream {
        let schema = input.schema();
        struct State {
            reducer: Reducer,
            input: SendableRecordBatchStream,
            /// The rows of the last key seen, which the next batch may continue.
            tail: Option<RecordBatch>,
            done: bool,
        }
        let state = State {
            reducer: self,
            input,
            tail: None,
            done: false,
        };
        let out = futures::stream::unfold(state, |mut s| async move {
            loop {
                if s.done {
                    return None;
                }
                match s.input.next().await {
                    None => {
                        s.done = true;
                        let tail = s.tail.take()?;
                        let r = s.reducer.reduce(&tail).map_err(to_df);
                        return Some((r, s));
                    }
                    Some(Err(e)) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                    Some(Ok(batch)) if batch.num_rows() == 0 => continue,
                    Some(Ok(batch)) => match s.reducer.step(&mut s.tail, batch) {
                        Ok(Some(out)) if out.num_rows() > 0 => return Some((Ok(out), s)),
                        Ok(_) => continue,
                        Err(e) => {
                            s.done = true;
                            return Some((Err(to_df(e)), s));
                        }
                    },
                }
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, out))
    }

    /// Take in one batch: reduce every key it completes, keep its last key's rows in `tail`.
    fn step(
        &self,
        tail: &mut Option<RecordBatch>,
        batch: RecordBatch,
    ) -> Result<Option<RecordBatch>> {
        let mut outs = Vec::new();
        let mut rest = batch;
        if let Some(t) = tail.take() {
            if self.same_key(&t, 0, &rest, 0)? {
                let first = self.groups(&rest)?[0].end;
                let joined = concat_batches(&rest.schema(), [&t, &rest.slice(0, first)])?;
                if first == rest.num_rows() {
                    *tail = Some(joined);
                    return Ok(None);
                }
                outs.push(self.reduce(&joined)?);
                rest = rest.slice(first, rest.num_rows() - first);
            } else {
                outs.push(self.reduce(&t)?);
            }
        }
        let last = self
            .groups(&rest)?
            .pop()
            .expect("a batch with rows has a group");
        if last.start > 0 {
            outs.push(self.reduce(&rest.slice(0, last.start))?);
        }
        *tail = Some(rest.slice(last.start, last.end - last.start));
        Ok(match outs.len() {
            0 => None,
            1 => outs.pop(),
            _ => Some(concat_batches(&outs[0].schema(), &outs)?),
        })
    }
}

fn to_df(e: Error) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::External(Box::new(e))
}

/// Per group, the sum of `col`'s values (a null counts one when `null_as_one`: the count
/// column); null for a group with no value.
fn sum_groups(
    col: &ArrayRef,
    groups: &[Range<usize>],
    null_as_one: bool,
    name: &str,
) -> Result<ArrayRef> {
    fn typed<T: ArrowPrimitiveType>(
        a: &PrimitiveArray<T>,
        groups: &[Range<usize>],
        null_as_one: bool,
        name: &str,
    ) -> Result<ArrayRef> {
        let mut b = PrimitiveBuilder::<T>::with_capacity(groups.len())
            .with_data_type(a.data_type().clone());
        for r in groups {
            let mut acc: Option<T::Native> = None;
            for i in r.clone() {
                let v = if a.is_valid(i) {
                    a.value(i)
                } else if null_as_one {
                    T::Native::ONE
                } else {
                    continue;
                };
                acc = Some(match acc {
                    None => v,
                    Some(x) => x.add_checked(v).map_err(|_| Error::MergedSumOverflow {
                        column: name.to_string(),
                        data_type: a.data_type().to_string(),
                        values: format!("{x:?} + {v:?}"),
                    })?,
                });
            }
            b.append_option(acc);
        }
        Ok(Arc::new(b.finish()))
    }
    if col.null_count() == col.len() && !null_as_one {
        return Ok(new_null_array(col.data_type(), groups.len()));
    }
    let sums = downcast_primitive_array!(
        col => typed(col, groups, null_as_one, name),
        t => Err(Error::InvalidMergeSpec {
            spec: format!("sum of '{name}'"),
            reason: format!("{t} cannot be summed"),
        })
    )?;
    // A decimal sum must fit its column's precision, not only the integer beneath it: the
    // Parquet writer would store it cut to the precision's bytes.
    let over = |e: ArrowError| Error::MergedSumOverflow {
        column: name.to_string(),
        data_type: col.data_type().to_string(),
        values: e.to_string(),
    };
    fn fits<T: arrow::datatypes::DecimalType>(a: &ArrayRef, p: u8) -> Result<(), ArrowError> {
        a.as_primitive::<T>().validate_decimal_precision(p)
    }
    use arrow::datatypes::{Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type};
    match sums.data_type() {
        DataType::Decimal32(p, _) => fits::<Decimal32Type>(&sums, *p),
        DataType::Decimal64(p, _) => fits::<Decimal64Type>(&sums, *p),
        DataType::Decimal128(p, _) => fits::<Decimal128Type>(&sums, *p),
        DataType::Decimal256(p, _) => fits::<Decimal256Type>(&sums, *p),
        _ => Ok(()),
    }
    .map_err(over)?;
    Ok(sums)
}

#[cfg(test)]
mod tests;

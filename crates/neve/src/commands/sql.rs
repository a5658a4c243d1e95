//! `neve sql`: run a query and stream the result in the format asked for.

use std::io::{Read, Write};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::StreamExt;
use neve_core::query::{query_error, ResultFormat, ResultWriter};
use neve_core::{AsOf, QueryEngine};

use crate::cli::{SqlArgs, SqlFormat};
use crate::error::{CliError, Result};

pub async fn run(a: SqlArgs) -> Result<()> {
    let as_of = match &a.as_of {
        Some(s) => Some(s.parse::<AsOf>()?),
        None => None,
    };
    let query = if a.query == "-" {
        let mut q = String::new();
        std::io::stdin()
            .read_to_string(&mut q)
            .map_err(CliError::read("the query from standard input"))?;
        q
    } else {
        a.query.clone()
    };
    // One statement, and nothing kept after it: DDL or DML would only seem to work.
    let mut engine = QueryEngine::with_limits(neve_core::query::QueryLimits {
        read_only: true,
        ..Default::default()
    });
    engine.set_raw(a.raw);
    register(&mut engine, &a.tables, a.warehouse.as_deref(), as_of).await?;
    let started = Instant::now();
    let mut stream = engine.stream(&query).await?;
    let out: Box<dyn Write + Send> = match &a.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|source| neve_core::Error::Io {
                path: path.into(),
                source,
            })?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let mut sink = Sink::new(a.format, stream.schema(), out)?;
    let mut rows = 0u64;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(query_error)?;
        rows += batch.num_rows() as u64;
        sink.write(batch)?;
    }
    sink.finish()?;
    if a.stats {
        let reads = engine.reads();
        eprintln!(
            "{rows} rows in {:.3}s; read {} in {} requests",
            started.elapsed().as_secs_f64(),
            humansize::format_size(reads.bytes(), humansize::DECIMAL),
            reads.requests()
        );
    }
    Ok(())
}

/// Register `--table` and `--warehouse` tables.
pub async fn register(
    engine: &mut QueryEngine,
    tables: &[String],
    warehouse: Option<&str>,
    as_of: Option<AsOf>,
) -> Result<()> {
    if tables.is_empty() && warehouse.is_none() {
        return Err(CliError::Usage(
            "name the tables to query: --table NAME=URL (repeatable) or --warehouse URL".into(),
        ));
    }
    if let Some(w) = warehouse {
        let names = engine.register_warehouse(w, as_of).await?;
        // Tables left out (none existed yet at `--as-of`): the query names one and is told
        // why, rather than hearing the warehouse is empty.
        if names.is_empty() && !engine.has_unopened() {
            return Err(CliError::Usage(format!("no neve tables under '{w}'")));
        }
        tracing::debug!(tables = ?names, "registered warehouse");
    }
    let mut given = std::collections::HashSet::new();
    for t in tables {
        let (name, url) = match t.split_once('=') {
            Some((n, u)) if !n.is_empty() && !n.contains('/') && !n.contains(':') => {
                (n.to_string(), u.to_string())
            }
            _ => {
                let name = t
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                if name.is_empty() {
                    return Err(CliError::Usage(format!(
                        "cannot name table '{t}': use --table NAME=URL"
                    )));
                }
                (name, t.clone())
            }
        };
        if !given.insert(name.clone()) {
            return Err(CliError::Usage(format!(
                "two tables are named '{name}': give each --table its own NAME=URL"
            )));
        }
        engine.register(&name, &url, as_of).await?;
    }
    Ok(())
}

/// Where result batches go, by format.
enum Sink {
    /// A readable table: the whole result is buffered.
    Table(Vec<RecordBatch>, SchemaRef, Box<dyn Write + Send>),
    Stream(Box<ResultWriter<Box<dyn Write + Send>>>),
}

impl Sink {
    fn new(format: SqlFormat, schema: SchemaRef, out: Box<dyn Write + Send>) -> Result<Self> {
        let format = match format {
            SqlFormat::Table => return Ok(Sink::Table(Vec::new(), schema, out)),
            SqlFormat::Csv => ResultFormat::Csv,
            SqlFormat::Json => ResultFormat::Json,
            SqlFormat::Ndjson => ResultFormat::Ndjson,
            SqlFormat::Parquet => ResultFormat::Parquet,
            SqlFormat::Arrow => ResultFormat::Arrow,
        };
        Ok(Sink::Stream(Box::new(ResultWriter::new(
            format, schema, out,
        )?)))
    }

    fn write(&mut self, batch: RecordBatch) -> Result<()> {
        match self {
            Sink::Table(all, _, _) => all.push(batch),
            Sink::Stream(w) => w.write(&batch)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Table(all, schema, mut out) => {
                let rows: usize = all.iter().map(|b| b.num_rows()).sum();
                let text = if all.is_empty() {
                    arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema)])
                } else {
                    arrow::util::pretty::pretty_format_batches(&all)
                }
                .map_err(|e| CliError::Core(e.into()))?;
                writeln!(out, "{text}")?;
                writeln!(out, "({rows} row{})", if rows == 1 { "" } else { "s" })?;
                out.flush()?;
            }
            Sink::Stream(w) => {
                w.finish()?;
            }
        }
        Ok(())
    }
}

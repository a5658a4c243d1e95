//! `neve sql`: run a query and stream the result in the format asked for.

use std::io::{Read, Write};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::StreamExt;
use neve_core::query::query_error;
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
        std::io::stdin().read_to_string(&mut q)?;
        q
    } else {
        a.query.clone()
    };
    let mut engine = QueryEngine::new();
    register(&mut engine, &a.tables, a.warehouse.as_deref(), as_of).await?;
    let started = Instant::now();
    let mut stream = engine.stream(&query).await?;
    let out: Box<dyn Write + Send> = match &a.output {
        Some(path) => Box::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
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
        if names.is_empty() {
            return Err(CliError::Usage(format!("no neve tables under '{w}'")));
        }
        tracing::debug!(tables = ?names, "registered warehouse");
    }
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
        engine.register(&name, &url, as_of).await?;
    }
    Ok(())
}

/// Where result batches go, by format.
enum Sink {
    Table(Vec<RecordBatch>, SchemaRef, Box<dyn Write + Send>),
    Csv(arrow::csv::Writer<Box<dyn Write + Send>>),
    Json(arrow::json::ArrayWriter<Box<dyn Write + Send>>),
    Ndjson(arrow::json::LineDelimitedWriter<Box<dyn Write + Send>>),
    Parquet(parquet::arrow::ArrowWriter<Box<dyn Write + Send>>),
    Arrow(arrow::ipc::writer::StreamWriter<Box<dyn Write + Send>>),
}

impl Sink {
    fn new(format: SqlFormat, schema: SchemaRef, out: Box<dyn Write + Send>) -> Result<Self> {
        let arrow_err = |e: arrow::error::ArrowError| CliError::Core(e.into());
        Ok(match format {
            SqlFormat::Table => Sink::Table(Vec::new(), schema, out),
            SqlFormat::Csv => Sink::Csv(
                arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(out),
            ),
            // Nulls are written as `null`, not left out, so every row has every column.
            SqlFormat::Json => Sink::Json(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::JsonArray>(out),
            ),
            SqlFormat::Ndjson => Sink::Ndjson(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(out),
            ),
            SqlFormat::Parquet => Sink::Parquet(
                parquet::arrow::ArrowWriter::try_new(out, schema, None)
                    .map_err(|e| CliError::Core(e.into()))?,
            ),
            SqlFormat::Arrow => Sink::Arrow(
                arrow::ipc::writer::StreamWriter::try_new(out, &schema).map_err(arrow_err)?,
            ),
        })
    }

    fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let core = |e: arrow::error::ArrowError| CliError::Core(e.into());
        match self {
            Sink::Table(all, _, _) => all.push(batch),
            Sink::Csv(w) => w.write(&batch).map_err(core)?,
            Sink::Json(w) => w.write(&batch).map_err(core)?,
            Sink::Ndjson(w) => w.write(&batch).map_err(core)?,
            Sink::Parquet(w) => w.write(&batch).map_err(|e| CliError::Core(e.into()))?,
            Sink::Arrow(w) => w.write(&batch).map_err(core)?,
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        let core = |e: arrow::error::ArrowError| CliError::Core(e.into());
        match self {
            Sink::Table(all, schema, mut out) => {
                let rows: usize = all.iter().map(|b| b.num_rows()).sum();
                let text = if all.is_empty() {
                    arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema)])
                } else {
                    arrow::util::pretty::pretty_format_batches(&all)
                }
                .map_err(core)?;
                writeln!(out, "{text}")?;
                writeln!(out, "({rows} row{})", if rows == 1 { "" } else { "s" })?;
                out.flush()?;
            }
            Sink::Csv(w) => w.into_inner().flush()?,
            Sink::Json(mut w) => {
                w.finish().map_err(core)?;
                let mut out = w.into_inner();
                out.write_all(b"\n")?;
                out.flush()?;
            }
            Sink::Ndjson(mut w) => {
                w.finish().map_err(core)?;
                w.into_inner().flush()?;
            }
            Sink::Parquet(w) => {
                w.close().map_err(|e| CliError::Core(e.into()))?;
            }
            Sink::Arrow(mut w) => {
                w.finish().map_err(core)?;
                w.into_inner().map_err(core)?.flush()?;
            }
        }
        Ok(())
    }
}

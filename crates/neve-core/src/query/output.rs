//! Query results written as CSV, JSON, NDJSON, Parquet or an Arrow IPC stream, batch by
//! batch, so a result of any size passes through with one batch in memory (Parquet: one row
//! group). `neve sql` writes them to a file or stdout, `neve serve` to a response body.

use std::io::Write;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::error::Result;

fn write_err(source: std::io::Error) -> crate::Error {
    crate::Error::ResultWrite { source }
}

/// A writer's error: its destination failing (a closed pipe, a full disk) is the
/// destination's; a value the format cannot hold is the format's (CSV and nested values).
fn arrow_err(format: &'static str, e: arrow::error::ArrowError) -> crate::Error {
    use arrow::error::ArrowError;
    match e {
        ArrowError::IoError(_, source) => write_err(source),
        ArrowError::ExternalError(x) if x.is::<std::io::Error>() => {
            write_err(*x.downcast::<std::io::Error>().expect("checked"))
        }
        ArrowError::CsvError(reason)
        | ArrowError::JsonError(reason)
        | ArrowError::InvalidArgumentError(reason)
        | ArrowError::NotYetImplemented(reason)
        | ArrowError::SchemaError(reason) => crate::Error::ResultUnwritable { format, reason },
        e => e.into(),
    }
}

fn parquet_err(
    format: &'static str,
    e: parquet::errors::ParquetError,
    failure: &Failure,
) -> crate::Error {
    use parquet::errors::ParquetError;
    if let Some((kind, message)) = failure.0.lock().expect("failure poisoned").take() {
        return write_err(std::io::Error::new(kind, message));
    }
    match e {
        ParquetError::External(x) if x.is::<std::io::Error>() => {
            write_err(*x.downcast::<std::io::Error>().expect("checked"))
        }
        ParquetError::ArrowError(reason) | ParquetError::NYI(reason) => {
            crate::Error::ResultUnwritable { format, reason }
        }
        e => e.into(),
    }
}

/// The destination's first error, kept: the Parquet writer's buffer reports it only as text
/// ("fail to get inner writer").
#[derive(Debug, Clone, Default)]
pub struct Failure(Arc<Mutex<Option<(std::io::ErrorKind, String)>>>);

/// The destination, its errors noted in a [`Failure`].
pub struct Watched<W> {
    inner: W,
    failure: Failure,
}

impl<W: Write> Watched<W> {
    fn noted<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r {
            let mut f = self.failure.0.lock().expect("failure poisoned");
            f.get_or_insert_with(|| (e.kind(), e.to_string()));
        }
        r
    }
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.noted(r)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.noted(r)
    }
}

/// A result format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultFormat {
    /// With a header line.
    Csv,
    /// One JSON array of objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    Parquet,
    /// Arrow IPC stream.
    Arrow,
}

impl ResultFormat {
    /// Every format with its media type (the first one a format answers with).
    const MEDIA: [(&str, ResultFormat); 8] = [
        ("application/vnd.apache.arrow.stream", ResultFormat::Arrow),
        ("application/x-ndjson", ResultFormat::Ndjson),
        ("text/csv", ResultFormat::Csv),
        ("application/json", ResultFormat::Json),
        ("application/vnd.apache.parquet", ResultFormat::Parquet),
        ("application/jsonlines", ResultFormat::Ndjson),
        ("application/x-jsonlines", ResultFormat::Ndjson),
        ("application/x-parquet", ResultFormat::Parquet),
    ];

    /// The format a media type names (parameters such as `; charset=utf-8` ignored).
    pub fn from_media_type(media: &str) -> Option<Self> {
        let essence = media.split(';').next().unwrap_or("").trim();
        Self::MEDIA
            .iter()
            .find(|(m, _)| m.eq_ignore_ascii_case(essence))
            .map(|(_, f)| *f)
    }

    /// The media type results of this format are sent as.
    pub fn media_type(self) -> &'static str {
        Self::MEDIA
            .iter()
            .find(|(_, f)| *f == self)
            .map(|(m, _)| *m)
            .expect("every format has a media type")
    }

    /// The media types accepted, for error messages.
    pub fn known_media_types() -> String {
        Self::MEDIA[..5]
            .iter()
            .map(|(m, _)| *m)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Writes batches in one format to `W`.
pub enum ResultWriter<W: Write + Send> {
    Csv(Box<arrow::csv::Writer<W>>),
    Json(arrow::json::ArrayWriter<W>),
    Ndjson(arrow::json::LineDelimitedWriter<W>),
    Parquet(Box<parquet::arrow::ArrowWriter<Watched<W>>>, Failure),
    Arrow(arrow::ipc::writer::StreamWriter<W>),
}

impl<W: Write + Send> ResultWriter<W> {
    /// Start a result of `schema` (Arrow and Parquet write their header now).
    pub fn new(format: ResultFormat, schema: SchemaRef, out: W) -> Result<Self> {
        Ok(match format {
            ResultFormat::Csv => Self::Csv(Box::new(
                arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(out),
            )),
            // Nulls are written as `null`, not left out, so every row has every column.
            ResultFormat::Json => Self::Json(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::JsonArray>(out),
            ),
            ResultFormat::Ndjson => Self::Ndjson(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(out),
            ),
            ResultFormat::Parquet => {
                let failure = Failure::default();
                let out = Watched {
                    inner: out,
                    failure: failure.clone(),
                };
                Self::Parquet(
                    Box::new(
                        parquet::arrow::ArrowWriter::try_new(out, schema, None)
                            .map_err(|e| parquet_err("Parquet", e, &failure))?,
                    ),
                    failure,
                )
            }
            ResultFormat::Arrow => Self::Arrow(
                arrow::ipc::writer::StreamWriter::try_new(out, &schema)
                    .map_err(|e| arrow_err("Arrow", e))?,
            ),
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let format = self.format();
        match self {
            Self::Csv(w) => w.write(batch).map_err(|e| arrow_err(format, e)),
            Self::Json(w) => w.write(batch).map_err(|e| arrow_err(format, e)),
            Self::Ndjson(w) => w.write(batch).map_err(|e| arrow_err(format, e)),
            Self::Parquet(w, failure) => {
                w.write(batch).map_err(|e| parquet_err(format, e, failure))
            }
            Self::Arrow(w) => w.write(batch).map_err(|e| arrow_err(format, e)),
        }
    }

    fn format(&self) -> &'static str {
        match self {
            Self::Csv(_) => "CSV",
            Self::Json(_) => "JSON",
            Self::Ndjson(_) => "NDJSON",
            Self::Parquet(..) => "Parquet",
            Self::Arrow(_) => "Arrow",
        }
    }

    /// End the result (JSON's closing bracket, Parquet's footer, Arrow's end marker) and
    /// flush; returns the writer.
    pub fn finish(self) -> Result<W> {
        let format = self.format();
        let a = |e| arrow_err(format, e);
        let mut out = match self {
            Self::Csv(w) => w.into_inner(),
            Self::Json(mut w) => {
                w.finish().map_err(a)?;
                let mut out = w.into_inner();
                out.write_all(b"\n").map_err(write_err)?;
                out
            }
            Self::Ndjson(mut w) => {
                w.finish().map_err(a)?;
                w.into_inner()
            }
            Self::Parquet(w, failure) => {
                w.into_inner()
                    .map_err(|e| parquet_err(format, e, &failure))?
                    .inner
            }
            Self::Arrow(mut w) => {
                w.finish().map_err(a)?;
                w.into_inner().map_err(a)?
            }
        };
        out.flush().map_err(write_err)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec![Some("a,b"), None])),
            ],
        )
        .unwrap()
    }

    fn write(format: ResultFormat) -> Vec<u8> {
        let b = batch();
        let mut w = ResultWriter::new(format, b.schema(), Vec::new()).unwrap();
        w.write(&b).unwrap();
        w.write(&b.slice(0, 1)).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn every_format_writes_every_row() {
        assert_eq!(
            String::from_utf8(write(ResultFormat::Csv)).unwrap(),
            "id,s\n1,\"a,b\"\n2,\n1,\"a,b\"\n"
        );
        assert_eq!(
            String::from_utf8(write(ResultFormat::Ndjson)).unwrap(),
            "{\"id\":1,\"s\":\"a,b\"}\n{\"id\":2,\"s\":null}\n{\"id\":1,\"s\":\"a,b\"}\n"
        );
        let json: serde_json::Value = serde_json::from_slice(&write(ResultFormat::Json)).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 3);
        let arrow = write(ResultFormat::Arrow);
        let r = arrow::ipc::reader::StreamReader::try_new(&arrow[..], None).unwrap();
        let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 3);
        let pq = bytes::Bytes::from(write(ResultFormat::Parquet));
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(pq, 1024).unwrap();
        let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 3);
    }

    /// A destination that refuses every byte, as a pipe whose reader has gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    /// The destination failing is the destination's error (exit 74), in every format; a type
    /// the format cannot hold is the format's (exit 65); neither is a fault of neve's (70).
    #[test]
    fn writer_errors_are_the_destinations_or_the_formats() {
        let b = batch();
        for format in [
            ResultFormat::Csv,
            ResultFormat::Json,
            ResultFormat::Ndjson,
            ResultFormat::Parquet,
            ResultFormat::Arrow,
        ] {
            let e = ResultWriter::new(format, b.schema(), Closed)
                .and_then(|mut w| {
                    for _ in 0..2000 {
                        w.write(&b)?;
                    }
                    w.finish().map(|_| ())
                })
                .unwrap_err();
            assert!(
                matches!(e, crate::Error::ResultWrite { .. }),
                "{format:?}: {e:?}"
            );
            assert_eq!(e.exit_code(), 74);
        }
        let nested = arrow::array::StructArray::from(vec![(
            Arc::new(Field::new("x", DataType::Int64, false)),
            Arc::new(Int64Array::from(vec![1])) as arrow::array::ArrayRef,
        )]);
        let nested = RecordBatch::try_from_iter([("s", Arc::new(nested) as _)]).unwrap();
        let mut w = ResultWriter::new(ResultFormat::Csv, nested.schema(), Vec::new()).unwrap();
        let e = w.write(&nested).unwrap_err();
        assert!(matches!(e, crate::Error::ResultUnwritable { .. }), "{e:?}");
        assert_eq!(e.exit_code(), 65);
    }

    #[test]
    fn media_types_name_formats() {
        for f in [
            ResultFormat::Csv,
            ResultFormat::Json,
            ResultFormat::Ndjson,
            ResultFormat::Parquet,
            ResultFormat::Arrow,
        ] {
            assert_eq!(ResultFormat::from_media_type(f.media_type()), Some(f));
        }
        assert_eq!(
            ResultFormat::from_media_type("text/csv; charset=utf-8"),
            Some(ResultFormat::Csv)
        );
        assert_eq!(ResultFormat::from_media_type("text/html"), None);
    }
}

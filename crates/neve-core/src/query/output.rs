//! Query results written as CSV, JSON, NDJSON, Parquet or an Arrow IPC stream, batch by
//! batch, so a result of any size passes through with one batch in memory (Parquet: one row
//! group). `neve sql` writes them to a file or stdout, `neve serve` to a response body.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::error::Result;

fn write_err(source: std::io::Error) -> crate::Error {
    crate::Error::ResultWrite { source }
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
    Parquet(Box<parquet::arrow::ArrowWriter<W>>),
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
            ResultFormat::Parquet => Self::Parquet(Box::new(parquet::arrow::ArrowWriter::try_new(
                out, schema, None,
            )?)),
            ResultFormat::Arrow => {
                Self::Arrow(arrow::ipc::writer::StreamWriter::try_new(out, &schema)?)
            }
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            Self::Csv(w) => w.write(batch)?,
            Self::Json(w) => w.write(batch)?,
            Self::Ndjson(w) => w.write(batch)?,
            Self::Parquet(w) => w.write(batch)?,
            Self::Arrow(w) => w.write(batch)?,
        }
        Ok(())
    }

    /// End the result (JSON's closing bracket, Parquet's footer, Arrow's end marker) and
    /// flush; returns the writer.
    pub fn finish(self) -> Result<W> {
        let mut out = match self {
            Self::Csv(w) => w.into_inner(),
            Self::Json(mut w) => {
                w.finish()?;
                let mut out = w.into_inner();
                out.write_all(b"\n").map_err(write_err)?;
                out
            }
            Self::Ndjson(mut w) => {
                w.finish()?;
                w.into_inner()
            }
            Self::Parquet(w) => w.into_inner()?,
            Self::Arrow(mut w) => {
                w.finish()?;
                w.into_inner()?
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

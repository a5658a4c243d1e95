//! Input decoding: Parquet, Arrow IPC, CSV, NDJSON and JSON arrays, from files or stdin,
//! streamed in batches so memory stays bounded whatever the input size (JSON arrays excepted:
//! an array is one value and is parsed whole).
//!
//! Text formats carry no types: columns the table already has are decoded as the table's
//! type (a value that does not parse is an error naming its line and column); new columns are
//! inferred from the first `infer_rows` rows.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read, Seek};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::{Error, Result};
use crate::schema::{ColumnType, TableSchema};

/// Supported input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    Parquet,
    Csv,
    Ndjson,
    /// A JSON array of objects.
    Json,
    /// Arrow IPC, file or stream.
    Arrow,
}

impl std::str::FromStr for InputFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "parquet" | "pq" => Self::Parquet,
            "csv" => Self::Csv,
            "ndjson" | "jsonl" => Self::Ndjson,
            "json" => Self::Json,
            "arrow" | "ipc" | "feather" => Self::Arrow,
            other => {
                return Err(Error::UnknownFormat {
                    input: "--format".into(),
                    reason: format!("'{other}' is not a format"),
                })
            }
        })
    }
}

/// How to read inputs.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub format: Option<InputFormat>,
    pub batch_rows: usize,
    /// Rows of a text input used to infer its new columns.
    pub infer_rows: usize,
    pub csv_delimiter: u8,
    pub csv_header: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            format: None,
            batch_rows: 65_536,
            infer_rows: 100_000,
            csv_delimiter: b',',
            csv_header: true,
        }
    }
}

/// An input opened and typed, ready to stream.
pub struct OpenedInput {
    pub name: String,
    pub format: InputFormat,
    pub schema: SchemaRef,
    pub batches: Box<dyn Iterator<Item = Result<RecordBatch>> + Send>,
}

impl std::fmt::Debug for OpenedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedInput")
            .field("name", &self.name)
            .field("format", &self.format)
            .finish()
    }
}

/// Open `path` (`-` for stdin). `table` types the columns of text inputs it already has.
pub fn open_input(path: &str, opts: &ReadOptions, table: &TableSchema) -> Result<OpenedInput> {
    let name = if path == "-" {
        "<stdin>".to_string()
    } else {
        path.to_string()
    };
    let unreadable = |source| Error::InputUnreadable {
        input: name.clone(),
        source,
    };
    let mut reader: Box<dyn BufRead + Send> = if path == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin()))
    } else {
        let f = File::open(path).map_err(unreadable)?;
        if f.metadata().map_err(unreadable)?.is_dir() {
            return Err(unreadable(std::io::Error::other("is a directory")));
        }
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    let format = match opts.format {
        Some(f) => f,
        None => detect_format(&name, path, &mut reader)?,
    };
    match format {
        InputFormat::Parquet => open_parquet(name, path, reader, opts),
        InputFormat::Arrow => open_arrow(name, path, reader),
        InputFormat::Csv => open_csv(name, path, reader, opts, table),
        InputFormat::Ndjson => open_ndjson(name, reader, opts, table),
        InputFormat::Json => open_json_array(name, reader, opts, table),
    }
}

fn detect_format(
    name: &str,
    path: &str,
    reader: &mut Box<dyn BufRead + Send>,
) -> Result<InputFormat> {
    let ext = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("parquet" | "pq") => return Ok(InputFormat::Parquet),
        Some("csv" | "tsv") => return Ok(InputFormat::Csv),
        Some("ndjson" | "jsonl") => return Ok(InputFormat::Ndjson),
        Some("arrow" | "ipc" | "feather" | "arrows") => return Ok(InputFormat::Arrow),
        Some("gz" | "zst" | "bz2" | "xz" | "zip") => {
            return Err(Error::UnknownFormat {
                input: name.into(),
                reason: "compressed inputs are not supported; decompress to stdin (`zcat f | neve insert t - --format csv`)".into(),
            })
        }
        _ => {}
    }
    let head = reader.fill_buf().map_err(|source| Error::InputUnreadable {
        input: name.into(),
        source,
    })?;
    if head.starts_with(b"PAR1") {
        return Ok(InputFormat::Parquet);
    }
    if head.starts_with(b"ARROW1") || head.starts_with(&[0xFF, 0xFF, 0xFF, 0xFF]) {
        return Ok(InputFormat::Arrow);
    }
    let first = head.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match first {
        Some(b'{') => Ok(InputFormat::Ndjson),
        Some(b'[') => Ok(InputFormat::Json),
        _ if ext.as_deref() == Some("json") => Ok(InputFormat::Ndjson),
        None => Err(Error::UnknownFormat {
            input: name.into(),
            reason: "the input is empty".into(),
        }),
        Some(_) if std::str::from_utf8(&head[..head.len().min(4096)]).is_ok() && ext.is_none() => {
            Ok(InputFormat::Csv)
        }
        Some(_) => Err(Error::UnknownFormat {
            input: name.into(),
            reason: match ext {
                Some(e) => format!("unrecognised extension '.{e}' and content"),
                None => "content is neither Parquet, Arrow, JSON nor text".into(),
            },
        }),
    }
}

/// A seekable local file for formats that need one (stdin is spooled to a temp file).
fn seekable(name: &str, path: &str, mut reader: Box<dyn BufRead + Send>) -> Result<File> {
    if path != "-" {
        return File::open(path).map_err(|source| Error::InputUnreadable {
            input: name.into(),
            source,
        });
    }
    let mut tmp = tempfile::tempfile().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    std::io::copy(&mut reader, &mut tmp).map_err(|source| Error::InputUnreadable {
        input: name.into(),
        source,
    })?;
    tmp.rewind().map_err(|source| Error::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    Ok(tmp)
}

fn invalid(name: &str, line: Option<u64>, column: Option<String>, message: impl ToString) -> Error {
    Error::InvalidInput {
        input: name.to_string(),
        line,
        column,
        message: message.to_string(),
    }
}

fn open_parquet(
    name: String,
    path: &str,
    reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
) -> Result<OpenedInput> {
    let file = seekable(&name, path, reader)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        invalid(
            &name,
            None,
            None,
            format!("not a readable Parquet file: {e}"),
        )
    })?;
    let schema = builder.schema().clone();
    let rdr = builder.with_batch_size(opts.batch_rows).build()?;
    let n = name.clone();
    Ok(OpenedInput {
        name,
        format: InputFormat::Parquet,
        schema,
        batches: Box::new(rdr.map(move |r| r.map_err(|e| invalid(&n, None, None, e)))),
    })
}

fn open_arrow(
    name: String,
    path: &str,
    mut reader: Box<dyn BufRead + Send>,
) -> Result<OpenedInput> {
    let head = reader.fill_buf().map_err(|source| Error::InputUnreadable {
        input: name.clone(),
        source,
    })?;
    let n = name.clone();
    if head.starts_with(b"ARROW1") {
        let file = seekable(&name, path, reader)?;
        let rdr = arrow::ipc::reader::FileReader::try_new(file, None).map_err(|e| {
            invalid(
                &name,
                None,
                None,
                format!("not a readable Arrow IPC file: {e}"),
            )
        })?;
        let schema = rdr.schema();
        return Ok(OpenedInput {
            name,
            format: InputFormat::Arrow,
            schema,
            batches: Box::new(rdr.map(move |r| r.map_err(|e| invalid(&n, None, None, e)))),
        });
    }
    let rdr = arrow::ipc::reader::StreamReader::try_new(reader, None).map_err(|e| {
        invalid(
            &name,
            None,
            None,
            format!("not a readable Arrow IPC stream: {e}"),
        )
    })?;
    let schema = rdr.schema();
    Ok(OpenedInput {
        name,
        format: InputFormat::Arrow,
        schema,
        batches: Box::new(rdr.map(move |r| r.map_err(|e| invalid(&n, None, None, e)))),
    })
}

/// Read up to `rows` lines (bounded to 256 MiB) for inference; returns them and the rest.
fn read_head(
    name: &str,
    mut reader: Box<dyn BufRead + Send>,
    rows: usize,
) -> Result<(Vec<u8>, Box<dyn BufRead + Send>)> {
    let mut head = Vec::new();
    let mut n = 0;
    while n < rows && head.len() < (256 << 20) {
        let read =
            reader
                .read_until(b'\n', &mut head)
                .map_err(|source| Error::InputUnreadable {
                    input: name.into(),
                    source,
                })?;
        if read == 0 {
            break;
        }
        n += 1;
    }
    Ok((head, reader))
}

/// Normalize an inferred type so text decoders produce the table's representation.
fn normalize_inferred(dt: &DataType) -> DataType {
    match dt {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        DataType::Date64 => DataType::Date32,
        other => other.clone(),
    }
}

/// The schema a text input is decoded with: the table's types for known columns.
fn decode_schema(inferred: &Schema, table: &TableSchema) -> Schema {
    Schema::new(
        inferred
            .fields()
            .iter()
            .map(|f| {
                let dt = match table.column(f.name()) {
                    Some(c) if c.column_type != ColumnType::Null => c.column_type.to_arrow(),
                    _ => normalize_inferred(f.data_type()),
                };
                Field::new(f.name(), dt, true)
            })
            .collect::<Vec<_>>(),
    )
}

fn open_csv(
    name: String,
    path: &str,
    reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    table: &TableSchema,
) -> Result<OpenedInput> {
    let delimiter = if opts.csv_delimiter == b',' && path.to_ascii_lowercase().ends_with(".tsv") {
        b'\t'
    } else {
        opts.csv_delimiter
    };
    let (head, rest) = read_head(&name, reader, opts.infer_rows + 1)?;
    let format = arrow::csv::reader::Format::default()
        .with_header(opts.csv_header)
        .with_delimiter(delimiter);
    let (inferred, _) = format
        .infer_schema(Cursor::new(&head), Some(opts.infer_rows))
        .map_err(|e| csv_error(&name, &inferred_names(&head, delimiter), 0, e))?;
    if inferred.fields().is_empty() {
        return Err(invalid(&name, None, None, "no columns (empty input?)"));
    }
    let schema = Arc::new(decode_schema(&inferred, table));
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let header_lines = u64::from(opts.csv_header);
    let rdr = arrow::csv::ReaderBuilder::new(schema.clone())
        .with_header(opts.csv_header)
        .with_delimiter(delimiter)
        .with_batch_size(opts.batch_rows)
        .build(Cursor::new(head).chain(rest))?;
    let n = name.clone();
    Ok(OpenedInput {
        name,
        format: InputFormat::Csv,
        schema,
        batches: Box::new(rdr.map(move |r| r.map_err(|e| csv_error(&n, &names, header_lines, e)))),
    })
}

fn inferred_names(head: &[u8], delimiter: u8) -> Vec<String> {
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    String::from_utf8_lossy(first)
        .trim_end()
        .split(delimiter as char)
        .map(|s| s.trim_matches('"').to_string())
        .collect()
}

/// Turn arrow-csv's messages ("... for column 2 at line 5 ...") into a located error.
fn csv_error(name: &str, names: &[String], header_lines: u64, e: ArrowError) -> Error {
    let msg = match &e {
        ArrowError::ParseError(m) | ArrowError::CsvError(m) => m.clone(),
        other => other.to_string(),
    };
    let number_after = |key: &str| -> Option<u64> {
        let i = msg.find(key)? + key.len();
        let digits: String = msg[i..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()
    };
    // Value errors count data records ("at line N" is the Nth record); field-count errors
    // count file lines. Report file lines.
    let line = number_after("at line ")
        .map(|l| l + header_lines)
        .or_else(|| number_after("for line "));
    let column = number_after("for column ").and_then(|c| names.get(c as usize).cloned());
    let mut message = match msg.find(". Row data") {
        Some(i) => msg[..i].to_string(),
        None => msg.clone(),
    };
    if let Some(i) = message.find(" for column ") {
        message.truncate(i);
    }
    invalid(name, line, column, message)
}

/// Sniff string columns of JSON samples that are all timestamps or all dates.
fn refine_json_types(inferred: Schema, samples: &[serde_json::Value]) -> Schema {
    let fields = inferred
        .fields()
        .iter()
        .map(|f| {
            if f.data_type() != &DataType::Utf8 {
                return Field::new(f.name(), normalize_inferred(f.data_type()), true);
            }
            let mut kind: Option<DataType> = None;
            let mut seen = false;
            for v in samples {
                let Some(s) = v.get(f.name()).and_then(|x| x.as_str()) else {
                    continue;
                };
                seen = true;
                let k = if s.len() == 10 && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
                {
                    DataType::Date32
                } else if looks_like_timestamp(s) {
                    DataType::Timestamp(TimeUnit::Microsecond, None)
                } else {
                    kind = None;
                    break;
                };
                match &kind {
                    None => kind = Some(k),
                    Some(prev) if *prev == k => {}
                    Some(_) => {
                        kind = None;
                        break;
                    }
                }
            }
            let dt = if seen {
                kind.unwrap_or(DataType::Utf8)
            } else {
                DataType::Utf8
            };
            Field::new(f.name(), dt, true)
        })
        .collect::<Vec<_>>();
    Schema::new(fields)
}

fn looks_like_timestamp(s: &str) -> bool {
    if s.len() < 19 || s.as_bytes()[4] != b'-' || !matches!(s.as_bytes()[10], b'T' | b' ') {
        return false;
    }
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f").is_ok()
}

fn infer_json(name: &str, samples: &[serde_json::Value], table: &TableSchema) -> Result<SchemaRef> {
    let inferred =
        arrow::json::reader::infer_json_schema_from_iterator(samples.iter().map(|v| Ok(v.clone())))
            .map_err(|e| invalid(name, None, None, format!("cannot infer a schema: {e}")))?;
    for f in inferred.fields() {
        if matches!(
            f.data_type(),
            DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_)
        ) && table.column(f.name()).is_none()
        {
            return Err(Error::UnsupportedType {
                column: f.name().clone(),
                data_type: f.data_type().to_string(),
            });
        }
    }
    if inferred.fields().is_empty() {
        return Err(invalid(
            name,
            None,
            None,
            "no fields found in the first rows",
        ));
    }
    Ok(Arc::new(decode_schema(
        &refine_json_types(inferred, samples),
        table,
    )))
}

fn open_ndjson(
    name: String,
    reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    table: &TableSchema,
) -> Result<OpenedInput> {
    let (head, rest) = read_head(&name, reader, opts.infer_rows)?;
    let mut samples = Vec::new();
    for (i, line) in head.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
            invalid(
                &name,
                Some(i as u64 + 1),
                None,
                format!("malformed JSON: {e}"),
            )
        })?;
        if !v.is_object() {
            return Err(invalid(
                &name,
                Some(i as u64 + 1),
                None,
                "expected a JSON object per line",
            ));
        }
        samples.push(v);
    }
    let schema = infer_json(&name, &samples, table)?;
    drop(samples);
    let decoder = arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(opts.batch_rows)
        .with_strict_mode(true)
        .build_decoder()?;
    let lines = Box::new(Cursor::new(head).chain(rest));
    Ok(OpenedInput {
        name: name.clone(),
        format: InputFormat::Ndjson,
        schema: schema.clone(),
        batches: Box::new(NdjsonBatches {
            name,
            schema,
            decoder,
            lines,
            line_no: 0,
            pending: Vec::new(),
            batch_rows: opts.batch_rows,
            done: false,
        }),
    })
}

/// Streams NDJSON lines through arrow-json, keeping the current batch's lines so that an
/// error can name the exact line.
struct NdjsonBatches {
    name: String,
    schema: SchemaRef,
    decoder: arrow::json::reader::Decoder,
    lines: Box<dyn BufRead + Send>,
    line_no: u64,
    /// (line number, text) of rows in the decoder.
    pending: Vec<(u64, Vec<u8>)>,
    batch_rows: usize,
    done: bool,
}

impl NdjsonBatches {
    /// Find which pending line fails, decoding each alone.
    fn locate(&self, e: ArrowError) -> Error {
        for (no, line) in &self.pending {
            let mut d = match arrow::json::ReaderBuilder::new(self.schema.clone())
                .with_strict_mode(true)
                .build_decoder()
            {
                Ok(d) => d,
                Err(_) => break,
            };
            let res = d.decode(line).and_then(|_| d.flush());
            if let Err(err) = res {
                return json_error(&self.name, Some(*no), err);
            }
        }
        json_error(&self.name, None, e)
    }
}

fn json_error(name: &str, line: Option<u64>, e: ArrowError) -> Error {
    let msg = e.to_string();
    let msg = msg.strip_prefix("Json error: ").unwrap_or(&msg).to_string();
    let column = ["field '", "column '"].iter().find_map(|k| {
        let i = msg.find(k)? + k.len();
        msg[i..].split('\'').next().map(str::to_string)
    });
    let hint = if msg.contains("missing from schema") {
        " (a field not seen in the rows used to infer the schema; raise --infer-rows)"
    } else {
        ""
    };
    invalid(name, line, column, format!("{msg}{hint}"))
}

impl Iterator for NdjsonBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut buf = Vec::new();
        while self.pending.len() < self.batch_rows {
            buf.clear();
            match self.lines.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(source) => {
                    self.done = true;
                    return Some(Err(Error::InputUnreadable {
                        input: self.name.clone(),
                        source,
                    }));
                }
            }
            self.line_no += 1;
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let trimmed = buf.trim_ascii();
            if !trimmed.starts_with(b"{") || !trimmed.ends_with(b"}") {
                self.done = true;
                return Some(Err(invalid(
                    &self.name,
                    Some(self.line_no),
                    None,
                    "malformed JSON: expected one object per line",
                )));
            }
            if let Err(e) = self.decoder.decode(&buf) {
                self.pending.push((self.line_no, buf.clone()));
                self.done = true;
                return Some(Err(self.locate(e)));
            }
            self.pending.push((self.line_no, std::mem::take(&mut buf)));
        }
        if self.pending.is_empty() {
            self.done = true;
            return None;
        }
        let out = match self.decoder.flush() {
            Ok(Some(b)) => Ok(b),
            Ok(None) => {
                self.done = true;
                return None;
            }
            Err(e) => {
                self.done = true;
                Err(self.locate(e))
            }
        };
        self.pending.clear();
        Some(out)
    }
}

fn open_json_array(
    name: String,
    mut reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    table: &TableSchema,
) -> Result<OpenedInput> {
    let mut text = Vec::new();
    reader
        .read_to_end(&mut text)
        .map_err(|source| Error::InputUnreadable {
            input: name.clone(),
            source,
        })?;
    let values: Vec<serde_json::Value> = serde_json::from_slice(&text).map_err(|e| {
        invalid(
            &name,
            Some(e.line() as u64),
            None,
            format!("malformed JSON array: {e}"),
        )
    })?;
    drop(text);
    if let Some(i) = values.iter().position(|v| !v.is_object()) {
        return Err(invalid(
            &name,
            None,
            None,
            format!("element {} is not an object", i + 1),
        ));
    }
    let schema = infer_json(&name, &values[..values.len().min(opts.infer_rows)], table)?;
    let batch_rows = opts.batch_rows;
    let n = name.clone();
    let s = schema.clone();
    let chunks: Vec<Vec<serde_json::Value>> =
        values.chunks(batch_rows).map(|c| c.to_vec()).collect();
    let iter = chunks.into_iter().enumerate().map(move |(ci, chunk)| {
        let mut d = arrow::json::ReaderBuilder::new(s.clone())
            .with_strict_mode(true)
            .build_decoder()?;
        match d.serialize(&chunk).and_then(|_| d.flush()) {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err(invalid(&n, None, None, "empty batch")),
            Err(e) => {
                // Locate the element.
                for (i, v) in chunk.iter().enumerate() {
                    let mut one = arrow::json::ReaderBuilder::new(s.clone())
                        .with_strict_mode(true)
                        .build_decoder()?;
                    if let Err(err) = one
                        .serialize(std::slice::from_ref(v))
                        .and_then(|_| one.flush())
                    {
                        let mut located = json_error(&n, None, err);
                        if let Error::InvalidInput { message, .. } = &mut located {
                            *message = format!("element {}: {message}", ci * batch_rows + i + 1);
                        }
                        return Err(located);
                    }
                }
                Err(json_error(&n, None, e))
            }
        }
    });
    Ok(OpenedInput {
        name,
        format: InputFormat::Json,
        schema,
        batches: Box::new(iter),
    })
}

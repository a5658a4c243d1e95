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
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

mod csv_infer;
mod csv_lines;
mod json;
mod sample;

use json::{open_json_array, open_ndjson};

#[cfg(test)]
mod tests;

use super::conform::conform_batch;
use super::text::TextOptions;
use crate::error::{Error, Result};
use crate::schema::{Column, ColumnType, TableSchema};

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
    /// How text values become typed values (the unit of epoch numbers for timestamps).
    pub text: TextOptions,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            format: None,
            batch_rows: 65_536,
            infer_rows: 100_000,
            csv_delimiter: b',',
            csv_header: true,
            text: TextOptions::default(),
        }
    }
}

/// Field metadata of a table column that no sampled row of a JSON input has: decoded (as
/// nulls, or values in later rows) but counted as absent from the input, so that an input
/// without the table's partition column is refused as it is for CSV and Parquet.
pub(crate) const ABSENT: &str = "neve:absent";

/// Field metadata of a decoded timestamp column that has its own epoch unit.
pub(crate) const EPOCH_UNIT: &str = "neve:epoch_unit";

/// Whether `input` brings column `name` (see [`ABSENT`]).
pub(crate) fn has_column(input: &Schema, name: &str) -> bool {
    input
        .field_with_name(name)
        .is_ok_and(|f| !f.metadata().contains_key(ABSENT))
}

/// An input opened and typed, ready to stream.
pub struct OpenedInput {
    pub name: String,
    pub format: InputFormat,
    pub schema: SchemaRef,
    pub batches: Box<dyn Iterator<Item = Result<RecordBatch>> + Send>,
}

impl OpenedInput {
    /// An input without rows or columns: inserting it commits nothing.
    fn empty(name: String, format: InputFormat) -> Self {
        Self {
            name,
            format,
            schema: Arc::new(Schema::empty()),
            batches: Box::new(std::iter::empty()),
        }
    }
}

/// Whether a reader holds nothing but white space (consumes it; only used to decide that an
/// input is empty, and such an input has nothing else to read).
fn is_exhausted(reader: &mut Box<dyn BufRead + Send>, name: &str) -> Result<bool> {
    loop {
        let buf = reader.fill_buf().map_err(|source| Error::InputUnreadable {
            input: name.into(),
            source,
        })?;
        if buf.is_empty() {
            return Ok(true);
        }
        if !buf.iter().all(u8::is_ascii_whitespace) {
            return Ok(false);
        }
        let n = buf.len();
        reader.consume(n);
    }
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
    let reader: Box<dyn BufRead + Send> = if path == "-" {
        Box::new(BufReader::with_capacity(1 << 20, std::io::stdin()))
    } else {
        let f = File::open(path).map_err(unreadable)?;
        if f.metadata().map_err(unreadable)?.is_dir() {
            return Err(unreadable(std::io::Error::other("is a directory")));
        }
        Box::new(BufReader::with_capacity(1 << 20, f))
    };
    open_reader(name, path, reader, opts, table)
}

/// Open an input held in memory (a request body): its format from `opts.format`, else from
/// its content. `name` names it in errors.
pub fn open_bytes(
    name: &str,
    body: bytes::Bytes,
    opts: &ReadOptions,
    table: &TableSchema,
) -> Result<OpenedInput> {
    let parquet = match opts.format {
        Some(f) => f == InputFormat::Parquet,
        None => body.starts_with(b"PAR1"),
    };
    if parquet {
        return parquet_input(name.to_string(), body, opts);
    }
    // `-`: no file name to go by, and formats that need to seek are spooled.
    open_reader(
        name.to_string(),
        "-",
        Box::new(Cursor::new(body)),
        opts,
        table,
    )
}

fn open_reader(
    name: String,
    path: &str,
    mut reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    table: &TableSchema,
) -> Result<OpenedInput> {
    let head = reader.fill_buf().map_err(|source| Error::InputUnreadable {
        input: name.clone(),
        source,
    })?;
    if head.iter().all(u8::is_ascii_whitespace) && is_exhausted(&mut reader, &name)? {
        return Ok(OpenedInput::empty(
            name,
            opts.format.unwrap_or(InputFormat::Ndjson),
        ));
    }
    let format = match opts.format {
        Some(f) => f,
        None => detect_format(&name, path, &mut reader)?,
    };
    match format {
        InputFormat::Parquet => open_parquet(name, path, reader, opts),
        InputFormat::Arrow => open_arrow(name, path, reader),
        InputFormat::Csv => open_csv(name, path, reader, opts, table),
        InputFormat::Ndjson => open_ndjson(name, reader, opts, table, "line"),
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
        Some(_) if looks_like_text(&head[..head.len().min(4096)]) && ext.is_none() => {
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

/// UTF-8, but for a character the cut at the end of `head` may have split.
fn looks_like_text(head: &[u8]) -> bool {
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
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
    parquet_input(name, file, opts)
}

/// A Parquet input from a file or from bytes in memory.
fn parquet_input<R: parquet::file::reader::ChunkReader + 'static>(
    name: String,
    source: R,
    opts: &ReadOptions,
) -> Result<OpenedInput> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(source).map_err(|e| {
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

/// The schema a text input is decoded into: the table's types for the columns it has (nested
/// ones extended by new fields the input brings), inferred types for new columns.
fn decode_schema(inferred: &Schema, table: &TableSchema) -> Result<Schema> {
    let mut fields = Vec::with_capacity(inferred.fields().len());
    for f in inferred.fields() {
        let it = ColumnType::from_arrow(f.name(), f.data_type())?;
        // Not null columns are checked while decoding, where errors can name the line.
        fields.push(match table.column(f.name()) {
            Some(c) => decode_field(c, &prefer_table(&c.column_type, &it)),
            None => Field::new(f.name(), it.to_arrow(), true),
        });
    }
    Ok(Schema::new(fields))
}

/// The decoded field of table column `c` as type `t`: its nullability (checked while
/// decoding, where errors can name the line) and its epoch unit, if any.
fn decode_field(c: &Column, t: &ColumnType) -> Field {
    let f = Field::new(&c.name, t.to_arrow(), c.nullable);
    match c.epoch_unit {
        Some(u) => f.with_metadata([(EPOCH_UNIT.to_string(), u.as_str().to_string())].into()),
        None => f,
    }
}

/// The table's type, with the nested fields only the input has appended: values are then read
/// as the table's types, so a value that does not fit gets its own error.
fn prefer_table(table: &ColumnType, input: &ColumnType) -> ColumnType {
    use ColumnType as C;
    match (table, input) {
        (C::Null, i) => i.clone(),
        (C::Struct(t), C::Struct(i)) => {
            let mut out: Vec<Column> = t
                .iter()
                .map(|tc| match i.iter().find(|ic| ic.name == tc.name) {
                    Some(ic) => Column {
                        column_type: prefer_table(&tc.column_type, &ic.column_type),
                        ..tc.clone()
                    },
                    None => tc.clone(),
                })
                .collect();
            out.extend(
                i.iter()
                    .filter(|ic| !t.iter().any(|tc| tc.name == ic.name))
                    .cloned(),
            );
            C::Struct(out)
        }
        (C::List(t), C::List(i)) => C::List(Box::new(Column {
            column_type: prefer_table(&t.column_type, &i.column_type),
            ..t.as_ref().clone()
        })),
        (C::Map(tk, tv), C::Map(_, iv)) => C::Map(
            tk.clone(),
            Box::new(Column {
                column_type: prefer_table(&tv.column_type, &iv.column_type),
                ..tv.as_ref().clone()
            }),
        ),
        // What JSON rows bring to a map's values comes as the list of those values' new parts
        // (`sample.rs`): JSON has no maps, only objects, which inference reads as structs.
        (C::Map(tk, tv), C::List(iv)) => C::Map(
            tk.clone(),
            Box::new(Column {
                column_type: prefer_table(&tv.column_type, &iv.column_type),
                ..tv.as_ref().clone()
            }),
        ),
        (t, _) => t.clone(),
    }
}

/// What a text decoder produces for `dt`: every non-string primitive as its text (parsed
/// exactly afterwards by `conform_batch`), nested types kept.
fn raw_type(dt: &DataType) -> DataType {
    let raw_field = |f: &arrow::datatypes::FieldRef| {
        Arc::new(Field::new(
            f.name(),
            raw_type(f.data_type()),
            f.is_nullable() || !matches!(f.name().as_str(), "key"),
        ))
    };
    match dt {
        DataType::Struct(fields) => DataType::Struct(
            fields
                .iter()
                .map(|f| Field::new(f.name(), raw_type(f.data_type()), true))
                .collect(),
        ),
        DataType::List(e) => DataType::List(Arc::new(Field::new(
            e.name(),
            raw_type(e.data_type()),
            true,
        ))),
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return dt.clone();
            };
            let kv: Vec<_> = kv.iter().map(raw_field).collect();
            DataType::Map(
                Arc::new(Field::new(
                    entries.name(),
                    DataType::Struct(kv.into()),
                    false,
                )),
                *sorted,
            )
        }
        // A column typed null (no value in the rows its type was inferred from) is read as
        // text too: a value further down is refused by its line, never dropped.
        DataType::Utf8 => dt.clone(),
        _ => DataType::Utf8,
    }
}

fn raw_schema(typed: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        typed
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), raw_type(f.data_type()), true))
            .collect::<Vec<_>>(),
    ))
}

/// Raw text batches to typed ones; `position` says where row `i` of the batch is.
fn typed(
    batch: RecordBatch,
    schema: &SchemaRef,
    text: &TextOptions,
    name: &str,
    position: &dyn Fn(usize) -> String,
) -> Result<RecordBatch> {
    conform_batch(&batch, schema, text, name, position)
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
        .map_err(|e| {
            let starts = csv_lines::record_starts(&head, delimiter);
            csv_error(&name, &inferred_names(&head, delimiter), e, &|n| match n {
                // The first record at or below the line its reading began on.
                Reported::At(l) => starts.iter().copied().find(|&s| s >= l).or(Some(l)),
                Reported::Record(r) => starts
                    .get(usize::try_from(r).ok()?.checked_sub(1)?)
                    .copied(),
            })
        })?;
    if inferred.fields().is_empty() {
        return Ok(OpenedInput::empty(name, InputFormat::Csv));
    }
    let inferred = csv_infer::refine(inferred, &head, opts.csv_header, delimiter, table)?;
    let schema = Arc::new(decode_schema(&inferred, table)?);
    let raw = raw_schema(&schema);
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let (tracked, lines) = csv_lines::LineTracker::new(Cursor::new(head).chain(rest), delimiter);
    let rdr = arrow::csv::ReaderBuilder::new(raw)
        .with_header(opts.csv_header)
        .with_delimiter(delimiter)
        .with_batch_size(opts.batch_rows)
        .build(tracked)?;
    let n = name.clone();
    let s = schema.clone();
    let text = opts.text;
    let mut header = opts.csv_header;
    Ok(OpenedInput {
        name,
        format: InputFormat::Csv,
        schema,
        batches: Box::new(rdr.map(move |r| {
            // arrow-csv numbers records, the header among them; the tracker knows their lines.
            let raw = r.map_err(|e| {
                csv_error(&n, &names, e, &|n| match n {
                    Reported::Record(r) => lines.line_of(r),
                    Reported::At(r) => lines.line_of(r + 1),
                })
            })?;
            if std::mem::take(&mut header) {
                lines.claim(1);
            }
            let at = lines.claim(raw.num_rows());
            typed(raw, &s, &text, &n, &|i| match at.get(i) {
                Some(line) => format!("line {line}"),
                None => format!("record {}", i + 1),
            })
        })),
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

/// How arrow-csv's messages number a CSV record.
#[derive(Debug, Clone, Copy)]
enum Reported {
    /// "for line N" (the decoder's field-count and UTF-8 errors): the Nth record from 1, the
    /// header among them.
    Record(u64),
    /// "at line N": from the decoder's value errors, the record after the Nth; from the
    /// schema's inference (the `csv` crate), the line where reading the record began, before
    /// any blank lines above it.
    At(u64),
}

/// Turn arrow-csv's messages ("... for column 2 at line 5 ...") into a located error, its
/// line the file's (`to_line`) and not repeated in the message.
fn csv_error(
    name: &str,
    names: &[String],
    e: ArrowError,
    to_line: &dyn Fn(Reported) -> Option<u64>,
) -> Error {
    let msg = match &e {
        ArrowError::ParseError(m) | ArrowError::CsvError(m) => m.clone(),
        other => other.to_string(),
    };
    let number_after = |key: &str| -> Option<(usize, u64)> {
        let at = msg.find(key)?;
        let i = at + key.len();
        let digits: String = msg[i..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        Some((at, digits.parse().ok()?))
    };
    let (line, cut) = match (number_after(" at line "), number_after(" for line ")) {
        (Some((at, n)), _) => (to_line(Reported::At(n)), Some(at)),
        (None, Some((at, n))) => (to_line(Reported::Record(n)), Some(at)),
        (None, None) => (None, None),
    };
    let column = number_after("for column ").and_then(|(_, c)| names.get(c as usize).cloned());
    let mut message = msg.clone();
    for end in [". Row data", " for column "] {
        if let Some(i) = message.find(end) {
            message.truncate(i);
        }
    }
    // The decoder's own number, wrong past blank lines, goes: "… for line 7, expected 2 got 1"
    // becomes "…, expected 2 got 1" beside the located line.
    if let Some(at) = cut.filter(|&at| at < message.len()) {
        let rest = &message[at + 1..];
        let skip = rest
            .find(|c: char| c.is_ascii_digit())
            .map(|d| d + rest[d..].chars().take_while(char::is_ascii_digit).count())
            .unwrap_or(rest.len());
        message = format!("{}{}", &message[..at], &rest[skip..]);
    }
    invalid(name, line, column, message)
}

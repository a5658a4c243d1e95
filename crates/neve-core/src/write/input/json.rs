//! JSON inputs: NDJSON and JSON arrays (read as one element per line), decoded by arrow-json
//! into the table's types, with the line or element of any error.

use std::io::{BufRead, Cursor, Read};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;

use super::{
    decode_field, invalid, prefer_table, raw_schema, read_head, typed, InputFormat, OpenedInput,
    ReadOptions, ABSENT,
};
use crate::error::{Error, Result};
use crate::schema::{Column, ColumnType, TableSchema};
use crate::write::text::TextOptions;

use super::sample::{self, Sample};

/// Sniff string columns of JSON samples that are all timestamps or all dates.
fn refine_json_types(inferred: Schema, samples: &[serde_json::Value]) -> Schema {
    let fields = inferred
        .fields()
        .iter()
        .map(|f| {
            // Whole numbers beyond i64 (arrow types them float64, which cannot hold them):
            // uint64 when every one of the sample is a whole number from 0 to 2^64 - 1.
            if f.data_type() == &DataType::Float64 {
                let numbers: Vec<&serde_json::Number> = samples
                    .iter()
                    .filter_map(|v| v.get(f.name()).and_then(|x| x.as_number()))
                    .collect();
                if numbers.iter().any(|n| n.is_u64() && !n.is_i64())
                    && numbers.iter().all(|n| n.is_u64())
                {
                    return Field::new(f.name(), DataType::UInt64, true);
                }
            }
            if f.data_type() != &DataType::Utf8 {
                return Field::new(f.name(), f.data_type().clone(), true);
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
                    let zone = crate::write::text::has_offset(s).then(|| "UTC".into());
                    DataType::Timestamp(TimeUnit::Microsecond, zone)
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

/// The schema JSON rows are decoded into: every column the table has, typed as the table
/// says (never inferred, so `{}` and `[]` for one map column, or a key absent from the first
/// rows, cannot conflict), extended by nested fields the rows bring; then the new columns,
/// inferred from the samples.
fn infer_json(name: &str, samples: Vec<Sample>, table: &TableSchema) -> Result<SchemaRef> {
    use serde_json::Value;
    let cannot = |e: ArrowError| invalid(name, None, None, format!("cannot infer a schema: {e}"));
    let typed = typed_columns(table);
    let mut nested: Vec<Vec<Value>> = vec![Vec::new(); typed.len()];
    let mut seen = vec![false; typed.len()];
    let mut new_only = Vec::with_capacity(samples.len());
    for sample in samples {
        for (i, s) in sample.seen.iter().enumerate() {
            seen[i] |= *s;
        }
        for (i, e) in sample.extras {
            let mut one = serde_json::Map::new();
            one.insert("v".into(), e);
            nested[i].push(Value::Object(one));
        }
        new_only.push(Value::Object(sample.rest));
    }
    let inferred = arrow::json::reader::infer_json_schema_from_iterator(new_only.iter().map(Ok))
        .map_err(cannot)?;
    let known = table.fields().len();
    if known + inferred.fields().len() > crate::schema::MAX_FIELDS {
        return Err(invalid(
            name,
            None,
            None,
            format!(
                "its rows bring {} new columns, and a table keeps at most {} columns and nested fields ({known} now)",
                inferred.fields().len(),
                crate::schema::MAX_FIELDS
            ),
        ));
    }
    let inferred = refine_json_types(inferred, &new_only);
    let mut fields = Vec::with_capacity(typed.len() + inferred.fields().len());
    for (i, c) in typed.iter().enumerate() {
        let mut t = c.column_type.clone();
        if t.is_nested() && !nested[i].is_empty() {
            let found =
                arrow::json::reader::infer_json_schema_from_iterator(nested[i].iter().map(Ok))
                    .ok()
                    .and_then(|s| {
                        let f = s.fields().first()?.clone();
                        ColumnType::from_arrow(&c.name, f.data_type()).ok()
                    });
            if let Some(found) = found {
                t = prefer_table(&t, &found);
            }
        }
        let mut field = decode_field(c, &t);
        if !seen[i] {
            let mut metadata = field.metadata().clone();
            metadata.insert(ABSENT.to_string(), "true".to_string());
            field = field.with_metadata(metadata);
        }
        fields.push(field);
    }
    for f in inferred.fields() {
        let t = ColumnType::from_arrow(f.name(), f.data_type())?;
        fields.push(Field::new(f.name(), t.to_arrow(), true));
    }
    if fields.is_empty() {
        return Err(invalid(
            name,
            None,
            None,
            "no fields found in the first rows",
        ));
    }
    Ok(Arc::new(Schema::new(fields)))
}

pub(super) fn open_ndjson(
    name: String,
    reader: Box<dyn BufRead + Send>,
    opts: &ReadOptions,
    table: &TableSchema,
    unit: &'static str,
) -> Result<OpenedInput> {
    let (head, rest) = read_head(&name, reader, opts.infer_rows)?;
    // Parsed on every core (100,000 lines by default); the first bad line in order wins.
    use rayon::prelude::*;
    let lines: Vec<(usize, &[u8])> = head
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let typed = typed_columns(table);
    let samples = lines
        .par_iter()
        .map(|(i, line)| {
            let at = Some(*i as u64 + 1);
            sample::parse(line, &typed).map_err(|(not_object, e)| {
                let message = if not_object {
                    "expected a JSON object".to_string()
                } else {
                    format!("malformed JSON: {e}")
                };
                located(&name, unit, at, None, message)
            })
        })
        .collect::<Vec<Result<_>>>()
        .into_iter()
        .collect::<Result<Vec<_>>>()?;
    drop(lines);
    if samples.is_empty() {
        return Ok(OpenedInput::empty(name, InputFormat::Ndjson));
    }
    let schema = infer_json(&name, samples, table)?;
    let raw = raw_schema(&schema);
    json_decoder(&raw, 1)?; // the schema is decodable: fail here, not per chunk
    let lines = Box::new(Cursor::new(head).chain(rest));
    Ok(OpenedInput {
        name: name.clone(),
        format: if unit == "line" {
            InputFormat::Ndjson
        } else {
            InputFormat::Json
        },
        schema: schema.clone(),
        batches: Box::new(NdjsonBatches {
            chunk: Arc::new(ChunkDecoder {
                name,
                unit,
                raw,
                schema,
                text: opts.text,
            }),
            lines,
            line_no: 0,
            batch_rows: opts.batch_rows,
            done: false,
            inflight: std::collections::VecDeque::new(),
        }),
    })
}

/// Numbers, booleans and strings all arrive as their text (`coerce_primitive`), so that
/// `conform_batch` parses them exactly: arrow-json alone would store 1.5 in an integer column
/// as 1, and a number in a timestamp column as microseconds.
fn json_decoder(raw: &SchemaRef, batch_rows: usize) -> Result<arrow::json::reader::Decoder> {
    Ok(arrow::json::ReaderBuilder::new(raw.clone())
        .with_batch_size(batch_rows)
        .with_strict_mode(true)
        .with_coerce_primitive(true)
        .build_decoder()?)
}

/// The table's columns an input's values are decoded as (a `null` column is inferred anew).
fn typed_columns(table: &TableSchema) -> Vec<&Column> {
    table
        .columns
        .iter()
        .filter(|c| c.column_type != ColumnType::Null)
        .collect()
}

/// An error at line (NDJSON) or element (JSON array) `at`.
fn located(
    name: &str,
    unit: &str,
    at: Option<u64>,
    column: Option<String>,
    message: String,
) -> Error {
    match (unit, at) {
        ("line", _) | (_, None) => invalid(name, at, column, message),
        (unit, Some(n)) => invalid(name, None, column, format!("{unit} {n}: {message}")),
    }
}

/// Streams NDJSON lines (or a JSON array's elements, one per line) in chunks of `batch_rows`
/// lines. Lines are read here, in order; each chunk is decoded and typed on the rayon pool,
/// a few at a time, so decoding uses every core; batches come out in input order, and an
/// error names the exact line.
struct NdjsonBatches {
    chunk: Arc<ChunkDecoder>,
    lines: Box<dyn BufRead + Send>,
    line_no: u64,
    batch_rows: usize,
    done: bool,
    /// Chunks being decoded, oldest first.
    inflight: std::collections::VecDeque<std::sync::mpsc::Receiver<Result<RecordBatch>>>,
}

/// Chunks decoded at once: enough to keep the cores busy, few enough to bound memory.
const CHUNKS_IN_FLIGHT: usize = 3;

/// Lines of one chunk: their text back to back, where each starts, and its line number.
struct Chunk {
    text: Vec<u8>,
    starts: Vec<usize>,
    numbers: Vec<u64>,
}

impl Chunk {
    fn line(&self, i: usize) -> &[u8] {
        let end = self.starts.get(i + 1).copied().unwrap_or(self.text.len());
        &self.text[self.starts[i]..end]
    }
}

/// What decoding a chunk needs, shared by the chunks in flight.
struct ChunkDecoder {
    name: String,
    /// "line" or "element".
    unit: &'static str,
    raw: SchemaRef,
    schema: SchemaRef,
    text: TextOptions,
}

impl ChunkDecoder {
    fn decode(&self, chunk: &Chunk) -> Result<RecordBatch> {
        // One row more than lines lets a line holding two objects show.
        let mut d = json_decoder(&self.raw, chunk.numbers.len() + 1)?;
        let res = d.decode(&chunk.text).and_then(|_| d.flush());
        let batch = match res {
            Ok(Some(b)) if b.num_rows() == chunk.numbers.len() => b,
            Ok(_) => return Err(self.locate(chunk, None)),
            Err(e) => return Err(self.locate(chunk, Some(e))),
        };
        let unit = self.unit;
        typed(batch, &self.schema, &self.text, &self.name, &|i| {
            format!("{unit} {}", chunk.numbers[i])
        })
    }

    /// Find which line of the chunk fails (or holds other than one object), decoding each
    /// alone.
    fn locate(&self, chunk: &Chunk, e: Option<ArrowError>) -> Error {
        for (i, no) in chunk.numbers.iter().enumerate() {
            let Ok(mut d) = json_decoder(&self.raw, 2) else {
                break;
            };
            match d.decode(chunk.line(i)).and_then(|_| d.flush()) {
                Err(err) => return json_error(&self.name, self.unit, Some(*no), err),
                Ok(Some(b)) if b.num_rows() == 1 => {}
                Ok(_) => {
                    return located(
                        &self.name,
                        self.unit,
                        Some(*no),
                        None,
                        "malformed JSON: expected one object per line".into(),
                    )
                }
            }
        }
        match e {
            Some(e) => json_error(&self.name, self.unit, None, e),
            None => invalid(
                &self.name,
                None,
                None,
                "malformed JSON: rows do not match lines",
            ),
        }
    }
}

fn json_error(name: &str, unit: &str, line: Option<u64>, e: ArrowError) -> Error {
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
    located(name, unit, line, column, format!("{msg}{hint}"))
}

impl NdjsonBatches {
    /// The next `batch_rows` non-blank lines; `None` at the end of the input.
    fn read_chunk(&mut self) -> Option<Result<Chunk>> {
        let mut chunk = Chunk {
            text: Vec::new(),
            starts: Vec::new(),
            numbers: Vec::new(),
        };
        while chunk.numbers.len() < self.batch_rows {
            let start = chunk.text.len();
            match self.lines.read_until(b'\n', &mut chunk.text) {
                Ok(0) => break,
                Ok(_) => {}
                Err(source) => {
                    return Some(Err(Error::InputUnreadable {
                        input: self.chunk.name.clone(),
                        source,
                    }))
                }
            }
            self.line_no += 1;
            let line = &chunk.text[start..];
            if line.iter().all(u8::is_ascii_whitespace) {
                chunk.text.truncate(start);
                continue;
            }
            let trimmed = line.trim_ascii();
            if !trimmed.starts_with(b"{") || !trimmed.ends_with(b"}") {
                return Some(Err(located(
                    &self.chunk.name,
                    self.chunk.unit,
                    Some(self.line_no),
                    None,
                    "malformed JSON: expected one object per line".into(),
                )));
            }
            chunk.starts.push(start);
            chunk.numbers.push(self.line_no);
        }
        (!chunk.numbers.is_empty()).then_some(Ok(chunk))
    }
}

impl Iterator for NdjsonBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done && self.inflight.len() < CHUNKS_IN_FLIGHT {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            match self.read_chunk() {
                None => self.done = true,
                Some(Err(e)) => {
                    // After the chunks before it, in order.
                    self.done = true;
                    let _ = tx.send(Err(e));
                    self.inflight.push_back(rx);
                }
                Some(Ok(chunk)) => {
                    let decoder = self.chunk.clone();
                    rayon::spawn(move || {
                        let _ = tx.send(decoder.decode(&chunk));
                    });
                    self.inflight.push_back(rx);
                }
            }
        }
        let rx = self.inflight.pop_front()?;
        let out = rx.recv().unwrap_or_else(|_| {
            Err(Error::TaskFailed(
                "decoding a chunk of JSON lines stopped".into(),
            ))
        });
        if out.is_err() {
            self.done = true;
            self.inflight.clear();
        }
        Some(out)
    }
}

/// A JSON array of objects, read as one object per line with its element number as the line
/// number: the elements' text reaches the decoder as written (numbers keep their digits).
pub(super) fn open_json_array(
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
    let lines =
        array_elements_as_lines(&text).map_err(|(n, m)| located(&name, "element", n, None, m))?;
    drop(text);
    open_ndjson(name, Box::new(Cursor::new(lines)), opts, table, "element")
}

/// `[{..}, {..}]` to `{..}\n{..}\n`: line breaks outside strings become spaces (inside JSON
/// strings they are always escaped). Errors carry the element number.
fn array_elements_as_lines(text: &[u8]) -> std::result::Result<Vec<u8>, (Option<u64>, String)> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < text.len() && text[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_ws(&mut i);
    if text.get(i) != Some(&b'[') {
        return Err((None, "malformed JSON array: expected '['".into()));
    }
    i += 1;
    let mut element = 0u64;
    loop {
        skip_ws(&mut i);
        match text.get(i) {
            Some(b']') if element == 0 => break,
            Some(b'{') => {}
            Some(_) => return Err((Some(element + 1), "is not an object".into())),
            None => {
                return Err((
                    Some(element + 1),
                    "malformed JSON array: unexpected end".into(),
                ))
            }
        }
        element += 1;
        let (mut depth, mut in_str, mut esc) = (0i64, false, false);
        while i < text.len() {
            let b = text[i];
            i += 1;
            if in_str {
                out.push(b);
                if esc {
                    esc = false;
                } else if b == b'\\' {
                    esc = true;
                } else if b == b'"' {
                    in_str = false;
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
            out.push(if b == b'\n' || b == b'\r' { b' ' } else { b });
            if depth == 0 {
                break;
            }
        }
        if depth != 0 {
            return Err((Some(element), "malformed JSON array: unexpected end".into()));
        }
        out.push(b'\n');
        skip_ws(&mut i);
        match text.get(i) {
            Some(b',') => i += 1,
            Some(b']') => break,
            _ => {
                return Err((
                    Some(element),
                    "malformed JSON array: expected ',' or ']' after the element".into(),
                ))
            }
        }
    }
    i += 1;
    skip_ws(&mut i);
    if i < text.len() {
        return Err((
            None,
            "malformed JSON array: text after the closing ']'".into(),
        ));
    }
    Ok(out)
}

//! The two Avro files of Iceberg v2 (manifests and manifest lists): their schemas, with the
//! field ids readers resolve them by, and an object container writer whose output is a
//! function of its input alone (header keys sorted, sync marker given), so two syncs write
//! the same bytes under the same name.

use apache_avro::types::Value;
use apache_avro::{Schema, Writer};
use serde_json::{json, Value as Json};

use super::types::{Prim, SpecField};
use crate::error::{Error, Result};
use crate::schema::ColumnType;

/// `["null", T]` with a null default: how Iceberg writes an optional field.
fn optional(name: &str, t: Json, id: i32) -> Json {
    json!({"name": name, "type": ["null", t], "default": null, "field-id": id})
}

fn required(name: &str, t: Json, id: i32) -> Json {
    json!({"name": name, "type": t, "field-id": id})
}

/// A map with int keys, as Iceberg writes it in Avro: an array of key/value records.
fn int_map(value: &str, key_id: i32, value_id: i32) -> Json {
    json!({
        "type": "array",
        "logicalType": "map",
        "items": {
            "type": "record",
            "name": format!("k{key_id}_v{value_id}"),
            "fields": [
                {"name": "key", "type": "int", "field-id": key_id},
                {"name": "value", "type": value, "field-id": value_id},
            ],
        },
    })
}

/// An Avro name for a partition field: Iceberg's escaping of what Avro names cannot hold.
pub(crate) fn avro_field_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, ch) in name.chars().enumerate() {
        let ok = ch == '_' || ch.is_ascii_alphabetic() || (i > 0 && ch.is_ascii_digit());
        if ok {
            out.push(ch);
        } else if i == 0 && ch.is_ascii_digit() {
            out.push('_');
            out.push(ch);
        } else {
            out.push_str(&format!("_x{:X}", ch as u32));
        }
    }
    out
}

/// A partition field's Avro type, as Iceberg's `AvroSchemaUtil` converts its result type.
fn partition_type(f: &SpecField) -> Json {
    let zoned = matches!(f.source_type, ColumnType::Timestamp(Some(_)));
    match f.result {
        Prim::Boolean => json!("boolean"),
        Prim::Long => json!("long"),
        Prim::String => json!("string"),
        Prim::Date => json!({"type": "int", "logicalType": "date"}),
        Prim::Time => json!({"type": "long", "logicalType": "time-micros"}),
        Prim::Timestamp => json!({
            "type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": zoned
        }),
        // Avro names are unique in a schema: the field id makes them so.
        Prim::Decimal(p, s) => json!({
            "type": "fixed", "name": format!("decimal_{p}_{s}_{}", f.field_id),
            "size": f.fixed_size(), "logicalType": "decimal", "precision": p, "scale": s
        }),
        Prim::Binary => json!("bytes"),
        Prim::Float => json!("float"),
        Prim::Double => json!("double"),
        Prim::Int | Prim::Other => json!("int"),
    }
}

/// The schema of a manifest (`manifest_entry`) for a partition spec.
pub(crate) fn manifest_schema(spec: &[SpecField]) -> Json {
    let partition: Vec<Json> = spec
        .iter()
        .map(|f| optional(&avro_field_name(&f.name), partition_type(f), f.field_id))
        .collect();
    let data_file = json!({
        "type": "record",
        "name": "r2",
        "fields": [
            required("content", json!("int"), 134),
            required("file_path", json!("string"), 100),
            required("file_format", json!("string"), 101),
            required("partition", json!({"type": "record", "name": "r102", "fields": partition}), 102),
            required("record_count", json!("long"), 103),
            required("file_size_in_bytes", json!("long"), 104),
            optional("column_sizes", int_map("long", 117, 118), 108),
            optional("value_counts", int_map("long", 119, 120), 109),
            optional("null_value_counts", int_map("long", 121, 122), 110),
            optional("nan_value_counts", int_map("long", 138, 139), 137),
            optional("lower_bounds", int_map("bytes", 126, 127), 125),
            optional("upper_bounds", int_map("bytes", 129, 130), 128),
            optional("key_metadata", json!("bytes"), 131),
            optional("split_offsets", json!({"type": "array", "items": "long", "element-id": 133}), 132),
            optional("equality_ids", json!({"type": "array", "items": "int", "element-id": 136}), 135),
            optional("sort_order_id", json!("int"), 140),
        ],
    });
    json!({
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            required("status", json!("int"), 0),
            optional("snapshot_id", json!("long"), 1),
            optional("sequence_number", json!("long"), 3),
            optional("file_sequence_number", json!("long"), 4),
            required("data_file", data_file, 2),
        ],
    })
}

/// The schema of a manifest list (`manifest_file`).
pub(crate) fn manifest_list_schema() -> Json {
    let summary = json!({
        "type": "record",
        "name": "r508",
        "fields": [
            required("contains_null", json!("boolean"), 509),
            optional("contains_nan", json!("boolean"), 518),
            optional("lower_bound", json!("bytes"), 510),
            optional("upper_bound", json!("bytes"), 511),
        ],
    });
    json!({
        "type": "record",
        "name": "manifest_file",
        "fields": [
            required("manifest_path", json!("string"), 500),
            required("manifest_length", json!("long"), 501),
            required("partition_spec_id", json!("int"), 502),
            required("content", json!("int"), 517),
            required("sequence_number", json!("long"), 515),
            required("min_sequence_number", json!("long"), 516),
            required("added_snapshot_id", json!("long"), 503),
            required("added_files_count", json!("int"), 504),
            required("existing_files_count", json!("int"), 505),
            required("deleted_files_count", json!("int"), 506),
            required("added_rows_count", json!("long"), 512),
            required("existing_rows_count", json!("long"), 513),
            required("deleted_rows_count", json!("long"), 514),
            optional("partitions", json!({"type": "array", "items": summary, "element-id": 508}), 507),
            optional("key_metadata", json!("bytes"), 519),
        ],
    })
}

/// `None` or `Some(v)` as the value of an optional (`["null", T]`) field.
pub(crate) fn opt(v: Option<Value>) -> Value {
    match v {
        None => Value::Union(0, Box::new(Value::Null)),
        Some(v) => Value::Union(1, Box::new(v)),
    }
}

fn zigzag(n: i64, out: &mut Vec<u8>) {
    super::varint::uvarint(super::varint::zigzag(n), out);
}

fn avro_bytes(b: &[u8], out: &mut Vec<u8>) {
    zigzag(b.len() as i64, out);
    out.extend_from_slice(b);
}

/// An Avro object container file of `records` with `schema` and the header `metadata`
/// (`avro.schema` and `avro.codec` are added), the keys written in sorted order.
pub(crate) fn container(
    schema: &Json,
    metadata: &[(&str, String)],
    marker: [u8; 16],
    records: Vec<Value>,
) -> Result<Vec<u8>> {
    let text = schema.to_string();
    let parsed = parse_schema(&text)?;
    container_with(&parsed, &text, metadata, marker, |w| {
        for r in records {
            w.append_value(r)?;
        }
        Ok(())
    })
}

/// Parse a schema built by this module.
pub(crate) fn parse_schema(text: &str) -> Result<Schema> {
    Schema::parse_str(text).map_err(|e| Error::IcebergMetadata {
        path: "(avro)".into(),
        reason: format!("schema: {e}"),
    })
}

/// The header of an object container of the schema whose JSON is `text`: `metadata` (plus
/// `avro.schema` and `avro.codec`) with the keys in sorted order, then `marker`.
fn header(text: &str, metadata: &[(&str, String)], marker: [u8; 16]) -> Vec<u8> {
    let mut header = b"Obj\x01".to_vec();
    let mut meta: Vec<(&str, &[u8])> = metadata
        .iter()
        .map(|(k, v)| (*k, v.as_bytes()))
        .chain([
            ("avro.schema", text.as_bytes()),
            ("avro.codec", &b"null"[..]),
        ])
        .collect();
    meta.sort_by_key(|(k, _)| *k);
    zigzag(meta.len() as i64, &mut header);
    for (k, v) in meta {
        avro_bytes(k.as_bytes(), &mut header);
        avro_bytes(v, &mut header);
    }
    zigzag(0, &mut header);
    header.extend_from_slice(&marker);
    header
}

/// An object container of `parsed` (whose JSON is `text`): the header written here, the
/// records by `fill` into the crate's writer.
pub(crate) fn container_with(
    parsed: &Schema,
    text: &str,
    metadata: &[(&str, String)],
    marker: [u8; 16],
    fill: impl FnOnce(&mut Writer<'_, Vec<u8>>) -> apache_avro::AvroResult<()>,
) -> Result<Vec<u8>> {
    let bad = |reason: String| Error::IcebergMetadata {
        path: "(avro)".into(),
        reason,
    };
    let mut w = Writer::builder()
        .schema(parsed)
        .writer(header(text, metadata, marker))
        .marker(marker)
        .has_header(true)
        .block_size(BLOCK_BYTES)
        .build()
        .map_err(|e| bad(e.to_string()))?;
    fill(&mut w).map_err(|e| bad(format!("record: {e}")))?;
    w.into_inner().map_err(|e| bad(e.to_string()))
}

/// A data block is closed once it holds this many bytes (the crate's default).
const BLOCK_BYTES: usize = 16_000;

/// An object container of records already encoded (each one datum of the schema whose JSON is
/// `text`, given by `records` as parts to concatenate), cut into blocks exactly as the crate's
/// writer cuts them, so its bytes are those [`container_with`] writes for the same records.
/// Lets a manifest reuse entries encoded by an earlier sync.
pub(crate) fn container_of_datums<'a>(
    text: &str,
    metadata: &[(&str, String)],
    marker: [u8; 16],
    records: impl IntoIterator<Item = [&'a [u8]; 2]>,
) -> Vec<u8> {
    let mut out = header(text, metadata, marker);
    let mut block: Vec<u8> = Vec::with_capacity(BLOCK_BYTES + 4096);
    let mut count = 0i64;
    let close = |out: &mut Vec<u8>, block: &mut Vec<u8>, count: &mut i64| {
        zigzag(*count, out);
        zigzag(block.len() as i64, out);
        out.extend_from_slice(block);
        out.extend_from_slice(&marker);
        block.clear();
        *count = 0;
    };
    for parts in records {
        for p in parts {
            block.extend_from_slice(p);
        }
        count += 1;
        if block.len() >= BLOCK_BYTES {
            close(&mut out, &mut block, &mut count);
        }
    }
    if count > 0 {
        close(&mut out, &mut block, &mut count);
    }
    out
}

/// An Avro `int` or `long` as its zig-zag varint.
pub(crate) fn zigzag_bytes(n: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    zigzag(n, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::Reader;

    #[test]
    fn containers_read_back_and_do_not_depend_on_the_run() {
        let schema = manifest_list_schema();
        let rec = |path: &str| {
            Value::Record(vec![
                ("manifest_path".into(), Value::String(path.into())),
                ("manifest_length".into(), Value::Long(10)),
                ("partition_spec_id".into(), Value::Int(0)),
                ("content".into(), Value::Int(0)),
                ("sequence_number".into(), Value::Long(3)),
                ("min_sequence_number".into(), Value::Long(1)),
                ("added_snapshot_id".into(), Value::Long(3)),
                ("added_files_count".into(), Value::Int(1)),
                ("existing_files_count".into(), Value::Int(0)),
                ("deleted_files_count".into(), Value::Int(0)),
                ("added_rows_count".into(), Value::Long(5)),
                ("existing_rows_count".into(), Value::Long(0)),
                ("deleted_rows_count".into(), Value::Long(0)),
                ("partitions".into(), opt(None)),
                ("key_metadata".into(), opt(None)),
            ])
        };
        let meta = [
            ("snapshot-id", "3".to_string()),
            ("format-version", "2".to_string()),
        ];
        let a = container(&schema, &meta, [7; 16], vec![rec("a"), rec("b")]).unwrap();
        let b = container(&schema, &meta, [7; 16], vec![rec("a"), rec("b")]).unwrap();
        assert_eq!(a, b);
        let reader = Reader::new(&a[..]).unwrap();
        assert_eq!(
            reader
                .user_metadata()
                .get("snapshot-id")
                .map(|v| v.as_slice()),
            Some(&b"3"[..])
        );
        let paths: Vec<String> = reader
            .map(|r| match r.unwrap() {
                Value::Record(fields) => match &fields[0].1 {
                    Value::String(s) => s.clone(),
                    v => panic!("{v:?}"),
                },
                v => panic!("{v:?}"),
            })
            .collect();
        assert_eq!(paths, ["a", "b"]);
        assert_eq!(avro_field_name("d"), "d");
        assert_eq!(avro_field_name("trip-month"), "trip_x2Dmonth");
        assert_eq!(avro_field_name("1x"), "_1x");
    }
}

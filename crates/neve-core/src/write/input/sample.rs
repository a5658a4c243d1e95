//! Inference rows of a JSON input, parsed against the table's schema: what a row brings that
//! the table does not know is kept (new columns, new nested fields, for schema inference),
//! everything else is skipped without being built. On a table whose schema covers the input,
//! which is the usual case, a sample row allocates little more than its keys.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::schema::{Column, ColumnType};

/// One inference row: which table columns it has, the parts of its nested values the table
/// does not declare (`extras`, by column index), and its columns the table does not have.
#[derive(Debug)]
pub(super) struct Sample {
    pub seen: Vec<bool>,
    pub extras: Vec<(usize, Value)>,
    pub rest: Map<String, Value>,
}

/// Parse one line as a sample; `Err(true)` when the line is JSON but not an object.
pub(super) fn parse(line: &[u8], typed: &[&Column]) -> Result<Sample, (bool, String)> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let sample = RowSeed { typed }
        .deserialize(&mut de)
        .and_then(|s| de.end().map(|_| s))
        .map_err(|e| (e.is_data(), e.to_string()))?;
    Ok(sample)
}

struct RowSeed<'a> {
    typed: &'a [&'a Column],
}

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = Sample;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Sample, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = Sample;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sample, A::Error> {
        let mut sample = Sample {
            seen: vec![false; self.typed.len()],
            extras: Vec::new(),
            rest: Map::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match self.typed.iter().position(|c| c.name == key) {
                Some(i) => {
                    sample.seen[i] = true;
                    let t = &self.typed[i].column_type;
                    if t.is_nested() {
                        if let Some(e) = map.next_value_seed(Unknown(t))? {
                            sample.extras.push((i, e));
                        }
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                None => {
                    let v = map.next_value::<Value>()?;
                    sample.rest.insert(key, v);
                }
            }
        }
        Ok(sample)
    }
}

/// The parts of a value that its type does not declare: fields a struct does not have, at any
/// depth through structs, lists and maps' values, with the structs that lead to them; `None`
/// when there are none. Map keys are data, never new fields: a map's part is the list of its
/// values' parts (`prefer_table` reads it so). Values of another shape than the type are the
/// decoder's to report, not inference's.
struct Unknown<'a>(&'a ColumnType);

impl<'de> DeserializeSeed<'de> for Unknown<'_> {
    type Value = Option<Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unknown<'_> {
    type Value = Option<Value>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
        if let ColumnType::Map(_, v) = self.0 {
            let mut kept = Vec::new();
            while map.next_key::<IgnoredAny>()?.is_some() {
                if v.column_type.is_nested() {
                    kept.extend(map.next_value_seed(Unknown(&v.column_type))?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            return Ok((!kept.is_empty()).then_some(Value::Array(kept)));
        }
        let ColumnType::Struct(fields) = self.0 else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(None);
        };
        let mut kept = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match fields.iter().find(|f| f.name == key) {
                Some(f) if f.column_type.is_nested() => {
                    if let Some(e) = map.next_value_seed(Unknown(&f.column_type))? {
                        kept.insert(key, e);
                    }
                }
                Some(_) => {
                    map.next_value::<IgnoredAny>()?;
                }
                None => {
                    let v = map.next_value::<Value>()?;
                    kept.insert(key, v);
                }
            }
        }
        Ok((!kept.is_empty()).then_some(Value::Object(kept)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<Value>, A::Error> {
        let ColumnType::List(e) = self.0 else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(None);
        };
        let mut kept = Vec::new();
        while let Some(x) = seq.next_element_seed(Unknown(&e.column_type))? {
            kept.extend(x);
        }
        Ok((!kept.is_empty()).then_some(Value::Array(kept)))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> Result<Option<Value>, E> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::parse_schema;

    #[test]
    fn only_what_the_table_lacks_is_kept() {
        let s = parse_schema(
            "id int64, user struct<plan string, geo struct<country string>>, \
             items list<struct<sku string>>, attrs map<string, string>",
        )
        .unwrap();
        let typed: Vec<&Column> = s.columns.iter().collect();
        let line = br#"{"id": 1, "user": {"plan": "pro", "geo": {"country": "NO", "city": "Oslo"}, "tier": 2},
            "items": [{"sku": "a"}, {"sku": "b", "qty": 3}], "attrs": {"k": "v"}, "new": [1, {"x": null}]}"#;
        let line: Vec<u8> = line.iter().copied().filter(|&b| b != b'\n').collect();
        let sample = parse(&line, &typed).unwrap();
        assert_eq!(sample.seen, vec![true, true, true, true]);
        let extras: Vec<String> = sample
            .extras
            .iter()
            .map(|(i, v)| format!("{i}:{v}"))
            .collect();
        assert_eq!(
            extras,
            vec![r#"1:{"geo":{"city":"Oslo"},"tier":2}"#, r#"2:[{"qty":3}]"#]
        );
        assert_eq!(
            Value::Object(sample.rest).to_string(),
            r#"{"new":[1,{"x":null}]}"#
        );
        // Nothing new: nothing kept.
        let plain = parse(
            br#"{"id": 2, "user": {"plan": "x"}, "attrs": {"a": {"b": 1}}}"#,
            &typed,
        )
        .unwrap();
        assert!(plain.extras.is_empty() && plain.rest.is_empty());
        assert_eq!(plain.seen, vec![true, true, false, true]);
        // A map's values: their new fields, as a list; keys are data.
        let s = parse_schema("m map<string, struct<a int64>>").unwrap();
        let typed: Vec<&Column> = s.columns.iter().collect();
        let sample = parse(br#"{"m": {"k": {"a": 1, "b": 2}, "j": {"a": 2}}}"#, &typed).unwrap();
        assert_eq!(sample.extras.len(), 1);
        assert_eq!(sample.extras[0].1.to_string(), r#"[{"b":2}]"#);
        // Not an object, or not JSON.
        assert!(parse(b"[1]", &typed).unwrap_err().0);
        assert!(!parse(b"{\"id\": ", &typed).unwrap_err().0);
        assert!(!parse(b"{\"id\": 1} x", &typed).unwrap_err().0);
    }
}

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    Float64Type, Int64Type, TimestampNanosecondType, TimestampSecondType, UInt64Type,
};

use super::*;

const NOW: i64 = 1_700_000_000_123_456_789;

fn one(text: &str) -> Measurement {
    let mut m = parse(text, Precision::Ns, 1, NOW).unwrap();
    assert_eq!(m.len(), 1);
    m.remove(0)
}

fn string(b: &RecordBatch, col: &str, row: usize) -> String {
    b.column_by_name(col)
        .unwrap()
        .as_string::<i32>()
        .value(row)
        .to_string()
}

#[test]
fn the_documentation_example() {
    let m = one("weather,location=us-midwest temperature=82 1465839830100400200");
    assert_eq!(m.name, "weather");
    assert_eq!(m.tags, vec!["location"]);
    assert_eq!(string(&m.batch, "location", 0), "us-midwest");
    let t = m.batch.column_by_name("temperature").unwrap();
    assert_eq!(t.as_primitive::<Float64Type>().value(0), 82.0);
    let time = m.batch.column_by_name("time").unwrap();
    assert_eq!(
        time.as_primitive::<TimestampNanosecondType>().value(0),
        1465839830100400200
    );
}

#[test]
fn escaping_as_the_documentation_says() {
    // From InfluxDB's line protocol reference: quotes stay in measurement names, commas,
    // equals signs and spaces are escaped in keys and tag values, only `"` and `\` in strings.
    let m = one(
        r#""measurement\ with\ quo⚡es\ and\ emoji",tag\ key\ with\ sp🚀ces=tag\,value\,with"commas" field_k\ey="string field value, only \" need be esc🍭ped""#,
    );
    assert_eq!(m.name, "\"measurement with quo⚡es and emoji\"");
    assert_eq!(m.tags, vec!["tag key with sp🚀ces"]);
    assert_eq!(
        string(&m.batch, "tag key with sp🚀ces", 0),
        "tag,value,with\"commas\""
    );
    assert_eq!(
        string(&m.batch, "field_k\\ey", 0),
        "string field value, only \" need be esc🍭ped"
    );
    // Missing timestamp: the receive time.
    let time = m.batch.column_by_name("time").unwrap();
    assert_eq!(time.as_primitive::<TimestampNanosecondType>().value(0), NOW);
    let m = one(r#"m,a\=b=c\ d s="x=1,y=\\2 z",n=1 5"#);
    assert_eq!(string(&m.batch, "a=b", 0), "c d");
    assert_eq!(string(&m.batch, "s", 0), "x=1,y=\\2 z");
}

#[test]
fn every_field_type() {
    let m =
        one("m f=1,g=-1.5e3,i=-7i,u=18446744073709551615u,s=\"a b, c\",b1=t,b2=FALSE,b3=True 10");
    let b = &m.batch;
    let col = |n: &str| b.column_by_name(n).unwrap().clone();
    assert_eq!(col("f").as_primitive::<Float64Type>().value(0), 1.0);
    assert_eq!(col("g").as_primitive::<Float64Type>().value(0), -1500.0);
    assert_eq!(col("i").as_primitive::<Int64Type>().value(0), -7);
    assert_eq!(col("u").as_primitive::<UInt64Type>().value(0), u64::MAX);
    assert_eq!(string(b, "s", 0), "a b, c");
    assert!(col("b1").as_boolean().value(0));
    assert!(!col("b2").as_boolean().value(0));
    assert!(col("b3").as_boolean().value(0));
}

#[test]
fn precisions_and_sparse_columns() {
    let text = "cpu,host=a usage=1 1700000000\n\n# a comment\ncpu,host=b,rack=r1 usage=2,temp=3i 1700000001\nmem free=5i 1700000002\n";
    let ms = parse(text, Precision::S, 1, NOW).unwrap();
    assert_eq!(
        ms.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        vec!["cpu", "mem"]
    );
    let cpu = &ms[0].batch;
    assert_eq!(ms[0].tags, vec!["host", "rack"]);
    assert_eq!(cpu.num_rows(), 2);
    assert!(cpu.column_by_name("rack").unwrap().is_null(0));
    assert!(cpu.column_by_name("temp").unwrap().is_null(0));
    let t = cpu.column_by_name("time").unwrap();
    assert_eq!(
        t.as_primitive::<TimestampSecondType>().value(1),
        1_700_000_001
    );
    // Minutes (`precision=m` of /write): seconds times 60.
    let (p, mult) = Precision::parse("m").unwrap();
    let m = parse("x v=1 2", p, mult, NOW).unwrap();
    let t = m[0].batch.column_by_name("time").unwrap();
    assert_eq!(t.as_primitive::<TimestampSecondType>().value(0), 120);
    assert!(Precision::parse("weeks").is_none());
}

#[test]
fn errors_name_the_line() {
    for (text, line, needle) in [
        ("m f=1\nm", 2, "field set"),
        ("m f=1 x", 1, "not an integer"),
        ("m f=1 99999999999999999999", 1, "out of range"),
        ("m f=abc", 1, "not a field value"),
        ("m f=1\nm f=1i", 2, "integer here but float"),
        ("m,t=1 f=1\nm t=2", 2, "field here but a tag"),
        ("m f=\"open", 1, "unterminated"),
        ("m f=99999999999999999999i", 1, "64-bit integer"),
        (",t=1 f=1", 1, "measurement"),
        ("m f=1,f=2", 1, "twice"),
        ("m f=9007199254740993", 1, "cannot hold exactly"),
        ("m f=1e-400", 1, "too close to zero"),
    ] {
        let e = parse(text, Precision::Ns, 1, NOW).unwrap_err();
        assert_eq!(e.line, line, "{text}: {e}");
        assert!(e.message.contains(needle), "{text}: {e}");
    }
}

#[test]
fn a_rows_error_names_the_request_line() {
    let m = parse("a v=1\nb v=1\na v=2\n\na v=3", Precision::Ns, 1, NOW).unwrap();
    assert_eq!(m[0].lines, vec![1, 3, 5]);
    assert_eq!(m[1].lines, vec![2]);
    let e = neve_core::Error::InvalidValue {
        input: "line protocol".into(),
        position: "row 3".into(),
        column: "v".into(),
        value: "3".into(),
        reason: "does not fit".into(),
    };
    let e = super::at_line(e, &m[0].lines);
    assert!(e.to_string().contains("at line 5, column 'v'"), "{e}");
}

/// Every precision of InfluxDB's `/write` (and its one-letter spellings): the timestamp `2`
/// is that many units after the epoch.
#[test]
fn every_precision_is_its_unit() {
    use arrow::datatypes::{DataType, TimeUnit, TimestampNanosecondType};
    for (p, ns) in [
        ("", 2),
        ("ns", 2),
        ("n", 2),
        ("us", 2_000),
        ("u", 2_000),
        ("µ", 2_000),
        ("ms", 2_000_000),
        ("s", 2_000_000_000),
        ("m", 120_000_000_000),
        ("h", 7_200_000_000_000),
    ] {
        let (precision, mult) = Precision::parse(p).unwrap();
        let m = parse("x v=1 2", precision, mult, NOW).unwrap();
        let t = m[0].batch.column_by_name("time").unwrap();
        let t = arrow::compute::cast(t, &DataType::Timestamp(TimeUnit::Nanosecond, None)).unwrap();
        assert_eq!(
            t.as_primitive::<TimestampNanosecondType>().value(0),
            ns,
            "precision '{p}'"
        );
    }
}

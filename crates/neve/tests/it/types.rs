//! Real-world data end to end through the CLI: declared schemas, nested types, values that
//! must not change on the way in, empty inputs, and `neve alter` (rename, drop, widen, not
//! null) read back by id.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Int64Array, ListBuilder, RecordBatch, StringBuilder, StructArray,
    TimestampNanosecondArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};

use crate::common::{info, local_table, neve, neve_ok, s3_table};

const EVENTS: &str = "id string not null, ts timestamp(UTC), \
    user struct<id int64, plan string, geo struct<country string, tags list<string>>>, \
    tags list<string>, attrs map<string, string>, amount decimal(18,2), \
    at time, uid uuid";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `neve sql` as NDJSON rows.
fn sql(table: &str, query: &str) -> Vec<serde_json::Value> {
    neve_ok(&[
        "sql",
        query,
        "--table",
        &format!("t={table}"),
        "--format",
        "ndjson",
    ])
    .lines()
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

fn version(table: &str) -> u64 {
    info(table)["version"].as_u64().unwrap()
}

const ROWS: &str = r#"{"id": "a", "ts": "2024-02-29T23:59:59.123456Z", "user": {"id": 7, "plan": "pro", "geo": {"country": "NO", "tags": ["x", "y"]}}, "tags": ["t1", "t2"], "attrs": {"k": "v"}, "amount": 12.50, "at": "12:34:56.000001", "uid": "550e8400-e29b-41d4-a716-446655440000"}
{"id": "b", "ts": "1969-07-20T20:17:40Z", "user": {"id": null, "plan": "free", "geo": null}, "tags": [], "attrs": {}, "amount": "-0.05", "at": null, "uid": null}
{"id": "c", "ts": null, "user": null, "tags": null, "attrs": null, "amount": null}
"#;

fn declared_nested_round_trip(table: &str) {
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        table,
        "--schema",
        EVENTS,
        "--partition-by",
        "day(ts)",
        "--sort-by",
        "id",
    ]);
    let text = neve_ok(&["info", table]);
    for want in [
        "id      string not null",
        "user    struct<id int64, plan string, geo struct<country string, tags list<string>>>",
        "attrs   map<string, string>",
        "amount  decimal(18,2)",
        "uid     fixed(16)",
    ] {
        assert!(text.contains(want), "info shows {want:?}:\n{text}");
    }
    assert_eq!(info(table)["format_version"], 2);
    let nd = write(dir.path(), "events.ndjson", ROWS);
    neve_ok(&["insert", table, &nd]);
    let rows = sql(
        table,
        "SELECT id, CAST(ts AS VARCHAR) AS ts, \"user\".plan AS plan, \"user\".geo.country AS country, \
         \"user\".geo.tags AS geo_tags, tags, attrs['k'] AS k, CAST(amount AS VARCHAR) AS amount, \
         CAST(at AS VARCHAR) AS at, uid IS NULL AS no_uid FROM t ORDER BY id",
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["ts"], "2024-02-29T23:59:59.123456Z");
    assert_eq!(rows[0]["plan"], "pro");
    assert_eq!(rows[0]["country"], "NO");
    assert_eq!(rows[0]["geo_tags"], serde_json::json!(["x", "y"]));
    assert_eq!(rows[0]["tags"], serde_json::json!(["t1", "t2"]));
    assert_eq!(rows[0]["k"], "v");
    assert_eq!(rows[0]["amount"], "12.50");
    assert_eq!(rows[0]["at"], "12:34:56.000001");
    assert_eq!(rows[0]["no_uid"], false);
    assert_eq!(rows[1]["ts"], "1969-07-20T20:17:40Z");
    assert_eq!(rows[1]["amount"], "-0.05");
    assert_eq!(rows[1]["tags"], serde_json::json!([]));
    assert!(rows[2]["plan"].is_null() && rows[2]["amount"].is_null());
    // unnest over a list column, grouping by a struct field.
    let plans = sql(
        table,
        "SELECT plan, count(*) AS n FROM (SELECT \"user\".plan AS plan, unnest(tags) AS tag FROM t) \
         GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(plans, vec![serde_json::json!({"plan": "pro", "n": 2})]);
    // The same question as users write it: `user.plan` unquoted, a lateral `CROSS JOIN unnest`.
    let plans = sql(
        table,
        "SELECT user.plan, count(*) AS n FROM t CROSS JOIN unnest(tags) GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(plans, vec![serde_json::json!({"plan": "pro", "n": 2})]);
    let tags = sql(
        table,
        "SELECT e.id, x.tag FROM t AS e, unnest(e.tags) AS x(tag) ORDER BY 1, 2",
    );
    assert_eq!(
        tags,
        vec![
            serde_json::json!({"id": "a", "tag": "t1"}),
            serde_json::json!({"id": "a", "tag": "t2"})
        ]
    );
    // The same rows as a JSON array and as CSV (scalars only) land the same way.
    let arr = write(
        dir.path(),
        "more.json",
        r#"[{"id": "d", "ts": null, "user": {"id": 1, "plan": "team", "geo": {"country": "SE", "tags": []}}, "tags": ["q"]},
            {"id": "e", "ts": "2024-01-01T00:00:00Z", "amount": 1}]"#,
    );
    let csv = write(
        dir.path(),
        "more.csv",
        "id,amount,at,ts\nf,3.10,23:59:59,2024-01-02 03:04:05\n",
    );
    neve_ok(&["insert", table, &arr, &csv]);
    let more = sql(table, "SELECT id, \"user\".geo.country AS c, CAST(amount AS VARCHAR) AS amount, CAST(at AS VARCHAR) AS at FROM t WHERE id > 'c' ORDER BY id");
    assert_eq!(more[0]["c"], "SE");
    assert_eq!(more[1]["amount"], "1.00");
    assert_eq!(more[2]["amount"], "3.10", "a CSV decimal stays a decimal");
    assert_eq!(more[2]["at"], "23:59:59");
}

#[test]
fn declared_nested_round_trip_local() {
    let (_d, t) = local_table("events");
    declared_nested_round_trip(&t);
}

#[test]
fn declared_nested_round_trip_minio() {
    declared_nested_round_trip(&s3_table("events"));
}

/// Runs a failing insert and checks the exit code, the error and that the version stayed.
fn refused(table: &str, args: &[&str], needles: &[&str]) {
    let before = version(table);
    let mut full = vec!["insert", table];
    full.extend_from_slice(args);
    let out = neve(&full);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{args:?}: {err}");
    for n in needles {
        assert!(
            err.contains(n),
            "{args:?}: error should mention {n:?}: {err}"
        );
    }
    assert_eq!(version(table), before, "{args:?} changed the table");
}

#[test]
fn lossy_values_are_refused_with_their_place() {
    let (_d, t) = local_table("lossy");
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        &t,
        "--schema",
        "n int64, small int8, f float64, ts timestamp(UTC), naive timestamp, d date, amount decimal(10,2)",
    ]);
    let ok = write(
        dir.path(),
        "ok.ndjson",
        "{\"n\": 1, \"small\": -128, \"d\": \"2024-02-29\", \"naive\": \"1900-01-01 00:00:00\"}\n",
    );
    neve_ok(&["insert", &t, &ok]);
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "frac.ndjson",
            "{\"n\": 1}\n{\"n\": 1.5}\n",
            &["line 2", "'n'", "1.5", "not an integer", "int64"],
        ),
        (
            "exp.ndjson",
            "{\"n\": 1e3}\n",
            &["line 1", "'n'", "1e3", "not an integer"],
        ),
        (
            "overflow.ndjson",
            "{\"small\": 128}\n",
            &["line 1", "'small'", "128", "out of range for int8"],
        ),
        (
            "nan.ndjson",
            "{\"n\": \"NaN\"}\n",
            &["'n'", "\"NaN\"", "not a number"],
        ),
        (
            "big.ndjson",
            "{\"n\": 9223372036854775808}\n",
            &["out of range for int64"],
        ),
        (
            "epoch.ndjson",
            "{\"ts\": 1700000000}\n",
            &["'ts'", "1700000000", "epoch unit"],
        ),
        (
            "offset.ndjson",
            "{\"naive\": \"2024-01-01T10:00:00+02:00\"}\n",
            &["'naive'", "UTC offset"],
        ),
        (
            "leap.ndjson",
            "{\"d\": \"2023-02-29\"}\n",
            &["'d'", "2023-02-29", "not a date"],
        ),
        (
            "cents.ndjson",
            "{\"amount\": 1.005}\n",
            &["'amount'", "1.005", "more than 2 decimal places"],
        ),
        (
            "float.ndjson",
            "{\"f\": 9007199254740993}\n",
            &["'f'", "cannot hold exactly"],
        ),
        (
            "type.csv",
            "n,small\n1,2\n2,x\n",
            &["line 3", "'small'", "\"x\"", "not a number"],
        ),
        (
            "frac.csv",
            "n\n2.7\n",
            &["line 2", "'n'", "2.7", "not an integer"],
        ),
        (
            "two.ndjson",
            "{\"n\": 1}\n{\"n\": 2} {\"n\": 3}\n",
            &["line 2", "malformed JSON"],
        ),
        (
            "elem.json",
            "[{\"n\": 1}, {\"n\": 2.5}]",
            &["element 2", "'n'", "2.5"],
        ),
    ];
    for (name, text, needles) in cases {
        let p = write(dir.path(), name, text);
        refused(&t, &[&p], needles);
    }
    // Past the rows read for inference, the decoder itself finds a line with two objects.
    let two = dir.path().join("two.ndjson");
    refused(
        &t,
        &[two.to_str().unwrap(), "--infer-rows", "1"],
        &["line 2", "one object per line"],
    );
    // With the unit named, an epoch number is a timestamp; nanoseconds must be whole micros.
    let ep = write(dir.path(), "epoch2.ndjson", "{\"ts\": 1700000000}\n");
    neve_ok(&["insert", &t, &ep, "--epoch-unit", "s"]);
    let rows = sql(
        &t,
        "SELECT CAST(ts AS VARCHAR) AS ts FROM t WHERE ts IS NOT NULL",
    );
    assert_eq!(
        rows,
        vec![serde_json::json!({"ts": "2023-11-14T22:13:20Z"})]
    );
    // A column can name its own unit; the insert's flag wins over it.
    let (_d2, t2) = local_table("epoch");
    neve_ok(&[
        "create",
        &t2,
        "--schema",
        "ts timestamp(UTC) epoch ms, n int64",
    ]);
    let ms = write(
        dir.path(),
        "ms.ndjson",
        "{\"ts\": 1700000000123, \"n\": 1}\n",
    );
    neve_ok(&["insert", &t2, &ms]);
    let s2 = write(dir.path(), "s2.ndjson", "{\"ts\": 1700000000, \"n\": 2}\n");
    neve_ok(&["insert", &t2, &s2, "--epoch-unit", "s"]);
    let rows = sql(&t2, "SELECT n, CAST(ts AS VARCHAR) AS ts FROM t ORDER BY n");
    assert_eq!(rows[0]["ts"], "2023-11-14T22:13:20.123Z");
    assert_eq!(rows[1]["ts"], "2023-11-14T22:13:20Z");
    let ns = write(dir.path(), "ns.ndjson", "{\"ts\": 1700000000000000001}\n");
    refused(&t, &[&ns, "--epoch-unit", "ns"], &["nanoseconds"]);
    // An offset into a zoned column is the same instant.
    let off = write(
        dir.path(),
        "off.ndjson",
        "{\"n\": 5, \"ts\": \"2024-01-01T02:00:00+02:00\"}\n",
    );
    neve_ok(&["insert", &t, &off]);
    let rows = sql(&t, "SELECT CAST(ts AS VARCHAR) AS ts FROM t WHERE n = 5");
    assert_eq!(
        rows,
        vec![serde_json::json!({"ts": "2024-01-01T00:00:00Z"})]
    );
    // A Parquet file with nanoseconds that are not whole microseconds.
    let pq = dir.path().join("ns.parquet");
    let schema = Arc::new(Schema::new(vec![Field::new(
        "naive",
        DataType::Timestamp(TimeUnit::Nanosecond, None),
        true,
    )]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(TimestampNanosecondArray::from(vec![1_000, 1_001]))],
    )
    .unwrap();
    crate::common::write_parquet(&pq, &b);
    refused(
        &t,
        &[pq.to_str().unwrap()],
        &["row 2", "'naive'", "nanoseconds"],
    );
}

#[test]
fn empty_inputs_insert_nothing() {
    let (_d, t) = local_table("empty");
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&["create", &t, "--partition-by", "month(ts) as d"]);
    for (name, text) in [
        ("e.ndjson", ""),
        ("e.csv", ""),
        ("h.csv", "id,ts\n"),
        ("ws.json", "  \n\n"),
        ("a.json", "[]"),
    ] {
        let p = write(dir.path(), name, text);
        let out = neve_ok(&["insert", &t, &p]);
        assert!(out.contains("nothing committed"), "{name}: {out}");
        assert_eq!(version(&t), 0, "{name} committed");
    }
}

#[test]
fn not_null_columns_and_strict_schemas() {
    let (_d, t) = local_table("strict");
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        &t,
        "--schema",
        "id string not null, user struct<plan string>",
        "--strict-schema",
    ]);
    let missing = write(dir.path(), "m.ndjson", "{\"user\": {\"plan\": \"x\"}}\n");
    refused(&t, &[&missing], &["'id'", "not null"]);
    let null = write(dir.path(), "n.ndjson", "{\"id\": \"a\"}\n{\"id\": null}\n");
    refused(&t, &[&null], &["line 2", "'id'", "null", "not null"]);
    let extra = write(
        dir.path(),
        "x.ndjson",
        "{\"id\": \"a\", \"user\": {\"plan\": \"x\", \"seats\": 3}}\n",
    );
    refused(&t, &[&extra], &["user.seats"]);
    let new_col = write(dir.path(), "y.ndjson", "{\"id\": \"a\", \"other\": 1}\n");
    refused(&t, &[&new_col], &["other"]);
    let good = write(
        dir.path(),
        "g.ndjson",
        "{\"id\": \"a\", \"user\": {\"plan\": \"x\"}}\n",
    );
    neve_ok(&["insert", &t, &good]);
}

fn alter(table: &str, change: &str) -> std::process::Output {
    let mut args = vec!["alter", table];
    args.extend(change.split(' '));
    neve(&args)
}

fn alter_reads_back_by_id(table: &str) {
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&["create", table, "--sort-by", "id"]);
    let v1 = write(
        dir.path(),
        "v1.ndjson",
        "{\"id\": 1, \"tags\": \"old\", \"amount\": 1.5, \"n\": 1}\n{\"id\": 2, \"n\": null}\n",
    );
    neve_ok(&["insert", table, &v1, "--create"]);
    // Rename: old files read under the new name, by field id.
    assert_eq!(
        info(table)["format_version"],
        1,
        "plain columns keep older readers working"
    );
    assert!(alter(table, "rename column tags to labels")
        .status
        .success());
    assert_eq!(
        info(table)["format_version"],
        2,
        "a rename needs readers that match by id"
    );
    let rows = sql(table, "SELECT id, labels FROM t ORDER BY id");
    assert_eq!(rows[0]["labels"], "old");
    let v2 = write(
        dir.path(),
        "v2.ndjson",
        "{\"id\": 3, \"labels\": \"new\", \"n\": 3}\n",
    );
    neve_ok(&["insert", table, &v2]);
    // Statistics follow the rename: a filter on the new name prunes and finds both files' rows.
    let rows = sql(
        table,
        "SELECT id FROM t WHERE labels = 'old' OR labels = 'new' ORDER BY id",
    );
    assert_eq!(
        rows,
        vec![serde_json::json!({"id": 1}), serde_json::json!({"id": 3})]
    );
    // Drop, then add a column of the same name: the old values stay gone.
    assert!(alter(table, "drop column labels").status.success());
    let out = neve_ok(&["alter", table, "add", "column", "labels string"]);
    assert!(out.contains("labels string"), "{out}");
    let rows = sql(
        table,
        "SELECT count(*) AS n FROM t WHERE labels IS NOT NULL",
    );
    assert_eq!(
        rows[0]["n"], 0,
        "a re-added column does not resurrect dropped values"
    );
    // Not null is refused while alive rows have nulls, then works once they are gone.
    let out = alter(table, "set not null n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("'n'") && err.contains("1 rows"), "{err}");
    neve_ok(&["delete", table, "--where", "n IS NULL"]);
    assert!(alter(table, "set not null n").status.success());
    let nulls = write(dir.path(), "v3.ndjson", "{\"id\": 4}\n");
    refused(table, &[&nulls], &["'n'", "not null"]);
    // Widening a decimal keeps the values; narrowing is refused.
    let out = alter(table, "widen amount float32");
    assert_eq!(out.status.code(), Some(65));
    let i = info(table);
    let schema = i["schema_ddl"].as_str().unwrap().to_string();
    assert!(schema.contains("n int64 not null"), "{schema}");
    let rows = sql(table, "SELECT id, amount FROM t ORDER BY id");
    assert_eq!(rows[0]["amount"], 1.5);
    // Merging after a rename and a drop keeps every row and value.
    neve_ok(&["merge", table, "--min-files", "2"]);
    let rows = sql(table, "SELECT id, amount FROM t ORDER BY id");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["amount"], 1.5);
}

fn nested_alter_reads_back_by_id(table: &str) {
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        table,
        "--schema",
        "id int64, user struct<id int64, plan string, geo struct<country string>>, \
         events list<struct<kind string, n int32>>",
        "--sort-by",
        "id",
    ]);
    let v1 = write(
        dir.path(),
        "v1.ndjson",
        "{\"id\": 1, \"user\": {\"id\": 10, \"plan\": \"pro\", \"geo\": {\"country\": \"NO\"}}, \"events\": [{\"kind\": \"a\", \"n\": 1}]}\n\
         {\"id\": 2, \"user\": {\"id\": 20, \"plan\": \"free\"}}\n",
    );
    neve_ok(&["insert", table, &v1]);
    // A struct field renamed: old files read it under the new name.
    assert!(alter(table, "rename column user.plan to tier")
        .status
        .success());
    assert!(
        !alter(table, "rename column events.kind to type")
            .status
            .success(),
        "a list's element fields are not a struct path"
    );
    // Into a list's elements with `[]`: a field added and one widened (a rename there is
    // refused, leaving the table as it was).
    let out = alter(table, "rename column events[].kind to type");
    assert_eq!(out.status.code(), Some(65));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inside a list"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    neve_ok(&["alter", table, "add", "column", "events[].weight float64"]);
    neve_ok(&["alter", table, "widen", "events[].n", "int64"]);
    let ddl = info(table)["schema_ddl"].as_str().unwrap().to_string();
    assert!(
        ddl.contains("events list<struct<kind string, n int64, weight float64>>"),
        "{ddl}"
    );
    let v2 = write(
        dir.path(),
        "v2.ndjson",
        "{\"id\": 3, \"user\": {\"id\": 30, \"tier\": \"team\"}, \"events\": [{\"kind\": \"b\", \"n\": 3000000000, \"weight\": 0.5}]}\n",
    );
    neve_ok(&["insert", table, &v2]);
    let rows = sql(
        table,
        "SELECT id, events[1]['kind'] AS kind, events[1]['n'] AS n, events[1]['weight'] AS w FROM t WHERE events IS NOT NULL ORDER BY id",
    );
    assert_eq!(
        rows,
        vec![
            serde_json::json!({"id": 1, "kind": "a", "n": 1, "w": null}),
            serde_json::json!({"id": 3, "kind": "b", "n": 3000000000i64, "w": 0.5}),
        ],
        "the files written before read the new field as null and the widened one as it was"
    );
    let rows = sql(table, "SELECT id, user.tier AS tier FROM t ORDER BY id");
    let tiers: Vec<_> = rows.iter().map(|r| r["tier"].clone()).collect();
    assert_eq!(tiers, vec!["pro", "free", "team"]);
    // The statistics moved with the name: a filter on it finds the old file's row.
    let rows = sql(table, "SELECT id FROM t WHERE user.tier = 'pro'");
    assert_eq!(rows, vec![serde_json::json!({"id": 1})]);
    // Dropped, then added again under the same name: the old values stay gone.
    assert!(alter(table, "drop column user.id").status.success());
    let out = alter(table, "drop column user.geo.country");
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only field"));
    neve_ok(&["alter", table, "add", "column", "user.id int64"]);
    let rows = sql(table, "SELECT count(user.id) AS n FROM t");
    assert_eq!(
        rows[0]["n"], 0,
        "a re-added field does not resurrect dropped values"
    );
    // The struct itself renamed: every field under it follows.
    assert!(alter(table, "rename column user to customer")
        .status
        .success());
    let ddl = info(table)["schema_ddl"].as_str().unwrap().to_string();
    assert!(
        ddl.contains("customer struct<tier string, geo struct<country string>, id int64>"),
        "{ddl}"
    );
    neve_ok(&["merge", table, "--min-files", "2"]);
    let rows = sql(
        table,
        "SELECT id, customer.tier AS tier, customer.geo.country AS c, customer.id AS cid FROM t ORDER BY id",
    );
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["tier"], "pro");
    assert_eq!(rows[0]["c"], "NO");
    assert!(rows[0]["cid"].is_null());
    assert_eq!(rows[2]["tier"], "team");
    let rows = sql(table, "SELECT id FROM t WHERE customer.tier = 'free'");
    assert_eq!(rows, vec![serde_json::json!({"id": 2})]);
}

#[test]
fn nested_alter_reads_back_by_id_local() {
    let (_d, t) = local_table("nested_alter");
    nested_alter_reads_back_by_id(&t);
}

#[test]
fn nested_alter_reads_back_by_id_minio() {
    nested_alter_reads_back_by_id(&s3_table("nested_alter"));
}

#[test]
fn alter_reads_back_by_id_local() {
    let (_d, t) = local_table("alter");
    alter_reads_back_by_id(&t);
}

#[test]
fn alter_reads_back_by_id_minio() {
    alter_reads_back_by_id(&s3_table("alter"));
}

/// Arrow inputs with nested types: large lists and structs go in as `list` and `struct`.
#[test]
fn parquet_with_nested_columns() {
    let (_d, t) = local_table("nested_pq");
    let dir = tempfile::tempdir().unwrap();
    let mut lb = ListBuilder::new(StringBuilder::new());
    lb.values().append_value("a");
    lb.values().append_value("b");
    lb.append(true);
    lb.append(false);
    let list: ArrayRef = Arc::new(lb.finish());
    let list = arrow::compute::cast(
        &list,
        &DataType::LargeList(Arc::new(Field::new("item", DataType::Utf8, true))),
    )
    .unwrap();
    let inner = StructArray::new(
        Fields::from(vec![Field::new("x", DataType::Int64, true)]),
        vec![Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef],
        None,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("l", list.data_type().clone(), true),
        Field::new("s", inner.data_type().clone(), true),
    ]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            list,
            Arc::new(inner),
        ],
    )
    .unwrap();
    let pq = dir.path().join("n.parquet");
    crate::common::write_parquet(&pq, &b);
    neve_ok(&["insert", &t, pq.to_str().unwrap(), "--create"]);
    let i = info(&t);
    assert_eq!(
        i["schema_ddl"],
        "id int64, l list<string>, s struct<x int64>"
    );
    let rows = sql(&t, "SELECT id, l, s.x AS x FROM t ORDER BY id");
    assert_eq!(rows[0]["l"], serde_json::json!(["a", "b"]));
    assert_eq!(rows[0]["x"], 1);
    assert!(rows[1]["l"].is_null() && rows[1]["x"].is_null());
    // Sorting and partitioning by a nested column is refused.
    let out = neve(&[
        "create",
        &format!("{t}2"),
        "--schema",
        "s struct<x int64>",
        "--sort-by",
        "s",
    ]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("primitive"));
}

/// Writer processes adding columns at once: those adding the same column agree on its id;
/// those adding different ones conflict, and each insert is written again against the new
/// schema until it commits. Every value lands under its own column.
fn concurrent_new_columns(table: &str) {
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        table,
        "--schema",
        "k int64 not null",
        "--sort-by",
        "k",
    ]);
    let writers = 6;
    let spawn = |i: usize, column: String| {
        let text: String = (0..50)
            .map(|j| format!("{{\"k\": {}, \"{column}\": \"w{i}\"}}\n", i * 1000 + j))
            .collect();
        let path = write(dir.path(), &format!("w{i}.ndjson"), &text);
        std::process::Command::new(crate::common::neve_bin())
            .args(["insert", table, &path])
            .output()
            .expect("run neve")
    };
    // Round 1: every writer adds the same column.
    let outs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..writers)
            .map(|i| s.spawn(move || spawn(i, "same".into())))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let rows = sql(
        table,
        "SELECT count(*) AS n, count(DISTINCT same) AS d FROM t",
    );
    assert_eq!(rows[0]["n"], writers * 50);
    assert_eq!(rows[0]["d"], writers);
    // Round 2: each writer adds its own column.
    let outs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..writers)
            .map(|i| s.spawn(move || spawn(writers + i, format!("own{i}"))))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, o) in outs.iter().enumerate() {
        assert!(
            o.status.success(),
            "writer {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let w = writers + i;
        let values = sql(
            table,
            &format!("SELECT count(*) AS n FROM t WHERE own{i} = 'w{w}'"),
        );
        assert_eq!(values[0]["n"], 50, "writer {w}'s values are under own{i}");
    }
    assert_eq!(
        sql(table, "SELECT count(*) AS n FROM t")[0]["n"],
        2 * writers * 50
    );
    // No column holds another writer's values.
    let schema = info(table)["schema_ddl"].as_str().unwrap().to_string();
    for i in 0..writers {
        let column = format!("own{i}");
        if schema.contains(&column) {
            let stray = sql(
                table,
                &format!(
                    "SELECT count(*) AS n FROM t WHERE {column} IS NOT NULL AND {column} <> 'w{}'",
                    writers + i
                ),
            );
            assert_eq!(stray[0]["n"], 0, "{column} holds only its writer's values");
        }
    }
}

#[test]
fn concurrent_new_columns_local() {
    let (_d, t) = local_table("conc");
    concurrent_new_columns(&t);
}

#[test]
fn concurrent_new_columns_minio() {
    concurrent_new_columns(&s3_table("conc"));
}

/// NDJSON past one chunk (65,536 lines) is decoded in parallel: every row arrives once, and
/// an error deep in the input names its line.
#[test]
fn ndjson_in_many_chunks() {
    let (_d, t) = local_table("chunks");
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&["create", &t, "--schema", "n int64 not null, s string"]);
    let rows = 200_000u64;
    let mut text = String::with_capacity(rows as usize * 24);
    for i in 0..rows {
        text.push_str(&format!("{{\"n\": {i}, \"s\": \"r{}\"}}\n", i % 7));
        if i % 50_000 == 0 {
            text.push('\n'); // blank lines do not count as rows
        }
    }
    let good = write(dir.path(), "good.ndjson", &text);
    neve_ok(&["insert", &t, &good]);
    let got = sql(
        &t,
        "SELECT count(*) AS c, sum(n) AS s, count(DISTINCT n) AS d FROM t",
    );
    assert_eq!(got[0]["c"], rows);
    assert_eq!(got[0]["d"], rows);
    assert_eq!(got[0]["s"], rows * (rows - 1) / 2);
    // A bad value on line 180,005 (past the inference rows and several chunks).
    let mut lines: Vec<&str> = text.lines().collect();
    let bad = "{\"n\": 1.5, \"s\": \"x\"}";
    lines[180_004] = bad;
    let bad_text = lines.join("\n") + "\n";
    let p = write(dir.path(), "bad.ndjson", &bad_text);
    refused(&t, &[&p], &["line 180005", "'n'", "1.5", "not an integer"]);
}

/// Partition values with spaces, `%`, `/`, non-ASCII letters or nothing at all are escaped into
/// folder names, and every reader finds the files again: queries, merge, gc (which must not
/// take them for orphans), and the paths given to other engines.
fn escaped_partition_values_round_trip(table: &str) {
    let dir = tempfile::tempdir().unwrap();
    neve_ok(&[
        "create",
        table,
        "--partition-by",
        "country",
        "--sort-by",
        "n",
    ]);
    let values = ["United States", "ä", "a/b", "50%", "", "x=y?#"];
    let mut rows = String::new();
    for (i, v) in values.iter().enumerate() {
        rows += &format!("{{\"country\": {}, \"n\": {i}}}\n", serde_json::json!(v));
    }
    for name in ["1.ndjson", "2.ndjson"] {
        neve_ok(&["insert", table, &write(dir.path(), name, &rows)]);
    }
    let check = |when: &str| {
        let got = sql(
            table,
            "SELECT country, count(*) AS c, sum(n) AS s FROM t GROUP BY country ORDER BY country",
        );
        let mut expected: Vec<(String, i64)> = values
            .iter()
            .enumerate()
            .map(|(i, v)| (v.to_string(), 2 * i as i64))
            .collect();
        expected.sort();
        let got: Vec<(String, i64)> = got
            .iter()
            .map(|r| {
                assert_eq!(r["c"], 2, "{when}: {r}");
                (
                    r["country"].as_str().unwrap().to_string(),
                    r["s"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, expected, "{when}");
        let one = sql(table, "SELECT n FROM t WHERE country = 'United States'");
        assert_eq!(one.len(), 2, "{when}: {one:?}");
    };
    check("after the inserts");
    neve_ok(&["merge", table, "--min-files", "2"]);
    check("after a merge");
    neve_ok(&["gc", table, "--grace", "0s", "--retention", "0s"]);
    check("after gc");
    assert_eq!(info(table)["files"], values.len() as u64);
    // The paths handed to other engines name files that exist.
    if !table.starts_with("s3://") {
        let listed = neve_ok(&["files", table, "--format", "plain"]);
        let paths: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(paths.len(), values.len(), "{listed}");
        for p in paths {
            assert!(std::path::Path::new(p).exists(), "{p} is not a file");
        }
    }
}

#[test]
fn escaped_partition_values_round_trip_local() {
    let (_d, t) = local_table("escaped");
    escaped_partition_values_round_trip(&t);
}

#[test]
fn escaped_partition_values_round_trip_s3() {
    escaped_partition_values_round_trip(&s3_table("escaped"));
}

use super::*;
use proptest::prelude::*;

fn t(s: &str) -> ColumnType {
    s.parse().unwrap()
}

fn col(name: impl Into<String>, ty: ColumnType) -> Column {
    Column::new(name, ty, true)
}

/// An input's schema: no ids, as `TableSchema::from_arrow` makes it.
fn input(columns: Vec<Column>) -> TableSchema {
    TableSchema {
        columns,
        ..Default::default()
    }
}

#[test]
fn type_names_round_trip() {
    for s in [
        "null",
        "boolean",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float32",
        "float64",
        "string",
        "binary",
        "date",
        "timestamp",
        "timestamp(UTC)",
        "decimal(10,2)",
        "time",
        "fixed(16)",
    ] {
        assert_eq!(t(s).to_string(), s);
        assert_eq!(ColumnType::from_arrow("c", &t(s).to_arrow()).unwrap(), t(s));
    }
    assert!("list<int>".parse::<ColumnType>().is_ok());
    assert!("list<".parse::<ColumnType>().is_err());
}

/// Every zone Arrow reads survives the log's text form: offsets from -12:00 to +14:00 and names
/// with '-', '+' or digits. A zone Arrow cannot read is refused where it comes in.
#[test]
fn time_zones_round_trip_through_the_log() {
    use arrow::datatypes::{DataType, TimeUnit};
    let mut zones: Vec<String> = (-24..=28)
        .map(|h: i32| {
            let m = h.abs() * 30;
            format!(
                "{}{:02}:{:02}",
                if h < 0 { '-' } else { '+' },
                m / 60,
                m % 60
            )
        })
        .collect();
    for z in [
        "UTC",
        "Etc/GMT+5",
        "Etc/GMT-14",
        "America/Port-au-Prince",
        "America/Argentina/Buenos_Aires",
        "Europe/Paris",
        "Asia/Kolkata",
    ] {
        zones.push(z.to_string());
    }
    for z in zones {
        let dt = DataType::Timestamp(TimeUnit::Microsecond, Some(z.as_str().into()));
        let ct = ColumnType::from_arrow("ts", &dt).unwrap();
        let back: ColumnType = ct.to_string().parse().unwrap();
        assert_eq!(back, ct, "{z}");
        assert_eq!(back.to_arrow(), dt, "{z}");
        let col = super::ddl::parse_column(&format!("ts {ct}")).unwrap();
        assert_eq!(col.column_type, ct, "{z}");
    }
    for bad in ["utc", "Z", "+25:00", "Not/AZone"] {
        let dt = DataType::Timestamp(TimeUnit::Microsecond, Some(bad.into()));
        let err = ColumnType::from_arrow("ts", &dt).unwrap_err().to_string();
        assert!(err.contains("'ts'") && err.contains(bad), "{err}");
    }
    // Logs of writers before this one, which split zones into words and numbers.
    assert_eq!(t("timestamp(-5:00)"), t("timestamp(-05:00)"));
    assert_eq!(t("timestamp(Etc/GMT+05)"), t("timestamp(Etc/GMT+5)"));
}

#[test]
fn widening_rules() {
    assert!(t("int8").widens_to(&t("int64")));
    assert!(t("uint32").widens_to(&t("int64")));
    assert!(!t("uint64").widens_to(&t("int64")));
    assert!(!t("int64").widens_to(&t("int32")));
    assert!(t("int32").widens_to(&t("float64")));
    assert!(!t("int64").widens_to(&t("float64")));
    assert!(t("float32").widens_to(&t("float64")));
    assert!(t("null").widens_to(&t("string")));
    assert!(!t("string").widens_to(&t("int64")));
    assert!(t("timestamp(UTC)").widens_to(&t("timestamp(Europe/Paris)")));
    assert!(t("timestamp(Europe/Paris)").widens_to(&t("timestamp(-05:00)")));
    assert!(!t("timestamp").widens_to(&t("timestamp(UTC)")));
    assert!(!t("timestamp(UTC)").widens_to(&t("timestamp")));
    // The table's zone is kept.
    assert_eq!(
        t("timestamp(Europe/Paris)").unify(&t("timestamp(UTC)")),
        Some(t("timestamp(Europe/Paris)"))
    );
    assert_eq!(t("uint8").unify(&t("int8")), Some(t("int16")));
    assert_eq!(t("int64").unify(&t("float64")), None);
}

#[test]
fn evolve_adds_and_widens_and_rejects() {
    let table = TableSchema::new(vec![col("a", t("int32")), col("b", t("string"))]);
    let inp = input(vec![col("a", t("int64")), col("c", t("float64"))]);
    let out = table.evolve(&inp, false).unwrap();
    assert_eq!(out.column("a").unwrap().column_type, t("int64"));
    assert_eq!(out.columns.len(), 3);
    assert_eq!(out.columns[2].name, "c");
    let err = table.evolve(&inp, true).unwrap_err();
    assert!(err.to_string().contains("c"), "{err}");
    // Strict: a wider input leaves the table's type (values are narrowed on the way in).
    let wider = input(vec![col("a", t("int64"))]);
    let held = table.evolve(&wider, true).unwrap();
    assert_eq!(held.column("a").unwrap().column_type, t("int32"));
    assert!(table
        .evolve(&input(vec![col("b", t("int64"))]), true)
        .is_err());

    let bad = input(vec![col("b", t("int64"))]);
    let err = table.evolve(&bad, false).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("'b'") && msg.contains("string") && msg.contains("int64"),
        "{msg}"
    );
}

fn any_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        Just(t("null")),
        Just(t("boolean")),
        Just(t("int8")),
        Just(t("int16")),
        Just(t("int32")),
        Just(t("int64")),
        Just(t("uint8")),
        Just(t("uint16")),
        Just(t("uint32")),
        Just(t("uint64")),
        Just(t("float32")),
        Just(t("float64")),
        Just(t("string")),
        Just(t("binary")),
        Just(t("date")),
        Just(t("timestamp")),
        Just(t("time")),
        Just(t("fixed(16)")),
        Just(t("decimal(10,2)")),
        Just(t("decimal(12,4)")),
        Just(t("decimal(38,0)")),
    ]
}

proptest! {
    /// Unification is symmetric and both sides widen losslessly to the result.
    #[test]
    fn unify_is_symmetric_and_lossless(a in any_type(), b in any_type()) {
        let ab = a.unify(&b);
        prop_assert_eq!(ab.clone(), b.unify(&a));
        if let Some(u) = ab {
            prop_assert!(a.widens_to(&u));
            prop_assert!(b.widens_to(&u));
        }
    }

    /// Widening is transitive, so a chain of evolutions never loses values.
    #[test]
    fn widening_is_transitive(a in any_type(), b in any_type(), c in any_type()) {
        if a.widens_to(&b) && b.widens_to(&c) {
            prop_assert!(a.widens_to(&c));
        }
    }

    /// Evolving by any sequence of schemas keeps every earlier column and only widens types.
    #[test]
    fn evolution_only_widens(types in proptest::collection::vec((0usize..4, any_type()), 1..12)) {
        let mut table = TableSchema::default();
        for (c, ty) in types {
            let inp = input(vec![col(format!("c{c}"), ty)]);
            match table.evolve(&inp, false) {
                Ok(next) => {
                    for c in &table.columns {
                        let n = next.column(&c.name).unwrap();
                        prop_assert!(c.column_type.widens_to(&n.column_type));
                    }
                    table = next;
                }
                Err(Error::SchemaConflict { .. }) => {}
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

#[test]
fn ddl_round_trips_nested_types() {
    let text = "id string not null, ts timestamp(UTC), user struct<id int64, plan string>, \
                tags list<string>, attrs map<string, string>, amount decimal(18,2), \
                deep list<struct<a map<string, list<int32 not null>>, \"odd name\" time>>, \
                u fixed(16)";
    let s = parse_schema(text).unwrap();
    assert_eq!(s.to_string(), text);
    assert_eq!(parse_schema(&s.to_string()).unwrap(), s);
    assert!(!s.column("id").unwrap().nullable);
    // Every column and nested field has its own id, depth first.
    let ids: Vec<u32> = s.fields().iter().map(|(_, c)| c.id).collect();
    assert_eq!(ids, (1..=ids.len() as u32).collect::<Vec<_>>());
    assert_eq!(s.last_column_id, ids.len() as u32);
    // A timestamp column may name the unit of epoch numbers given for it.
    let s = parse_schema("ts timestamp(UTC) not null epoch ms, b int64").unwrap();
    assert_eq!(
        s.to_string(),
        "ts timestamp(UTC) not null epoch ms, b int64"
    );
    assert_eq!(
        serde_json::from_str::<TableSchema>(&serde_json::to_string(&s).unwrap()).unwrap(),
        s
    );
    assert!(s.needs_v2());
    assert!(parse_schema("b int64 epoch s").is_err());
    assert!(parse_schema("t timestamp epoch weeks").is_err());
    // SQL spellings.
    let s = parse_schema("a bigint, b double, c varchar, d uuid, e array<int>").unwrap();
    assert_eq!(
        s.to_string(),
        "a int64, b float64, c string, d fixed(16), e list<int32>"
    );
}

#[test]
fn ddl_errors_say_what_is_wrong() {
    for (text, want) in [
        ("id strng", "unknown type 'strng'"),
        ("a int64, a string", "duplicate column 'a'"),
        ("a struct<b int64", "expected ','"),
        ("a decimal(40,2)", "precision must be 1 to 38"),
        (
            "a map<list<int64>, string>",
            "map keys must be a primitive type",
        ),
        ("a int64 not", "expected 'null' after 'not'"),
        ("a timestamp(Mars/Olympus)", "timestamp(Mars/Olympus)"),
    ] {
        let e = parse_schema(text).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn log_form_of_nested_types() {
    let s = parse_schema(
        "user struct<id int64 not null>, tags list<string>, m map<string, float64 not null>",
    )
    .unwrap();
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(
        json,
        r#"{"columns":[{"id":1,"name":"user","type":{"type":"struct","fields":[{"id":2,"name":"id","type":"int64","nullable":false}]}},{"id":3,"name":"tags","type":{"type":"list","elementId":4,"element":"string"}},{"id":5,"name":"m","type":{"type":"map","keyId":6,"key":"string","valueId":7,"value":"float64","valueNullable":false}}],"lastColumnId":7}"#
    );
    let back: TableSchema = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
}

#[test]
fn schemas_written_before_ids_get_them_by_position() {
    let legacy = r#"{"columns":[{"name":"a","type":"int64"},{"name":"b","type":"string"}]}"#;
    let s: TableSchema = serde_json::from_str(legacy).unwrap();
    assert_eq!(s.columns[0].id, 1);
    assert_eq!(s.columns[1].id, 2);
    assert_eq!(
        s.name_mapped_ids, 2,
        "files without ids hold these columns by name"
    );
    assert!(!s.needs_v2());
}

#[test]
fn nested_fields_evolve_and_keep_ids() {
    let table = parse_schema("user struct<id int32, plan string>, tags list<int8>").unwrap();
    let arrow_like = input(vec![
        col("user", t("struct<id int64, country string>")),
        col("tags", t("list<int16>")),
    ]);
    let out = table.evolve(&arrow_like, false).unwrap();
    assert_eq!(
        out.to_string(),
        "user struct<id int64, plan string, country string>, tags list<int16>"
    );
    let user = out.column("user").unwrap();
    let ColumnType::Struct(fields) = &user.column_type else {
        panic!()
    };
    assert_eq!(
        (fields[0].id, fields[1].id),
        (2, 3),
        "existing fields keep their ids"
    );
    assert_eq!(
        fields[2].id, out.last_column_id,
        "a new field gets the next id"
    );
    // Strict tables refuse new nested fields too.
    let e = table.evolve(&arrow_like, true).unwrap_err().to_string();
    assert!(e.contains("user.country"), "{e}");
    // A struct cannot become a list.
    let e = table
        .evolve(&input(vec![col("user", t("list<int64>"))]), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'user'") && e.contains("struct<"), "{e}");
}

#[test]
fn written_ids_must_agree_with_the_table() {
    // The files of an insert were written with tags = id 2; a rename made id 2 `labels`.
    let written = parse_schema("a int64, tags string").unwrap();
    let table = written
        .alter(
            &AlterOp::RenameColumn {
                from: "tags".into(),
                to: "labels".into(),
            },
            true,
        )
        .unwrap();
    let e = table.evolve(&written, false).unwrap_err();
    assert!(matches!(e, Error::ConcurrentSchemaChange { .. }), "{e}");
    // The same schema evolving onto itself is fine.
    assert_eq!(written.evolve(&written, false).unwrap(), written);
    // A drop meanwhile: the column is not added back with its old id (its old values would
    // show again), at the top or in a struct, strict or not.
    let written =
        parse_schema("a int64, tags string, user struct<plan string, tier int32>").unwrap();
    for drop in ["tags", "user.tier"] {
        let table = written
            .alter(&AlterOp::DropColumn(drop.into()), true)
            .unwrap();
        for strict in [false, true] {
            let e = table.evolve(&written, strict).unwrap_err();
            assert!(
                matches!(e, Error::ConcurrentSchemaChange { .. }),
                "{drop}: {e}"
            );
            assert!(e.to_string().contains(drop), "{e}");
        }
    }
}

/// Empty names, and names equal but for case, are refused where they would be new; a table
/// that has them already goes on being written.
#[test]
fn new_names_must_be_non_empty_and_distinct_ignoring_case() {
    let table = TableSchema::new(vec![col("name", t("string"))]);
    let msg = |e: Error| e.to_string();
    let e = table
        .evolve(&input(vec![col("Name", t("string"))]), false)
        .unwrap_err();
    assert!(msg(e).contains("'Name' and 'name' differ only in case"));
    let e = table
        .evolve(&input(vec![col("", t("int64"))]), false)
        .unwrap_err();
    assert!(msg(e).contains("a column has an empty name"));
    let nested = input(vec![col("s", t("struct<a int64, A int64>"))]);
    let e = table.evolve(&nested, false).unwrap_err();
    assert!(msg(e).contains("'s.A' and 's.a'"), "case within a struct");
    // Already in the table (written before the check): inserts go on.
    let old = TableSchema::new(vec![col("x", t("int64")), col("X", t("int64"))]);
    old.evolve(&input(vec![col("x", t("int64"))]), false)
        .unwrap();
    // `--schema` and `alter` say the same.
    let e = parse_schema("\"\" int64").unwrap_err();
    assert!(msg(e).contains("empty name"));
    assert!(msg(parse_schema("a int64, A string").unwrap_err()).contains("differ only in case"));
    let op = |words: &[&str]| {
        AlterOp::parse(&words.iter().map(|w| w.to_string()).collect::<Vec<_>>()).unwrap()
    };
    let e = table
        .alter(&op(&["rename", "column", "name", "to", ""]), true)
        .unwrap_err();
    assert!(msg(e).contains("empty name"));
    let two = TableSchema::new(vec![col("name", t("string")), col("b", t("int64"))]);
    let e = two
        .alter(&op(&["rename", "column", "b", "to", "NAME"]), true)
        .unwrap_err();
    assert!(msg(e).contains("differ only in case"));
    let e = two
        .alter(&op(&["add", "column", "B string"]), true)
        .unwrap_err();
    assert!(msg(e).contains("differ only in case"));
}

#[test]
fn a_change_given_as_one_argument_is_split_as_the_shell_would() {
    let one = |text: &str| AlterOp::parse(&[text.to_string()]).unwrap();
    let words =
        |w: &[&str]| AlterOp::parse(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    assert_eq!(one("drop column name"), words(&["drop", "column", "name"]));
    assert_eq!(
        one("add column \"x string not null\""),
        words(&["add", "column", "x string not null"])
    );
    assert_eq!(
        one(" rename column \"a \"\"b\"\"\" to  c "),
        words(&["rename", "column", "a \"b\"", "to", "c"])
    );
    assert_eq!(one("set gc_grace=1h"), words(&["set", "gc_grace=1h"]));
    let e = AlterOp::parse(&["drop column \"name".to_string()]).unwrap_err();
    assert!(e.to_string().contains("not closed"), "{e}");
}

#[test]
fn alter_steps_into_list_elements() {
    let s = parse_schema(
        "id int64, events list<struct<kind string, n int32>>, grid list<list<struct<v int32>>>, tags list<string>",
    )
    .unwrap();
    let op = |words: &str| AlterOp::parse(&[words.to_string()]).unwrap();
    let added = s
        .alter(&op("add column events[].weight float64"), true)
        .unwrap();
    assert_eq!(
        added.to_string(),
        "id int64, events list<struct<kind string, n int32, weight float64>>, \
         grid list<list<struct<v int32>>>, tags list<string>"
    );
    assert!(
        added.last_column_id > s.last_column_id,
        "the new field has an id of its own"
    );
    let widened = s.alter(&op("widen events[].n int64"), true).unwrap();
    assert!(widened
        .to_string()
        .contains("events list<struct<kind string, n int64>>"));
    let deep = s.alter(&op("widen grid[][].v int64"), true).unwrap();
    assert!(deep
        .to_string()
        .contains("grid list<list<struct<v int64>>>"));
    let strict = parse_schema("events list<struct<kind string not null>>").unwrap();
    let nullable = strict
        .alter(&op("drop not null events[].kind"), true)
        .unwrap();
    assert_eq!(nullable.to_string(), "events list<struct<kind string>>");
    for (change, says) in [
        (
            "rename column events[].kind to type",
            "not renamed, dropped",
        ),
        ("drop column events[].kind", "not renamed, dropped"),
        (
            "set not null events[].kind",
            "not renamed, dropped or set not null",
        ),
        ("add column events.weight float64", "`events[].weight`"),
        ("add column tags[].x int64", "not a struct"),
        ("widen grid[].v int64", "no such column"),
        ("widen id[] int64", "no such column"),
    ] {
        let e = s.alter(&op(change), true).unwrap_err().to_string();
        assert!(e.contains(says), "{change}: {e}");
    }
}

#[test]
fn alter_changes_and_refusals() {
    let s = parse_schema(
        "id string, amount decimal(18,2), tags list<string>, user struct<plan string>",
    )
    .unwrap();
    let op = |words: &str| {
        AlterOp::parse(&words.split(' ').map(String::from).collect::<Vec<_>>()).unwrap()
    };
    let widened = s.alter(&op("widen amount decimal(28,2)"), true).unwrap();
    assert_eq!(
        widened.column("amount").unwrap().column_type,
        t("decimal(28,2)")
    );
    let e = s
        .alter(&op("widen amount decimal(18,3)"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not lossless"), "{e}");
    let renamed = s.alter(&op("rename column tags to labels"), true).unwrap();
    assert_eq!(
        renamed.column("labels").unwrap().id,
        s.column("tags").unwrap().id
    );
    let dropped = s.alter(&op("drop column tags"), true).unwrap();
    let readded = dropped
        .alter(
            &AlterOp::parse(&["add".into(), "column".into(), "tags string".into()]).unwrap(),
            true,
        )
        .unwrap();
    assert!(
        readded.column("tags").unwrap().id > s.last_column_id,
        "a new column never reuses an id"
    );
    let nested = s
        .alter(
            &AlterOp::parse(&["add".into(), "column".into(), "user.country string".into()])
                .unwrap(),
            true,
        )
        .unwrap();
    assert_eq!(nested.to_string(), "id string, amount decimal(18,2), tags list<string>, user struct<plan string, country string>");
    let e = s
        .alter(
            &AlterOp::parse(&["add".into(), "column".into(), "x int64 not null".into()]).unwrap(),
            true,
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("has rows"), "{e}");
    assert!(s
        .alter(&op("set not null id"), true)
        .unwrap()
        .column("id")
        .map(|c| !c.nullable)
        .unwrap());
    assert!(AlterOp::parse(&["frobnicate".into()]).is_err());
}

#[test]
fn nested_fields_rename_and_drop_by_id() {
    let s =
        parse_schema("id int64, user struct<plan string, geo struct<country string, city string>>")
            .unwrap();
    let op = |words: &str| {
        AlterOp::parse(&words.split(' ').map(String::from).collect::<Vec<_>>()).unwrap()
    };
    let id_of = |s: &TableSchema, path: &str| {
        s.fields()
            .into_iter()
            .find(|(p, _)| p == path)
            .map(|(_, c)| c.id)
    };
    let renamed = s
        .alter(&op("rename column user.plan to tier"), true)
        .unwrap();
    assert_eq!(id_of(&renamed, "user.tier"), id_of(&s, "user.plan"));
    // The full path of the new name is accepted too, within the same struct only.
    assert_eq!(
        s.alter(&op("rename column user.geo.city to user.geo.town"), true)
            .unwrap()
            .to_string(),
        "id int64, user struct<plan string, geo struct<country string, town string>>"
    );
    for (words, needle) in [
        ("rename column user.plan to geo", "has a field named 'geo'"),
        ("rename column user.plan to id.tier", "within its struct"),
        ("rename column user.nope to x", "no such column"),
        ("rename column id.x to y", "not a struct"),
        ("drop column user.nope", "no such column"),
    ] {
        let e = s.alter(&op(words), true).unwrap_err().to_string();
        assert!(e.contains(needle), "{words}: {e}");
    }
    // Statistics keys move with every path under a renamed struct, and go with a dropped one.
    let moved = s
        .alter(&op("rename column user to customer"), true)
        .unwrap();
    let changes = s.renames_and_drops(&moved);
    assert_eq!(
        changes.get("user.geo.country"),
        Some(&Some("customer.geo.country".to_string()))
    );
    assert_eq!(changes.get("id"), None);
    let dropped = s.alter(&op("drop column user.geo.city"), true).unwrap();
    assert_eq!(
        dropped.to_string(),
        "id int64, user struct<plan string, geo struct<country string>>"
    );
    assert_eq!(
        s.renames_and_drops(&dropped).get("user.geo.city"),
        Some(&None)
    );
    let e = dropped
        .alter(&op("drop column user.geo.country"), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("only field of 'user.geo'"), "{e}");
    // A dropped field added again is a new field: a new id.
    let readded = dropped
        .alter(
            &AlterOp::parse(&["add".into(), "column".into(), "user.geo.city string".into()])
                .unwrap(),
            true,
        )
        .unwrap();
    assert!(id_of(&readded, "user.geo.city").unwrap() > s.last_column_id);
}

#[test]
fn concurrent_inserts_adding_columns() {
    // Both inserts read a table with `k` (id 1) and wrote their files with a new column.
    let base = parse_schema("k int64").unwrap();
    let written_a = base
        .evolve(&input(vec![col("a", t("string"))]), false)
        .unwrap();
    let written_b = base
        .evolve(&input(vec![col("b", t("string"))]), false)
        .unwrap();
    let written_a2 = base
        .evolve(&input(vec![col("a", t("string"))]), false)
        .unwrap();
    assert_eq!(written_a.column("a").unwrap().id, 2);
    assert_eq!(written_b.column("b").unwrap().id, 2);
    // A commits first.
    let latest = base.evolve(&written_a, false).unwrap();
    // Another insert that added the same column got the same id: it commits too.
    assert_eq!(latest.evolve(&written_a2, false).unwrap(), latest);
    // B gave id 2 to another column: its files would be read as `a`. Refused, nothing lost.
    let e = latest.evolve(&written_b, false).unwrap_err();
    assert!(matches!(e, Error::ConcurrentSchemaChange { .. }), "{e}");
    assert!(e.to_string().contains("field id 2"), "{e}");
}

/// A column nested as deep as neve allows still fits the log's JSON and Arrow's schema format,
/// both read back; one level more is refused where it comes in, naming the column.
#[test]
fn nesting_is_bounded_by_what_the_log_and_arrow_read_back() {
    let nested = |depth: usize| {
        let mut ty = t("int64");
        for _ in 0..depth {
            ty = ColumnType::Struct(vec![col("a", ty)]);
        }
        ty
    };
    let table = TableSchema::new(vec![col("id", t("int64"))]);
    let max = super::MAX_NESTING;
    let ok = table
        .evolve(&input(vec![col("nest", nested(max))]), false)
        .unwrap();
    let json = serde_json::to_string(&ok).unwrap();
    let back: TableSchema = serde_json::from_str(&json).unwrap();
    assert_eq!(back, ok);
    let arrow_schema = ok.to_arrow();
    let mut buf = Vec::new();
    let mut w = arrow::ipc::writer::StreamWriter::try_new(&mut buf, &arrow_schema).unwrap();
    w.finish().unwrap();
    drop(w);
    let r = arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(buf), None).unwrap();
    assert_eq!(r.schema(), arrow_schema);
    let err = table
        .evolve(&input(vec![col("nest", nested(max + 1))]), false)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("'nest'") && err.contains("at most 32"),
        "{err}"
    );
    // In a list or a map too.
    let list = ColumnType::List(Box::new(col("element", nested(max))));
    assert!(table.evolve(&input(vec![col("l", list)]), false).is_err());
}

#[test]
fn a_table_keeps_at_most_max_fields_columns() {
    let table = TableSchema::new(vec![col("id", t("int64"))]);
    let wide = |n: usize| input((0..n).map(|i| col(format!("c{i}"), t("int64"))).collect());
    let max = super::MAX_FIELDS;
    assert_eq!(
        table.evolve(&wide(max - 1), false).unwrap().columns.len(),
        max
    );
    let err = table.evolve(&wide(max), false).unwrap_err().to_string();
    assert!(err.contains("at most 10000"), "{err}");
}

/// A top-level column whose name holds a dot (`user.id`, as a CSV header makes) is renamed,
/// widened, set not null and dropped by that name; a struct's field keeps its dotted path.
#[test]
fn top_level_names_with_dots_are_altered_by_name() {
    let s = parse_schema("a int32, user struct<plan string>, b string").unwrap();
    let op = |words: &str| {
        AlterOp::parse(&words.split(' ').map(String::from).collect::<Vec<_>>()).unwrap()
    };
    let dotted = s.alter(&op("rename column a to user.id"), true).unwrap();
    let id = s.column("a").unwrap().id;
    assert_eq!(dotted.column("user.id").unwrap().id, id);
    let widened = dotted.alter(&op("widen user.id int64"), true).unwrap();
    assert_eq!(widened.column("user.id").unwrap().column_type, t("int64"));
    let strict = widened.alter(&op("set not null user.id"), true).unwrap();
    assert!(!strict.column("user.id").unwrap().nullable);
    let back = strict
        .alter(&op("rename column user.id to a"), true)
        .unwrap();
    assert_eq!(back.column("a").unwrap().id, id);
    let dropped = strict.alter(&op("drop column user.id"), true).unwrap();
    assert!(dropped.column("user.id").is_none());
    assert!(dropped.column("user").is_some(), "the struct stays");
    // The struct's field is still reached through its path.
    let tier = strict
        .alter(&op("rename column user.plan to tier"), true)
        .unwrap();
    assert_eq!(
        tier.column("user").unwrap().column_type.to_string(),
        "struct<tier string>"
    );
}

/// A map's values do not gain fields: readers could not read the files written before (the
/// map is cast whole); the refusal says so. Lists of structs do, as struct columns do.
#[test]
fn map_values_do_not_gain_fields() {
    let table = TableSchema::new(vec![
        col("id", t("int64")),
        col("m", t("map<string, struct<a int64>>")),
    ]);
    let inp = input(vec![col("m", t("map<string, struct<a int64, b int64>>"))]);
    let e = table.evolve(&inp, false).unwrap_err();
    assert!(matches!(e, Error::SchemaConflict { .. }), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("m.value.b") && e.contains("cannot gain fields"),
        "{e}"
    );
    // The same values: accepted, nothing changed.
    let same = input(vec![col("m", t("map<string, struct<a int64>>"))]);
    assert_eq!(table.evolve(&same, false).unwrap(), table);
    let table = TableSchema::new(vec![col("l", t("list<struct<a int64>>"))]);
    let inp = input(vec![col("l", t("list<struct<a int64, b int64>>"))]);
    assert!(table.evolve(&inp, false).is_ok());
}

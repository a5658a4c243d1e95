use super::*;
use proptest::prelude::*;

fn t(s: &str) -> ColumnType {
    s.parse().unwrap()
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
    ] {
        assert_eq!(t(s).to_string(), s);
        assert_eq!(ColumnType::from_arrow("c", &t(s).to_arrow()).unwrap(), t(s));
    }
    assert!("list<int>".parse::<ColumnType>().is_err());
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
    assert_eq!(t("uint8").unify(&t("int8")), Some(t("int16")));
    assert_eq!(t("int64").unify(&t("float64")), None);
}

#[test]
fn evolve_adds_and_widens_and_rejects() {
    let table = TableSchema {
        columns: vec![
            Column {
                name: "a".into(),
                column_type: t("int32"),
            },
            Column {
                name: "b".into(),
                column_type: t("string"),
            },
        ],
    };
    let input = TableSchema {
        columns: vec![
            Column {
                name: "a".into(),
                column_type: t("int64"),
            },
            Column {
                name: "c".into(),
                column_type: t("float64"),
            },
        ],
    };
    let out = table.evolve(&input, false).unwrap();
    assert_eq!(out.column("a").unwrap().column_type, t("int64"));
    assert_eq!(out.columns.len(), 3);
    assert_eq!(out.columns[2].name, "c");
    let err = table.evolve(&input, true).unwrap_err();
    assert!(err.to_string().contains("c"), "{err}");

    let bad = TableSchema {
        columns: vec![Column {
            name: "b".into(),
            column_type: t("int64"),
        }],
    };
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
        for (col, ty) in types {
            let input = TableSchema { columns: vec![Column { name: format!("c{col}"), column_type: ty }] };
            match table.evolve(&input, false) {
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

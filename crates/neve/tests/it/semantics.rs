//! Tables with merge semantics through the CLI: exact reads before and after `neve merge`,
//! `--raw`, and specs and deletes that are refused with the reason.

use crate::common::{info, local_table, neve, neve_ok, s3_table};

fn csv(table: &str, query: &str, raw: bool) -> String {
    let mut args = vec!["sql", query, "--table", table, "--format", "csv"];
    if raw {
        args.push("--raw");
    }
    neve_ok(&args)
}

fn insert(table: &str, dir: &std::path::Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    neve_ok(&["insert", table, p.to_str().unwrap()]);
}

fn replace_flow(table: &str, dir: &std::path::Path) {
    neve_ok(&[
        "create",
        table,
        "--partition-by",
        "region",
        "--sort-by",
        "user_id,updated_at",
        "--schema",
        "region string, user_id int64, updated_at timestamp, plan string, is_deleted boolean",
        "--merge",
        "replace(key = [user_id], version = updated_at, deleted = is_deleted)",
    ]);
    let i = info(table);
    assert!(i.to_string().contains("replace"), "{i}");
    insert(
        table,
        dir,
        "a.ndjson",
        concat!(
            r#"{"region": "eu", "user_id": 1, "updated_at": "2026-01-01T00:00:00", "plan": "free"}"#,
            "\n",
            r#"{"region": "eu", "user_id": 2, "updated_at": "2026-01-01T00:00:00", "plan": "free"}"#,
            "\n",
            r#"{"region": "us", "user_id": 3, "updated_at": "2026-01-01T00:00:00", "plan": "free"}"#,
            "\n",
        ),
    );
    // An update, a stale update (older version: loses), a delete, a new key.
    insert(
        table,
        dir,
        "b.ndjson",
        concat!(
            r#"{"region": "eu", "user_id": 1, "updated_at": "2026-02-01T00:00:00", "plan": "pro"}"#,
            "\n",
            r#"{"region": "eu", "user_id": 2, "updated_at": "2025-12-01T00:00:00", "plan": "stale"}"#,
            "\n",
            r#"{"region": "us", "user_id": 3, "updated_at": "2026-02-01T00:00:00", "is_deleted": true}"#,
            "\n",
            r#"{"region": "us", "user_id": 4, "updated_at": "2026-02-01T00:00:00", "plan": "team"}"#,
            "\n",
        ),
    );
    let exact = "user_id,plan\n1,pro\n2,free\n4,team\n";
    let q = "SELECT user_id, plan FROM t ORDER BY user_id";
    let t = format!("t={table}");
    assert_eq!(csv(&t, q, false), exact);
    assert_eq!(csv(&t, "SELECT count(*) AS n FROM t", false), "n\n3\n");
    assert_eq!(csv(&t, "SELECT count(*) AS n FROM t", true), "n\n7\n");
    assert_eq!(
        csv(&t, "SELECT plan FROM t WHERE user_id = 2", false),
        "plan\nfree\n"
    );

    // Merging changes what is stored, never what is read.
    neve_ok(&["merge", table, "--min-files", "2"]);
    assert_eq!(csv(&t, q, false), exact);
    // One row per key, the deleted key's too (a later insert of an older version must still
    // lose to the delete).
    assert_eq!(csv(&t, "SELECT count(*) AS n FROM t", true), "n\n4\n");

    // Deletes name whole keys only.
    let out = neve(&["delete", table, "--where", "plan = 'free'"]);
    assert_eq!(out.status.code(), Some(65));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is_deleted = true"), "{err}");
    neve_ok(&["delete", table, "--where", "user_id = 4"]);
    assert_eq!(csv(&t, q, false), "user_id,plan\n1,pro\n2,free\n");
}

#[test]
fn replace_flow_local() {
    let (d, t) = local_table("users");
    replace_flow(&t, d.path());
}

#[test]
fn replace_flow_minio() {
    let d = tempfile::tempdir().unwrap();
    replace_flow(&s3_table("users"), d.path());
}

#[test]
fn bad_specs_are_refused_and_create_nothing() {
    let (_d, t) = local_table("bad");
    for (spec, needle) in [
        ("replace(key = [plan])", "must be a prefix of the sort key"),
        (
            "aggregate(key = [user_id], sum = [plan])",
            "sum needs a numeric column",
        ),
        (
            "replace(key = [user_id], deleted = plan)",
            "must be boolean",
        ),
        ("upsert(key = [user_id])", "unknown merge 'upsert'"),
    ] {
        let out = neve(&[
            "create",
            &t,
            "--sort-by",
            "user_id",
            "--schema",
            "user_id int64, plan string",
            "--merge",
            spec,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(65), "{spec}: {err}");
        assert!(err.contains(needle), "{spec}: {err}");
        assert!(
            !std::path::Path::new(&t).join("_log").exists(),
            "{spec} created the table"
        );
    }
}

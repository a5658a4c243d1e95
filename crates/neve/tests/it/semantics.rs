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

/// The torture run on a `replace` table on MinIO: three inserters writing versions of 400
/// shared keys (every version unique), two mergers, a GC loop, and two readers. A reader pins
/// the latest version and checks the exact read against the raw rows of that same version,
/// merged by SQL (the highest version per key): one consistent snapshot, merged exactly, whatever
/// merges and GCs are doing. At the end the exact read is the model's: per key the highest
/// acknowledged version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn torture_replace_minio() {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use crate::maintenance::{join_all, spawn_maintenance, torture_secs};

    let addr = s3_table("torture-replace");
    neve_ok(&[
        "create",
        &addr,
        "--partition-by",
        "month(ts) as m",
        "--sort-by",
        "id,v",
        "--schema",
        "id int64, v int64, ts timestamp, writer int64",
        "--merge",
        "replace(key = [id], version = v)",
        "--set",
        "checkpoint_interval=10",
    ]);
    let deadline = Instant::now() + Duration::from_secs(torture_secs());
    let stop = Arc::new(AtomicBool::new(false));
    let versions = Arc::new(AtomicU64::new(1));
    // Per key, the highest acknowledged version.
    let model = Arc::new(Mutex::new(BTreeMap::<i64, i64>::new()));
    let dir = tempfile::tempdir().unwrap();
    let mut threads: Vec<std::thread::JoinHandle<String>> = Vec::new();
    for w in 0..3i64 {
        let (addr, versions, model) = (addr.clone(), versions.clone(), model.clone());
        let dir = dir.path().to_path_buf();
        threads.push(std::thread::spawn(move || {
            let mut n = 0i64;
            while Instant::now() < deadline {
                let mut body = String::new();
                let mut rows = Vec::new();
                for i in 0..40 {
                    let id = (w * 7919 + n * 131 + i * 17) % 400;
                    let v = versions.fetch_add(1, Ordering::SeqCst) as i64;
                    let month = id % 12 + 1;
                    body.push_str(&format!(
                        "{{\"id\": {id}, \"v\": {v}, \"ts\": \"2021-{month:02}-15T10:00:00\", \"writer\": {w}}}\n"
                    ));
                    rows.push((id, v));
                }
                let f = dir.join(format!("w{w}-{n}.ndjson"));
                std::fs::write(&f, body).unwrap();
                let out = neve(&["insert", &addr, f.to_str().unwrap()]);
                assert!(out.status.success(), "insert: {}", String::from_utf8_lossy(&out.stderr));
                let mut m = model.lock().unwrap();
                for (id, v) in rows {
                    let e = m.entry(id).or_insert(v);
                    *e = (*e).max(v);
                }
                n += 1;
            }
            format!("inserter {w}: {n} inserts")
        }));
    }
    let gc_deleted = Arc::new(AtomicU64::new(0));
    threads.extend(spawn_maintenance(&addr, deadline, gc_deleted.clone()));
    for r in 0..2 {
        let (addr, stop) = (addr.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut queries = 0;
            while Instant::now() < deadline && !stop.load(Ordering::SeqCst) {
                let version = info(&addr)["version"].as_u64().unwrap().to_string();
                let t = format!("t={addr}");
                let q = |sql: &str, raw: bool| {
                    let mut args = vec!["sql", sql, "--table", &t, "--as-of", &version, "--format", "csv"];
                    if raw {
                        args.push("--raw");
                    }
                    let out = neve(&args);
                    assert!(out.status.success(), "reader {r}: {}", String::from_utf8_lossy(&out.stderr));
                    String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap_or("").to_string()
                };
                let exact = q("SELECT count(*), coalesce(sum(v), 0), count(DISTINCT id) FROM t", false);
                let merged_by_sql = q(
                    "SELECT count(*), coalesce(sum(m), 0), count(DISTINCT id) FROM (SELECT id, max(v) AS m FROM t GROUP BY id)",
                    true,
                );
                assert_eq!(exact, merged_by_sql, "reader {r} at version {version}");
                queries += 1;
            }
            format!("reader {r}: {queries} pinned queries")
        }));
    }
    join_all(threads, &stop);
    let want: String = model
        .lock()
        .unwrap()
        .iter()
        .map(|(id, v)| format!("{id},{v}\n"))
        .collect();
    assert!(want.lines().count() > 100, "inserts ran");
    let got = csv(
        &format!("t={addr}"),
        "SELECT id, v FROM t ORDER BY id",
        false,
    );
    assert_eq!(
        got,
        format!("id,v\n{want}"),
        "the highest acknowledged version of every key"
    );
    let history = crate::common::table(&addr).history(None).await.unwrap();
    assert!(
        history.iter().any(|c| c.info.operation == "MERGE"),
        "merges committed"
    );
}

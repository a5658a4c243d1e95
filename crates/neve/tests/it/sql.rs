//! `neve sql` end to end: every output format, time travel, warehouses, errors and exit codes,
//! on a local folder and on MinIO.

use crate::common::{local_table, neve, neve_ok, s3_table, write_ndjson};

/// Two inserts of ids 0..120 and 120..240, each id in month (id % 12) + 1 of 2021.
fn load(table: &str, dir: &std::path::Path) {
    neve_ok(&[
        "create",
        table,
        "--partition-by",
        "month(ts)",
        "--sort-by",
        "id",
    ]);
    for (i, ids) in [(0, 0..120), (1, 120..240)] {
        let p = dir.join(format!("in{i}.ndjson"));
        write_ndjson(&p, ids, i);
        neve_ok(&["insert", table, p.to_str().unwrap()]);
    }
}

fn sql(table: &str, query: &str, extra: &[&str]) -> String {
    let t = format!("t={table}");
    let mut args = vec!["sql", query, "--table", &t];
    args.extend_from_slice(extra);
    neve_ok(&args)
}

fn sql_flow(table: &str, dir: &std::path::Path) {
    load(table, dir);
    // Readable table.
    let out = sql(table, "SELECT count(*) AS n, sum(id) AS s FROM t", &[]);
    assert!(out.contains("| n   | s     |"), "{out}");
    assert!(out.contains("| 240 | 28680 |"), "{out}");
    assert!(out.trim_end().ends_with("(1 row)"), "{out}");

    // CSV, JSON, NDJSON.
    let out = sql(
        table,
        "SELECT extract(month FROM ts) AS m, count(*) AS n FROM t WHERE id < 24 GROUP BY 1 ORDER BY 1",
        &["--format", "csv"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "m,n");
    assert_eq!(lines.len(), 13);
    assert!(lines[1..].iter().all(|l| l.ends_with(",2")), "{out}");
    let out = sql(
        table,
        "SELECT id, writer FROM t WHERE id IN (5, 200) ORDER BY id",
        &["--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!([{"id": 5, "writer": 0}, {"id": 200, "writer": 1}])
    );
    let out = sql(
        table,
        "SELECT id FROM t ORDER BY id DESC LIMIT 3",
        &["--format", "ndjson"],
    );
    assert_eq!(out, "{\"id\":239}\n{\"id\":238}\n{\"id\":237}\n");

    // Parquet and Arrow to a file, read back.
    let pq = dir.join("out.parquet");
    sql(
        table,
        "SELECT id FROM t WHERE extract(month FROM ts) = 8 ORDER BY id",
        &["--format", "parquet", "--output", pq.to_str().unwrap()],
    );
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(&pq).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let ids: Vec<i64> = reader
        .flat_map(|b| {
            let b = b.unwrap();
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    assert_eq!(ids, (0..240).filter(|i| i % 12 == 7).collect::<Vec<_>>());
    let ipc = dir.join("out.arrow");
    sql(
        table,
        "SELECT * FROM t",
        &["--format", "arrow", "--output", ipc.to_str().unwrap()],
    );
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::fs::File::open(&ipc).unwrap(), None)
            .unwrap();
    let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 240);

    // Time travel: version 1 is the first insert.
    let out = sql(
        table,
        "SELECT count(*) AS n FROM t",
        &["--as-of", "1", "--format", "csv"],
    );
    assert_eq!(out, "n\n120\n");

    // count by month from the log: no data read.
    let t = format!("t={table}");
    let out = neve(&[
        "sql",
        "SELECT date_trunc('month', ts) AS m, count(*) FROM t GROUP BY 1",
        "--table",
        &t,
        "--format",
        "csv",
        "--stats",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("read 0 B"),
        "{stderr}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 13);

    // Errors: exit code, kind and position.
    let bad = |query: &str, code: i32, needles: &[&str]| {
        let out = neve(&["sql", query, "--table", &t]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{query}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{query}: missing '{n}' in {stderr}");
        }
    };
    bad("SELEC id FROM t", 65, &["SQL syntax error", "SELEC"]);
    bad(
        "SELECT nope FROM t",
        65,
        &["invalid query", "nope", "line 1, column 8"],
    );
    bad("SELECT * FROM other", 66, &["other", "not found"]);
    bad("SELECT id + 'x' FROM t", 65, &["invalid query"]);
}

#[test]
fn sql_flow_local() {
    let (dir, table) = local_table("sql");
    sql_flow(&table, dir.path());
}

#[test]
fn sql_flow_minio() {
    let dir = tempfile::tempdir().unwrap();
    sql_flow(&s3_table("sql"), dir.path());
}

#[test]
fn sql_warehouse_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("lake");
    let a = wh.join("alpha").display().to_string();
    let b = wh.join("beta").display().to_string();
    load(&a, dir.path());
    load(&b, dir.path());
    std::fs::create_dir_all(wh.join("not_a_table")).unwrap();
    let out = neve_ok(&[
        "sql",
        "SELECT (SELECT count(*) FROM alpha) + (SELECT count(*) FROM beta) AS n",
        "--warehouse",
        wh.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert_eq!(out, "n\n480\n");
    // A bare URL is named after its last segment.
    let out = neve_ok(&[
        "sql",
        "SELECT count(*) AS n FROM alpha",
        "--table",
        &a,
        "--format",
        "csv",
    ]);
    assert_eq!(out, "n\n240\n");
    // No table named: usage error.
    let out = neve(&["sql", "SELECT 1"]);
    assert_eq!(out.status.code(), Some(64));
    // A table that does not exist: not found.
    let missing = format!("m={}", dir.path().join("missing").display());
    let out = neve(&["sql", "SELECT 1", "--table", &missing]);
    assert_eq!(out.status.code(), Some(66));
    // The warehouse at a time before its tables: the table named is not found then, and the
    // answer says why (not that the warehouse has no tables).
    let out = neve(&[
        "sql",
        "SELECT count(*) FROM alpha",
        "--warehouse",
        wh.to_str().unwrap(),
        "--as-of",
        "2020-01-01T00:00:00Z",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(66), "{err}");
    assert!(
        err.contains("alpha") && !err.contains("no neve tables"),
        "{err}"
    );
}

/// A long chain of alternatives is planned by recursion: up to the limit it is answered, and
/// beyond it refused as a bad query (65), never a crash of the process.
#[test]
fn long_expression_chains_are_answered_or_refused_never_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, t) = local_table("chains");
    load(&t, dir.path());
    let chain = |n: usize| {
        (0..n)
            .map(|i| format!("id = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    };
    let out = sql(
        &t,
        &format!("SELECT count(*) AS n FROM t WHERE {}", chain(250)),
        &["--format", "csv"],
    );
    assert_eq!(out, "n\n240\n");
    let table = format!("t={t}");
    let long = format!("SELECT count(*) FROM t WHERE {}", chain(5000));
    let out = neve(&["sql", &long, "--table", &table]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("IN ("), "{err}");
    let out = neve(&["delete", &t, "--where", &chain(5000)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    let out = neve(&["info", &t, "--json"]);
    assert!(out.status.success());
}

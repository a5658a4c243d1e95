//! The CLI end to end: create/insert/info/files/history, every input format, bad input.

use std::path::Path;

use crate::common::{info, local_table, neve, neve_ok, s3_table, write_ndjson};

/// A table with a month partition on `ts`, sorted by id.
fn create(table: &str) {
    neve_ok(&[
        "create",
        table,
        "--partition-by",
        "month(ts) as d",
        "--sort-by",
        "id",
    ]);
}

fn version(table: &str) -> u64 {
    info(table)["version"].as_u64().unwrap()
}

/// Every data file referenced by the log, and every file under _data/ (local tables).
fn data_files(dir: &Path) -> usize {
    fn walk(p: &Path) -> usize {
        std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .map(|e| {
                        if e.path().is_dir() {
                            walk(&e.path())
                        } else {
                            1
                        }
                    })
                    .sum()
            })
            .unwrap_or(0)
    }
    walk(&dir.join("_data"))
}

fn cli_flow(table: &str, dir: &Path) {
    create(table);
    let nd = dir.join("a.ndjson");
    write_ndjson(&nd, 0..100, 1);
    let csv = dir.join("b.csv");
    std::fs::write(
        &csv,
        "id,ts,note\n100,2021-03-01 00:00:00,x\n101,2021-04-01 12:30:00,\n",
    )
    .unwrap();
    let json = dir.join("c.json");
    std::fs::write(
        &json,
        r#"[{"id": 102, "ts": "2021-05-05T05:05:05"}, {"id": 103, "ts": null}]"#,
    )
    .unwrap();
    let out = neve_ok(&[
        "insert",
        table,
        nd.to_str().unwrap(),
        csv.to_str().unwrap(),
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("inserted 104 rows"), "{out}");
    let i = info(table);
    assert_eq!(i["version"], 1);
    assert_eq!(i["rows"], 104);
    // 12 months from the NDJSON, March..May overlap, plus the null partition.
    assert_eq!(i["partitions"], 13);
    let cols: Vec<String> = i["schema"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c["name"].as_str().unwrap(),
                c["type"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        cols,
        ["id:int64", "writer:int64", "ts:timestamp", "note:string"]
    );
    assert!(i["files"].as_u64().unwrap() >= 13);
    assert!(i["bytes"].as_u64().unwrap() > 0);
    // Parquet and Arrow inputs, through stdin too.
    let pq = dir.join("gen.parquet");
    neve_ok(&["bench", "gen", pq.to_str().unwrap(), "--rows", "500"]);
    let other = format!("{table}-taxi");
    neve_ok(&[
        "create",
        &other,
        "--partition-by",
        "month(trip_start_timestamp)",
        "--sort-by",
        "payment_type,trip_start_timestamp",
    ]);
    neve_ok(&["insert", &other, pq.to_str().unwrap()]);
    let arrow_file = dir.join("gen.arrow");
    neve_ok(&[
        "bench",
        "gen",
        arrow_file.to_str().unwrap(),
        "--rows",
        "300",
    ]);
    let status = std::process::Command::new(crate::common::neve_bin())
        .args(["insert", &other, "-"])
        .stdin(std::fs::File::open(&arrow_file).unwrap())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let ti = info(&other);
    assert_eq!(ti["rows"], 800);
    // A multi-batch input smaller than a chunk makes one file per partition, not one per batch.
    let many = dir.join("many.arrow");
    neve_ok(&["bench", "gen", many.to_str().unwrap(), "--rows", "140000"]);
    let chunked = format!("{table}-chunked");
    neve_ok(&[
        "create",
        &chunked,
        "--partition-by",
        "year(trip_start_timestamp)",
    ]);
    neve_ok(&["insert", &chunked, many.to_str().unwrap()]);
    let ci = info(&chunked);
    assert_eq!(ci["rows"], 140_000);
    assert_eq!(ci["partitions"], 11);
    assert_eq!(
        ci["files"], 11,
        "one file per partition for a 3-batch input"
    );
    assert_eq!(ti["version"], 2);
    let partition_names: Vec<&str> = ti["partition_details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["partition"].as_str().unwrap())
        .collect();
    assert!(
        partition_names
            .iter()
            .all(|p| p.starts_with("trip_start_timestamp_month=20")),
        "{partition_names:?}"
    );
    // History and time travel.
    let h = neve_ok(&["history", &other, "--json"]);
    let lines: Vec<serde_json::Value> = h
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| l["operation"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["CREATE", "INSERT", "INSERT"]
    );
    assert_eq!(lines[2]["rows_added"], 300);
    let at1: serde_json::Value =
        serde_json::from_str(&neve_ok(&["info", &other, "--json", "--as-of", "1"])).unwrap();
    assert_eq!(at1["rows"], 500);
    let ts = lines[1]["timestamp"].as_str().unwrap();
    let at_ts: serde_json::Value =
        serde_json::from_str(&neve_ok(&["info", &other, "--json", "--as-of", ts])).unwrap();
    assert_eq!(at_ts["version"], 1);
    // Files in each format.
    let plain = neve_ok(&["files", &other, "--as-of", "1"]);
    assert_eq!(plain.lines().count() as u64, at1["files"].as_u64().unwrap());
    let json: serde_json::Value =
        serde_json::from_str(&neve_ok(&["files", &other, "--format", "json"])).unwrap();
    let total: u64 = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rows"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 800);
    let duck = neve_ok(&["files", &other, "--format", "duckdb"]);
    assert!(
        duck.starts_with("read_parquet(['") && duck.contains("union_by_name = true"),
        "{duck}"
    );
    let ch = neve_ok(&["files", &other, "--format", "clickhouse"]);
    assert!(ch.contains("'Parquet')"), "{ch}");
}

#[test]
fn cli_flow_local() {
    let (d, t) = local_table("flow");
    cli_flow(&t, d.path());
    assert!(Path::new(&t)
        .join("_log/00000000000000000001.json")
        .exists());
}

#[test]
fn cli_flow_minio() {
    let d = tempfile::tempdir().unwrap();
    cli_flow(&s3_table("flow"), d.path());
}

/// Runs a failing insert and checks the error, the exit code and that nothing changed.
fn rejected(table: &str, args: &[&str], code: i32, needles: &[&str]) {
    let before = info(table);
    let mut full = vec!["insert", table];
    full.extend_from_slice(args);
    let out = neve(&full);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    for n in needles {
        assert!(
            err.contains(n),
            "{args:?}: error should mention {n:?}: {err}"
        );
    }
    let after = info(table);
    assert_eq!(
        after["version"], before["version"],
        "{args:?} changed the table"
    );
    assert_eq!(after["files"], before["files"]);
}

fn bad_input(table: &str, dir: &Path, local_dir: Option<&Path>) {
    create(table);
    let good = dir.join("good.ndjson");
    write_ndjson(&good, 0..10, 1);
    neve_ok(&["insert", table, good.to_str().unwrap()]);
    let files_before = local_dir.map(data_files);
    let w = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let csv_fields = w(
        "fields.csv",
        "id,ts\n1,2021-01-01 00:00:00\n2,2021-01-01 00:00:00,extra\n",
    );
    rejected(table, &[&csv_fields], 65, &["fields.csv", "line 3"]);
    let csv_type = w(
        "type.csv",
        "id,ts\n1,2021-01-01 00:00:00\nabc,2021-01-01 00:00:00\n",
    );
    rejected(
        table,
        &[&csv_type],
        65,
        &["type.csv", "line 3", "'id'", "abc"],
    );
    let nd_bad = w("bad.ndjson", "{\"id\": 1, \"ts\": \"2021-01-01T00:00:00\"}\n{\"id\": 2, \"ts\": \"2021-01-01T00:00:00\"}\n{\"id\": 3, \"ts\": \n");
    rejected(table, &[&nd_bad], 65, &["bad.ndjson", "line 3"]);
    let nd_type = w("type.ndjson", "{\"id\": 1, \"ts\": \"2021-01-01T00:00:00\"}\n{\"id\": \"x\", \"ts\": \"2021-01-01T00:00:00\"}\n");
    rejected(table, &[&nd_type], 65, &["type.ndjson", "line 2", "id"]);
    let no_part = w("nopart.ndjson", "{\"id\": 1}\n");
    rejected(
        table,
        &[&no_part],
        65,
        &["nopart.ndjson", "'ts'", "partitioned by"],
    );
    let unknown = w("blob.xyz", "\u{1}\u{2}\u{3}binary");
    rejected(
        table,
        &[&unknown],
        65,
        &["unknown input format", "blob.xyz"],
    );
    let missing = dir.join("missing.csv");
    rejected(
        table,
        &[missing.to_str().unwrap()],
        66,
        &["cannot read input", "missing.csv"],
    );
    let forced = w("really.csv", "id,ts\n1,2021-01-01 00:00:00\n");
    rejected(
        table,
        &[&forced, "--format", "parquet"],
        65,
        &["really.csv", "Parquet"],
    );
    // A good file with a bad one: nothing from the good one is committed either.
    rejected(
        table,
        &[good.to_str().unwrap(), &csv_type],
        65,
        &["type.csv"],
    );
    // Typed input whose column conflicts with the table.
    let pq = dir.join("conflict.parquet");
    {
        use std::sync::Arc;
        let schema = Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Utf8, true),
            arrow::datatypes::Field::new(
                "ts",
                arrow::datatypes::DataType::Timestamp(
                    arrow::datatypes::TimeUnit::Microsecond,
                    None,
                ),
                true,
            ),
        ]));
        let b = arrow::array::RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(arrow::array::StringArray::from(vec!["x"])),
                Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![0])),
            ],
        )
        .unwrap();
        crate::common::write_parquet(&pq, &b);
    }
    rejected(
        table,
        &[pq.to_str().unwrap()],
        65,
        &["schema conflict", "'id'", "int64", "string"],
    );
    if let (Some(d), Some(before)) = (local_dir, files_before) {
        assert_eq!(
            data_files(d),
            before,
            "failed inserts left no data files behind"
        );
    }
    // And the table still takes good input.
    neve_ok(&["insert", table, good.to_str().unwrap()]);
    assert_eq!(info(table)["rows"], 20);
}

#[test]
fn bad_input_local() {
    let (_d, t) = local_table("bad");
    let dir = tempfile::tempdir().unwrap();
    bad_input(&t, dir.path(), Some(Path::new(&t)));
}

#[test]
fn bad_input_minio() {
    let dir = tempfile::tempdir().unwrap();
    bad_input(&s3_table("bad"), dir.path(), None);
}

#[test]
fn usage_errors() {
    let (_d, t) = local_table("usage");
    let out = neve(&["info", &t]);
    assert_eq!(out.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no neve table"));
    let out = neve(&["create", &t, "--partition-by", "frob(x)"]);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown transform 'frob'"));
    create(&t);
    // A table that exists cannot be created, however often it is tried: not 75 (try again).
    let out = neve(&["create", &t]);
    assert_eq!(out.status.code(), Some(73));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = neve(&["info", &t, "--as-of", "7"]);
    assert_eq!(out.status.code(), Some(66));
    let out = neve(&["info", "gs://nope/t"]);
    assert_eq!(out.status.code(), Some(65));
    // Arguments clap refuses are usage errors too (64, not clap's 2); help is not an error.
    let out = neve(&["insert", &t, "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"));
    let out = neve(&["create"]);
    assert_eq!(out.status.code(), Some(64));
    for (keys, needle) in [("id,id", "given twice"), ("id desc", "no direction")] {
        let (_d2, t2) = local_table("sorted");
        let out = neve(&["create", &t2, "--sort-by", keys]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(65), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!Path::new(&t2).join("_log").exists());
    }
    for flags in [
        &["--strict-schema", "--set", "strict_schema=false"][..],
        &["--iceberg", "--set", "iceberg=false"][..],
    ] {
        let (_d2, t2) = local_table("conflict");
        let mut args = vec!["create", &t2];
        args.extend_from_slice(flags);
        let out = neve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{flags:?}: {err}");
        assert!(err.contains("give one"), "{flags:?}: {err}");
        assert!(!Path::new(&t2).join("_log").exists());
    }
    // An S3 key with nothing to serve it is refused, not ignored.
    let out = neve(&[
        "serve",
        "--warehouse",
        &t,
        "--access-key-id",
        "AKIAEXAMPLE",
        "--secret-access-key",
        "secret",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("--s3-listen, which is not given"), "{err}");
    let out = neve(&["merge", &t, "--min-files", "0"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 2"));
    let out = neve(&["insert", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    assert_eq!(version(&t), 0);
}

/// `insert --create` looks before it makes a table: a missing input leaves no table, and an
/// existing table's layout is not silently kept against the flags. New column names must be
/// non-empty and distinct ignoring case; `neve sql` answers queries only.
#[test]
fn insert_create_and_names_refused_cleanly() {
    let (d, t) = local_table("ic");
    let csv = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let out = neve(&["insert", &t, "/nonexistent/rows.csv", "--create"]);
    assert_eq!(out.status.code(), Some(66));
    assert!(!Path::new(&t).join("_log").exists(), "no table made");

    let good = csv("good.csv", "id,name\n1,a\n");
    neve_ok(&["insert", &t, &good, "--create", "--sort-by", "id"]);
    neve_ok(&["insert", &t, &good, "--create"]);
    let before = version(&t);
    for (flags, needle) in [
        (
            &["--partition-by", "bucket(4, id)"][..],
            "partitions none, not 'bucket(4, id)",
        ),
        (&["--sort-by", "name"][..], "sort keys 'id', not 'name'"),
        (&["--set", "compression=none"][..], "other settings"),
    ] {
        let mut args = vec!["insert", &t, &good, "--create"];
        args.extend_from_slice(flags);
        let out = neve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{flags:?}: {err}");
        assert!(err.contains(needle), "{flags:?}: {err}");
    }
    let cased = csv("cased.csv", "id,Name\n2,b\n");
    let empty = csv("empty.csv", "id,\n3,c\n");
    for (input, needle) in [(&cased, "differ only in case"), (&empty, "empty name")] {
        let out = neve(&["insert", &t, input]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(65), "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(err.contains(input.as_str()), "the input is named: {err}");
    }
    assert_eq!(version(&t), before, "nothing committed");

    // Layout flags without `--create` would change nothing: refused, not ignored.
    for flags in [
        &["--set", "strict_schema=true"][..],
        &["--merge", "dedupe(key = [id])"][..],
    ] {
        let mut args = vec!["insert", &t, &good];
        args.extend_from_slice(flags);
        let out = neve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{flags:?}: {err}");
        assert!(err.contains("apply with --create"), "{flags:?}: {err}");
    }
    assert_eq!(version(&t), before, "nothing committed");
    // A bad flag is found before `--create` makes the table.
    let fresh = d.path().join("fresh").display().to_string();
    for flags in [
        &["--delimiter", ";;"][..],
        &["--epoch-unit", "fortnights"][..],
    ] {
        let mut args = vec!["insert", &fresh, &good, "--create"];
        args.extend_from_slice(flags);
        let out = neve(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{flags:?}: {err}");
        assert!(!Path::new(&fresh).exists(), "{flags:?}: a table was made");
    }
    // What cannot be read is named, with its own exit code (not "cannot write output").
    for cmd in ["serve", "proxy", "maintain"] {
        let out = neve(&[
            cmd,
            "--config",
            "/nonexistent/neve.toml",
            "--warehouse",
            &fresh,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(66), "{cmd}: {err}");
        assert!(
            err.contains("cannot read config file /nonexistent/neve.toml"),
            "{cmd}: {err}"
        );
    }
    let mut child = std::process::Command::new(crate::common::neve_bin())
        .args(["sql", "-", "--table", &format!("t={t}")])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"SELECT '\xff'").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(
        err.contains("cannot read the query from standard input"),
        "{err}"
    );

    let table = format!("t={t}");
    let out = neve(&["sql", "DROP TABLE t", "--table", &table]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(err.contains("only queries are answered"), "{err}");
    let out = neve(&["sql", "SELECT 1", "--table", &table, "--table", &table]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("two tables are named 't'"), "{err}");
    let out = neve(&[
        "sql",
        "SELECT 1",
        "--table",
        &table,
        "--output",
        "/nonexistent/dir/x.csv",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{err}");
    assert!(err.contains("/nonexistent/dir/x.csv"), "{err}");

    // `info` shows the table's own maintenance policy once it has one.
    neve_ok(&["alter", &t, "set", "gc_grace=1h"]);
    let text = neve_ok(&["info", &t]);
    assert!(text.contains("maintenance   gc_grace=3600s"), "{text}");
}

/// `files --format clickhouse` names every file where it is, also when a partition value was
/// escaped (a space, a `:`) and the files are listed as one `{a,b}` alternation.
#[test]
fn clickhouse_paths_of_escaped_partitions_exist() {
    let (d, t) = local_table("escaped");
    let rows = d.path().join("rows.ndjson");
    std::fs::write(
        &rows,
        "{\"id\": 1, \"region\": \"United States\"}\n{\"id\": 2, \"region\": \"France\"}\n\
         {\"id\": 3, \"region\": \"a:b/c%d\"}\n",
    )
    .unwrap();
    let rows = rows.display().to_string();
    neve_ok(&["insert", &t, &rows, "--create", "--partition-by", "region"]);
    let text = neve_ok(&["files", &t, "--format", "clickhouse"]);
    let (root, rest) = text
        .trim()
        .strip_prefix("(SELECT * FROM file('")
        .and_then(|s| s.split_once("/{"))
        .unwrap_or_else(|| panic!("not one alternation: {text}"));
    let list = rest.split_once("}'").map(|(l, _)| l).unwrap();
    let files: Vec<&str> = list.split(',').collect();
    assert_eq!(files.len(), 3, "{text}");
    for f in files {
        let p = Path::new(root).join(f);
        assert!(p.is_file(), "{} is not there: {text}", p.display());
    }
}

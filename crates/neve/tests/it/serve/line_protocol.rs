//! InfluxDB line protocol over HTTP: a namespace's tables made and written from lines.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn line_protocol_writes_tables_of_a_namespace() {
    let (w, _) = warehouse();
    let s = ServerProc::start(&w, &["--token", "tok"]);
    let c = client();
    // The receive time given to a line without one lies between these two instants.
    let sent = chrono::Utc::now();
    let lines = "cpu,host=a,region=eu\\ west usage_user=1.5,usage_idle=97i,up=true,note=\"ok, fine\" 1700000000000000000\n\
                 cpu,host=b usage_user=2,usage_idle=95i,up=F 1700000001000000000\n\
                 mem,host=a free=123u\n";
    let r = c
        .post(format!(
            "{}/api/v2/write?bucket=metrics&precision=ns",
            s.url
        ))
        .header("authorization", "Token tok")
        .body(lines)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    // InfluxDB 1's /write, token as `p`, precision in seconds.
    let r = c
        .post(format!("{}/write?db=metrics&precision=s&p=tok", s.url))
        .body("cpu,host=c usage_user=3,usage_idle=90i,up=t 1700000002\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204, "{}", r.text().await.unwrap());
    // What InfluxDB clients ask before writing: the namespaces, and creating one.
    let r = c
        .get(format!("{}/query?q=SHOW%20DATABASES&p=tok", s.url))
        .send()
        .await
        .unwrap();
    let v = json(r).await;
    assert_eq!(
        v["results"][0]["series"][0]["values"],
        serde_json::json!([["metrics"]]),
        "{v}"
    );
    let r = c
        .post(format!("{}/query?q=CREATE+DATABASE+other&p=tok", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .get(format!("{}/query?q=SELECT+*+FROM+cpu&p=tok", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let cpu = format!("{w}/metrics/cpu");
    let out = neve_ok(&[
        "sql",
        "SELECT host, \"region\", usage_user, usage_idle, up, note, CAST(time AS VARCHAR) AS t FROM cpu ORDER BY host",
        "--table",
        &format!("cpu={cpu}"),
        "--format",
        "ndjson",
    ]);
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows[0]["region"], "eu west");
    assert_eq!(rows[0]["usage_user"], 1.5);
    assert_eq!(rows[0]["usage_idle"], 97);
    assert_eq!(rows[0]["up"], true);
    assert_eq!(rows[0]["note"], "ok, fine");
    assert!(
        rows[0]["t"]
            .as_str()
            .unwrap()
            .starts_with("2023-11-14T22:13:20"),
        "{}",
        rows[0]
    );
    assert_eq!(rows[1]["up"], false);
    assert!(
        rows[2]["t"]
            .as_str()
            .unwrap()
            .starts_with("2023-11-14T22:13:22"),
        "{}",
        rows[2]
    );
    let i = info(&cpu);
    assert!(i["sort_by"].to_string().contains("host"), "{i}");
    // The measurement without a timestamp got the receive time.
    let mem = format!("{w}/metrics/mem");
    let out = neve_ok(&[
        "sql",
        "SELECT free, CAST(time AS VARCHAR) AS t FROM m",
        "--table",
        &format!("m={mem}"),
        "--format",
        "ndjson",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["free"], 123);
    let t = chrono::DateTime::parse_from_rfc3339(v["t"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{v}: {e}"));
    assert!(t >= sent && t <= chrono::Utc::now(), "{v}, sent at {sent}");
    // A bad line: 400 naming it, and nothing of that request is written.
    let before = info(&cpu)["version"].clone();
    let r = c
        .post(format!("{}/api/v2/write?bucket=metrics", s.url))
        .header("authorization", "Token tok")
        .body("cpu,host=d usage_user=4 1700000003000000000\ncpu,host=e usage_user=oops\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    assert_eq!(v["error"]["line"], 2, "{v}");
    assert_eq!(info(&cpu)["version"], before);
    // A field whose type changes is refused too.
    let r = c
        .post(format!("{}/api/v2/write?bucket=metrics", s.url))
        .header("authorization", "Token tok")
        .body("cpu,host=d usage_idle=1.5 1700000003000000000\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "{}", r.text().await.unwrap());
    // A request refused for one measurement creates no table for another, and says which
    // measurement and line it was.
    let r = c
        .post(format!("{}/api/v2/write?bucket=metrics", s.url))
        .header("authorization", "Token tok")
        .body(
            "fresh,host=a v=1 1700000003000000000\ncpu,host=d usage_idle=1.5 1700000003000000000\n",
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    assert_eq!(v["error"]["measurement"], "cpu", "{v}");
    assert_eq!(v["error"]["code"], "schema_conflict", "{v}");
    let out = crate::common::neve(&["info", &format!("{w}/metrics/fresh")]);
    assert_eq!(
        out.status.code(),
        Some(66),
        "the refused request made a table"
    );
    // A table's own folders are not measurements, and a request naming one writes nothing,
    // not even its other measurements' tables.
    for (bucket, body) in [
        (
            "metrics",
            "disk,host=a v=1 1700000000000000000\n_log,host=a v=1 1700000000000000000\n",
        ),
        ("metrics", "_data,host=a v=1 1700000000000000000\n"),
        ("_log", "disk,host=a v=1 1700000000000000000\n"),
    ] {
        let r = c
            .post(format!("{}/api/v2/write?bucket={bucket}", s.url))
            .header("authorization", "Token tok")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bucket} {body}");
        let v = json(r).await;
        assert!(v["error"]["message"].to_string().contains("'_'"), "{v}");
    }
    // A namespace SQL reserves as a schema: its tables could never be queried.
    for bucket in ["public", "information_schema", "PUBLIC"] {
        let r = c
            .post(format!("{}/api/v2/write?bucket={bucket}", s.url))
            .header("authorization", "Token tok")
            .body("disk,host=a v=1 1700000000000000000\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bucket}");
        let v = json(r).await;
        assert!(
            v["error"]["message"].to_string().contains("reserves"),
            "{v}"
        );
        let out = crate::common::neve(&["info", &format!("{w}/{bucket}/disk")]);
        assert_eq!(out.status.code(), Some(66), "{bucket}/disk was made");
    }
    for never in ["metrics/disk", "metrics/_log", "_log/disk"] {
        let out = crate::common::neve(&["info", &format!("{w}/{never}")]);
        assert_eq!(out.status.code(), Some(66), "{never} was made");
    }
    // A value nested deeper than a table can keep: 400, and the table still opens.
    let deep = format!(
        "{{\"nest\": {}1{}}}\n",
        "{\"a\": ".repeat(40),
        "}".repeat(40)
    );
    let r = c
        .post(format!("{}/api/v2/write?bucket=metrics", s.url))
        .header("authorization", "Token tok")
        .body("cpu,host=d usage_user=4 1700000004000000000\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = c
        .put(format!("{}/v1/tables/deep", s.url))
        .bearer_auth("tok")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = c
        .post(format!("{}/v1/tables/deep/insert", s.url))
        .bearer_auth("tok")
        .header("content-type", "application/x-ndjson")
        .body(deep)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v = json(r).await;
    assert!(
        v["error"]["message"].to_string().contains("at most 32"),
        "{v}"
    );
    info(&format!("{w}/deep"));
}

/// Bad line-protocol requests arriving while good ones keep the measurement's queue busy: each
/// refused alone with its line; every good one committed; nothing of the bad ones written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_lines_are_refused_alone_inside_a_busy_flush() {
    let (w, _) = warehouse();
    let s = ServerProc::start(&w, &["--token", "tok"]);
    let c = client();
    let write = |c: reqwest::Client, url: String, body: String| async move {
        let r = c
            .post(format!("{url}/api/v2/write?bucket=busy&precision=s"))
            .header("authorization", "Token tok")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    };
    let (st, body) = write(
        c.clone(),
        s.url.clone(),
        "load,k=x n=0i,v=0.5 1700000000\n".into(),
    )
    .await;
    assert_eq!(st, 204, "{body}");
    let mut good = Vec::new();
    for k in 0..8u64 {
        let (c, url) = (c.clone(), s.url.clone());
        good.push(tokio::spawn(async move {
            for r in 0..10u64 {
                let body: String = (0..5u64)
                    .map(|i| {
                        format!(
                            "load,k=g n={}i,v=1.5 {}\n",
                            1 + (k * 10 + r) * 5 + i,
                            1_700_000_001 + i
                        )
                    })
                    .collect();
                let (st, text) = write(c.clone(), url.clone(), body).await;
                assert_eq!(st, 204, "{text}");
            }
        }));
    }
    // A line cut short, below a good one: refused by its line.
    let body = "load,k=b n=100001i,v=1 1700000009\nload,k=b n=100002i,v=\n";
    let (st, text) = write(c.clone(), s.url.clone(), body.into()).await;
    assert_eq!(st, 400, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["line"], 2, "{v}");
    // A field of another type than the measurement's: refused, naming it.
    for (body, column) in [
        ("load,k=b n=100003i,v=\"text\" 1700000009\n", "'v'"),
        ("load,k=b n=100004,v=1 1700000009\n", "'n'"),
    ] {
        let (st, text) = write(c.clone(), s.url.clone(), body.into()).await;
        assert_eq!(st, 400, "{body}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], "schema_conflict", "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(column),
            "{v}"
        );
    }
    for g in good {
        g.await.unwrap();
    }
    let out = neve_ok(&[
        "sql",
        "SELECT count(*) AS n, count(DISTINCT n) AS d, max(n) AS hi FROM t",
        "--table",
        &format!("t={w}/busy/load"),
        "--format",
        "ndjson",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["n"].as_u64(), v["d"].as_u64(), v["hi"].as_u64()),
        (Some(401), Some(401), Some(400)),
        "{v}"
    );
}

"""`neve serve`'s SQL over the network, read by real clients, on a taxi table in MinIO through
the built binary: over HTTP (`POST /v1/sql`) the six seed queries in every result format
(decoded by pyarrow, pandas and the json module), and over Arrow Flight SQL with the ADBC
driver (and through it pandas and polars), answer as `neve sql` does."""
import csv
import http.client
import io
import json
import os
import subprocess
import urllib.parse

import pytest

from test_seed_queries import QUERIES, assert_same_answers, neve_rows, norm, taxi  # noqa: F401

TOKEN = "sql-interop-token"


class Server:
    """`neve serve` on a free port over the taxi table's warehouse."""

    def __init__(self, neve_bin, warehouse, *args, env=None):
        self.proc = subprocess.Popen(
            [neve_bin, "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0",
             "--flight-listen", "127.0.0.1:0", "--no-maintenance", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=None if env is None else {**os.environ, **env},
        )
        line, flight = self.proc.stdout.readline(), self.proc.stdout.readline()
        if "listening on" not in line or "flight sql listening on" not in flight:
            self.proc.kill()
            raise AssertionError(f"server did not start: {line} {self.proc.stderr.read()}")
        self.url = line.strip().split()[-1]
        self.grpc = flight.strip().split()[-1]

    def adbc(self, token=TOKEN, **db_kwargs):
        import adbc_driver_flightsql.dbapi as flight_sql

        if token is not None:
            db_kwargs.setdefault("adbc.flight.sql.authorization_header", f"Bearer {token}")
        return flight_sql.connect(self.grpc, db_kwargs=db_kwargs, autocommit=True)

    def sql(self, sql, accept):
        u = urllib.parse.urlsplit(self.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        conn.request("POST", "/v1/sql", body=sql.encode(),
                     headers={"Authorization": f"Bearer {TOKEN}", "Accept": accept})
        r = conn.getresponse()
        body = r.read()
        conn.close()
        assert r.status == 200, body[:2000]
        assert r.getheader("content-type") == accept
        return body

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(neve_bin, taxi):  # noqa: F811
    s = Server(neve_bin, taxi["table"].rpartition("/")[0], "--token", TOKEN)
    yield s
    s.stop()


def decode(body, accept):
    """Rows as dicts, with each format's own reader."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if accept == "application/json":
        return json.loads(body)
    if accept == "application/x-ndjson":
        return [json.loads(l) for l in body.splitlines() if l.strip()]
    if accept == "text/csv":
        # Typed by pyarrow's reader, as a client would; the header must match the stdlib's.
        assert next(csv.reader(io.StringIO(body.decode())))
        return pacsv.read_csv(pa.BufferReader(body)).to_pylist()
    if accept == "application/vnd.apache.arrow.stream":
        return pa.ipc.open_stream(body).read_all().to_pylist()
    if accept == "application/vnd.apache.parquet":
        return pq.read_table(pa.BufferReader(body)).to_pylist()
    raise AssertionError(accept)


FORMATS = ["application/json", "application/x-ndjson", "text/csv",
           "application/vnd.apache.arrow.stream", "application/vnd.apache.parquet"]


@pytest.mark.parametrize("accept", FORMATS, ids=["json", "ndjson", "csv", "arrow", "parquet"])
@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_queries_over_http_answer_as_neve_sql(q, accept, neve, server, taxi):  # noqa: F811
    ours = norm(neve_rows(neve, taxi, q["neve"]))
    theirs = norm(decode(server.sql(q["neve"].format(table="taxi"), accept), accept))
    assert len(theirs) == len(ours)
    if q["name"] == "limit_1000":
        assert set(theirs[0]) == set(ours[0])
        return
    assert_same_answers(ours, {f"http {accept}": theirs})


def test_pandas_reads_the_csv_and_arrow_results(server):
    import pandas as pd
    import pyarrow as pa

    sql = "SELECT payment_type, count(*) AS n FROM taxi GROUP BY payment_type ORDER BY payment_type"
    a = pd.read_csv(io.BytesIO(server.sql(sql, "text/csv")))
    b = pa.ipc.open_stream(server.sql(sql, "application/vnd.apache.arrow.stream")).read_pandas()
    assert a["n"].sum() == b["n"].sum() == 300_000
    assert list(a["payment_type"]) == list(b["payment_type"])


@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_queries_over_flight_sql_answer_as_neve_sql(q, neve, server, taxi):  # noqa: F811
    ours = norm(neve_rows(neve, taxi, q["neve"]))
    with server.adbc() as conn, conn.cursor() as cur:
        cur.execute(q["neve"].format(table="taxi"))
        theirs = norm(cur.fetch_arrow_table().to_pylist())
    assert len(theirs) == len(ours)
    if q["name"] == "limit_1000":
        assert set(theirs[0]) == set(ours[0])
        return
    assert_same_answers(ours, {"flight sql": theirs})


def test_flight_sql_prepared_statements_pandas_polars_and_metadata(server):
    import polars as pl

    with server.adbc() as conn:
        with conn.cursor() as cur:
            # A prepared statement with a parameter, bound twice.
            sql = "SELECT count(*) AS n FROM taxi WHERE trip_miles > $1"
            cur.execute(sql, parameters=(5.0,))
            far = cur.fetchone()[0]
            cur.execute(sql, parameters=(0.0,))
            some = cur.fetchone()[0]
            cur.execute("SELECT count(*) AS n FROM taxi WHERE trip_miles > 5.0")
            assert far == cur.fetchone()[0]
            cur.execute("SELECT count(*) AS n FROM taxi WHERE trip_miles > 0.0")
            assert some == cur.fetchone()[0] and far < some
            cur.execute("SELECT payment_type, count(*) AS n FROM taxi GROUP BY 1 ORDER BY 1")
            df = cur.fetch_df()
            assert df["n"].sum() == 300_000
        polars = pl.read_database("SELECT count(*) AS n FROM taxi", connection=conn)
        assert polars["n"][0] == 300_000
        objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        names = [t["table_name"] for c in objects for s in c["catalog_db_schemas"] or []
                 for t in s["db_schema_tables"] or []]
        assert "taxi" in names
        schema = conn.adbc_get_table_schema("taxi")
        assert "trip_miles" in schema.names and "payment_type" in schema.names
        info = conn.adbc_get_info()
        assert info["vendor_name"] == "neve"


def test_flight_sql_basic_auth_handshake_and_refusals(server):
    import adbc_driver_manager

    # Basic auth whose password is the token: the handshake answers with a bearer token.
    with server.adbc(token=None, username="anyone", password=TOKEN) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM taxi")
        assert cur.fetchone()[0] == 300_000
    # A wrong token, a wrong password, and no credentials at all.
    for kwargs in ({"token": "wrong"}, {"token": None, "username": "x", "password": "wrong"}, {"token": None}):
        with pytest.raises(adbc_driver_manager.Error) as e:
            with server.adbc(**kwargs) as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
        assert "UNAUTHENTICATED" in str(e.value) or "Unauthenticated" in str(e.value), e.value
    with server.adbc() as conn, conn.cursor() as cur:
        for sql, status in (("SELECT * FROM nowhere", "NOT_FOUND"),
                            ("SELEC 1", "INVALID_ARGUMENT"),
                            ("SELECT nope FROM taxi", "INVALID_ARGUMENT")):
            with pytest.raises(adbc_driver_manager.Error) as e:
                cur.execute(sql)
                cur.fetchall()
            text = str(e.value)
            assert status in text or status.replace("_", " ").title().replace(" ", "") in text, text


def test_flight_sql_statuses_and_plans_show_no_server_path(neve_bin, tmp_path):
    """Over Flight as over HTTP, neither an error nor a plan says where the warehouse is:
    files are named from the table's folder."""
    import adbc_driver_manager

    warehouse = tmp_path / "wh-secret-place"
    table = warehouse / "events"
    subprocess.run([neve_bin, "create", str(table)], check=True, capture_output=True)
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"id": 1}\n{"id": 2}\n')
    subprocess.run([neve_bin, "insert", str(table), str(rows)], check=True, capture_output=True)
    s = Server(neve_bin, str(warehouse), "--token", TOKEN)
    try:
        with s.adbc() as conn, conn.cursor() as cur:
            cur.execute("EXPLAIN SELECT * FROM events")
            plan = " ".join(str(v) for row in cur.fetchall() for v in row)
            assert "events/_data/" in plan and "wh-secret-place" not in plan, plan
            files = list((table / "_data").rglob("*.parquet"))
            assert files
            for f in files:
                f.unlink()
            with pytest.raises(adbc_driver_manager.Error) as e:
                cur.execute("SELECT * FROM events")
                cur.fetchall()
            text = str(e.value)
            assert "events/_data/" in text and "wh-secret-place" not in text, text
    finally:
        s.stop()


def test_flight_sql_tenants_see_only_their_tables(neve_bin, s3_prefix, tmp_path):
    """Tenant B's table is invisible to tenant A's token over Flight, by name and in the
    catalog."""
    import adbc_driver_manager

    def hash_token(t):
        return subprocess.run([neve_bin, "hash-token", t], capture_output=True, text=True,
                              check=True).stdout.strip()

    warehouse = f"{s3_prefix}/flight-tenants"
    subprocess.run([neve_bin, "create", f"{warehouse}/b/secret"], check=True, capture_output=True)
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"id": 1}\n{"id": 2}\n')
    subprocess.run([neve_bin, "insert", f"{warehouse}/b/secret", str(rows)], check=True,
                   capture_output=True)
    config = tmp_path / "neve.toml"
    config.write_text(
        f'[[tenants]]\nname = "a"\ntokens = [{{ sha256 = "{hash_token("ta")}", role = "read" }}]\n'
        f'[[tenants]]\nname = "b"\ntokens = [{{ sha256 = "{hash_token("tb")}", role = "read" }}]\n'
    )
    s = Server(neve_bin, warehouse, "--config", str(config))
    try:
        with s.adbc(token="tb") as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM secret")
            assert cur.fetchone()[0] == 2
        with s.adbc(token="ta") as conn:
            with conn.cursor() as cur, pytest.raises(adbc_driver_manager.Error):
                cur.execute("SELECT count(*) FROM secret")
                cur.fetchall()
            objects = conn.adbc_get_objects(depth="tables").read_all().to_pylist()
            names = [t["table_name"] for c in objects for sc in c["catalog_db_schemas"] or []
                     for t in sc["db_schema_tables"] or []]
            assert "secret" not in names
    finally:
        s.stop()


def test_flight_sql_timeout_and_too_many_queries(neve_bin, taxi):  # noqa: F811
    """Over Flight, a query past the time limit ends with DEADLINE_EXCEEDED, and one over the
    concurrency limit is refused with RESOURCE_EXHAUSTED, as HTTP answers 504 and 429."""
    import adbc_driver_manager

    def refused(conn, sql):
        with pytest.raises(adbc_driver_manager.Error) as e:
            with conn.cursor() as cur:
                cur.execute(sql)
                cur.fetchall()
        return str(e.value)

    s = Server(neve_bin, taxi["table"].rpartition("/")[0], "--token", TOKEN,
               "--query-timeout", "4s", "--max-concurrent-queries", "1")
    try:
        with s.adbc() as conn:
            text = refused(conn, "SELECT count(*) FROM range(100000000000)")
            assert "DEADLINE_EXCEEDED" in text or "DeadlineExceeded" in text, text
            assert "4s" in text, text
            # One query held open over HTTP, unread, takes the only slot.
            u = urllib.parse.urlsplit(s.url)
            held = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            held.request("POST", "/v1/sql", body=b"SELECT value FROM range(100000000000)",
                         headers={"Authorization": f"Bearer {TOKEN}",
                                  "Accept": "application/vnd.apache.arrow.stream"})
            r = held.getresponse()
            assert r.status == 200
            r.read(1024)
            text = refused(conn, "SELECT count(*) FROM taxi")
            assert "RESOURCE_EXHAUSTED" in text or "ResourceExhausted" in text, text
            held.close()
    finally:
        s.stop()


def flight_calls(server):
    """`neve_flight_calls_total` from the server's /metrics, as {(method, code): count}."""
    import re

    u = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    calls = {}
    for m in re.finditer(r'^neve_flight_calls_total\{method="(\w+)",code="(\w+)"\} (\d+)$', text,
                         re.M):
        calls[(m.group(1), m.group(2))] = int(m.group(3))
    return calls, text


def test_flight_calls_are_counted_by_method_and_code(neve_bin, tmp_path):
    """Operators see Flight as they see HTTP: each RPC counted by method and gRPC code, a
    query's stream by how it ended."""
    import adbc_driver_manager

    warehouse = tmp_path / "wh"
    subprocess.run([neve_bin, "create", str(warehouse / "events")], check=True,
                   capture_output=True)
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"id": 1}\n{"id": 2}\n')
    subprocess.run([neve_bin, "insert", str(warehouse / "events"), str(rows)], check=True,
                   capture_output=True)
    s = Server(neve_bin, str(warehouse), "--token", TOKEN,
               env={"NEVE_LOG_FORMAT": "json", "NEVE_LOG": "warn,neve_server=debug"})
    try:
        assert flight_calls(s)[0] == {}
        with s.adbc() as conn, conn.cursor() as cur:
            for _ in range(3):
                cur.execute("SELECT count(*) FROM events")
                assert cur.fetchone()[0] == 2
            with pytest.raises(adbc_driver_manager.Error):
                cur.execute("SELEC 1")
                cur.fetchall()
        with pytest.raises(adbc_driver_manager.Error):
            with s.adbc(token="wrong") as conn, conn.cursor() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
        calls, text = flight_calls(s)
        assert calls.get(("get_flight_info", "Ok"), 0) >= 3, calls
        assert calls.get(("do_get", "Ok"), 0) >= 3, calls
        # The bad SQL, refused when the driver asks to prepare it (its Go driver asks more than
        # once).
        assert calls.get(("do_action", "InvalidArgument"), 0) >= 1, sorted(calls.items())
        assert sum(n for (_, code), n in calls.items() if code == "Unauthenticated") >= 1, text
        assert 'neve_flight_call_seconds_count{method="do_get"}' in text, text
    finally:
        s.stop()
    # Each call is logged at debug as HTTP requests are: its method, tenant, code and time.
    events = [json.loads(line) for line in s.proc.stderr.read().splitlines() if line.startswith("{")]
    answered = [(e["spans"][-1], e) for e in events
                if e.get("message") == "answered" and e["spans"][-1].get("name") == "flight"]
    ok = [e for span, e in answered if span["method"] == "do_get" and e["code"] == "Ok"]
    assert len(ok) >= 3 and all(e["spans"][-1]["tenant"] == "default" and e["ms"] >= 0 for e in ok), answered
    bad = [span for span, e in answered if e["code"] == "Unauthenticated"]
    assert bad and all("tenant" not in span for span in bad), answered

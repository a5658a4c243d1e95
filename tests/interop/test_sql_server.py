"""`neve serve`'s SQL over HTTP (`POST /v1/sql`), read by real clients: the six seed queries
in every result format (decoded by pyarrow, pandas and the json module) answer as `neve sql`
does, on a taxi table in MinIO, through the built binary."""
import csv
import http.client
import io
import json
import subprocess
import urllib.parse

import pytest

from test_seed_queries import QUERIES, assert_same_answers, neve_rows, norm, taxi  # noqa: F401

TOKEN = "sql-interop-token"


class Server:
    """`neve serve` on a free port over the taxi table's warehouse."""

    def __init__(self, neve_bin, warehouse):
        self.proc = subprocess.Popen(
            [neve_bin, "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0",
             "--token", TOKEN, "--no-maintenance"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise AssertionError(f"server did not start: {line} {self.proc.stderr.read()}")
        self.url = line.strip().split()[-1]

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
    s = Server(neve_bin, taxi["table"].rpartition("/")[0])
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

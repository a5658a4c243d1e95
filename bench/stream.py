"""`neve bench stream` (issue 17): how fast results leave `neve serve`.

Seed 002's workload: `range(ROWS)`, one 64-bit integer, streamed
  (a) as Arrow IPC over HTTP to a Rust client (`neve bench stream-client`),
  (b) over Flight SQL to the ADBC Python driver, and to arrow-flight's Rust client,
  (c) as NDJSON (fewer rows),
and, for the ADBC client's bound, the same rows from pyarrow's Flight server (C++), which sends
one prebuilt batch again and again;
against the ceiling measured in the same run: the same number of bytes over one loopback TCP
connection between two processes. Time, rows/s, GB/s, client and server peak RSS.
Then `SELECT *` of a taxi table (MB/s, time to first byte), and the latency of `count(*)` and
of a point query on that (hot) table through the server against `neve sql`.
Medians of --runs runs.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "bench-stream-token"


def peak_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def proc_cpu(pid):
    """CPU seconds (user + system) a process has used, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    """CPU seconds of this process's finished children: the clients, and the ceiling's ends."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def reset_peak(pid):
    """Start the process's peak RSS over from its current RSS (Linux clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class Server:
    def __init__(self, neve_bin, warehouse):
        self.proc = subprocess.Popen(
            [neve_bin, "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0",
             "--flight-listen", "127.0.0.1:0", "--token", TOKEN, "--no-maintenance",
             "--query-timeout", "1h"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().split()[-1]
        self.grpc = self.proc.stdout.readline().split()[-1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def rust_client(neve_bin, url, sql, fmt):
    where = ["--flight", url] if fmt == "flight" else ["--url", url, "--format", fmt]
    out = subprocess.run([neve_bin, "bench", "stream-client", *where, "--token", TOKEN,
                          "--sql", sql], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


FLIGHT_CLIENT = r"""
import json, resource, sys, time
import adbc_driver_flightsql.dbapi as f
t = time.perf_counter()
conn = f.connect(sys.argv[1], db_kwargs={"adbc.flight.sql.authorization_header": "Bearer " + sys.argv[2]}, autocommit=True)
# Python, pyarrow and the driver (a Go runtime) loaded and connected, before any result.
start_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
cur = conn.cursor()
cur.execute(sys.argv[3])
reader = cur.fetch_record_batch()
rows, nbytes, first = 0, 0, None
for b in reader:
    if first is None:
        first = time.perf_counter() - t
    rows += b.num_rows
    nbytes += b.nbytes
secs = time.perf_counter() - t
print(json.dumps({"rows": rows, "bytes": nbytes, "seconds": secs, "first_byte_s": first or secs,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "start_rss_mb": start_mb}))
"""

# The ADBC client's bound: pyarrow's Flight server (C++ gRPC) sending the same rows as
# `range(N)`, in batches of the size neve serve sends, built once and sent again and again: no
# query, no encoding beyond gRPC's. It answers the driver's GetSqlInfo at connect with no info.
BOUND_SERVER = r"""
import sys
import pyarrow as pa, pyarrow.flight as fl
ROWS, BATCH = int(sys.argv[1]), 131072
batch = pa.record_batch([pa.array(range(BATCH), pa.int64())], names=["value"])
SQL_INFO = pa.schema([
    pa.field("info_name", pa.uint32(), nullable=False),
    pa.field("value", pa.dense_union([
        pa.field("string_value", pa.utf8()), pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()), pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.utf8())),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32())))]),
        nullable=False)])

class Server(fl.FlightServerBase):
    def get_flight_info(self, context, descriptor):
        if b"CommandGetSqlInfo" in descriptor.command:
            return fl.FlightInfo(SQL_INFO, descriptor, [fl.FlightEndpoint(b"info", [])], 0, -1)
        return fl.FlightInfo(batch.schema, descriptor, [fl.FlightEndpoint(b"rows", [])], ROWS, -1)

    def do_get(self, context, ticket):
        if ticket.ticket == b"info":
            return fl.RecordBatchStream(SQL_INFO.empty_table())
        def batches():
            left = ROWS
            while left > 0:
                n = min(left, BATCH)
                yield batch if n == BATCH else batch.slice(0, n)
                left -= n
        return fl.GeneratorStream(batch.schema, batches())

s = Server("grpc://127.0.0.1:0")
print(s.port, flush=True)
s.serve()
"""


class BoundServer:
    def __init__(self, rows):
        self.proc = subprocess.Popen([sys.executable, "-c", BOUND_SERVER, str(rows)],
                                     stdout=subprocess.PIPE, text=True)
        self.grpc = f"grpc://127.0.0.1:{self.proc.stdout.readline().strip()}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def flight_client(grpc, sql):
    out = subprocess.run([sys.executable, "-c", FLIGHT_CLIENT, grpc, TOKEN, sql],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def ceiling(neve_bin, nbytes):
    sink = subprocess.Popen([neve_bin, "bench", "stream-client", "--sink", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    addr = sink.stdout.readline().strip()
    src = subprocess.run([neve_bin, "bench", "stream-client", "--source", addr, "--bytes",
                          str(nbytes)], capture_output=True, text=True)
    assert src.returncode == 0, src.stderr
    out = json.loads(sink.stdout.readline())
    sink.wait()
    return out


def timed(f, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def http_sql(url, sql):
    req = urllib.request.Request(f"{url}/v1/sql", data=sql.encode(), headers={
        "Authorization": f"Bearer {TOKEN}", "Accept": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--rows", type=int, default=500_000_000)
    ap.add_argument("--ndjson-rows", type=int, default=50_000_000)
    ap.add_argument("--taxi-rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default="./neve-bench/stream")
    a = ap.parse_args()
    neve = a.neve_bin
    warehouse = os.path.abspath(a.dir)
    taxi = f"{warehouse}/taxi"
    if subprocess.run([neve, "info", taxi], capture_output=True).returncode != 0:
        subprocess.run([neve, "create", taxi, "--partition-by", "month(trip_start_timestamp) as d",
                        "--sort-by", "payment_type,trip_start_timestamp"], check=True,
                       capture_output=True)
        with tempfile.TemporaryDirectory() as d:
            step = 2_000_000
            for i, start in enumerate(range(0, a.taxi_rows, step)):
                path = f"{d}/taxi-{i}.parquet"
                subprocess.run([neve, "bench", "gen", path, "--rows", str(min(step, a.taxi_rows - start)),
                                "--seed", str(i + 1)], check=True, capture_output=True)
                subprocess.run([neve, "insert", taxi, path], check=True, capture_output=True)
        print(f"loaded {a.taxi_rows:,} taxi rows into {taxi}", file=sys.stderr)

    server = Server(neve, warehouse)
    bound = BoundServer(a.rows)
    results = []
    try:
        cases = [
            ("Arrow over HTTP (Rust client)", a.rows,
             lambda: rust_client(neve, server.url, f"SELECT value FROM range({a.rows})", "arrow")),
            ("Flight SQL (ADBC Python)", a.rows,
             lambda: flight_client(server.grpc, f"SELECT value FROM range({a.rows})")),
            ("Flight SQL (Rust client)", a.rows,
             lambda: rust_client(neve, server.grpc, f"SELECT value FROM range({a.rows})", "flight")),
            ("Flight, ADBC from pyarrow (bound)", a.rows,
             lambda: flight_client(bound.grpc, "rows")),
            ("NDJSON over HTTP (Rust client)", a.ndjson_rows,
             lambda: rust_client(neve, server.url, f"SELECT value FROM range({a.ndjson_rows})", "ndjson")),
            ("taxi SELECT * as Arrow over HTTP", a.taxi_rows,
             lambda: rust_client(neve, server.url, "SELECT * FROM taxi", "arrow")),
        ]
        arrow_bytes = None
        for name, rows, run in cases:
            runs = []
            pid = bound.proc.pid if "bound" in name else server.proc.pid
            for i in range(a.runs):
                reset_peak(pid)
                cpu0 = (proc_cpu(pid), children_cpu())
                r = run()
                r["server_cpu_s"] = proc_cpu(pid) - cpu0[0]
                r["client_cpu_s"] = children_cpu() - cpu0[1]
                r["server_peak_rss_mb"] = peak_rss_mb(pid)
                assert r["rows"] == rows, (name, r)
                runs.append(r)
                print(f"  {name} run {i + 1}: {r['seconds']:.2f}s, {r['bytes'] / 1e9:.2f} GB, client "
                      f"{r['peak_rss_mb']} MB, server {r['server_peak_rss_mb']} MB; CPU server "
                      f"{r['server_cpu_s']:.2f}s, client {r['client_cpu_s']:.2f}s", file=sys.stderr)
            m = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
            m.update(name=name, runs=[x["seconds"] for x in runs])
            results.append(m)
            if arrow_bytes is None:
                arrow_bytes = m["bytes"]
        ceil = []
        for i in range(a.runs):
            cpu0 = children_cpu()
            c = ceiling(neve, int(arrow_bytes))
            c["cpu_s"] = children_cpu() - cpu0
            ceil.append(c)
            print(f"  ceiling run {i + 1}: {c['seconds']:.2f}s for {c['bytes'] / 1e9:.2f} GB", file=sys.stderr)
        c = {k: statistics.median(x[k] for x in ceil) for k in ceil[0]}
        ceiling_gbs = c["bytes"] / c["seconds"] / 1e9

        # Latency on the hot table: through the server (its table handle is warm) and `neve sql`.
        count_sql = "SELECT count(*) AS n FROM taxi"
        point_sql = ("SELECT count(*) AS n, avg(fare) AS f FROM taxi WHERE trip_start_timestamp >= "
                     "'2021-08-15 00:00:00' AND trip_start_timestamp < '2021-08-16 00:00:00'")
        latency = []
        for label, sql in (("count(*)", count_sql), ("point query (one day)", point_sql)):
            http_sql(server.url, sql)
            via_server = timed(lambda: http_sql(server.url, sql), max(a.runs, 5))
            via_cli = timed(lambda: subprocess.run([neve, "sql", sql, "--table", f"taxi={taxi}",
                                                    "--format", "json"], check=True,
                                                   capture_output=True), max(a.runs, 5))
            latency.append((label, via_server, via_cli))
    finally:
        server.stop()
        bound.stop()

    print(f"\nceiling: {c['bytes'] / 1e9:.2f} GB over one loopback TCP connection in "
          f"{c['seconds']:.2f}s = {ceiling_gbs:.2f} GB/s (medians of {a.runs})")
    print(f"{'stream':<36} {'rows':>12} {'time':>8} {'Mrows/s':>8} {'GB/s':>6} {'of ceiling':>10} "
          f"{'1st byte':>9} {'client MB':>9} {'server MB':>9} {'CPU-s srv':>9} {'CPU-s cli':>9} {'CPU floor':>9}")
    cores = os.cpu_count()
    for r in results:
        gbs = r["bytes"] / r["seconds"] / 1e9
        # Both ends share the cores: no stream of theirs ends before their CPU time is spent.
        floor = (r["server_cpu_s"] + r["client_cpu_s"]) / cores
        print(f"{r['name']:<36} {int(r['rows']):>12,} {r['seconds']:>7.2f}s {r['rows'] / r['seconds'] / 1e6:>8.1f} "
              f"{gbs:>6.2f} {gbs / ceiling_gbs:>9.0%} {r['first_byte_s'] * 1e3:>7.0f}ms "
              f"{int(r['peak_rss_mb']):>9} {int(r['server_peak_rss_mb']):>9} {r['server_cpu_s']:>9.2f} "
              f"{r['client_cpu_s']:>9.2f} {floor:>8.2f}s")
    print(f"ceiling's two ends: {c['cpu_s']:.2f} CPU-s for {c['bytes'] / 1e9:.2f} GB")
    for r in results:
        if "start_rss_mb" in r:
            print(f"{r['name']}: the client held {int(r['start_rss_mb'])} MB connected, before any result")
    print(f"\n{'latency on the hot taxi table':<36} {'neve serve':>11} {'neve sql':>9} {'ratio':>6}")
    for label, s, cli in latency:
        print(f"{label:<36} {s * 1e3:>9.1f}ms {cli * 1e3:>7.1f}ms {cli / s:>5.1f}x")
    print(json.dumps({"ceiling": c, "results": results,
                      "latency": [{"query": l, "server_s": s, "neve_sql_s": cli} for l, s, cli in latency]}))


if __name__ == "__main__":
    main()

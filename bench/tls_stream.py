"""What TLS costs a result stream: `neve serve` with `--tls-cert` against the same server
without it, in the same run, on the same machine. Two servers over one local warehouse (no
table: `SELECT value FROM range(ROWS)`, seed 002's workload), each streamed in turns to
  - Arrow IPC over HTTP(S), read by the Rust client (`neve bench stream-client`),
  - Flight SQL (grpc / grpc+tls) to the ADBC Python driver,
with the server's CPU seconds per stream read from /proc. The certificate is the test one of
`tests/tls` (ECDSA P-256). Medians of --runs; the ratio is TLS over plain.

python bench/tls_stream.py --neve-bin target/release/neve [--rows 200000000] [--runs 5]
(the Python needs pyarrow and adbc-driver-flightsql: the test venv has them)
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

TOKEN = "bench-tls-token"
TLS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "tls"


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    def __init__(self, neve_bin, warehouse, tls):
        extra = ["--tls-cert", str(TLS / "server1.pem"), "--tls-key", str(TLS / "server1.key")] if tls else []
        self.proc = subprocess.Popen(
            [neve_bin, "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0",
             "--flight-listen", "127.0.0.1:0", "--token", TOKEN, "--no-maintenance",
             "--query-timeout", "1h", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = self.proc.stdout.readline().split()[-1]
        self.grpc = self.proc.stdout.readline().split()[-1]
        self.tls = tls

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


FLIGHT_CLIENT = r"""
import json, sys, time
import adbc_driver_flightsql.dbapi as f
kwargs = {"adbc.flight.sql.authorization_header": "Bearer " + sys.argv[2]}
if sys.argv[4]:
    kwargs["adbc.flight.sql.client_option.tls_root_certs"] = open(sys.argv[4]).read()
t = time.perf_counter()
conn = f.connect(sys.argv[1], db_kwargs=kwargs, autocommit=True)
cur = conn.cursor()
cur.execute(sys.argv[3])
rows = 0
for b in cur.fetch_record_batch():
    rows += b.num_rows
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - t}))
"""


def http_stream(neve_bin, server, sql):
    ca = ["--ca-cert", str(TLS / "ca1.pem")] if server.tls else []
    out = subprocess.run([neve_bin, "bench", "stream-client", "--url", server.url, "--format", "arrow",
                          "--token", TOKEN, "--sql", sql, *ca], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def flight_stream(server, sql):
    ca = str(TLS / "ca1.pem") if server.tls else ""
    out = subprocess.run([sys.executable, "-c", FLIGHT_CLIENT, server.grpc, TOKEN, sql, ca],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--rows", type=int, default=200_000_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    sql = f"SELECT value FROM range({a.rows})"
    with tempfile.TemporaryDirectory() as d:
        servers = {"plain": Server(a.neve_bin, d, False), "tls": Server(a.neve_bin, d, True)}
        assert servers["tls"].url.startswith("https://") and servers["tls"].grpc.startswith("grpc+tls://")
        got = {(k, s): {"seconds": [], "cpu": []} for k in ("http", "flight") for s in servers}
        try:
            for run in range(a.runs):
                # Who goes first alternates.
                order = list(servers) if run % 2 == 0 else list(reversed(servers))
                for kind in ("http", "flight"):
                    for name in order:
                        s = servers[name]
                        before = proc_cpu(s.proc.pid)
                        r = http_stream(a.neve_bin, s, sql) if kind == "http" else flight_stream(s, sql)
                        cpu = proc_cpu(s.proc.pid) - before
                        assert r["rows"] == a.rows, r
                        got[(kind, name)]["seconds"].append(r["seconds"])
                        got[(kind, name)]["cpu"].append(cpu)
                        print(f"run {run + 1} {kind:6} {name:5} {r['seconds']:.2f} s, server {cpu:.2f} CPU-s",
                              file=sys.stderr)
        finally:
            for s in servers.values():
                s.stop()
    print("| stream | plain | TLS | TLS / plain | server CPU-s plain | TLS | runs plain (s) | runs TLS (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, label in (("http", "Arrow over HTTP(S), Rust client"), ("flight", "Flight SQL, ADBC Python")):
        p, t = got[(kind, "plain")], got[(kind, "tls")]
        mp, mt = statistics.median(p["seconds"]), statistics.median(t["seconds"])
        print(f"| {label} | {mp:.2f} s | {mt:.2f} s | {mt / mp:.2f}× | {statistics.median(p['cpu']):.2f} | "
              f"{statistics.median(t['cpu']):.2f} | {', '.join(f'{x:.2f}' for x in p['seconds'])} | "
              f"{', '.join(f'{x:.2f}' for x in t['seconds'])} |")
    print(json.dumps({f"{k}_{s}": v for (k, s), v in got.items()}))


if __name__ == "__main__":
    main()

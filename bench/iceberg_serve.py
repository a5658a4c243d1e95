"""Issue 19's worst case through `neve serve`: what a client waits for an insert into a table
with Iceberg metadata, against the same insert into a plain table, with the server writing the
metadata before it answers (`[iceberg] sync = "before_answer"`) or after (`"after_answer"`).

    neve bench gen taxi.arrow --rows 1200000 --seed 7
    python bench/iceberg_serve.py --neve-bin <neve> --arrow taxi.arrow --dir /dev/shm/is \
        --sync after_answer --inserts 12

Two tables month-partitioned with `replace(key = [taxi_id], version = trip_start_timestamp)`
(every insert replaces rows in every partition), one with `iceberg=true`; the file is cut into
`--inserts` slices, each POSTed as an Arrow IPC stream to one table and then the other (who goes
first alternates), one request at a time. With `after_answer`, the next request waits until the
Iceberg table's metadata describes its last commit (polled), so the plain insert after it does
not share the cores with it; that wait is printed as the lag. Prints each table's median
request time and the lag.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request

import pyarrow as pa
import pyarrow.ipc as ipc

from ports import free_port

MERGE = "replace(key = [taxi_id], version = trip_start_timestamp)"


def request(method, url, body=None, content_type="application/json"):
    req = urllib.request.Request(url, data=body, method=method,
                                 headers={"content-type": content_type, "authorization": "Bearer t"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, r.read()


def hint_version(table_dir):
    """The neve version the Iceberg metadata describes (its newest metadata file's property)."""
    try:
        n = open(os.path.join(table_dir, "metadata", "version-hint.text")).read().strip()
        meta = json.load(open(os.path.join(table_dir, "metadata", f"v{n}.metadata.json")))
    except (FileNotFoundError, ValueError):
        return -1
    return int(meta.get("current-snapshot-id", -1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--arrow", required=True, help="taxi rows (neve bench gen)")
    ap.add_argument("--dir", required=True, help="the warehouse (emptied first)")
    ap.add_argument("--sync", choices=["before_answer", "after_answer"], required=True)
    ap.add_argument("--inserts", type=int, default=12)
    a = ap.parse_args()
    with pa.OSFile(a.arrow) as src:
        table = ipc.open_file(src).read_all()
    per = table.num_rows // a.inserts
    bodies = []
    for i in range(a.inserts):
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, table.schema) as w:
            w.write_table(table.slice(i * per, per))
        bodies.append(sink.getvalue().to_pybytes())
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    conf = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    # A 100,000-row request is about 35 MB of Arrow; the budget is wider than the default so
    # that no request of a run waits for another's memory (the figures were taken so).
    conf.write(f'[iceberg]\nsync = "{a.sync}"\n[ingest]\nmax_pending_bytes = "2GiB"\nmax_body_bytes = "1GiB"\n')
    conf.close()
    port = free_port()
    server = subprocess.Popen([a.neve_bin, "serve", "--warehouse", a.dir, "--listen", f"127.0.0.1:{port}",
                               "--token", "t", "--no-maintenance", "--flush-interval", "1ms",
                               "--config", conf.name],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                request("GET", f"{url}/healthz")
                break
            except OSError:
                time.sleep(0.1)
        layout = {"partition_by": "month(trip_start_timestamp) as d",
                  "sort_by": ["taxi_id", "trip_start_timestamp"], "merge": MERGE}
        request("PUT", f"{url}/v1/tables/plain", json.dumps(layout).encode())
        request("PUT", f"{url}/v1/tables/ice",
                json.dumps({**layout, "settings": {"iceberg": "true"}}).encode())
        times = {"plain": [], "ice": []}
        lags = []

        def post(name, body):
            t = time.perf_counter()
            status, answer = request("POST", f"{url}/v1/tables/{name}/insert", body,
                                     "application/vnd.apache.arrow.stream")
            times[name].append(time.perf_counter() - t)
            assert status == 200, answer
            if name == "ice":
                version = json.loads(answer)["version"]
                t = time.perf_counter()
                while hint_version(os.path.join(a.dir, "ice")) < version:
                    time.sleep(0.0005)
                lags.append(time.perf_counter() - t)

        for i, body in enumerate(bodies):
            order = ["plain", "ice"] if i % 2 == 0 else ["ice", "plain"]
            for name in order:
                post(name, body)
        p, w = statistics.median(times["plain"]), statistics.median(times["ice"])
        print(json.dumps({"sync": a.sync, "inserts": a.inserts, "rows_per_insert": per,
                          "plain_ms": round(p * 1e3, 1), "iceberg_ms": round(w * 1e3, 1),
                          "added": round(w / p - 1, 4),
                          "lag_median_ms": round(statistics.median(lags) * 1e3, 1),
                          "lag_max_ms": round(max(lags) * 1e3, 1)}))
    finally:
        server.terminate()
        server.wait()
        os.unlink(conf.name)


if __name__ == "__main__":
    main()

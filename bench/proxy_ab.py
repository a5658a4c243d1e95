"""Cold reads through `neve proxy` from two or more builds, in turns, on the same link: what
`BENCHMARKS.md` (issue 16, "Fewer GETs for small files") compares. Each run starts a fresh
proxy of one build (empty cache), times chdb's query through it, then the same query direct on
the link; prints wall time, each process's CPU and the proxy's upstream GETs. Optionally
records the proxy with `perf` during the cold query.

    AWS_ENDPOINT_URL=http://127.0.0.1:19000 AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… \\
    python bench/proxy_ab.py --table s3://lake/w/taxi --neve-bin OLD --neve-bin NEW \\
        --toxiproxy ~/.cache/neve/toxiproxy-v2.12.0/server [--threads 32] [--rounds 2] \\
        [--query point] [--perf perf-proxy.data]

The table must exist (`neve bench proxy` loads one the same way: 5 inserts of 2M rows of
`neve bench gen --seed 1..5`, month-partitioned). Uses bench/proxy.py's link and proxy helpers.
"""
import argparse
import os
import signal
import subprocess
import time
import urllib.parse

import proxy as bp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True, help="s3://bucket/prefix/name")
    ap.add_argument("--neve-bin", action="append", required=True)
    ap.add_argument("--toxiproxy", required=True)
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--query", default="point", choices=["point", "scan"])
    ap.add_argument("--perf", help="record the proxy during each cold query into this file")
    a = ap.parse_args()
    minio = os.environ["AWS_ENDPOINT_URL"]
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    bucket, _, table_key = a.table.removeprefix("s3://").partition("/")
    warehouse, _, name = a.table.rpartition("/")
    link_proc, link = bp.start_link(a.toxiproxy, urllib.parse.urlsplit(minio).netloc, 30, 51_200)
    try:
        for rnd in range(a.rounds):
            for neve in a.neve_bin:
                p = bp.NeveProxy(neve, warehouse, link, None)
                try:
                    sql = bp.queries(f"{p.url}/{name}/**/*.parquet", bp.KEY, bp.SECRET, a.threads)[a.query]
                    perf = None
                    if a.perf:
                        perf = subprocess.Popen(["perf", "record", "-F", "999", "--call-graph", "dwarf,16384",
                                                 "-o", a.perf, "-p", str(p.proc.pid)],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(1)
                    with bp.CpuMeter({"proxy": p.proc.pid, "toxiproxy": link_proc.pid}) as m:
                        cold, _ = bp.chdb_time(sql)
                    if perf:
                        perf.send_signal(signal.SIGINT)
                        perf.wait()
                    gets = p.counters()["upstream_requests"]
                finally:
                    p.stop()
                sql = bp.queries(f"{link}/{bucket}/{table_key}/_data/**/*.parquet", key, secret, a.threads)[a.query]
                direct, _ = bp.chdb_time(sql)
                cpu = " ".join(f"{k} {v:.2f}" for k, v in m.cpu.items())
                print(f"round {rnd + 1} {neve}: cold {cold:.2f}s (CPU-s {cpu}; {gets} upstream GETs), "
                      f"direct {direct:.2f}s, cold/direct {cold / direct:.2f}x", flush=True)
    finally:
        link_proc.terminate()


if __name__ == "__main__":
    main()

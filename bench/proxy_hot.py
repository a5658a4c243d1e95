"""Hot scans through a fresh `neve proxy`, beside the floor chdb's own CPU sets: what
`BENCHMARKS.md` (issue 16, the full runs' notes) reports for the scan at 2 threads. Each
round starts a proxy (empty cache) on the link, runs one cold query, then `--hot` hot ones,
reading chdb's and the proxy's CPU around each; prints the best hot/cold and what chdb's CPU
over 2 cores allows.

    AWS_ENDPOINT_URL=http://127.0.0.1:19000 AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… \\
    python bench/proxy_hot.py --table s3://lake/w/taxi --neve-bin NEVE \\
        --toxiproxy ~/.cache/neve/toxiproxy-v2.12.0/server [--threads 2] [--rounds 3] [--hot 2] \\
        [--perf hot.perf]

With `--perf`, the last hot query of each round runs under a system-wide `perf record -a -g`
(the file is overwritten each round): where the machine's CPU went, chdb's, the proxy's, idle.

The table must exist (as for bench/proxy_ab.py). Uses bench/proxy.py's link and proxy helpers.
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
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--toxiproxy", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hot", type=int, default=2)
    ap.add_argument("--query", default="scan", choices=["point", "scan"])
    ap.add_argument("--perf", help="record the whole machine during each round's last hot query into this file")
    a = ap.parse_args()
    minio = os.environ["AWS_ENDPOINT_URL"]
    warehouse, _, name = a.table.rpartition("/")
    link_proc, link = bp.start_link(a.toxiproxy, urllib.parse.urlsplit(minio).netloc, 30, 51_200)
    try:
        for rnd in range(a.rounds):
            p = bp.NeveProxy(a.neve_bin, warehouse, link, None)
            try:
                sql = bp.queries(f"{p.url}/{name}/**/*.parquet", bp.KEY, bp.SECRET, a.threads)[a.query]
                cold, _ = bp.chdb_time(sql)
                hots = []
                for h in range(a.hot):
                    perf = None
                    if a.perf and h == a.hot - 1:
                        perf = subprocess.Popen(["perf", "record", "-a", "-g", "-F", "999", "-o", a.perf],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                        time.sleep(1)
                    with bp.CpuMeter({"proxy": p.proc.pid}) as m:
                        t, _ = bp.chdb_time(sql)
                    if perf:
                        perf.send_signal(signal.SIGINT)
                        perf.wait()
                    hots.append((t, m.cpu["chdb"], m.cpu["proxy"]))
            finally:
                p.stop()
            runs = ", ".join(f"{t:.2f}s (chdb {c:.2f}, proxy {x:.2f} CPU-s)" for t, c, x in hots)
            best = min(t for t, _, _ in hots)
            floor = min(c for _, c, _ in hots) / 2
            print(f"round {rnd + 1}: cold {cold:.2f}s, hot {runs}; hot/cold {cold / best:.2f}x, "
                  f"chdb's floor allows {cold / floor:.2f}x", flush=True)
    finally:
        link_proc.terminate()


if __name__ == "__main__":
    main()

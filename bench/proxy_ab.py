"""Cold reads through `neve proxy` from two or more builds, in turns, on the same link: what
`BENCHMARKS.md` (issue 16, "Fewer GETs for small files") compares. Each run starts a fresh
proxy of one build (empty cache), times chdb's query through it, then the same query direct on
the link; prints wall time, each process's CPU and the proxy's upstream GETs. Optionally
records the proxy with `perf` during the cold query. With `--relay`, also the same query direct
through a relay in front of the link (a process that only forwards the bytes): the floor under
"cold through the proxy within 10% of direct" on this machine.

    AWS_ENDPOINT_URL=http://127.0.0.1:19000 AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… \\
    python bench/proxy_ab.py --table s3://lake/w/taxi --neve-bin OLD --neve-bin NEW \\
        --toxiproxy ~/.cache/neve/toxiproxy-v2.12.0/server [--threads 32] [--rounds 2] \\
        [--query point] [--perf perf-proxy.data] [--relay neve|neve-keep|toxiproxy]

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
    ap.add_argument("--relay", choices=["neve", "neve-keep", "toxiproxy"],
                    help="also read direct through a relay in front of the link: one more process that "
                         "reads and writes every byte and does nothing else, the least any proxy in the "
                         "path costs (`neve bench relay` of the first --neve-bin: 1 MiB reads; "
                         "neve-keep: the same, keeping every byte sent back in fresh memory, as a "
                         "cache that fills does; or a second Toxiproxy with no toxics)")
    a = ap.parse_args()
    minio = os.environ["AWS_ENDPOINT_URL"]
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    bucket, _, table_key = a.table.removeprefix("s3://").partition("/")
    warehouse, _, name = a.table.rpartition("/")
    link_proc, link = bp.start_link(a.toxiproxy, urllib.parse.urlsplit(minio).netloc, 30, 51_200)
    relay_proc, relay = bp.start_relay(a.relay, a.neve_bin[0] if a.relay != "toxiproxy" else a.toxiproxy,
                                               urllib.parse.urlsplit(link).netloc) if a.relay else (None, None)
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
                with bp.CpuMeter({"toxiproxy": link_proc.pid}) as md:
                    direct, _ = bp.chdb_time(sql)
                cpu = " ".join(f"{k} {v:.2f}" for k, v in m.cpu.items())
                dcpu = " ".join(f"{k} {v:.2f}" for k, v in md.cpu.items())
                line = (f"round {rnd + 1} {neve}: cold {cold:.2f}s (CPU-s {cpu}; {gets} upstream GETs), "
                        f"direct {direct:.2f}s (CPU-s {dcpu}), cold/direct {cold / direct:.2f}x")
                if relay:
                    sql = bp.queries(f"{relay}/{bucket}/{table_key}/_data/**/*.parquet", key, secret,
                                     a.threads)[a.query]
                    with bp.CpuMeter({"relay": relay_proc.pid, "toxiproxy": link_proc.pid}) as mr:
                        relayed, _ = bp.chdb_time(sql)
                    rcpu = " ".join(f"{k} {v:.2f}" for k, v in mr.cpu.items())
                    line += f"; relay {relayed:.2f}s (CPU-s {rcpu}), relay/direct {relayed / direct:.2f}x"
                print(line, flush=True)
    finally:
        link_proc.terminate()
        if relay_proc:
            relay_proc.terminate()


if __name__ == "__main__":
    main()

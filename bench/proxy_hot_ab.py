"""Hot scans through `neve proxy` over a local warehouse, under several configurations in turns:
what `BENCHMARKS.md` (issue 16, "Where the scan at 2 threads loses its last 20%") compares. No
link and no MinIO: the hot read comes from the proxy's memory either way, so a local table of the
bench's shape (5 inserts of 2M rows of `neve bench gen --seed 1..5`, month-partitioned, sorted by
payment_type, trip_start_timestamp) gives the proxy's share of a hot scan without the cold one's
minutes. Each round starts a fresh proxy per configuration (environment variables over this
process's, and optionally another binary), runs one scan to fill its cache, then `--hot` hot ones,
reading chdb's CPU (this process) and the proxy's around each; prints each configuration's median
hot time, CPU, and how long the scan ran past chdb's CPU over 2 cores.

    python bench/proxy_hot_ab.py --warehouse /dev/shm/pw --table taxi --neve-bin NEVE \\
        --config default='{}' --config w1='{"TOKIO_WORKER_THREADS": "1"}' [--rounds 4] [--hot 3] \\
        [--threads 2] [--config-bin w1=OTHER_NEVE]

Uses bench/proxy.py's proxy and chdb helpers (its key pair).
"""
import argparse
import json
import os
import statistics

import proxy as bp


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", required=True, help="a local folder holding the table")
    ap.add_argument("--table", default="taxi")
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--config", action="append", required=True,
                    help="NAME=JSON object of environment variables for the proxy")
    ap.add_argument("--config-bin", action="append", default=[],
                    help="NAME=path of another neve binary for that configuration")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--hot", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    configs = {}
    for c in a.config:
        name, _, env = c.partition("=")
        configs[name] = {"env": json.loads(env or "{}"), "bin": a.neve_bin}
    for c in a.config_bin:
        name, _, path = c.partition("=")
        configs[name]["bin"] = path
    runs = {name: [] for name in configs}
    for r in range(a.rounds):
        for name, cfg in configs.items():
            saved = dict(os.environ)
            os.environ.update(cfg["env"])
            try:
                p = bp.NeveProxy(cfg["bin"], a.warehouse, "http://127.0.0.1:1", None)
            finally:
                os.environ.clear()
                os.environ.update(saved)
            try:
                sql = bp.queries(f"{p.url}/{a.table}/**/*.parquet", bp.KEY, bp.SECRET, a.threads)["scan"]
                bp.chdb_time(sql)
                for _ in range(a.hot):
                    c0, s0 = cpu_seconds(p.proc.pid), os.times()
                    t, _ = bp.chdb_time(sql)
                    s1, c1 = os.times(), cpu_seconds(p.proc.pid)
                    runs[name].append((t, s1.user - s0.user + s1.system - s0.system, c1 - c0))
            finally:
                p.stop()
        print(f"round {r + 1}: " + "; ".join(
            f"{n} " + " ".join(f"{t:.2f}" for t, _, _ in v[-a.hot:]) for n, v in runs.items()), flush=True)
    for name, v in runs.items():
        med = lambda xs: statistics.median(xs)  # noqa: E731
        print(f"{name}: hot median {med([t for t, _, _ in v]):.3f}s, chdb {med([c for _, c, _ in v]):.2f} CPU-s, "
              f"proxy {med([x for _, _, x in v]):.2f} CPU-s, past chdb's floor {med([t - c / 2 for t, c, _ in v]):.3f}s")


if __name__ == "__main__":
    main()

"""The warm listing of a 10,000-file table through `neve proxy`, from two or more builds in
turns, on the link `neve bench proxy` uses (Toxiproxy, 30 ms before each response, in front of
MinIO): what `BENCHMARKS.md` (issue 16, "Listing pages from kept elements") compares. Each
round starts a fresh proxy of each build, lists the table once (cold), then `--listings` more
times, and prints the median, the proxy's CPU per listing and every listing's time.

    AWS_ENDPOINT_URL=http://127.0.0.1:19000 AWS_ACCESS_KEY_ID=… AWS_SECRET_ACCESS_KEY=… \\
    python bench/proxy_list_ab.py --warehouse s3://lake/w --neve-bin OLD --neve-bin NEW \\
        --toxiproxy ~/.cache/neve/toxiproxy-v2.12.0/server [--rounds 3] [--listings 15]

The table `<warehouse>/listing10000` is made as `neve bench proxy` makes it (one insert of
10,000 rows, one file per partition) when it is not there. Uses bench/proxy.py's helpers.
"""
import argparse
import os
import statistics
import subprocess
import urllib.parse

import proxy as bp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", required=True, help="s3://bucket/prefix")
    ap.add_argument("--neve-bin", action="append", required=True)
    ap.add_argument("--toxiproxy", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--listings", type=int, default=15)
    ap.add_argument("--files", type=int, default=10_000)
    a = ap.parse_args()

    table = f"{a.warehouse}/listing{a.files}"
    bp.listing_table(a.neve_bin[0], table, a.files)
    upstream = urllib.parse.urlsplit(os.environ["AWS_ENDPOINT_URL"]).netloc
    link_proc, link = bp.start_link(a.toxiproxy, upstream, 30, 51_200)
    bucket = table.rpartition("/")[2]
    medians = {b: [] for b in a.neve_bin}
    try:
        for r in range(a.rounds):
            for b in a.neve_bin:
                env = {**os.environ, "AWS_ENDPOINT_URL": link, "NEVE_PROXY_ACCESS_KEY_ID": bp.KEY,
                       "NEVE_PROXY_SECRET_ACCESS_KEY": bp.SECRET}
                proc = subprocess.Popen(
                    [b, "proxy", "--warehouse", a.warehouse, "--listen", "127.0.0.1:0",
                     "--cache-memory", "256MiB", "--cache-disk", "0"],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                url = proc.stdout.readline().split()[-1]
                try:
                    cold, n = bp.list_all(url, bp.KEY, bp.SECRET, bucket, "")
                    assert n == a.files, n
                    cpu0 = bp.proc_cpu(proc.pid)
                    warm = [bp.list_all(url, bp.KEY, bp.SECRET, bucket, "")[0] * 1e3 for _ in range(a.listings)]
                    cpu = (bp.proc_cpu(proc.pid) - cpu0) / a.listings * 1e3
                finally:
                    proc.terminate()
                    proc.wait()
                m = statistics.median(warm)
                medians[b].append(m)
                print(f"round {r + 1} {b}: cold {cold * 1e3:.0f} ms, warm median {m:.1f} ms, "
                      f"proxy CPU {cpu:.1f} ms a listing; warm {' '.join(f'{t:.0f}' for t in warm)}")
    finally:
        link_proc.terminate()
    for b, ms in medians.items():
        print(f"{b}: warm medians {' '.join(f'{m:.1f}' for m in ms)} ms")


if __name__ == "__main__":
    main()

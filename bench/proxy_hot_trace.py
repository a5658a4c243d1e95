"""What a fresh `neve proxy` spends on hot scans, by system call: the counts behind
BENCHMARKS.md (issue 16, "What the proxy's hot scan spends, by system call"). Over a local
warehouse (as `bench/proxy_hot_ab.py`), one scan fills the cache; then `strace -f` over one hot
scan gives the `writev`s (count, bytes, median size), the connections accepted, and those chdb
reset (a `shutdown` answered ENOTCONN) with what their last response had sent; and, with
`--perf FILE`, `perf record -F 1999 --call-graph dwarf` over `--hot` more hot scans.

    python bench/proxy_hot_trace.py --warehouse /dev/shm/pw --neve-bin NEVE [--table taxi]
        [--threads 2] [--perf /tmp/proxy.perf --hot 3]

Needs strace (and perf for `--perf`); uses bench/proxy.py's proxy and chdb helpers.
"""
import argparse
import collections
import re
import statistics
import subprocess
import tempfile
import time

import proxy as bp


def traced(pid, out, run):
    """`run()` while `strace -f` writes the proxy's network calls to `out`."""
    st = subprocess.Popen(["strace", "-f", "-e", "trace=writev,accept4,shutdown,close", "-o", out,
                           "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    try:
        return run()
    finally:
        st.send_signal(2)
        st.wait()


def summary(path):
    """Bytes per `writev`, accepts, and the bytes each reset connection's last response sent."""
    writes, accepts, resets = [], 0, []
    since_head = collections.defaultdict(int)  # per fd: bytes since a response's head
    pending = {}  # per thread: the fd of an unfinished writev
    for line in open(path):
        tid = line.split()[0]
        if m := re.search(r'writev\((\d+), \[\{iov_base="HTTP/1\.1 ', line):
            since_head[m.group(1)] = 0
        if m := re.search(r"writev\((\d+),.*= (\d+)$", line):
            n = int(m.group(2))
            writes.append(n)
            since_head[m.group(1)] += n
        elif m := re.search(r"writev\((\d+),.*<unfinished", line):
            pending[tid] = m.group(1)
        elif (m := re.search(r"<\.\.\. writev resumed>.*= (\d+)$", line)) and tid in pending:
            n = int(m.group(1))
            writes.append(n)
            since_head[pending.pop(tid)] += n
        elif ("accept4(" in line or "accept4 resumed" in line) and re.search(r"= \d+$", line):
            accepts += 1
        elif m := re.search(r"shutdown\((\d+),.*ENOTCONN", line):
            resets.append(since_head.pop(m.group(1), 0))
    return writes, accepts, resets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", required=True, help="a local folder holding the table")
    ap.add_argument("--table", default="taxi")
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--perf", help="also perf-record the proxy over --hot hot scans into this file")
    ap.add_argument("--hot", type=int, default=3)
    a = ap.parse_args()

    p = bp.NeveProxy(a.neve_bin, a.warehouse, "http://127.0.0.1:1", None)
    try:
        sql = bp.queries(f"{p.url}/{a.table}/**/*.parquet", bp.KEY, bp.SECRET, a.threads)["scan"]
        bp.chdb_time(sql)
        with tempfile.NamedTemporaryFile(suffix=".strace") as f:
            t, _ = traced(p.proc.pid, f.name, lambda: bp.chdb_time(sql))
            writes, accepts, resets = summary(f.name)
        print(f"hot scan under strace {t:.2f}s: {len(writes)} writev, {sum(writes) / 1e6:.0f} MB, "
              f"median {statistics.median(writes):.0f} B; {accepts} connections accepted, "
              f"{len(resets)} reset by the client, their last responses "
              f"{sum(resets) / 1e6:.0f} MB sent (median {statistics.median(resets or [0]) / 1e6:.2f} MB)")
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-F", "1999", "--call-graph", "dwarf,16384",
                                     "-o", a.perf, "-p", str(p.proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
            for _ in range(a.hot):
                t, _ = bp.chdb_time(sql)
                print(f"hot scan under perf {t:.2f}s")
            perf.send_signal(2)
            perf.wait()
            print(f"perf report -i {a.perf} --no-children --sort dso,sym")
    finally:
        p.stop()


if __name__ == "__main__":
    main()

"""chdb's side of `neve bench merge-semantics`: the same rows, inserted file by file (one part
per neve insert, merges stopped) into a ReplacingMergeTree, queried with FINAL; then OPTIMIZE
FINAL and the same queries. Prints one JSON object: per state, per query, the medians."""
import argparse
import json
import statistics
import sys
import tempfile
import time

from chdb import session

QUERIES = [
    ("count_sum", "SELECT count(), sum(x) FROM users{final}"),
    ("lookup", "SELECT user_id, x, region FROM users{final} WHERE user_id = 424242"),
    ("by_region", "SELECT region, count(), sum(x) FROM users{final} GROUP BY region ORDER BY region"),
]


def timed(s, sql, runs):
    secs = []
    out = None
    for _ in range(runs):
        t = time.perf_counter()
        out = s.query(sql, "CSV")
        secs.append(time.perf_counter() - t)
    return secs, str(out)


def run_queries(s, runs):
    res = []
    for name, q in QUERIES:
        f, answer = timed(s, q.format(final=" FINAL"), runs)
        p, _ = timed(s, q.format(final=""), runs)
        print(f"  chdb {name}: FINAL {f}, plain {p}", file=sys.stderr)
        res.append({"query": name, "final_median_s": statistics.median(f), "final_runs_s": f,
                    "plain_median_s": statistics.median(p), "answer": answer})
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", required=True)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    files = json.load(open(a.files))
    with tempfile.TemporaryDirectory() as d:
        s = session.Session(d)
        s.query("CREATE DATABASE IF NOT EXISTS b")
        s.query("USE b")
        s.query("""CREATE TABLE users (user_id Int64, updated_at DateTime64(6), is_deleted UInt8, x Int64,
                   region String) ENGINE = ReplacingMergeTree(updated_at, is_deleted) ORDER BY user_id""")
        s.query("SYSTEM STOP MERGES users")
        t = time.perf_counter()
        for f in files:
            path = f.removeprefix("file://")
            s.query(f"""INSERT INTO users SELECT user_id, updated_at, toUInt8(is_deleted), x, region
                        FROM file('{path}', Parquet)""")
        load = time.perf_counter() - t
        parts = str(s.query("SELECT count() FROM system.parts WHERE table = 'users' AND active", "CSV")).strip()
        print(f"  chdb loaded {len(files)} files in {load:.1f}s, {parts} parts", file=sys.stderr)
        unmerged = run_queries(s, a.runs)
        s.query("SYSTEM START MERGES users")
        t = time.perf_counter()
        s.query("OPTIMIZE TABLE users FINAL")
        optimize = time.perf_counter() - t
        optimized = run_queries(s, a.runs)
    print(json.dumps({"load_s": load, "parts": int(parts), "optimize_s": optimize,
                      "unmerged": unmerged, "optimized": optimized}))


if __name__ == "__main__":
    main()

"""The six seed queries of two `neve` builds, in turns (who goes first alternates each round):
`neve bench query --table TABLE --runs 3 --json` of each, then each query's median over the
rounds of each build's medians, and their ratio (BENCHMARKS.md, issue 19, "Seventy-ninth
session", where it compared two allocators).

    python3 bench/query_ab.py --table /dev/shm/pw/taxi --a NEVE_A --b NEVE_B [--rounds 3]
"""
import argparse
import collections
import json
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--table", required=True, help="an existing taxi table")
    ap.add_argument("--a", required=True, help="the first neve binary")
    ap.add_argument("--b", required=True, help="the second neve binary")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    res = {a.a: collections.defaultdict(list), a.b: collections.defaultdict(list)}
    for r in range(a.rounds):
        for neve in (a.a, a.b) if r % 2 == 0 else (a.b, a.a):
            out = subprocess.run([neve, "bench", "query", "--table", a.table, "--runs", "3", "--json"],
                                 capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                d = json.loads(line)
                res[neve][d["query"]].append(d["neve_median_s"])
        print(f"round {r + 1}:", {q: (round(res[a.a][q][-1], 3), round(res[a.b][q][-1], 3))
                                   for q in res[a.a]}, flush=True)
    for q in res[a.a]:
        ma, mb = statistics.median(res[a.a][q]), statistics.median(res[a.b][q])
        print(f"{q}: A {ma:.4f} s, B {mb:.4f} s, B/A {mb / ma:.3f}")


if __name__ == "__main__":
    main()

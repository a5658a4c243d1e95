"""`neve bench merge` of two `neve` builds, in turns (who goes first alternates each round), on
a fresh folder each time: the load of many small inserts (its seconds, from the bench's log),
the merge's seconds and its peak RSS; the medians over the rounds and their ratio (BENCHMARKS.md,
issue 19, "Seventy-ninth session", where it compared two allocators).

    python3 bench/merge_ab.py --a NEVE_A --b NEVE_B [--dir /dev/shm/abm] [--rounds 4]
        [--rows 2000000] [--insert-rows 20000]
"""
import argparse
import collections
import json
import re
import shutil
import statistics
import subprocess


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the first neve binary")
    ap.add_argument("--b", required=True, help="the second neve binary")
    ap.add_argument("--dir", default="/dev/shm/abm", help="a folder of its own: removed before each run")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--insert-rows", type=int, default=20_000)
    a = ap.parse_args()
    res = {a.a: collections.defaultdict(list), a.b: collections.defaultdict(list)}
    for r in range(a.rounds):
        for neve in (a.a, a.b) if r % 2 == 0 else (a.b, a.a):
            shutil.rmtree(a.dir, ignore_errors=True)
            p = subprocess.run([neve, "bench", "merge", "--target", a.dir, "--rows", str(a.rows),
                                "--insert-rows", str(a.insert_rows), "--runs", "1", "--json"],
                               capture_output=True, text=True, check=True)
            d = json.loads(p.stdout.strip().splitlines()[-1])
            res[neve]["load_s"].append(float(re.search(r"inserts: .*\(([0-9.]+)s\)", p.stderr).group(1)))
            res[neve]["merge_s"].append(d["merge_s"])
            res[neve]["peak_mb"].append(d["merge_peak_rss_mb"])
            print(f"round {r + 1} {neve}:", {k: v[-1] for k, v in res[neve].items()}, flush=True)
    shutil.rmtree(a.dir, ignore_errors=True)
    for k in res[a.a]:
        ma, mb = statistics.median(res[a.a][k]), statistics.median(res[a.b][k])
        print(f"{k}: A {ma:.3f}, B {mb:.3f}, B/A {mb / ma:.3f}")


if __name__ == "__main__":
    main()

"""Two builds of the Python module, `t.insert` of one in-memory table, by turns: each round runs
one process per build, each inserting the table --runs times. Prints each process's runs (wall
seconds / CPU seconds), then per build the median over the rounds of each round's median.
What `BENCHMARKS.md` (issue 15, "Fifty-fourth session") compares builds with:

    neve bench gen taxi.parquet --rows 10000000 --seed 1   # then to Arrow IPC, 65,536-row batches
    python bench/python_builds_ab.py --arrow taxi.arrow --base OLD/lib_neve.so \
        --new NEW/lib_neve.so --target /dev/shm/ab --rounds 4 --runs 3

Run with the Python of a venv where `neve` is installed (its pure-Python files are copied, with
each build's library in place of the installed one). Tables are month-partitioned and sorted
as in bench/python_ingest.py, and deleted after each insert. Asserts nothing.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def child(arrow, target, runs):
    import resource
    import time

    import pyarrow.ipc as ipc

    import neve

    tbl = ipc.open_file(arrow).read_all()

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    for i in range(runs):
        d = os.path.join(target, f"ab-{os.getpid()}-{i}")
        shutil.rmtree(d, ignore_errors=True)
        t = neve.create_table(d, partition_by="month(trip_start_timestamp) as d",
                              sort_by=["payment_type", "trip_start_timestamp"])
        c, w = cpu(), time.perf_counter()
        t.insert(tbl)
        print(f"{time.perf_counter() - w:.3f} {cpu() - c:.3f}", flush=True)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrow", required=True)
    ap.add_argument("--base", required=True, help="the base build's lib_neve.so")
    ap.add_argument("--new", required=True, help="the new build's lib_neve.so")
    ap.add_argument("--target", required=True, help="folder for the tables")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.arrow, a.target, a.runs)
    import neve

    installed = os.path.dirname(neve.__file__)
    tmp = tempfile.mkdtemp(prefix="neve-builds-ab-")
    try:
        paths = {}
        for name, so in (("base", a.base), ("new", a.new)):
            pkg = os.path.join(tmp, name, "neve")
            shutil.copytree(installed, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
            shutil.copy(so, os.path.join(pkg, "_neve.abi3.so"))
            paths[name] = os.path.join(tmp, name)
        os.makedirs(a.target, exist_ok=True)
        medians = {"base": ([], []), "new": ([], [])}
        for r in range(1, a.rounds + 1):
            for name in ("base", "new"):
                env = dict(os.environ, PYTHONPATH=paths[name])
                out = subprocess.run([sys.executable, __file__, "--child", "--arrow", a.arrow, "--target",
                                      a.target, "--runs", str(a.runs), "--base", a.base, "--new", a.new],
                                     env=env, check=True, capture_output=True, text=True).stdout
                runs = [tuple(map(float, line.split())) for line in out.strip().splitlines()]
                print(f"round {r} {name}: " + " ".join(f"{w:.3f}/{c:.3f}" for w, c in runs), flush=True)
                medians[name][0].append(statistics.median(w for w, _ in runs))
                medians[name][1].append(statistics.median(c for _, c in runs))
        for name, (walls, cpus) in medians.items():
            print(f"{name}: medians over {a.rounds} rounds: wall {statistics.median(walls):.3f} s, "
                  f"CPU {statistics.median(cpus):.3f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

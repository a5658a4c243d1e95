"""Issue 19's worst case through the Python package: what Iceberg metadata written before
`t.insert` returns adds to it, where every insert replaces rows in all 132 partitions.

    python bench/iceberg_python.py --arrow taxi.arrow --dir /dev/shm/ip --inserts 12

`taxi.arrow` from `neve bench gen taxi.arrow --rows 1200000 --seed 7`, cut into --inserts
slices of equal size. Two tables month-partitioned with `replace(key = [taxi_id], version =
trip_start_timestamp)` (as `neve bench iceberg --merge …` and bench/iceberg_serve.py make
them), one with `iceberg=True`; each slice goes into both, who goes first alternating, in one
Python process (the module's allocator as users have it). Prints each pair on stderr and one
JSON object on stdout: the medians of wall time and process CPU per insert, and the added
fraction.
"""
import argparse
import json
import resource
import shutil
import statistics
import sys
import time

import pyarrow as pa
import pyarrow.ipc as ipc

import neve

MERGE = "replace(key = [taxi_id], version = trip_start_timestamp)"


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(table, rows):
    t, c = time.perf_counter(), cpu()
    table.insert(rows)
    return time.perf_counter() - t, cpu() - c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrow", required=True, help="an Arrow IPC file of taxi rows")
    ap.add_argument("--dir", required=True, help="a folder for the two tables (emptied first)")
    ap.add_argument("--inserts", type=int, default=12)
    a = ap.parse_args()
    with pa.OSFile(a.arrow) as src:
        rows = ipc.open_file(src).read_all()
    shutil.rmtree(a.dir, ignore_errors=True)
    layout = dict(partition_by="month(trip_start_timestamp) as d",
                  sort_by=["taxi_id", "trip_start_timestamp"], merge=MERGE)
    plain = neve.create_table(f"{a.dir}/plain", **layout)
    ice = neve.create_table(f"{a.dir}/iceberg", iceberg=True, **layout)
    step = rows.num_rows // a.inserts
    walls = {"plain": [], "iceberg": []}
    cpus = {"plain": [], "iceberg": []}
    for i in range(a.inserts):
        part = rows.slice(i * step, step)
        order = [("plain", plain), ("iceberg", ice)]
        if i % 2:
            order.reverse()
        for name, t in order:
            w, c = timed(t, part)
            walls[name].append(w)
            cpus[name].append(c)
        print(f"insert {i + 1}: plain {walls['plain'][-1] * 1e3:.1f} ms, "
              f"with Iceberg {walls['iceberg'][-1] * 1e3:.1f} ms", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in walls.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    added = med["iceberg"] / med["plain"] - 1
    print(f"{step} rows an insert: plain {med['plain'] * 1e3:.1f} ms, with Iceberg "
          f"{med['iceberg'] * 1e3:.1f} ms ({added:+.1%}); CPU {med_cpu['plain'] * 1e3:.1f} → "
          f"{med_cpu['iceberg'] * 1e3:.1f} ms", file=sys.stderr)
    assert ice.version == plain.version == a.inserts
    print(json.dumps({
        "rows_per_insert": step, "inserts": a.inserts,
        "plain_median_ms": round(med["plain"] * 1e3, 1),
        "iceberg_median_ms": round(med["iceberg"] * 1e3, 1),
        "added_fraction": round(added, 4),
        "plain_cpu_median_ms": round(med_cpu["plain"] * 1e3, 1),
        "iceberg_cpu_median_ms": round(med_cpu["iceberg"] * 1e3, 1),
    }))


if __name__ == "__main__":
    main()

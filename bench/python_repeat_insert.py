"""Repeated inserts in one Python process: each `t.insert`'s wall, user and system time and
page faults, to see what a process's first insert costs against later ones (the allocator's
memory comes from the kernel on first use). Prints figures, asserts nothing.

    neve bench gen /tmp/taxi.parquet --rows 1000000 --seed 1
    python bench/python_repeat_insert.py /tmp/taxi.parquet --dir /tmp/repeat --runs 5 [--gap 1.5]
"""

import argparse
import resource
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq

import neve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parquet")
    ap.add_argument("--dir", required=True, help="where to create the tables (each deleted after its run)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds idle between inserts")
    a = ap.parse_args()
    # In batches of 65,536 rows, as `neve bench ingest` generates them.
    tbl = pa.Table.from_batches(pq.read_table(a.parquet).to_batches(max_chunksize=65_536))
    for i in range(a.runs):
        d = f"{a.dir.rstrip('/')}/repeat-{i}"
        shutil.rmtree(d, ignore_errors=True)
        t = neve.create_table(d, partition_by="month(trip_start_timestamp) as d",
                              sort_by=["payment_type", "trip_start_timestamp"])
        r0, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        t.insert(tbl)
        w, r1 = time.perf_counter() - w, resource.getrusage(resource.RUSAGE_SELF)
        print(f"insert {i + 1}: {w:.2f}s, user {r1.ru_utime - r0.ru_utime:.2f}s, system "
              f"{r1.ru_stime - r0.ru_stime:.2f}s, {r1.ru_minflt - r0.ru_minflt} page faults, "
              f"peak {r1.ru_maxrss // 1024} MB", flush=True)
        shutil.rmtree(d, ignore_errors=True)
        time.sleep(a.gap)


if __name__ == "__main__":
    main()

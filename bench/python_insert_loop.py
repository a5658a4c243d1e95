"""The same pyarrow table inserted into fresh tables again and again by one Python process, each
insert's wall time, CPU and page faults printed: `t.insert` in its steady state, where the
module's allocator keeps memory between inserts. What `BENCHMARKS.md` (issue 15, "Sixteenth
session") profiles:

    python bench/python_insert_loop.py --arrow taxi.arrow --dir /tmp/loop --inserts 8
    perf record -F 1999 -o insert.perf -- python bench/python_insert_loop.py …

`--marks` also prints each insert's start and end on CLOCK_MONOTONIC, the clock `perf record -k
CLOCK_MONOTONIC` stamps samples with, so `perf report --time START,END` shows one insert alone
(a process's first insert against its later ones).

`taxi.arrow` from `neve bench gen taxi.arrow --rows 1000000`. Tables are month-partitioned and
sorted as in bench/python_ingest.py.
"""
import argparse
import resource
import shutil
import time

import pyarrow as pa
import pyarrow.ipc as ipc

import neve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrow", required=True, help="an Arrow IPC file of taxi rows")
    ap.add_argument("--dir", required=True, help="a folder for the tables (emptied first)")
    ap.add_argument("--inserts", type=int, default=5)
    ap.add_argument("--marks", action="store_true", help="print each insert's CLOCK_MONOTONIC span")
    a = ap.parse_args()
    # Read into memory, as bench/python_ingest.py holds its table (a memory map would make the
    # first insert fault in the file's pages too).
    with pa.OSFile(a.arrow) as src:
        table = ipc.open_file(src).read_all()
    shutil.rmtree(a.dir, ignore_errors=True)
    for i in range(a.inserts):
        t = neve.create_table(f"{a.dir}/t{i}", partition_by="month(trip_start_timestamp) as d",
                              sort_by=["payment_type", "trip_start_timestamp"])
        r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        m0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        t.insert(table)
        m1 = time.clock_gettime(time.CLOCK_MONOTONIC)
        wall, r1 = time.perf_counter() - w0, resource.getrusage(resource.RUSAGE_SELF)
        if a.marks:
            print(f"marks {i + 1}: {m0:.6f},{m1:.6f}", flush=True)
        cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        print(f"insert {i + 1}: {wall:.3f} s, CPU {cpu:.2f} s, page faults {r1.ru_minflt - r0.ru_minflt}",
              flush=True)


if __name__ == "__main__":
    main()

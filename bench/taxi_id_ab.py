"""What a long, repetitive string column costs an insert: `t.insert` of the same taxi rows with
`taxi_id` as generated (64 hex characters, 6,000 values) and with each value replaced by a
9-character id of its own, in turns (BENCHMARKS.md, issue 15, thirty-second session).

    python bench/taxi_id_ab.py --parquet taxi.parquet --rows 1000000 --rounds 8 --dir /tmp/ab

`taxi.parquet` is `neve bench gen --rows N --seed 1 taxi.parquet`; the wheel must be installed.
"""
import argparse
import os
import shutil
import time

import neve
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def load(path, n):
    batches, rows = [], 0
    for b in pq.ParquetFile(path).iter_batches(batch_size=65536):
        batches.append(b)
        rows += b.num_rows
        if rows >= n:
            break
    return pa.Table.from_batches(batches).slice(0, n).combine_chunks()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parquet", required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    long = load(a.parquet, a.rows)
    ids = pc.dictionary_encode(long.column("taxi_id")).combine_chunks().indices
    short = long.set_column(long.schema.get_field_index("taxi_id"), "taxi_id",
                            pc.cast(pc.add(ids, 100_000_000), pa.string()))
    print(f"input {long.nbytes / 1e6:.0f} MB, with short ids {short.nbytes / 1e6:.0f} MB")
    for r in range(a.rounds):
        order = [("long", long), ("short", short)]
        for name, table in order if r % 2 == 0 else order[::-1]:
            path = os.path.join(a.dir, name)
            shutil.rmtree(path, ignore_errors=True)
            t = neve.create_table(path, partition_by="month(trip_start_timestamp) as d",
                                  sort_by=["payment_type", "trip_start_timestamp"])
            c0, t0 = os.times(), time.perf_counter()
            t.insert(table)
            wall, c1 = time.perf_counter() - t0, os.times()
            cpu = c1.user - c0.user + c1.system - c0.system
            print(f"{name} {wall:.3f}s CPU {cpu:.2f}s", flush=True)


if __name__ == "__main__":
    main()

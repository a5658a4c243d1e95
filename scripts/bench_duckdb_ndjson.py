"""DuckDB peer for `neve bench nested` from NDJSON: the same NDJSON file read with the same
declared column types (`read_json(columns=...)`), day-partitioned Parquet (zstd) written sorted
like neve's table, into a local folder. One COPY statement per run, all of it timed (reading,
parsing, sorting, writing), as `neve insert` is. Prints one JSON object: {"runs_s": [...]}."""
import argparse, json, time

import duckdb

ap = argparse.ArgumentParser()
ap.add_argument("--input", required=True)
ap.add_argument("--target", required=True)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--columns", required=True, help="DuckDB struct literal of column types")
ap.add_argument("--sort-by", default="event_type, ts")
ap.add_argument("--ts-column", default="ts")
a = ap.parse_args()

runs = []
for i in range(a.runs):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    t = time.perf_counter()
    con.execute(
        f"""COPY (SELECT *, strftime({a.ts_column}, '%Y-%m-%d') AS d
                  FROM read_json('{a.input}', format = 'newline_delimited', columns = {a.columns})
                  ORDER BY {a.sort_by})
            TO '{a.target}-{i}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (d))"""
    )
    runs.append(time.perf_counter() - t)
    con.close()
print(json.dumps({"runs_s": runs}))

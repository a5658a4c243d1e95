"""DuckDB's `iceberg_scan` over one or more copies of a table's Iceberg metadata, against
`read_parquet` over the table's `_data/` glob, in turns: what `BENCHMARKS.md` (issue 19,
"What DuckDB's iceberg_scan pays per file") compares. Each copy is the same table (its
`_data/` and `_log/`) whose `metadata/` was rebuilt (`neve iceberg sync --full`) by another
build. A fresh connection per run; the first round is a warm-up; prints medians and each
copy's ratio to the glob.

    python bench/duckdb_iceberg_ab.py --glob /tmp/ice/taxi --copy all=/tmp/ice/t_all \\
        --copy none=/tmp/ice/t_none [--queries count_by_month,count_by_payment_type] [--runs 9]
"""
import argparse
import json
import pathlib
import statistics
import time

import duckdb
import duckdb_ext

EXT = pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions"
QUERIES = pathlib.Path(__file__).with_name("seed_queries.json")


def run(sql):
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{EXT}'")
    con.execute("LOAD iceberg")
    t = time.perf_counter()
    con.execute(sql).fetchall()
    return (time.perf_counter() - t) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--glob", required=True, help="a table folder; its _data/*/*.parquet is read")
    ap.add_argument("--copy", action="append", default=[], help="NAME=table folder")
    ap.add_argument("--queries", default="count_by_month,count_by_payment_type,month_8_by_payment_type")
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    q = {x["name"]: x["duckdb"] for x in json.loads(QUERIES.read_text())["queries"]}
    srcs = {"glob": f"read_parquet('{a.glob}/_data/*/*.parquet')"}
    for c in a.copy:
        name, _, path = c.partition("=")
        srcs[name] = f"iceberg_scan('{path}')"
    for name in a.queries.split(","):
        ts = {k: [] for k in srcs}
        for _ in range(a.runs):
            for k, s in srcs.items():
                ts[k].append(run(q[name].format(table=s)))
        m = {k: statistics.median(v[1:]) for k, v in ts.items()}
        print(f"{name:26s} " + "  ".join(f"{k} {v:6.1f} ms ({v / m['glob']:.2f})" for k, v in m.items()))


if __name__ == "__main__":
    main()

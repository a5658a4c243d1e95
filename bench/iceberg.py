"""The read half of `neve bench iceberg`: the six seed queries on one taxi table with Iceberg
metadata, read by Spark (two workers) through Iceberg (also with one task group per partition,
`spark.sql.iceberg.planning.preserve-data-grouping`) and through a Parquet glob of `_data/`,
and by DuckDB through `iceberg_scan` and a Parquet glob, against
`neve sql`. Each figure is the median of --runs; runs of the readers alternate per query.
Prints per-query lines on stderr and one JSON object on stdout."""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from spark_cluster import cluster  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    rows = fn()
    return time.perf_counter() - t, rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--neve-bin", required=True)
    p.add_argument("--table", required=True, help="a local table with Iceberg metadata")
    p.add_argument("--queries", required=True)
    p.add_argument("--jar", required=True, help="iceberg-spark-runtime")
    p.add_argument("--python", default=sys.executable, help="the workers' Python")
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()

    import duckdb
    import duckdb_ext

    queries = json.loads(pathlib.Path(a.queries).read_text())["queries"]
    ext_dir = pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions"
    glob = f"{a.table}/_data/*/*.parquet"

    def duck(sql):
        # A fresh connection per run, as `neve sql` is a fresh process per run.
        con = duckdb.connect()
        con.execute(f"SET extension_directory = '{ext_dir}'")
        con.execute("LOAD iceberg")
        n = len(con.execute(sql).fetchall())
        con.close()
        return n

    def neve_sql(sql):
        out = subprocess.run([a.neve_bin, "sql", sql, "--table", f"taxi={a.table}", "--format", "csv"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        return out.stdout.count("\n") - 1

    results = []
    with tempfile.TemporaryDirectory() as logs, cluster(a.jar, logs, a.python, worker_memory="2g",
                                                        executor_memory="1536m") as spark:
        spark.read.format("iceberg").load(a.table).createOrReplaceTempView("ice")
        spark.read.option("basePath", f"{a.table}/_data").parquet(glob).createOrReplaceTempView("glob")
        def spark_grouped(sql):
            # One task group per partition (docs/ENGINES.md, "Aggregates by partition").
            spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", "true")
            try:
                return len(spark.sql(sql).collect())
            finally:
                spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", "false")

        readers = {
            "spark_iceberg": lambda q: len(spark.sql(q["spark"].format(table="ice")).collect()),
            "spark_iceberg_grouped": lambda q: spark_grouped(q["spark"].format(table="ice")),
            "spark_glob": lambda q: len(spark.sql(q["spark"].format(table="glob")).collect()),
            "duckdb_iceberg_scan": lambda q: duck(q["duckdb"].format(table=f"iceberg_scan('{a.table}')")),
            "duckdb_glob": lambda q: duck(q["duckdb"].format(
                table=f"read_parquet('{glob}', hive_partitioning = false)")),
            "neve_sql": lambda q: neve_sql(q["neve"].format(table="taxi")),
        }
        for q in queries:
            q = {**q, "spark": q["duckdb"].replace("approx_quantile(", "percentile_approx(")}
            for fn in readers.values():
                fn(q)  # warm: the JVM's classes, the page cache
            times = {name: [] for name in readers}
            rows = {}
            for _ in range(a.runs):
                for name, fn in readers.items():
                    s, n = timed(lambda: fn(q))
                    times[name].append(s)
                    rows[name] = n
            medians = {name: statistics.median(ts) for name, ts in times.items()}
            line = {
                "query": q["name"], "rows": rows,
                "median_s": medians,
                "spark_iceberg_vs_glob": medians["spark_iceberg"] / medians["spark_glob"],
                "spark_iceberg_grouped_vs_glob": medians["spark_iceberg_grouped"] / medians["spark_glob"],
                "duckdb_iceberg_vs_glob": medians["duckdb_iceberg_scan"] / medians["duckdb_glob"],
                "duckdb_iceberg_vs_neve_sql": medians["duckdb_iceberg_scan"] / medians["neve_sql"],
                "runs_s": times,
            }
            print(f"{q['name']:26} " + "  ".join(f"{k} {v * 1e3:8.1f} ms" for k, v in medians.items()),
                  file=sys.stderr)
            results.append(line)
    print(json.dumps({"bench": "iceberg-read", "table": a.table, "runs": a.runs, "queries": results}))


if __name__ == "__main__":
    main()

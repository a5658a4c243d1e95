"""Spark (local[2]) on one table with Iceberg metadata: the seed queries through Iceberg as
planned by default, with one task group per partition
(`spark.sql.iceberg.planning.preserve-data-grouping`), with that and
`spark.sql.sources.v2.bucketing.enabled`, and through a Parquet glob of `_data/`. Runs of the
readers alternate per query after a warm one; prints each query's medians (seconds, and over the
glob's) and the task counts with and without grouping.

    python bench/spark_grouping_ab.py --jar iceberg-spark-runtime-4.1_2.13-1.12.0.jar \
        --table /tmp/ice/taxi --runs 3 [--queries medians_by_month,...]
"""
import argparse
import json
import pathlib
import statistics
import time

from pyspark.sql import SparkSession

MODES = {  # view, preserve-data-grouping, v2 bucketing
    "ice": ("ice", "false", "false"),
    "ice_pdg": ("ice", "true", "false"),
    "ice_pdg_b": ("ice", "true", "true"),
    "glob": ("glob", "false", "false"),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jar", required=True, help="iceberg-spark-runtime")
    p.add_argument("--table", required=True, help="a local table with Iceberg metadata")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--queries", default="", help="names from bench/seed_queries.json (all if empty)")
    a = p.parse_args()
    names = set(filter(None, a.queries.split(",")))
    spark = (SparkSession.builder.master("local[2]").config("spark.jars", a.jar)
             .config("spark.driver.memory", "3g").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    seed = pathlib.Path(__file__).with_name("seed_queries.json")
    queries = [q for q in json.loads(seed.read_text())["queries"] if not names or q["name"] in names]
    spark.read.format("iceberg").load(a.table).createOrReplaceTempView("ice")
    spark.read.option("basePath", f"{a.table}/_data").parquet(
        f"{a.table}/_data/*/*.parquet").createOrReplaceTempView("glob")

    def run(sql, view, grouping, bucketing):
        spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", grouping)
        spark.conf.set("spark.sql.sources.v2.bucketing.enabled", bucketing)
        t = time.perf_counter()
        spark.sql(sql.format(table=view)).collect()
        return time.perf_counter() - t

    for q in queries:
        sql = q["duckdb"].replace("approx_quantile(", "percentile_approx(")
        for mode in MODES.values():
            run(sql, *mode)  # warm
        times = {k: [] for k in MODES}
        for _ in range(a.runs):
            for k, mode in MODES.items():
                times[k].append(run(sql, *mode))
        glob = statistics.median(times["glob"])
        print(q["name"], {k: (round(statistics.median(ts), 2), round(statistics.median(ts) / glob, 2))
                          for k, ts in times.items()}, flush=True)
    for grouping in ("true", "false"):
        spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", grouping)
        print("tasks, preserve-data-grouping", grouping, spark.table("ice").rdd.getNumPartitions())


if __name__ == "__main__":
    main()

"""Peers for `neve bench query`: the seed queries through DuckDB (read_parquet over a glob of
the table's data files) and chdb (file()/s3() over the same glob), in one process each.
Prints one JSON object: {"duckdb": {name: [seconds...]}, "chdb": {...}}."""
import argparse, json, os, pathlib, time

ap = argparse.ArgumentParser()
ap.add_argument("--queries", required=True)
ap.add_argument("--data", required=True, help="local folder or s3://bucket/prefix of the table")
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--skip", default="", help="comma-separated peers to skip")
a = ap.parse_args()
queries = json.loads(pathlib.Path(a.queries).read_text())["queries"]
skip = set(filter(None, a.skip.split(",")))
out = {}

if "duckdb" not in skip:
    import duckdb

    def connect():
        """A fresh DuckDB, as a new `duckdb` process would be. DuckDB caches remote file blocks
        and Parquet metadata per database (a warm second run on MinIO took 0.4 s where a cold
        one took 3.3 s); neve's runs each start cold, so DuckDB's do too. Setup is not timed."""
        con = duckdb.connect()
        if a.data.startswith("s3://"):
            import duckdb_ext
            ext_dir = pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions"
            con.execute(f"SET extension_directory = '{ext_dir}'")
            con.execute("LOAD httpfs")
            endpoint = os.environ["AWS_ENDPOINT_URL"].removeprefix("http://")
            con.execute(f"""CREATE SECRET s (TYPE s3, KEY_ID '{os.environ['AWS_ACCESS_KEY_ID']}',
                SECRET '{os.environ['AWS_SECRET_ACCESS_KEY']}', ENDPOINT '{endpoint}',
                URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')""")
        return con

    src = f"read_parquet('{a.data.rstrip('/')}/_data/**/*.parquet')"
    res = {}
    for q in queries:
        sql = q["duckdb"].format(table=src)
        times = []
        for _ in range(a.runs):
            con = connect()
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append(time.perf_counter() - t)
            con.close()
        res[q["name"]] = times
    out["duckdb"] = res

if "chdb" not in skip:
    import chdb
    if a.data.startswith("s3://"):
        bucket_prefix = a.data.removeprefix("s3://").rstrip("/")
        endpoint = os.environ["AWS_ENDPOINT_URL"].rstrip("/")
        src = (f"s3('{endpoint}/{bucket_prefix}/_data/**/*.parquet', "
               f"'{os.environ['AWS_ACCESS_KEY_ID']}', '{os.environ['AWS_SECRET_ACCESS_KEY']}', 'Parquet')")
    else:
        src = f"file('{os.path.abspath(a.data)}/_data/**/*.parquet', 'Parquet')"
    res = {}
    for q in queries:
        sql = q["clickhouse"].format(table=src) + " FORMAT Null"
        times = []
        for _ in range(a.runs):
            t = time.perf_counter()
            chdb.query(sql)
            times.append(time.perf_counter() - t)
        res[q["name"]] = times
    out["chdb"] = res

print(json.dumps(out))

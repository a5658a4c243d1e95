"""The Python package's benchmark (issue 15): prints figures, asserts nothing.

From one in-memory pyarrow Table of N taxi rows (`neve bench gen`, seed 1), into a
month-partitioned table, in the same run and on the same data:

- neve `t.insert` (sorted by payment_type, trip_start_timestamp; zstd);
- the same insert through neve-core in Rust (`neve bench ingest --json`, same generator and seed);
- delta-rs `write_deltalake` (partitioned by a month column computed before the clock starts);
- pyiceberg `append` to a table partitioned by month(trip_start_timestamp) (SQLite catalog);
- IceDB `insert` (its own repository, in a venv of its own; S3 only; up to 1M rows, as it takes
  a list of dicts).

Then the six seed queries through `t.sql` and through DuckDB over the same files.

    python bench/python_ingest.py --neve-bin target/release/neve --target DIR_OR_S3 \
        --rows 1000000,10000000 --runs 3 [--icedb-python VENV/bin/python --icedb-repo DIR]

Each insert figure is the median of --runs runs, each query's of --query-runs; every run is
printed. neve's Python inserts run in a row, as each peer's do, then its Rust inserts; the run
prints the bound beside the insert target: the CPU time the parts' sorting and encoding take
(and MinIO's, given its pid in NEVE_MINIO_PID), spread over the cores.
"""

import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import neve

ROOT = pathlib.Path(__file__).resolve().parents[1]
QUERIES = json.loads((ROOT / "bench" / "seed_queries.json").read_text())["queries"]


def median(xs):
    return statistics.median(xs)


def s3_options():
    return {
        "endpoint_url": os.environ.get("AWS_ENDPOINT_URL", ""),
        "access_key_id": os.environ.get("AWS_ACCESS_KEY_ID", ""),
        "secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "region": os.environ.get("AWS_REGION", "us-east-1"),
    }


def timed(fn):
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cpu_s():
    """This process's CPU seconds, all threads (user + system)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed_cpu(fn):
    """(wall seconds, CPU seconds of this process) of fn()."""
    cpu = cpu_s()
    wall = timed(fn)
    return wall, cpu_s() - cpu


def server_cpu_s():
    """CPU seconds of the object store's server process so far (MinIO, when the runner gives
    its pid in NEVE_MINIO_PID), 0 otherwise: on this machine it shares the cores with the
    insert, so its work belongs in the insert's bound."""
    pid = os.environ.get("NEVE_MINIO_PID")
    if not pid:
        return 0.0
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_idle_server(limit_s=60.0, busy=0.05):
    """Wait (up to `limit_s`) until the object store's server has used under `busy` of a core
    for a whole second, so that work it still does for the runs before (MinIO goes on working
    after a round deletes its tables: once for 27 s in BENCHMARKS.md, issue 15, "Fifty-eighth
    session") does not land in the first runs of the next size."""
    if not os.environ.get("NEVE_MINIO_PID"):
        return 0.0
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        before = server_cpu_s()
        time.sleep(1.0)
        if server_cpu_s() - before < busy:
            break
    waited = time.perf_counter() - started
    print(f"  waited {waited:.1f}s for the object store's server to go idle", file=sys.stderr)
    return waited


def remove(address):
    """Delete a finished run's table, so a 10M-row run does not fill the disk under MinIO."""
    if address.startswith("s3://"):
        import pyarrow.fs as pafs
        o = s3_options()
        scheme, host = o["endpoint_url"].split("://", 1)
        fs = pafs.S3FileSystem(access_key=o["access_key_id"], secret_key=o["secret_access_key"],
                               region=o["region"], endpoint_override=host, scheme=scheme)
        fs.delete_dir(address[len("s3://"):])
    else:
        shutil.rmtree(address, ignore_errors=True)


def run_rust(neve_bin, target, rows):
    """One insert of the same rows through neve-core in Rust (`neve bench ingest --runs 1`):
    its wall seconds, process CPU seconds, and the CPU seconds its parts spent sorting and in
    the Parquet encoder."""
    out = subprocess.run([neve_bin, "bench", "ingest", "--target", target, "--rows", str(rows), "--runs", "1",
                          "--seed", "1", "--json"], check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return {"s": r["neve_runs_s"][0], "cpu_s": r["neve_cpu_runs_s"][0], "sort_s": r["neve_sort_runs_s"][0],
            "encode_s": r["neve_encode_runs_s"][0], "cores": r["cores"]}


def run_neve(neve_bin, target, tbl, runs, stamp, rust):
    """neve `t.insert` --runs times in a row, as each peer's runs are, then (unless `rust` is
    false) the same insert in Rust as many times: the Python layer's cost is their difference.
    The Rust runs used to be taken by turns with the Python ones, but a 10M-row Rust process
    between two Python inserts left the module's freed memory unused for over 10 s, which the
    allocator then returns to the kernel: every Python insert was measured cold while each
    peer's second and third were not (BENCHMARKS.md, issue 15, "Fifty-fourth session")."""
    py, rs, table = [], [], None
    for run in range(runs):
        address = f"{target}/py-neve-{tbl.num_rows}-{stamp}-{run}"
        t = neve.create_table(address, partition_by="month(trip_start_timestamp) as d",
                              sort_by=["payment_type", "trip_start_timestamp"])
        server = server_cpu_s()
        wall, cpu = timed_cpu(lambda: t.insert(tbl))
        server = server_cpu_s() - server
        py.append({"s": wall, "cpu_s": cpu, "server_cpu_s": server})
        print(f"  neve t.insert run {run + 1}: {wall:.2f}s, CPU {cpu:.2f}s" +
              (f", the object store's server {server:.2f}s" if server else ""), file=sys.stderr)
        if table is not None:
            remove(table[0])
        table = (address, t)
    for run in range(runs if rust else 0):
        rs.append(run_rust(neve_bin, target, tbl.num_rows))
        r = rs[-1]
        print(f"  neve-core in Rust run {run + 1}: {r['s']:.2f}s, CPU {r['cpu_s']:.2f}s, of which sorting "
              f"parts {r['sort_s']:.2f}s, the Parquet encoder {r['encode_s']:.2f}s", file=sys.stderr)
    return py, rs, table


def run_delta(target, tbl, runs, stamp):
    from deltalake import write_deltalake

    d = pc.strftime(tbl.column("trip_start_timestamp"), format="%Y-%m")
    with_month = tbl.append_column("d", d)
    secs = []
    for run in range(runs):
        uri = f"{target}/py-delta-{tbl.num_rows}-{stamp}-{run}"
        opts = None
        if uri.startswith("s3://"):
            o = s3_options()
            opts = {"AWS_ENDPOINT_URL": o["endpoint_url"], "AWS_ACCESS_KEY_ID": o["access_key_id"],
                    "AWS_SECRET_ACCESS_KEY": o["secret_access_key"], "AWS_REGION": o["region"],
                    "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
        else:
            os.makedirs(uri, exist_ok=True)
        wall, cpu = timed_cpu(lambda: write_deltalake(uri, with_month, partition_by=["d"], storage_options=opts))
        secs.append(wall)
        print(f"  delta-rs write_deltalake run {run + 1}: {wall:.2f}s, CPU {cpu:.2f}s", file=sys.stderr)
        remove(uri)
    return secs


def run_iceberg(target, tbl, runs, stamp):
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import MonthTransform

    secs = []
    for run in range(runs):
        tmp = tempfile.mkdtemp()
        warehouse = f"{target}/py-iceberg-{tbl.num_rows}-{stamp}-{run}"
        props = {"uri": f"sqlite:///{tmp}/catalog.db", "warehouse": warehouse if warehouse.startswith("s3://") else f"file://{warehouse}"}
        if warehouse.startswith("s3://"):
            o = s3_options()
            props.update({"s3.endpoint": o["endpoint_url"], "s3.access-key-id": o["access_key_id"],
                          "s3.secret-access-key": o["secret_access_key"], "s3.region": o["region"]})
        else:
            os.makedirs(warehouse, exist_ok=True)
        catalog = SqlCatalog("bench", **props)
        catalog.create_namespace("b")
        schema = tbl.schema
        table = catalog.create_table("b.taxi", schema=schema)
        with table.update_spec() as spec:
            spec.add_field("trip_start_timestamp", MonthTransform(), "d")
        secs.append(timed(lambda: table.append(tbl)))
        print(f"  pyiceberg append run {run + 1}: {secs[-1]:.2f}s", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
        remove(warehouse)
    return secs


ICEDB_RUNNER = r'''
import os, sys, time, json, pathlib, shutil
# IceDB runs `INSTALL httpfs`, which downloads unless the extension is in DuckDB's default
# folder: put the packaged one there (this machine reaches package registries only).
import duckdb_ext
shutil.copytree(pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions",
                pathlib.Path.home() / ".duckdb" / "extensions", dirs_exist_ok=True)
sys.path.insert(0, sys.argv[1])
import pyarrow.parquet as pq
from datetime import datetime, timezone
from icedb.icedb import IceDBv3, S3Client
rows = pq.read_table(sys.argv[2]).to_pylist()
for r in rows:
    ts = r["trip_start_timestamp"]
    r["trip_start_timestamp"] = int(ts.timestamp() * 1000) if ts is not None else None
    if r.get("trip_end_timestamp") is not None:
        r["trip_end_timestamp"] = int(r["trip_end_timestamp"].timestamp() * 1000)
def part(row):
    ms = row["trip_start_timestamp"] or 0
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("d=%Y-%m")
class Conn:
    """DuckDB 1.4's `.arrow()` is a reader; IceDB (written for 0.10) wants a table."""
    def __init__(self, c):
        self._c = c
    def arrow(self):
        return self._c.fetch_arrow_table()
    def __getattr__(self, name):
        return getattr(self._c, name)
class IceDB(IceDBv3):
    def get_duckdb(self):
        return Conn(super().get_duckdb())
s3c = S3Client(s3prefix=sys.argv[4], s3bucket=sys.argv[3], s3region=os.environ.get("AWS_REGION", "us-east-1"),
               s3endpoint=os.environ["AWS_ENDPOINT_URL"], s3accesskey=os.environ["AWS_ACCESS_KEY_ID"],
               s3secretkey=os.environ["AWS_SECRET_ACCESS_KEY"])
ice = IceDB(part, ["payment_type", "trip_start_timestamp"], os.environ.get("AWS_REGION", "us-east-1"),
              os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"], os.environ["AWS_ENDPOINT_URL"],
              s3c, "bench", s3_use_path=True)
started = time.perf_counter()
ice.insert(rows)
print(json.dumps({"seconds": time.perf_counter() - started}))
'''


def run_icedb(python, repo, parquet, target, runs, stamp):
    bucket, _, prefix = target[len("s3://"):].partition("/")
    runner = pathlib.Path(tempfile.mkdtemp()) / "icedb_runner.py"
    runner.write_text(ICEDB_RUNNER)
    secs = []
    for run in range(runs):
        p = subprocess.run([python, str(runner), repo, parquet, bucket, f"{prefix}/py-icedb-{stamp}-{run}".strip("/")],
                           check=True, capture_output=True, text=True)
        secs.append(json.loads(p.stdout.strip().splitlines()[-1])["seconds"])
        print(f"  IceDB insert run {run + 1}: {secs[-1]:.2f}s", file=sys.stderr)
    return secs


def run_queries(t, runs):
    import duckdb

    con = duckdb.connect()
    files = [f["url"] for f in t.files()]
    if files[0].startswith("s3://"):
        o = s3_options()
        import duckdb_ext  # the httpfs extension's package (duckdb-ext-httpfs)

        con.execute(f"SET extension_directory = '{pathlib.Path(list(duckdb_ext.__path__)[0]) / 'extensions'}'")
        con.execute("LOAD httpfs")
        con.execute(f"""CREATE SECRET m (TYPE s3, KEY_ID '{o['access_key_id']}', SECRET '{o['secret_access_key']}',
            ENDPOINT '{o['endpoint_url'].split('://')[1]}', URL_STYLE 'path', USE_SSL false, REGION '{o['region']}')""")
    rel = "read_parquet([" + ", ".join("'" + f + "'" for f in files) + "], union_by_name = true)"
    out = []
    for q in QUERIES:
        ours = [timed(lambda: t.sql(q["neve"].format(table='"' + t.name + '"'))) for _ in range(runs)]
        theirs = [timed(lambda: con.execute(q["duckdb"].format(table=rel)).fetch_arrow_table()) for _ in range(runs)]
        out.append({"query": q["name"], "neve_s": median(ours), "duckdb_s": median(theirs),
                    "neve_runs_s": ours, "duckdb_runs_s": theirs})
        print(f"  {q['name']:<28} neve t.sql {median(ours) * 1000:8.1f} ms   DuckDB {median(theirs) * 1000:8.1f} ms   "
              f"DuckDB/neve {median(theirs) / median(ours):.2f}x", file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--rows", default="1000000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--query-runs", type=int, default=7,
                    help="runs per seed query (each takes milliseconds: more runs steady the median)")
    ap.add_argument("--icedb-python", default="")
    ap.add_argument("--icedb-repo", default="")
    ap.add_argument("--skip", default="", help="comma-separated peers to leave out (delta,iceberg,icedb,rust)")
    a = ap.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    stamp = time.strftime("%Y%m%d%H%M%S")
    target = a.target.rstrip("/")
    for rows in map(int, a.rows.split(",")):
        tmp = tempfile.mkdtemp()
        parquet = os.path.join(tmp, "taxi.parquet")
        subprocess.run([a.neve_bin, "bench", "gen", parquet, "--rows", str(rows), "--seed", "1"], check=True,
                       capture_output=True)
        # In batches of 65,536 rows, as `neve bench ingest` generates them: the same work.
        tbl = pa.Table.from_batches(pq.read_table(parquet).to_batches(max_chunksize=65_536))
        print(f"{rows:,} rows into {target}", file=sys.stderr)
        result = {"rows": rows, "target": target, "runs": a.runs}
        result["idle_wait_s"] = wait_for_idle_server()
        py, rs, (address, t) = run_neve(a.neve_bin, target, tbl, a.runs, stamp, "rust" not in skip)
        result["neve_runs_s"] = [r["s"] for r in py]
        result["neve_cpu_runs_s"] = [r["cpu_s"] for r in py]
        result["server_cpu_runs_s"] = [r["server_cpu_s"] for r in py]
        if rs:
            for key, field in (("rust_runs_s", "s"), ("rust_cpu_runs_s", "cpu_s"), ("rust_sort_runs_s", "sort_s"),
                               ("rust_encode_runs_s", "encode_s")):
                result[key] = [r[field] for r in rs]
            result["cores"] = rs[0]["cores"]
        peers = {}
        if "delta" not in skip:
            peers["delta-rs"] = run_delta(target, tbl, a.runs, stamp)
        if "iceberg" not in skip:
            peers["pyiceberg"] = run_iceberg(target, tbl, a.runs, stamp)
        # IceDB takes rows as a list of dicts: 10M of them are tens of GB of Python objects.
        if "icedb" not in skip and a.icedb_python and a.icedb_repo and target.startswith("s3://") and rows <= 1_000_000:
            peers["IceDB"] = run_icedb(a.icedb_python, a.icedb_repo, parquet, target, a.runs, stamp)
        result["peers_runs_s"] = peers
        result["queries"] = run_queries(t, a.query_runs)
        n = median(result["neve_runs_s"])
        print(f"  neve t.insert {n:.2f}s = {rows / n:,.0f} rows/s", file=sys.stderr)
        if "rust_runs_s" in result:
            r = median(result["rust_runs_s"])
            print(f"  neve-core in Rust {r:.2f}s: the Python layer adds {100 * (n / r - 1):+.1f}%", file=sys.stderr)
        for name, runs in peers.items():
            print(f"  {name} {median(runs):.2f}s = {rows / median(runs):,.0f} rows/s; neve rows/s / {name} rows/s = "
                  f"{median(runs) / n:.2f}x", file=sys.stderr)
        if "rust_runs_s" in result and peers:
            # The bound beside the target: a sorted insert must at least sort its parts and
            # encode them, and that work cannot take less than its CPU time over the cores.
            cores = result["cores"]
            encode = median(result["rust_encode_runs_s"])
            floor = median([s + e for s, e in zip(result["rust_sort_runs_s"], result["rust_encode_runs_s"])])
            # The object store's server, on the same cores, must take in the files.
            server = median(result["server_cpu_runs_s"])
            fastest = min(median(r) for r in peers.values())
            result["floor_s"] = (floor + server) / cores
            print(f"  bound: sorting and encoding the parts take {floor:.2f} CPU-s (the encoder alone {encode:.2f})"
                  + (f", the object store's server {server:.2f} CPU-s" if server else "")
                  + f": on {cores} cores no insert ends before {(floor + server) / cores:.2f}s; 2x the fastest peer "
                  f"is {fastest / 2:.2f}s", file=sys.stderr)
        print(json.dumps(result))
        remove(address)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

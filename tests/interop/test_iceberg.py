"""Iceberg metadata beside the log (issue 19): DuckDB `iceberg_scan`, pyiceberg and chdb
(`icebergLocal`, `icebergS3`) read a neve table as neve does. The six seed queries give neve's answers at the latest version and at an
older one, on a local folder and on MinIO; after merges, deletes, partition drops and gc, the
readers plan exactly the alive files."""
import json
import os
import pathlib
import subprocess
import uuid

import pyarrow.fs as pafs
import pytest

from test_seed_queries import QUERIES, assert_same_answers, norm

ROWS = 60_000


def run(neve_bin, *args):
    p = subprocess.run([neve_bin, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, f"neve {args}: {p.stderr}"
    return p.stdout


def s3_props():
    return {
        "s3.endpoint": os.environ["AWS_ENDPOINT_URL"],
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": "us-east-1",
    }


def read_text(table, key):
    if table.startswith("s3://"):
        import boto3

        bucket, prefix = table[len("s3://"):].split("/", 1)
        s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        return s3.get_object(Bucket=bucket, Key=f"{prefix}/{key}")["Body"].read().decode()
    return (pathlib.Path(table) / key).read_text()


def metadata_file(table):
    n = int(read_text(table, "metadata/version-hint.text").strip())
    return f"{table}/metadata/v{n}.metadata.json"


def static_table(table):
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata_file(table), properties=s3_props())


def make_table(neve_bin, tmp_path_factory, where):
    d = tmp_path_factory.mktemp("ice")
    if where == "local":
        table = str(d / "taxi")
    else:
        table = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/taxi"
    run(neve_bin, "create", table, "--partition-by", "month(trip_start_timestamp) as d",
        "--sort-by", "payment_type,trip_start_timestamp", "--iceberg")
    for seed in (1, 2):
        path = d / f"taxi-{seed}.parquet"
        run(neve_bin, "bench", "gen", path, "--rows", ROWS // 2, "--seed", seed)
        run(neve_bin, "insert", table, path)
    return table


@pytest.fixture(scope="module", params=["local", "minio"])
def taxi(request, neve_bin, tmp_path_factory):
    return make_table(neve_bin, tmp_path_factory, request.param)


# chdb reads local files only under its working folder, fixed when it starts: its queries run
# in a child process started in `/`, all at once.
CHDB = """
import json, sys, chdb
out = []
for sql in json.load(sys.stdin):
    text = str(chdb.query(sql, "JSONEachRow"))
    out.append([json.loads(l) for l in text.splitlines() if l.strip()])
print(json.dumps(out))
"""


def chdb_relation(table):
    if table.startswith("s3://"):
        url = f"{os.environ['AWS_ENDPOINT_URL']}/{table[len('s3://'):]}/"
        key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        return f"icebergS3('{url}', '{key}', '{secret}')"
    return f"icebergLocal('{table}')"


@pytest.fixture(scope="module")
def chdb_answers(taxi):
    """Every seed query at both versions through chdb's Iceberg table functions."""
    import sys

    asked = [(q["name"], v) for q in QUERIES for v in (1, 2)]
    sqls = [
        next(q for q in QUERIES if q["name"] == name)["clickhouse"].format(table=chdb_relation(taxi))
        + f" SETTINGS iceberg_snapshot_id = {v}"
        for name, v in asked
    ]
    p = subprocess.run([sys.executable, "-c", CHDB], input=json.dumps(sqls), capture_output=True,
                       text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    return dict(zip(asked, json.loads(p.stdout)))


def neve_rows(neve, table, sql, version):
    out = neve("sql", sql.format(table="taxi"), "--table", f"taxi={table}", "--as-of", version,
               "--format", "json").stdout
    return json.loads(out)


def duck_rows(con, sql, relation):
    cur = con.execute(sql.format(table=relation))
    names = [c[0] for c in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


@pytest.fixture(scope="module")
def duck_ice(duck):
    duck.execute("LOAD iceberg")
    return duck


@pytest.mark.parametrize("version", [1, 2], ids=["older", "latest"])
@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_queries_through_iceberg(q, version, neve, duck_ice, taxi, chdb_answers):
    import duckdb

    ours = norm(neve_rows(neve, taxi, q["neve"], version))
    scan = f"iceberg_scan('{taxi}', snapshot_from_id => {version})"
    through_duckdb = norm(duck_rows(duck_ice, q["duckdb"], scan))
    arrow = static_table(taxi).scan(snapshot_id=version).to_arrow()
    con = duckdb.connect()
    con.register("ice", arrow)
    through_pyiceberg = norm(duck_rows(con, q["duckdb"], "ice"))
    through_chdb = norm(chdb_answers[(q["name"], version)])
    if q["name"] == "limit_1000":
        assert len(ours) == len(through_duckdb) == len(through_pyiceberg) == len(through_chdb) == 1000
        assert set(ours[0]) == set(through_duckdb[0]) == set(through_pyiceberg[0]) == set(through_chdb[0])
        return
    assert len(ours) > 0
    assert_same_answers(ours, {"duckdb iceberg_scan": through_duckdb,
                               "pyiceberg": through_pyiceberg, "chdb": through_chdb})
    if q["name"] == "count_by_month":
        assert sum(r["cnt"] for r in ours) == ROWS * version // 2


def alive_files(neve, table):
    out = neve("files", table).stdout.split()
    return sorted(out)


def planned_files(table):
    return sorted(t.file.file_path for t in static_table(table).scan().plan_files())


@pytest.mark.parametrize("where", ["local", "minio"])
def test_readers_plan_the_alive_files_after_maintenance(where, neve, neve_bin, duck_ice,
                                                        tmp_path_factory):
    table = make_table(neve_bin, tmp_path_factory, where)
    assert planned_files(table) == alive_files(neve, table)
    neve("merge", table, "--min-files", "2")
    neve("delete", table, "--where", "payment_type = 'Cash'")
    first = sorted(f.split("/d=")[1].split("/")[0] for f in alive_files(neve, table))[0]
    neve("drop-partition", table, f"d={first}")
    q = "SELECT count(*) AS cnt, sum(fare) AS fare FROM {table}"

    def same_answers():
        latest = json.loads(neve("info", table, "--json").stdout)["version"]
        ours = neve_rows(neve, table, q, latest)
        theirs = duck_rows(duck_ice, q, f"iceberg_scan('{table}')")
        assert ours[0]["cnt"] == theirs[0]["cnt"] > 0
        assert abs(ours[0]["fare"] - theirs[0]["fare"]) < 1e-6 * abs(ours[0]["fare"])

    # Before gc the merged, deleted and dropped files are still in the store, and an orphan
    # (a copy of an alive file no commit names) sits beside them: none is planned or read.
    files = alive_files(neve, table)
    planted = files[0].rsplit("/", 1)[0] + "/orphan-never-committed.parquet"
    fs, path = pafs.FileSystem.from_uri(files[0])
    fs.copy_file(path, pafs.FileSystem.from_uri(planted)[1])
    assert planned_files(table) == files
    same_answers()
    neve("gc", table, "--grace", "0s", "--retention", "0s")
    files = alive_files(neve, table)
    assert planned_files(table) == files and files
    # Every file a reader plans is there, and the answers are neve's.
    same_answers()
    cash = duck_rows(duck_ice, "SELECT count(*) AS n FROM {table} WHERE payment_type = 'Cash'",
                     f"iceberg_scan('{table}')")
    assert cash[0]["n"] == 0
    # gc expired the snapshots whose files it deleted: only the newest is left.
    meta = static_table(table).metadata
    assert [s.snapshot_id for s in meta.snapshots] == [meta.current_snapshot_id]


@pytest.fixture(scope="module")
def local_taxi(neve_bin, tmp_path_factory):
    return make_table(neve_bin, tmp_path_factory, "local")


@pytest.mark.parametrize("version", [1, 2], ids=["older", "latest"])
@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_queries_through_spark(q, version, neve, spark, local_taxi):
    """Spark on a standalone cluster (two workers) loads the table by its folder, as a
    Hadoop-style Iceberg table, at a snapshot id that is neve's version."""
    ours = norm(neve_rows(neve, local_taxi, q["neve"], version))
    df = spark.read.format("iceberg").option("versionAsOf", version).load(local_taxi)
    df.createOrReplaceTempView("ice")
    # Spark's percentile_approx keeps few samples of a small month; its exact percentile is
    # what the approximate medians of the other engines are compared with.
    sql = q["duckdb"].replace("approx_quantile(", "percentile(").format(table="ice")
    theirs = norm([r.asDict() for r in spark.sql(sql).collect()])
    if q["name"] == "limit_1000":
        assert len(ours) == len(theirs) == 1000
        assert set(ours[0]) == set(theirs[0])
        return
    assert len(ours) > 0
    assert_same_answers(ours, {"spark": theirs})


def test_spark_splits_the_iceberg_scan_as_its_parquet_reader_splits_the_files(spark, local_taxi):
    """Spark's Iceberg reader sizes splits as its own Parquet reader does (128 MB, each file
    counted as at least 4 MB), not for its 200 shuffle partitions, which made a table of many
    small files 6.6x as many tasks and its queries 1.7-2.3x slower."""
    ice = spark.read.format("iceberg").load(local_taxi).rdd.getNumPartitions()
    glob = spark.read.parquet(f"{local_taxi}/_data/*/*.parquet").rdd.getNumPartitions()
    files = len(list(pathlib.Path(local_taxi, "_data").glob("*/*.parquet")))
    assert files > 100, files
    # Both pack files into 128 MB splits, in their own orders: a task or two apart at most.
    assert ice <= glob * 1.5, (ice, glob, files)


def test_spark_with_one_task_group_per_partition_answers_as_neve(neve, spark, local_taxi):
    """docs/ENGINES.md recommends `preserve-data-grouping` for aggregates by partition on a
    table between merges: Iceberg then plans one task group per partition (each task one
    month), and the answers are neve's."""
    q = next(q for q in QUERIES if q["name"] == "medians_by_month")
    ours = norm(neve_rows(neve, local_taxi, q["neve"], 2))
    months = len([p for p in pathlib.Path(local_taxi, "_data").iterdir() if p.is_dir()])
    spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", "true")
    try:
        df = spark.read.format("iceberg").load(local_taxi)
        assert df.rdd.getNumPartitions() == months > 1
        df.createOrReplaceTempView("ice_grouped")
        sql = q["duckdb"].replace("approx_quantile(", "percentile(").format(table="ice_grouped")
        theirs = norm([r.asDict() for r in spark.sql(sql).collect()])
    finally:
        spark.conf.set("spark.sql.iceberg.planning.preserve-data-grouping", "false")
    assert len(ours) == months
    assert_same_answers(ours, {"spark": theirs})


def snapshot_files(table, version):
    return sorted(t.file.file_path for t in static_table(table).scan(snapshot_id=version).plan_files())


def files_at(neve, table, version):
    return sorted(neve("files", table, "--as-of", version).stdout.split())


@pytest.mark.parametrize("point", ["iceberg:after-manifests", "iceberg:after-metadata"])
def test_a_sync_killed_midway_leaves_readable_metadata_and_the_next_sync_completes(
        point, neve, neve_bin, tmp_path):
    table = str(tmp_path / "t")
    src = tmp_path / "rows.parquet"
    neve("bench", "gen", src, "--rows", 2000, "--seed", 3)
    neve("create", table, "--partition-by", "month(trip_start_timestamp) as d", "--iceberg")
    neve("insert", table, src)
    # The second insert commits, then dies inside its sync (as a SIGKILL would).
    p = subprocess.run([neve_bin, "insert", table, src], capture_output=True, text=True,
                       env={**os.environ, "NEVE_FAILPOINT": point})
    assert p.returncode != 0
    assert json.loads(neve("info", table, "--json").stdout)["version"] == 2
    # What readers find is complete: the version it describes, with that version's files.
    meta = static_table(table).metadata
    described = meta.current_snapshot_id
    assert described in (1, 2)
    assert snapshot_files(table, described) == files_at(neve, table, described)
    r = json.loads(neve("iceberg", "sync", table, "--json").stdout)
    assert r["version"] == 2
    meta = static_table(table).metadata
    assert meta.current_snapshot_id == 2
    for v in (1, 2):
        assert snapshot_files(table, v) == files_at(neve, table, v)


@pytest.mark.parametrize("where", ["local", "minio"])
def test_many_processes_inserting_and_syncing_at_once(where, neve, neve_bin, tmp_path_factory):
    """Four processes insert three times each (each insert syncs after its commit) while two
    run `neve iceberg sync`: every snapshot lists its version's files, none is missing."""
    d = tmp_path_factory.mktemp("many")
    table = str(d / "t") if where == "local" else \
        f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/t"
    src = d / "rows.parquet"
    neve("bench", "gen", src, "--rows", 500, "--seed", 4)
    neve("create", table, "--partition-by", "month(trip_start_timestamp) as d", "--iceberg")
    script = " && ".join([f"'{neve_bin}' insert '{table}' '{src}'"] * 3)
    syncs = " ; ".join([f"'{neve_bin}' iceberg sync '{table}'"] * 6)
    procs = [subprocess.Popen(["bash", "-c", script]) for _ in range(4)]
    procs += [subprocess.Popen(["bash", "-c", syncs], stdout=subprocess.DEVNULL) for _ in range(2)]
    for p in procs:
        assert p.wait() == 0
    neve("iceberg", "sync", table)
    meta = static_table(table).metadata
    assert meta.current_snapshot_id == 12
    assert [s.snapshot_id for s in meta.snapshots] == list(range(1, 13))
    for v in range(1, 13):
        assert snapshot_files(table, v) == files_at(neve, table, v)
    assert static_table(table).scan().to_arrow().num_rows == 12 * 500


def test_metrics_modes_keep_the_bounds_asked_for_and_readers_answer_as_neve(
        neve, neve_bin, duck_ice, tmp_path):
    """`iceberg_metrics`: counts and bounds only where asked, company's cut to 4 characters;
    pyiceberg prunes by what is left without losing a row, and DuckDB answers the seed
    queries as neve does."""
    table = str(tmp_path / "taxi")
    src = tmp_path / "rows.parquet"
    neve("bench", "gen", src, "--rows", 20_000, "--seed", 5)
    neve("create", table, "--partition-by", "month(trip_start_timestamp) as d",
         "--sort-by", "payment_type,trip_start_timestamp", "--iceberg")
    neve("insert", table, src)
    p = neve("alter", table, "set", "iceberg_metrics=none,", "payment_type=full,", "fare=nope",
             check=False)
    assert p.returncode != 0 and "metrics mode" in p.stderr
    neve("alter", table, "set", "iceberg_metrics=none,", "payment_type=full,",
         "company=truncate(4)")
    neve("insert", table, src)
    info = neve("info", table).stdout
    assert "metrics=none, payment_type=full, company=truncate(4)" in info, info
    t = static_table(table)
    assert t.metadata.properties["write.metadata.metrics.default"] == "none"
    ids = {f.name: f.field_id for f in t.schema().fields}
    kept = {ids["payment_type"], ids["company"]}
    tasks = list(t.scan().plan_files())
    assert tasks
    for task in tasks:
        f = task.file
        assert set(f.value_counts) == kept and set(f.null_value_counts) == kept
        assert set(f.lower_bounds) <= kept and ids["payment_type"] in f.lower_bounds
        for b in (f.lower_bounds, f.upper_bounds):
            if ids["company"] in b:
                assert len(b[ids["company"]].decode()) <= 4
    latest = json.loads(neve("info", table, "--json").stdout)["version"]
    # A filter on the cut column keeps every matching row.
    company = neve_rows(neve, table, "SELECT company FROM {table} WHERE company IS NOT NULL "
                        "ORDER BY company DESC LIMIT 1", latest)[0]["company"]
    want = neve_rows(neve, table, f"SELECT count(*) AS n FROM {{table}} WHERE company = '{company}'",
                     latest)[0]["n"]
    assert want > 0
    assert t.scan(row_filter=f"company == '{company}'").to_arrow().num_rows == want
    for q in QUERIES:
        ours = norm(neve_rows(neve, table, q["neve"], latest))
        theirs = norm(duck_rows(duck_ice, q["duckdb"], f"iceberg_scan('{table}')"))
        if q["name"] == "limit_1000":
            assert len(ours) == len(theirs) == 1000
            continue
        assert_same_answers(ours, {"duckdb iceberg_scan": theirs})


@pytest.mark.parametrize("where", ["local", "minio"])
def test_readers_follow_schema_changes_at_every_version(where, neve, duck_ice, tmp_path):
    """A column added, renamed, widened and dropped between inserts: pyiceberg, DuckDB and chdb
    read every version as neve does (older files by field id, nulls for a column they lack)."""
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = str(tmp_path / "t") if where == "local" else \
        f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/t"
    neve("create", table, "--partition-by", "g", "--sort-by", "k", "--iceberg")
    steps = [
        (None, {"g": pa.array([1, 2], pa.int64()), "k": pa.array([1, 2], pa.int32()),
                "s": ["a", "b"], "d": [1.5, 2.5]}),
        (["add", "column", "n string"],
         {"g": pa.array([1], pa.int64()), "k": pa.array([3], pa.int32()), "s": ["c"],
          "d": [3.5], "n": ["x"]}),
        (["rename", "column", "s", "to", "label"],
         {"g": pa.array([2], pa.int64()), "k": pa.array([4], pa.int32()), "label": ["d"],
          "d": [4.5], "n": ["y"]}),
        (["widen", "k", "bigint"],
         {"g": pa.array([2], pa.int64()), "k": pa.array([2**40], pa.int64()), "label": ["e"],
          "d": [5.5], "n": ["z"]}),
        (["drop", "column", "d"],
         {"g": pa.array([1], pa.int64()), "k": pa.array([6], pa.int64()), "label": [None],
          "n": ["w"]}),
    ]
    for i, (change, columns) in enumerate(steps):
        if change:
            neve("alter", table, *change)
        src = tmp_path / f"rows-{i}.parquet"
        pq.write_table(pa.table(columns), src)
        neve("insert", table, src)
    latest = json.loads(neve("info", table, "--json").stdout)["version"]
    assert latest == 9

    def ordered(rows):
        return sorted(rows, key=lambda r: r["k"])

    ice = static_table(table)
    asked, expected = [], {}
    for v in range(1, latest + 1):
        ours = ordered(json.loads(neve("sql", "SELECT * FROM t", "--table", f"t={table}",
                                       "--as-of", v, "--format", "json").stdout))
        cols = list(ours[0])
        expected[v] = ours
        got = ordered(duck_rows(duck_ice, f"SELECT {', '.join(cols)} FROM {{table}}",
                                f"iceberg_scan('{table}', snapshot_from_id => {v})"))
        assert got == ours, f"DuckDB at version {v}"
        got = ordered(ice.scan(snapshot_id=v).to_arrow().select(cols).to_pylist())
        assert got == ours, f"pyiceberg at version {v}"
        asked.append(f"SELECT {', '.join(cols)} FROM {chdb_relation(table)} "
                     f"SETTINGS iceberg_snapshot_id = {v}")
    p = subprocess.run([sys.executable, "-c", CHDB], input=json.dumps(asked), capture_output=True,
                       text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    for v, rows in zip(range(1, latest + 1), json.loads(p.stdout)):
        # ClickHouse's JSON writes 64-bit integers as strings.
        got = ordered([{c: (int(x) if c in ("g", "k") else x) for c, x in r.items()} for r in rows])
        assert got == expected[v], f"chdb at version {v}"


def merge_table(neve, tmp_path, where):
    """A `replace` table between merges: five inserts of versions (some deleting their key)
    and a merge after the third, so partitions hold merged and unmerged files. Returns the
    table and its versions."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = str(tmp_path / "users") if where == "local" else \
        f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/users"
    neve("create", table, "--partition-by", "g", "--sort-by", "k,v", "--iceberg",
         "--schema", "g bigint, k bigint, v bigint, del boolean, x string",
         "--merge", "replace(key = [k], version = v, deleted = del)")
    rnd = random.Random(7)
    for i in range(5):
        # A key at most once per insert: which of one insert's rows of a key wins is not
        # specified.
        keys = rnd.sample(range(60), 40)
        src = tmp_path / f"users-{i}.parquet"
        pq.write_table(pa.table({
            "g": pa.array([k % 3 for k in keys], pa.int64()),
            "k": pa.array(keys, pa.int64()),
            "v": pa.array([rnd.choice([None, rnd.randrange(5)]) for _ in keys], pa.int64()),
            "del": [rnd.random() < 0.15 for _ in keys],
            "x": [f"i{i}-k{k}" for k in keys],
        }), src)
        neve("insert", table, src)
        if i == 2:
            neve("merge", table, "--min-files", "2")
    latest = json.loads(neve("info", table, "--json").stdout)["version"]
    return table, latest


def merged_rows(neve, table, version):
    out = neve("sql", "SELECT g, k, v, del, x FROM t", "--table", f"t={table}", "--as-of",
               version, "--format", "json").stdout
    return sorted(json.loads(out), key=lambda r: r["k"])


@pytest.mark.parametrize("where", ["local", "minio"])
def test_readers_see_one_row_per_key_of_a_replace_table_at_every_version(
        where, neve, duck_ice, tmp_path):
    """Position deletes: pyiceberg, DuckDB and chdb read a `replace` table as neve does, one
    row per key (a deleted key gone), at every version; and still after gc."""
    import sys

    table, latest = merge_table(neve, tmp_path, where)
    assert latest == 6

    def ordered(rows):
        return sorted(rows, key=lambda r: r["k"])

    cols = "g, k, v, del, x"
    asked, expected = [], {}
    for v in range(1, latest + 1):
        ours = merged_rows(neve, table, v)
        stored = json.loads(neve("sql", "SELECT count(*) AS n FROM t", "--table", f"t={table}",
                                 "--as-of", v, "--raw", "--format", "json").stdout)[0]["n"]
        assert len({r["k"] for r in ours}) == len(ours) < stored
        expected[v] = ours
        got = ordered(duck_rows(duck_ice, f"SELECT {cols} FROM {{table}}",
                                f"iceberg_scan('{table}', snapshot_from_id => {v})"))
        assert got == ours, f"DuckDB at version {v}"
        got = ordered(static_table(table).scan(snapshot_id=v).to_arrow()
                      .select(["g", "k", "v", "del", "x"]).to_pylist())
        assert got == ours, f"pyiceberg at version {v}"
        asked.append(f"SELECT {cols} FROM {chdb_relation(table)} "
                     f"SETTINGS iceberg_snapshot_id = {v}")
    p = subprocess.run([sys.executable, "-c", CHDB], input=json.dumps(asked), capture_output=True,
                       text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    for v, rows in zip(range(1, latest + 1), json.loads(p.stdout)):
        got = ordered([{c: (int(x) if c in ("g", "k", "v") and x is not None else x)
                        for c, x in r.items()} for r in rows])
        assert got == expected[v], f"chdb at version {v}"

    # gc expires every snapshot but the newest and deletes what only they used: the delete
    # files the newest lists stay, and readers still answer as neve does.
    neve("gc", table, "--grace", "0s", "--retention", "0s")
    planned = static_table(table).scan().plan_files()
    listed = {d.file_path for task in planned for d in task.delete_files}
    assert listed
    got = ordered(static_table(table).scan().to_arrow().select(["g", "k", "v", "del", "x"]).to_pylist())
    assert got == expected[latest]
    got = ordered(duck_rows(duck_ice, f"SELECT {cols} FROM {{table}}", f"iceberg_scan('{table}')"))
    assert got == expected[latest]


def test_a_delete_file_is_applied_only_to_the_data_files_it_names(neve, tmp_path):
    """A position delete file's entry bounds the paths it names: pyiceberg attaches it to the
    scan task of the one data file whose rows it deletes, not to every file of its partition
    (as it must when the entry has no bounds), and still reads one row per key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = str(tmp_path / "t")
    neve("create", table, "--partition-by", "g", "--sort-by", "k,v", "--iceberg",
         "--schema", "g bigint, k bigint, v bigint, x string",
         "--merge", "replace(key = [k], version = v)")

    def insert(i, keys, version):
        src = tmp_path / f"in-{i}.parquet"
        pq.write_table(pa.table({
            "g": pa.array([0] * len(keys), pa.int64()),
            "k": pa.array(keys, pa.int64()),
            "v": pa.array([version] * len(keys), pa.int64()),
            "x": [f"i{i}-k{k}" for k in keys],
        }), src)
        neve("insert", table, src)

    insert(0, list(range(10)), 1)         # A
    insert(1, list(range(100, 110)), 1)   # B: other keys, none of its rows loses
    insert(2, list(range(5)), 2)          # C: newer rows for half of A's keys
    tasks = list(static_table(table).scan().plan_files())
    assert len(tasks) == 3
    first = {t.file.file_path: pq.read_table(t.file.file_path)["x"][0].as_py()[:2] for t in tasks}
    deletes = {first[t.file.file_path]: [d.file_path for d in t.delete_files] for t in tasks}
    assert len(deletes["i0"]) == 1, deletes
    assert deletes["i1"] == [] and deletes["i2"] == [], deletes
    got = sorted(static_table(table).scan().to_arrow().select(["k", "v", "x"]).to_pylist(),
                 key=lambda r: r["k"])
    ours = json.loads(neve("sql", "SELECT k, v, x FROM t ORDER BY k", "--table", f"t={table}",
                           "--format", "json").stdout)
    assert got == ours
    assert [r["x"] for r in got[:6]] == ["i2-k0", "i2-k1", "i2-k2", "i2-k3", "i2-k4", "i0-k5"]


def test_spark_reads_one_row_per_key_of_a_replace_table(neve, spark, tmp_path):
    table, latest = merge_table(neve, tmp_path, "local")
    for v in (2, latest):
        ours = merged_rows(neve, table, v)
        df = spark.read.format("iceberg").option("versionAsOf", v).load(table)
        theirs = sorted((r.asDict() for r in df.select("g", "k", "v", "del", "x").collect()),
                        key=lambda r: r["k"])
        assert theirs == ours, f"Spark at version {v}"


def test_an_aggregating_table_writes_no_iceberg_metadata(neve, tmp_path):
    table = tmp_path / "totals"
    p = neve("create", table, "--sort-by", "k", "--schema", "k bigint, n bigint",
             "--merge", "aggregate(key = [k], sum = [n])", "--iceberg", check=False)
    assert p.returncode == 65 and "merge semantics" in p.stderr, p.stderr
    assert not table.exists() or not any(table.rglob("*.json"))
    neve("create", table, "--sort-by", "k", "--schema", "k bigint, n bigint",
         "--merge", "aggregate(key = [k], sum = [n])")
    p = neve("iceberg", "enable", table, check=False)
    assert p.returncode == 65 and "merge semantics" in p.stderr, p.stderr
    assert json.loads(neve("info", table, "--json").stdout)["version"] == 0
    assert not (table / "metadata").exists()


def test_every_reader_reads_unsigned_columns_as_neve_does(neve, spark, duck_ice, tmp_path):
    """`uint8`/`uint16`/`uint32` columns at their extremes, at the top level, in a struct and in
    a list. Iceberg has no unsigned types and Iceberg's Java reader refuses Parquet's unsigned
    ones ("Unsupported logical type: UINT_8"), so data files store them as the wider signed
    types: Spark, pyiceberg and DuckDB read the values neve reads, before and after a merge
    rewrites the files, and the bounds prune files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.expressions import EqualTo

    table = str(tmp_path / "u")
    neve("create", table, "--partition-by", "g", "--sort-by", "k", "--iceberg")
    u32 = pa.struct([("u", pa.uint32())])
    batches = [
        pa.table({
            "g": pa.array([1, 1, 2], pa.int64()),
            "k": pa.array([1, 2, 3], pa.int64()),
            "a": pa.array([0, 255, None], pa.uint8()),
            "b": pa.array([65535, None, 1], pa.uint16()),
            "c": pa.array([4294967295, 0, 7], pa.uint32()),
            "i8": pa.array([-128, 127, None], pa.int8()),
            "i16": pa.array([-32768, 32767, 0], pa.int16()),
            "s": pa.array([{"u": 4294967295}, {"u": None}, None], u32),
            "l": pa.array([[65535, 0], None, []], pa.list_(pa.uint16())),
        }),
        pa.table({
            "g": pa.array([1], pa.int64()),
            "k": pa.array([4], pa.int64()),
            "a": pa.array([128], pa.uint8()),
            "b": pa.array([0], pa.uint16()),
            "c": pa.array([2147483648], pa.uint32()),
            "i8": pa.array([0], pa.int8()),
            "i16": pa.array([1], pa.int16()),
            "s": pa.array([{"u": 2147483648}], u32),
            "l": pa.array([[32768]], pa.list_(pa.uint16())),
        }),
    ]
    for i, rows in enumerate(batches):
        src = tmp_path / f"rows-{i}.parquet"
        pq.write_table(rows, src)
        neve("insert", table, src)
    want = sorted(pa.concat_tables(batches).to_pylist(), key=lambda r: r["k"])
    cols = list(want[0])

    def check(stage):
        ours = json.loads(neve("sql", "SELECT * FROM t ORDER BY k", "--table", f"t={table}",
                               "--format", "json").stdout)
        assert ours == want, f"neve {stage}"
        files = list(pathlib.Path(table, "_data").rglob("*.parquet"))
        alive = {pathlib.Path(table, f).resolve() for f in alive_files(neve, table)}
        for f in files:
            if f.resolve() not in alive:
                continue
            schema = pq.read_schema(f)
            for field in schema:
                t = field.type
                while pa.types.is_struct(t) or pa.types.is_list(t):
                    t = t.field(0).type if pa.types.is_struct(t) else t.value_type
                assert not pa.types.is_unsigned_integer(t), f"{f}: {field} ({stage})"
        spark_rows = spark.read.format("iceberg").load(table).orderBy("k").collect()
        assert [r.asDict(recursive=True) for r in spark_rows] == want, f"Spark {stage}"
        got = spark.read.format("iceberg").load(table).where("c = 4294967295").select("k")
        assert [r.k for r in got.collect()] == [1], f"Spark filter {stage}"
        got = duck_rows(duck_ice, f"SELECT {', '.join(cols)} FROM {{table}} ORDER BY k",
                        f"iceberg_scan('{table}')")
        assert got == want, f"DuckDB {stage}"
        ice = static_table(table)
        got = sorted(ice.scan().to_arrow().select(cols).to_pylist(), key=lambda r: r["k"])
        assert got == want, f"pyiceberg {stage}"
        # One file holds c = 4294967295 (u32::MAX, above i32's range); the bounds of a
        # uint32 column prune the others (g=2's, and g=1's second insert before the merge).
        planned = list(ice.scan(row_filter=EqualTo("c", 4294967295)).plan_files())
        assert len(planned) == 1 and "g=1" in planned[0].file.file_path, f"pruning {stage}"

    check("after the inserts")
    neve("merge", table, "--min-files", "2")
    assert len(alive_files(neve, table)) == 2
    check("after a merge")

"""Spark's `neve` data source (issue 19, part 5): `spark.read.format("neve")` on a standalone
cluster (two workers) reads neve's own log. The six seed queries answer as `neve sql` does at
the latest version and an older one, on a local folder and on MinIO; one input partition per
file group; filters prune files; a table with merge semantics reads exact."""
import datetime as dt
import json
import os
import subprocess
import uuid

import pytest

from test_seed_queries import QUERIES, assert_same_answers, norm

ROWS = 60_000


def run(neve_bin, *args):
    p = subprocess.run([neve_bin, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, f"neve {args}: {p.stderr}"
    return p.stdout


def storage_options(table):
    if not table.startswith("s3://"):
        return {}
    return {
        "endpoint_url": os.environ["AWS_ENDPOINT_URL"],
        "access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
        "secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "region": "us-east-1",
        "allow_http": "true",
    }


@pytest.fixture(scope="module")
def neve_spark(spark):
    import neve.spark

    neve.spark.register(spark)
    return spark


def read(spark, table, **options):
    r = spark.read.format("neve")
    for k, v in {**storage_options(table), **options}.items():
        r = r.option(k, v)
    return r.load(table)


@pytest.fixture(scope="module", params=["local", "minio"])
def taxi(request, neve_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("spark-src")
    if request.param == "local":
        table = str(d / "taxi")
    else:
        table = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/taxi"
    run(neve_bin, "create", table, "--partition-by", "month(trip_start_timestamp) as d",
        "--sort-by", "payment_type,trip_start_timestamp")
    for seed in (1, 2):
        path = d / f"taxi-{seed}.parquet"
        run(neve_bin, "bench", "gen", path, "--rows", ROWS // 2, "--seed", seed)
        run(neve_bin, "insert", table, path)
    return table


def neve_rows(neve, table, sql, version=None):
    args = ["sql", sql.format(table="taxi"), "--table", f"taxi={table}", "--format", "json"]
    if version is not None:
        args += ["--as-of", version]
    return json.loads(neve(*args).stdout)


@pytest.mark.parametrize("version", [1, 2], ids=["older", "latest"])
@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_queries_through_the_neve_source(q, version, neve, neve_spark, taxi):
    ours = norm(neve_rows(neve, taxi, q["neve"], version))
    read(neve_spark, taxi, versionAsOf=version).createOrReplaceTempView("nv")
    # Spark's percentile_approx keeps few samples of a small month: its exact percentile is
    # compared with neve's approximate median.
    sql = q["duckdb"].replace("approx_quantile(", "percentile(").format(table="nv")
    theirs = norm([r.asDict() for r in neve_spark.sql(sql).collect()])
    if q["name"] == "limit_1000":
        assert len(ours) == len(theirs) == 1000
        assert set(ours[0]) == set(theirs[0])
        return
    assert len(ours) > 0
    assert_same_answers(ours, {"spark": theirs})


def test_one_input_partition_per_file_group_and_filters_prune_them(neve, neve_spark, taxi):
    from pyspark.sql import functions as F

    files = json.loads(neve("files", taxi, "--format", "json").stdout)["files"]
    months = {f["partition_values"]["d"] for f in files}
    assert len(months) > 2
    df = read(neve_spark, taxi)
    # Files of a month together, none over maxPartitionBytes (128 MiB): here one per month.
    assert df.rdd.getNumPartitions() == len(months)
    small = read(neve_spark, taxi, maxPartitionBytes=1)
    assert small.rdd.getNumPartitions() == len(files)
    assert small.count() == df.count() == ROWS

    # A filter on the partition's source column reads only the months it can match.
    first = min(months)
    since = dt.datetime.strptime(first, "%Y-%m") + dt.timedelta(days=40)
    since = since.replace(day=1)
    # The column has no zone (TIMESTAMP_NTZ in Spark): the literal too, or Spark casts the column.
    cut = df.filter(F.col("trip_start_timestamp") >= F.lit(since).cast("timestamp_ntz"))
    expected = len({m for m in months if m >= since.strftime("%Y-%m")})
    assert cut.rdd.getNumPartitions() == expected < len(months)
    want = neve_rows(neve, taxi, "SELECT count(*) AS n FROM {table} WHERE trip_start_timestamp >= "
                     f"TIMESTAMP '{since.isoformat()}'")[0]["n"]
    assert cut.count() == want > 0
    # A filter on another column is applied too (by Spark, and by neve to prune).
    one = df.filter((F.col("payment_type") == "Cash") & (F.col("fare") > 10))
    want = neve_rows(neve, taxi, "SELECT count(*) AS n FROM {table} WHERE payment_type = 'Cash' "
                     "AND fare > 10")[0]["n"]
    assert one.count() == want > 0


def test_a_replace_table_reads_exact(neve_bin, neve, neve_spark, tmp_path):
    from pyspark.sql import functions as F

    table = str(tmp_path / "users")
    run(neve_bin, "create", table, "--sort-by", "user_id", "--schema",
        "user_id int64, updated int64, name string, gone boolean",
        "--merge", "replace(key = [user_id], version = updated, deleted = gone)")
    batches = [
        [(i, 1, f"u{i}", False) for i in range(100)],
        [(i, 2, f"v{i}", False) for i in range(0, 100, 2)],
        [(i, 3, None, True) for i in range(0, 100, 10)],
    ]
    for rows in batches:
        path = tmp_path / "rows.ndjson"
        path.write_text("".join(json.dumps(dict(zip(["user_id", "updated", "name", "gone"], r))) + "\n"
                                for r in rows))
        run(neve_bin, "insert", table, path)
    df = read(neve_spark, table)
    got = {r["user_id"]: r["name"] for r in df.collect()}
    want = {r["user_id"]: r["name"] for r in neve_rows(neve, table, "SELECT user_id, name FROM {table}")}
    assert got == want and len(want) == 90 and want[2] == "v2" and want[1] == "u1"
    # A key filter prunes below the merge, and still reads the key's latest row.
    assert [r["name"] for r in df.filter(F.col("user_id") == 4).collect()] == ["v4"]
    assert df.filter(F.col("user_id") == 10).count() == 0
    # An older version reads that version's answer.
    old = read(neve_spark, table, versionAsOf=2)
    assert old.count() == 100 and old.filter(F.col("name") == "v4").count() == 1
    # Columns are read by name: a schema given in another order keeps each value in its column.
    swapped = neve_spark.read.format("neve").schema("name string, user_id long").load(table)
    assert {r["user_id"]: r["name"] for r in swapped.collect()} == want
    with pytest.raises(Exception, match="column 'nope' is not in version 3"):
        neve_spark.read.format("neve").schema("nope long").load(table).collect()
    # A column dropped after load() is an error naming it, not another column's values.
    stale = read(neve_spark, table)
    run(neve_bin, "alter", table, "drop column name")
    with pytest.raises(Exception, match="column 'name' is not in version 4"):
        stale.collect()


def test_bad_options_say_what_is_wrong(neve_spark, neve_bin):
    table = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/t"
    env = {**os.environ}
    p = subprocess.run([neve_bin, "create", table, "--schema", "a int64"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert read(neve_spark, table).count() == 0
    with pytest.raises(Exception, match="versionAsOf: 'latest' is not a version number"):
        read(neve_spark, table, versionAsOf="latest").collect()
    with pytest.raises(Exception, match="unknown storage option 'no_such_option'"):
        read(neve_spark, table, no_such_option="x").collect()
    with pytest.raises(Exception, match="version 7"):
        read(neve_spark, table, versionAsOf=7).collect()
    # Digits alone are not a time (neve would read them as a version).
    with pytest.raises(Exception, match="timestampAsOf: '0' is not a time"):
        read(neve_spark, table, timestampAsOf="0").collect()


def test_spark_filters_translate_to_neve_predicates_with_spark_answers(tmp_path):
    """Without a cluster: each filter Spark may push, translated, selects in neve exactly the
    rows Python's own comparison selects (time zones, NTZ, strings, NULLs)."""
    import pyarrow as pa
    from pyspark.sql.datasource import (EqualNullSafe, EqualTo, GreaterThanOrEqual, In, IsNotNull,
                                        IsNull, LessThan, Not, StringContains, StringStartsWith)

    import neve
    from neve.spark import _translate

    utc = dt.timezone.utc
    base = dt.datetime(2021, 3, 27, tzinfo=utc)
    times = [base + dt.timedelta(minutes=37 * i) for i in range(200)]
    data = pa.table({
        "id": pa.array(range(200), pa.int64()),
        "at": pa.array(times, pa.timestamp("us", tz="Europe/Paris")),
        "wall": pa.array([t.replace(tzinfo=None) for t in times], pa.timestamp("us")),
        "name": pa.array([None if i % 7 == 0 else f"n{i % 13}'x" for i in range(200)]),
        "day": pa.array([t.date() for t in times], pa.date32()),
    })
    t = neve.create_table(str(tmp_path / "f"), sort_by=["id"])
    t.insert(data)
    rows = data.to_pylist()
    cut = times[101]
    local_naive = cut.astimezone().replace(tzinfo=None)  # how Spark hands a TIMESTAMP value
    cases = [
        (GreaterThanOrEqual(("at",), cut), lambda r: r["at"] >= cut),
        (GreaterThanOrEqual(("at",), local_naive), lambda r: r["at"] >= cut),
        (LessThan(("wall",), cut.replace(tzinfo=None)), lambda r: r["wall"] < cut.replace(tzinfo=None)),
        (EqualTo(("name",), "n3'x"), lambda r: r["name"] == "n3'x"),
        (In(("id",), (1, 5, 199, 400)), lambda r: r["id"] in (1, 5, 199)),
        (IsNull(("name",)), lambda r: r["name"] is None),
        (IsNotNull(("name",)), lambda r: r["name"] is not None),
        (Not(EqualTo(("id",), 3)), lambda r: r["id"] != 3),
        (EqualNullSafe(("name",), None), lambda r: r["name"] is None),
        (StringStartsWith(("name",), "n1"), lambda r: (r["name"] or "").startswith("n1")),
        (StringContains(("name",), "'"), lambda r: "'" in (r["name"] or "")),
        (EqualTo(("day",), times[150].date()), lambda r: r["day"] == times[150].date()),
    ]
    schema = t.schema
    for f, keep in cases:
        predicate = _translate(f, schema)
        assert predicate is not None, f
        got = t.sql(f"SELECT count(*) AS n FROM f WHERE {predicate}").to_pylist()[0]["n"]
        want = sum(1 for r in rows if keep(r))
        assert got == want > 0, (f, predicate, got, want)
    # What has no exact translation is left to Spark.
    assert _translate(EqualTo(("id",), 1.5), schema) is None
    assert _translate(EqualTo(("nested", "x"), 1), schema) is None
    assert _translate(GreaterThanOrEqual(("id",), float("nan")), schema) is None
    # Floats never: neve orders -0.0 below 0.0, Spark takes them as equal.
    floats = pa.schema([("x", pa.float64())])
    assert _translate(EqualTo(("x",), 0.0), floats) is None
    assert _translate(In(("x",), (0.0, 1.5)), floats) is None

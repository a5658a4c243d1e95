"""Partition transforms of the types Iceberg defines them on besides integers, strings and
dates: decimals, bytes, UUIDs, times and timestamps. Each file's partition values in neve's
Iceberg metadata are the values pyiceberg's own transforms compute from the file's rows, and
pyiceberg, DuckDB and chdb, which prune files by them, answer filters as `neve sql` does."""
import datetime as dt
import json
import os
import random
import subprocess
import sys
import uuid
from decimal import Decimal

import pytest

from test_iceberg import CHDB, chdb_relation, duck_ice, duck_rows, static_table  # noqa: F401

SCHEMA = ("k bigint, amount decimal(9,2), raw binary, id uuid, t time, ts timestamptz, "
          "price decimal(5,2)")
# Partition levels by kind; a level on `t` names it in its source.
SPECS = {
    "bucket": ["bucket(8, amount) as ab", "bucket(4, raw) as rb", "bucket(4, id) as ib",
               "bucket(3, ts) as tb", "bucket(3, t) as tt"],
    "truncate": ["truncate(1000, amount) as at", "truncate(1, raw) as rt"],
    "identity": ["identity(price) as price", "identity(t) as tid", "identity(ts) as tsid"],
}
UTC = dt.timezone.utc
AMOUNTS = [None, Decimal("0.00"), Decimal("-0.05"), Decimal("14.20"), Decimal("-9999999.99"),
           Decimal("9999999.99"), Decimal("5.00"), Decimal("4.99"), Decimal("-20.00"),
           Decimal("-20.01")]
RAWS = [None, b"", b"\x00\x01\x02\x03", b"\x01", b"\x01\x02", b"\xff" * 5, b"iceberg"]
TIMES = [None, dt.time(0, 0), dt.time(13, 45, 0, 7), dt.time(23, 59, 59, 999999)]
STAMPS = [None, dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
          dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=UTC),
          dt.datetime(2021, 8, 15, 13, 45, 0, 1, tzinfo=UTC)]
PRICES = [None, Decimal("1.50"), Decimal("-2.25")]


def rows(seed, n=80):
    rnd = random.Random(seed)
    ids = [None] + [rnd.randbytes(16) for _ in range(4)]
    amounts = AMOUNTS + [Decimal(rnd.randrange(-10**8, 10**8)).scaleb(-2) for _ in range(6)]
    return [{"k": seed * 1000 + i, "amount": rnd.choice(amounts), "raw": rnd.choice(RAWS),
             "id": rnd.choice(ids), "t": rnd.choice(TIMES), "ts": rnd.choice(STAMPS),
             "price": rnd.choice(PRICES)} for i in range(n)]


def write_rows(path, rs, drop=()):
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("k", pa.int64()), ("amount", pa.decimal128(9, 2)), ("raw", pa.binary()),
                        ("id", pa.binary(16)), ("t", pa.time64("us")),
                        ("ts", pa.timestamp("us", tz="UTC")), ("price", pa.decimal128(5, 2))])
    table = pa.Table.from_pylist(rs, schema=schema)
    pq.write_table(table.drop_columns(list(drop)), path)


def make_table(neve_bin, d, path, spec, drop=()):
    """A table partitioned by `spec`, with two inserts of `rows` (less the `drop` columns)."""
    run = lambda *a: subprocess.run([neve_bin, *map(str, a)], capture_output=True, text=True)
    schema = ", ".join(c for c in SCHEMA.split(", ") if c.split()[0] not in drop)
    p = run("create", path, "--schema", schema, "--partition-by", spec, "--iceberg")
    assert p.returncode == 0, p.stderr
    for seed in (1, 2):
        src = d / f"rows-{seed}.parquet"
        write_rows(src, rows(seed), drop)
        p = run("insert", path, src)
        assert p.returncode == 0, p.stderr


def micros(v):
    """pyiceberg's transforms take times and timestamps as microseconds."""
    if isinstance(v, dt.datetime):
        return (v - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return v


@pytest.fixture(scope="module", params=[(w, k) for w in ("local", "minio") for k in SPECS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def table(request, neve_bin, tmp_path_factory):
    where, kind = request.param
    d = tmp_path_factory.mktemp("transforms")
    path = str(d / "t") if where == "local" else \
        f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/t"
    make_table(neve_bin, d, path, ", ".join(SPECS[kind]))
    return path, kind


def test_each_files_partition_values_are_pyicebergs_transforms_of_its_rows(table):
    import pyarrow.parquet as pq

    path, kind = table
    ice = static_table(path)
    spec, schema = ice.spec(), ice.schema()
    assert len(spec.fields) == len(SPECS[kind])
    tasks = list(ice.scan().plan_files())
    assert sum(t.file.record_count for t in tasks) == 160
    seen = set()
    for task in tasks:
        with ice.io.new_input(task.file.file_path).open() as f:
            file_rows = pq.read_table(f).to_pylist()
        assert len(file_rows) == task.file.record_count
        for r in file_rows:
            for i, field in enumerate(spec.fields):
                source = schema.find_field(field.source_id)
                fn = field.transform.transform(source.field_type)
                want = fn(micros(r[source.name]))
                got = task.file.partition[i]
                assert got == want, (field, r[source.name], got, want)
                seen.add((field.name, got))
    # Every level has several values, so a wrong function would have shown.
    for field in spec.fields:
        assert len({v for n, v in seen if n == field.name}) >= 3, field


# Filters each reader prunes by the partition values: (pyiceberg expression, neve SQL, DuckDB
# SQL, ClickHouse SQL or None where chdb has no such literal).
def filters():
    from pyiceberg.expressions import EqualTo, GreaterThanOrEqual, LessThan

    return [
        (EqualTo("amount", Decimal("14.20")), "amount = 14.20", "amount = 14.20",
         "amount = toDecimal64('14.20', 2)"),
        (GreaterThanOrEqual("amount", Decimal("5.00")), "amount >= 5.00", "amount >= 5.00",
         "amount >= toDecimal64('5.00', 2)"),
        (LessThan("amount", Decimal("-20.00")), "amount < -20.00", "amount < -20.00",
         "amount < toDecimal64('-20.00', 2)"),
        (EqualTo("raw", b"\x01\x02"), "raw = X'0102'", "raw = from_hex('0102')",
         "raw = unhex('0102')"),
        (EqualTo("ts", "2017-11-16T22:31:08+00:00"),
         "ts = TIMESTAMP '2017-11-16T22:31:08Z'",
         "ts = TIMESTAMPTZ '2017-11-16 22:31:08+00'",
         "ts = toDateTime64('2017-11-16 22:31:08', 6, 'UTC')"),
        (EqualTo("t", "13:45:00.000007"), "t = TIME '13:45:00.000007'",
         "t = TIME '13:45:00.000007'", None),
        (EqualTo("price", Decimal("-2.25")), "price = -2.25", "price = -2.25",
         "price = toDecimal32('-2.25', 2)"),
    ]


def test_readers_pruning_by_the_partition_values_answer_as_neve(table, neve, duck_ice):
    path, kind = table
    ice = static_table(path)
    all_files = len(list(ice.scan().plan_files()))
    asked, expected, pruned = [], [], 0
    for expr, ours, duck, ch in filters():
        want = sorted(r["k"] for r in json.loads(neve(
            "sql", f"SELECT k FROM t WHERE {ours}", "--table", f"t={path}",
            "--format", "json").stdout))
        assert want, ours
        scan = ice.scan(row_filter=expr, selected_fields=("k",))
        planned = len(list(scan.plan_files()))
        pruned += planned < all_files
        assert sorted(scan.to_arrow()["k"].to_pylist()) == want, f"pyiceberg: {expr}"
        got = sorted(r["k"] for r in duck_rows(
            duck_ice, f"SELECT k FROM {{table}} WHERE {duck}", f"iceberg_scan('{path}')"))
        assert got == want, f"DuckDB: {duck}"
        if ch:
            asked.append(f"SELECT k FROM {chdb_relation(path)} WHERE {ch} "
                         "SETTINGS use_iceberg_partition_pruning = 1")
            expected.append((ch, want))
    # pyiceberg planned fewer files for the filters on a partition source.
    assert pruned >= 3, pruned
    p = subprocess.run([sys.executable, "-c", CHDB], input=json.dumps(asked),
                       capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    for (ch, want), got in zip(expected, json.loads(p.stdout)):
        assert sorted(int(r["k"]) for r in got) == want, f"chdb: {ch}"


@pytest.mark.parametrize("kind", SPECS)
def test_spark_prunes_by_the_partition_values_and_answers_as_neve(kind, neve, neve_bin, spark,
                                                                  tmp_path):
    """Spark's Iceberg reader (Java, 1.12) on the same layouts; Spark reads no table with a
    `time` column ("Spark does not support time fields"), so the tables here have none."""
    path = str(tmp_path / "t")
    spec = ", ".join(lv for lv in SPECS[kind] if ", t)" not in lv and "(t)" not in lv)
    make_table(neve_bin, tmp_path, path, spec, drop=("t",))
    spark.read.format("iceberg").load(path).createOrReplaceTempView("ice")
    for _, ours, _, _ in filters():
        if ours.startswith("t "):
            continue
        theirs = ours.replace("TIMESTAMP '2017-11-16T22:31:08Z'",
                              "TIMESTAMP '2017-11-16 22:31:08Z'")
        want = sorted(r["k"] for r in json.loads(neve(
            "sql", f"SELECT k FROM t WHERE {ours}", "--table", f"t={path}",
            "--format", "json").stdout))
        got = sorted(r.k for r in spark.sql(f"SELECT k FROM ice WHERE {theirs}").collect())
        assert got == want, f"Spark: {theirs}"


def test_identity_of_a_uuid_is_neves_own_not_icebergs(neve, tmp_path):
    """Iceberg's Java reader cannot read an identity partition of a fixed (UUID) column: such a
    table is refused `iceberg=true` with the alternative named; without it, it partitions."""
    p = neve("create", tmp_path / "a", "--schema", "k bigint, id uuid",
             "--partition-by", "identity(id) as iid", "--iceberg", check=False)
    assert p.returncode != 0 and "bucket(N, id)" in p.stderr, p.stderr
    assert not (tmp_path / "a" / "_log").exists()
    path = tmp_path / "b"
    neve("create", path, "--schema", "k bigint, id uuid", "--partition-by", "identity(id) as iid")
    src = tmp_path / "rows.parquet"
    write_rows(src, [{"k": 1, "id": bytes(range(16))}], drop=("amount", "raw", "t", "ts", "price"))
    neve("insert", path, src)
    assert [d.name for d in (path / "_data").iterdir()] == ["iid=000102030405060708090a0b0c0d0e0f"]
    p = neve("alter", path, "set", "iceberg=true", check=False)
    assert p.returncode != 0 and "bucket(N, id)" in p.stderr, p.stderr


def test_a_decimal_partition_source_keeps_its_scale(neve, tmp_path):
    """Widening a bucketed decimal's scale would move its values to other buckets: refused,
    and the table is as it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(tmp_path / "t")
    neve("create", path, "--schema", "k bigint, amount decimal(9,2)",
         "--partition-by", "bucket(8, amount)", "--iceberg")
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"k": pa.array([1], pa.int64()),
                             "amount": pa.array([Decimal("1.20")], pa.decimal128(9, 2))}), src)
    neve("insert", path, src)
    before = json.loads(neve("info", path, "--json").stdout)
    wider = tmp_path / "b.parquet"
    pq.write_table(pa.table({"k": pa.array([2], pa.int64()),
                             "amount": pa.array([Decimal("1.200")], pa.decimal128(12, 3))}), wider)
    p = neve("insert", path, wider, check=False)
    assert p.returncode != 0
    assert "amount" in p.stderr and "keeps its scale" in p.stderr, p.stderr
    p = neve("alter", path, "widen", "amount", "decimal(12,3)", check=False)
    assert p.returncode != 0 and "keeps its scale" in p.stderr, p.stderr
    # Precision alone widens.
    neve("alter", path, "widen", "amount", "decimal(12,2)")
    after = json.loads(neve("info", path, "--json").stdout)
    assert after["version"] == before["version"] + 1
    assert after["rows"] == before["rows"] == 1

"""Values go in and come back unchanged, from and to pyarrow, pandas, polars and DuckDB."""
import datetime as dt
import decimal

import pyarrow as pa
import pytest

import neve

UTC = dt.timezone.utc


def sample():
    return pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "name": pa.array(["a", None, "ç ü", ""], pa.string()),
            "score": pa.array([1.5, None, -0.0, 1e300], pa.float64()),
            "ok": pa.array([True, False, None, True]),
            "ts": pa.array(
                [dt.datetime(2021, 1, 1, 12, 0, 0, 123456, tzinfo=UTC), None,
                 dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), dt.datetime(2038, 1, 19, 3, 14, 8, tzinfo=UTC)],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array([dt.date(2021, 1, 1), dt.date(1900, 3, 1), None, dt.date(9999, 12, 31)]),
            "amount": pa.array([decimal.Decimal("1.10"), None, decimal.Decimal("-99999.99"), decimal.Decimal("0.00")], pa.decimal128(18, 2)),
        }
    )


def test_pyarrow_round_trip(where):
    t = neve.create_table(where, partition_by="identity(ok)", sort_by=["id"])
    report = t.insert(sample())
    assert (report.version, report.rows) == (1, 4)
    assert report.files >= 1 and report.partitions == 3
    back = t.sql("SELECT * FROM t ORDER BY id")
    assert back.schema.names == sample().schema.names
    for name in sample().schema.names:
        assert back.column(name).to_pylist() == sample().column(name).to_pylist(), name
    assert back.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert t.version == 1
    assert t.schema.names == back.schema.names
    # The same rows through a reader and a batch: two more commits.
    t.insert(sample().to_reader())
    t.insert(sample().to_batches()[0])
    assert t.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [12]
    assert [c["operation"] for c in t.history()] == ["CREATE", "INSERT", "INSERT", "INSERT"]
    assert t.info()["rows"] == 12
    assert sum(f["rows"] for f in t.files()) == 12
    # Time travel.
    assert t.sql("SELECT count(*) AS n FROM t", as_of=1).column("n").to_pylist() == [4]


def test_pandas_round_trip(where):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {
            "id": pd.array([1, 2, None], dtype="Int64"),
            "city": pd.Categorical(["Rome", "Oslo", "Rome"]),
            "ts": pd.to_datetime(["2024-03-01 10:00:00.000001", None, "2024-03-02 00:00:00"], format="ISO8601").tz_localize("Europe/Rome"),
            "x": [0.5, float("nan"), None],
            "s": ["a", None, "c"],
        }
    )
    t = neve.create_table(where)
    t.insert(df)
    arrow = t.sql("SELECT * FROM t ORDER BY ts NULLS LAST")
    back = arrow.to_pandas()
    # Row by row (ordered by ts: rows 0, 2, then 1, whose ts is null): every value, and its
    # nulls where they were. (A float64 column in pandas holds None as NaN, and pandas hands
    # NaN to Arrow as null: both are null on the way in.)
    assert arrow.column("id").to_pylist() == [1, None, 2]
    assert arrow.column("city").cast(pa.string()).to_pylist() == ["Rome", "Rome", "Oslo"]
    assert arrow.column("s").to_pylist() == ["a", "c", None]
    assert arrow.column("x").to_pylist() == [0.5, None, None]
    # A zoned timestamp keeps its instant (neve stores UTC) and its zone's meaning.
    got = back["ts"].dropna().dt.tz_convert("Europe/Rome").tolist()
    want = df["ts"].dropna().sort_values().tolist()
    assert got == want
    assert back["ts"].isna().sum() == 1
    assert back["s"].isna().sum() == 1
    assert back["x"].isna().sum() == 2  # NaN and None are both missing in pandas


def test_polars_round_trip(where):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame(
        {
            "id": [1, 2, 3],
            "tags": [["a", "b"], [], None],
            "ts": [dt.datetime(2024, 1, 1), None, dt.datetime(2024, 1, 3, 4, 5, 6, 7)],
            "v": [None, 2.5, 3.5],
        }
    )
    t = neve.create_table(where, sort_by=["id"])
    t.insert(df)
    back = pl.from_arrow(t.sql("SELECT * FROM t ORDER BY id"))
    assert back.to_dicts() == df.to_dicts()


def test_duckdb_round_trip(where):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    rel = con.sql("SELECT i AS id, 'k' || i AS k, i * 0.5 AS half FROM range(1000) t(i)")
    t = neve.create_table(where)
    t.insert(rel)
    back = t.sql("SELECT * FROM t ORDER BY id")
    want = con.sql("SELECT i AS id, 'k' || i AS k, i * 0.5 AS half FROM range(1000) t(i) ORDER BY id").arrow()
    if hasattr(want, "read_all"):
        want = want.read_all()
    for name in ("id", "k", "half"):
        assert back.column(name).to_pylist() == want.column(name).to_pylist()
    # And back into DuckDB from neve's result.
    assert con.sql("SELECT sum(id) FROM back").fetchone()[0] == sum(range(1000))


def test_list_of_dicts_and_sql_stream(where):
    t = neve.create_table(where)
    t.insert([{"id": i, "v": f"x{i}"} for i in range(5000)])
    reader = t.sql_stream("SELECT id FROM t WHERE id % 2 = 0")
    assert isinstance(reader, pa.RecordBatchReader)
    total = sum(b.num_rows for b in reader)
    assert total == 2500


def test_sql_over_several_tables_by_address_and_object(tmp_path):
    a = neve.create_table(tmp_path / "a")
    a.insert(pa.table({"k": [1, 2, 3], "x": ["a", "b", "c"]}))
    neve.create_table(tmp_path / "b").insert(pa.table({"k": [2, 3, 4], "y": [20, 30, 40]}))
    out = neve.sql(
        "SELECT a.k, x, y FROM a JOIN b ON a.k = b.k ORDER BY a.k",
        tables={"a": a, "b": str(tmp_path / "b")},
    )
    assert out.to_pylist() == [{"k": 2, "x": "b", "y": 20}, {"k": 3, "x": "c", "y": 30}]


def test_storage_options_reach_minio(s3_address, minio_options):
    t = neve.create_table(s3_address, storage_options=minio_options)
    t.insert(pa.table({"a": [1]}))
    assert neve.Table(s3_address, storage_options=minio_options).version == 1


def test_maintenance_calls(where):
    t = neve.create_table(where, partition_by="identity(p)")
    for i in range(4):
        t.insert(pa.table({"p": ["x", "y"], "v": [i, i]}))
    merged = t.merge(min_files=2)
    assert merged["files_in"] == 8 and merged["files_out"] == 2
    assert t.delete("v = 0")["rows_deleted"] == 2
    dropped = t.drop_partitions(["p=y"])
    assert dropped["rows"] == 3
    assert t.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [3]
    report = t.gc(grace="0s", retention="0s")
    assert report["tombstones_deleted"] >= 8
    assert t.alter("add column note string") == t.version
    assert "note" in t.schema.names
    # Words are split as a shell splits `neve alter`'s command line.
    t.alter('add column "score int64"')
    assert t.schema.field("score").type == pa.int64()
    t.alter('rename column score to "final score"')
    assert "final score" in t.schema.names
    version = t.version
    with pytest.raises(neve.InvalidInputError, match="quotation"):
        t.alter('add column "x string')
    assert t.version == version


def test_a_naive_datetime_as_of_is_local_time(tmp_path, monkeypatch):
    """`datetime.now()` is the machine's wall time: read as such, not as UTC."""
    import datetime as dt
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        t = neve.create_table(tmp_path / "t")
        t.insert(pa.table({"id": [1]}))
        time.sleep(0.05)
        between = dt.datetime.now()
        assert between.tzinfo is None
        time.sleep(0.05)
        t.insert(pa.table({"id": [2]}))
        count = "SELECT count(*) AS n FROM t"
        assert t.sql(count, as_of=between).column("n").to_pylist() == [1]
        assert t.sql(count, as_of=between.astimezone(dt.timezone.utc)).column("n").to_pylist() == [1]
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()

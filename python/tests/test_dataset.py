"""`to_pyarrow_dataset`: DuckDB and polars scan a version's files lazily and answer the seed
queries as `t.sql` does; a filter on the partition column skips files by the log's bounds."""
import datetime as dt
import json
import math
import pathlib
import subprocess

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

import neve

QUERIES = {
    q["name"]: q
    for q in json.loads((pathlib.Path(__file__).parents[2] / "bench" / "seed_queries.json").read_text())["queries"]
}
ROWS = 200_000


@pytest.fixture(scope="module", params=["local", "minio"])
def taxi(request, neve_bin, tmp_path_factory):
    import uuid

    d = tmp_path_factory.mktemp("taxi")
    if request.param == "local":
        address = str(d / "taxi")
    else:
        import os

        address = f"s3://{os.environ['NEVE_TEST_BUCKET']}/python/{uuid.uuid4()}/taxi"
    t = neve.create_table(address, partition_by="month(trip_start_timestamp) as d",
                          sort_by=["payment_type", "trip_start_timestamp"])
    for seed in (1, 2):
        path = d / f"taxi-{seed}.parquet"
        subprocess.run([neve_bin, "bench", "gen", str(path), "--rows", str(ROWS // 2), "--seed", str(seed)], check=True,
                       capture_output=True)
        import pyarrow.parquet as pq

        t.insert(pq.read_table(path))
    return t


def rows_of(table: pa.Table):
    out = []
    for r in table.to_pylist():
        n = {}
        for k, v in r.items():
            if k == "mnth":
                n[k] = str(v)[:7]
            elif isinstance(v, (int, float)) or hasattr(v, "__float__"):
                n[k] = float(v)
            else:
                n[k] = v
        out.append(n)
    keys = [k for k in ("mnth", "payment_type", "m") if out and k in out[0]]
    return {tuple(r[k] for k in keys): r for r in out}


def same(ours, other, engine):
    assert ours.keys() == other.keys(), f"{engine}: different groups"
    for key, row in ours.items():
        for col, v in row.items():
            w = other[key][col]
            if isinstance(v, float):
                tol = 0.05 if col.startswith("med_") else 1e-9
                assert math.isclose(v, w, rel_tol=tol, abs_tol=1.0 if col.startswith("med_") else 1e-9), (engine, key, col, v, w)
            else:
                assert v == w, (engine, key, col, v, w)


@pytest.mark.parametrize("name", [n for n in QUERIES if n != "limit_1000"])
def test_duckdb_over_the_dataset_answers_as_neve(taxi, name):
    import duckdb

    q = QUERIES[name]
    taxi_ds = taxi.to_pyarrow_dataset()  # noqa: F841  (DuckDB finds it by its name)
    duck = duckdb.sql(q["duckdb"].format(table="taxi_ds")).arrow()
    if hasattr(duck, "read_all"):
        duck = duck.read_all()
    ours = taxi.sql(q["neve"].format(table="taxi"))
    assert ours.num_rows > 0
    same(rows_of(ours), rows_of(duck), "duckdb")


def polars_query(lf, name):
    import polars as pl

    ts = pl.col("trip_start_timestamp")
    month = ts.dt.truncate("1mo").alias("mnth")
    if name == "count_by_month":
        return lf.group_by(month).agg(pl.len().alias("cnt"))
    if name == "medians_by_month":
        aggs = []
        for c in ("fare", "tips", "trip_seconds", "trip_miles"):
            aggs += [pl.col(c).median().alias(f"med_{c}"), pl.col(c).mean().alias(f"avg_{c}")]
        return lf.group_by(month).agg(aggs)
    if name == "count_by_payment_type":
        return lf.group_by("payment_type").agg(pl.len().alias("cnt"))
    m = ts.dt.month().cast(pl.Int64).alias("m")
    if name == "month_8_by_payment_type":
        return lf.filter(ts.dt.month() == 8).group_by("payment_type", m).agg(pl.len().alias("cnt"))
    if name == "year_2021_by_payment_type":
        lo, hi = dt.datetime(2021, 1, 1), dt.datetime(2021, 12, 31)
        tz = lf.collect_schema()["trip_start_timestamp"].time_zone
        if tz:
            lo, hi = lo.replace(tzinfo=dt.timezone.utc), hi.replace(tzinfo=dt.timezone.utc)
        return lf.filter((ts.dt.truncate("1mo") >= lo) & (ts.dt.truncate("1mo") <= hi)).group_by("payment_type", m).agg(
            pl.len().alias("cnt"))
    raise AssertionError(name)


@pytest.mark.parametrize("name", [n for n in QUERIES if n != "limit_1000"])
def test_polars_over_the_dataset_answers_as_neve(taxi, name):
    import polars as pl

    lf = pl.scan_pyarrow_dataset(taxi.to_pyarrow_dataset())
    theirs = polars_query(lf, name).collect().to_arrow()
    ours = taxi.sql(QUERIES[name]["neve"].format(table="taxi"))
    same(rows_of(ours), rows_of(theirs), "polars")


def test_limit_through_duckdb_and_polars(taxi):
    import duckdb
    import polars as pl

    taxi_ds = taxi.to_pyarrow_dataset()  # noqa: F841
    assert duckdb.sql("SELECT * FROM taxi_ds LIMIT 1000").fetchall().__len__() == 1000
    assert pl.scan_pyarrow_dataset(taxi.to_pyarrow_dataset()).head(1000).collect().height == 1000


class Counting(pafs.FileSystemHandler):
    """A filesystem that counts the bytes read through it from another."""

    def __init__(self, fs):
        self.fs = fs
        self.read = 0

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.fs.get_file_info(selector)

    def open_input_file(self, path):
        handler = self

        class File:
            def __init__(self, f):
                self.f = f
                self.closed = False

            def read(self, n=-1):
                b = self.f.read(n)
                handler.read += len(b)
                return b

            def seek(self, off, whence=0):
                return self.f.seek(off, whence)

            def tell(self):
                return self.f.tell()

            def size(self):
                return self.f.size()

            def close(self):
                self.closed = True
                self.f.close()

            def readable(self):
                return True

            def seekable(self):
                return True

        return pa.PythonFile(File(self.fs.open_input_file(path)), mode="r")

    def open_input_stream(self, path):
        return self.open_input_file(path)

    def create_dir(self, *a):
        raise NotImplementedError

    delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = move = copy_file = create_dir
    open_output_stream = open_append_stream = create_dir


def test_a_partition_filter_reads_fewer_bytes(taxi):
    handler = Counting(taxi.to_pyarrow_dataset().filesystem)
    data = taxi.to_pyarrow_dataset(filesystem=pafs.PyFileSystem(handler))
    ts = ds.field("trip_start_timestamp")
    tz = data.schema.field("trip_start_timestamp").type.tz
    lo = pa.scalar(dt.datetime(2021, 8, 1), pa.timestamp("us", tz=tz))
    hi = pa.scalar(dt.datetime(2021, 9, 1), pa.timestamp("us", tz=tz))
    month = (ts >= lo) & (ts < hi)
    n_month = data.to_table(filter=month, columns=["fare"]).num_rows
    month_bytes = handler.read
    handler.read = 0
    n_all = data.to_table(columns=["fare"]).num_rows
    all_bytes = handler.read
    want = taxi.sql(
        "SELECT count(*) AS n FROM taxi WHERE trip_start_timestamp >= '2021-08-01T00:00:00Z' "
        "AND trip_start_timestamp < '2021-09-01T00:00:00Z'"
    ).column("n").to_pylist()[0]
    assert n_month == want > 0
    assert n_all == ROWS
    assert month_bytes < all_bytes / 4, (month_bytes, all_bytes)


def test_duckdb_and_polars_push_a_partition_filter_into_the_dataset(taxi):
    """DuckDB and polars scanning the dataset lazily read fewer bytes with a filter on the
    partition column than without, and count what neve counts."""
    import duckdb
    import polars as pl

    handler = Counting(taxi.to_pyarrow_dataset().filesystem)
    data = taxi.to_pyarrow_dataset(filesystem=pafs.PyFileSystem(handler))
    want = taxi.sql(
        "SELECT count(*) AS n FROM taxi WHERE trip_start_timestamp >= '2021-08-01T00:00:00Z' "
        "AND trip_start_timestamp < '2021-09-01T00:00:00Z'"
    ).column("n").to_pylist()[0]
    con = duckdb.connect()
    con.register("data", data)

    def read(run):
        handler.read = 0
        n = run()
        return n, handler.read

    n_all, all_bytes = read(lambda: con.sql("SELECT count(fare) FROM data").fetchone()[0])
    n, month_bytes = read(lambda: con.sql(
        "SELECT count(fare) FROM data WHERE trip_start_timestamp >= TIMESTAMPTZ '2021-08-01 00:00:00+00' "
        "AND trip_start_timestamp < TIMESTAMPTZ '2021-09-01 00:00:00+00'").fetchone()[0])
    assert (n_all, n) == (ROWS, want)
    assert month_bytes < all_bytes / 4, ("duckdb", month_bytes, all_bytes)
    tz = data.schema.field("trip_start_timestamp").type.tz
    lo, hi = dt.datetime(2021, 8, 1), dt.datetime(2021, 9, 1)
    if tz:
        lo, hi = lo.replace(tzinfo=dt.timezone.utc), hi.replace(tzinfo=dt.timezone.utc)
    ts = pl.col("trip_start_timestamp")
    lf = pl.scan_pyarrow_dataset(data)
    n_all, all_bytes = read(lambda: lf.select(pl.col("fare").count()).collect().item())
    n, month_bytes = read(lambda: lf.filter((ts >= lo) & (ts < hi)).select(pl.col("fare").count()).collect().item())
    assert (n_all, n) == (ROWS, want)
    assert month_bytes < all_bytes / 4, ("polars", month_bytes, all_bytes)


def test_a_partition_filter_skips_files(taxi):
    data = taxi.to_pyarrow_dataset()
    ts = ds.field("trip_start_timestamp")
    tz = data.schema.field("trip_start_timestamp").type.tz
    lo = pa.scalar(dt.datetime(2021, 8, 1), pa.timestamp("us", tz=tz))
    kept = list(data.get_fragments(filter=ts >= lo))
    assert 0 < len(kept) < len(list(data.get_fragments()))


def test_dataset_as_of_a_version(taxi):
    first = taxi.to_pyarrow_dataset(as_of=1)
    assert first.count_rows() == ROWS // 2
    assert taxi.to_pyarrow_dataset().count_rows() == ROWS


def test_unsigned_columns_are_read_back_as_their_types(tmp_path):
    """Data files store uint8/16/32 as wider signed integers (Iceberg's Java reader refuses
    Parquet's unsigned ones); the dataset reads them back as the table's types, values equal,
    and filters and DuckDB over it see the same numbers."""
    import duckdb

    t = neve.create_table(str(tmp_path / "u"), sort_by=["k"])
    rows = pa.table({
        "k": pa.array([1, 2, 3], pa.int64()),
        "a": pa.array([0, 255, None], pa.uint8()),
        "b": pa.array([65535, None, 1], pa.uint16()),
        "c": pa.array([4294967295, 0, 7], pa.uint32()),
        "s": pa.array([{"u": 4294967295}, None, {"u": 1}], pa.struct([("u", pa.uint32())])),
        "l": pa.array([[255], [], None], pa.list_(pa.uint8())),
        "m": pa.array([[("x", 65535)], None, []], pa.map_(pa.string(), pa.uint16())),
    })
    t.insert(rows)
    data = t.to_pyarrow_dataset()
    assert data.schema.field("a").type == pa.uint8()
    assert data.schema.field("c").type == pa.uint32()
    got = data.to_table().sort_by("k")
    assert [f.type for f in got.schema] == [f.type for f in rows.schema]
    assert got.to_pylist() == rows.to_pylist()
    assert data.to_table(filter=ds.field("c") == 4294967295).column("k").to_pylist() == [1]
    assert t.sql("SELECT k FROM u WHERE a = 255").column("k").to_pylist() == [2]
    con = duckdb.connect()
    con.register("d", data)
    assert con.execute("SELECT k FROM d WHERE c = 4294967295").fetchall() == [(1,)]

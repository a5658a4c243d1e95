"""Input that broke tables or the process before: each is refused with a neve exception (or
the source's own), the table stays as it was, and what is accepted reads back."""

import datetime as dt
import multiprocessing as mp
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import neve


def state(t):
    info = t.info()
    return info["version"], info["rows"], info["files"], info["schema_ddl"]


def test_zones_of_every_kind_keep_the_table_readable(where):
    t = neve.create_table(where)
    zones = ["-05:00", "-03:30", "+05:45", "Etc/GMT+5", "America/Port-au-Prince", "UTC"]
    instant = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    for i, z in enumerate(zones):
        t.insert(pa.table({f"ts{i}": pa.array([instant], pa.timestamp("us", tz=z))}))
    again = neve.Table(where)
    assert [again.schema.field(f"ts{i}").type.tz for i in range(len(zones))] == zones
    row = again.sql("SELECT * FROM t").to_pylist()
    assert len(row) == len(zones)
    before = state(again)
    with pytest.raises(neve.SchemaError) as e:
        again.insert(pa.table({"bad": pa.array([instant], pa.timestamp("us", tz="utc"))}))
    assert "'bad'" in str(e.value) and "utc" in str(e.value)
    assert state(again) == before


def test_long_predicates_are_refused_not_a_crash(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"v": list(range(10))}))
    chain = " OR ".join(f"v = {i}" for i in range(3000))
    with pytest.raises(neve.SqlError) as e:
        t.sql(f"SELECT count(*) FROM t WHERE {chain}")
    assert "IN (" in str(e.value)
    with pytest.raises(neve.SqlError):
        t.delete(chain)
    short = " OR ".join(f"v = {i}" for i in range(200))
    assert t.sql(f"SELECT count(*) AS n FROM t WHERE {short}").column("n").to_pylist() == [10]


def test_a_reader_whose_batches_break_its_schema_is_refused(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"v": pa.array([1], pa.int64())}))
    before = state(t)
    schema = pa.schema([("v", pa.int64())])
    floats = pa.record_batch([pa.array([1.5, 2.5])], names=["v"])
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.RecordBatchReader.from_batches(schema, iter([floats])))
    assert "batch 1" in str(e.value)

    class Raw:
        """A producer that hands its broken stream straight to the C interface."""

        def __init__(self, batch):
            self.batch = batch

        def __arrow_c_stream__(self, requested_schema=None):
            return pa.RecordBatchReader.from_batches(schema, iter([self.batch])).__arrow_c_stream__()

    two = pa.record_batch([pa.array([1]), pa.array([2])], names=["v", "w"])
    with pytest.raises(neve.InvalidInputError) as e:
        t.insert(Raw(two))
    assert "batch 1" in str(e.value)
    # (Arrays of other types but the same columns cannot be told apart below the C interface,
    # which carries no buffer sizes: pyarrow's readers are checked above, in Python.)
    assert state(t) == before


def test_invalid_utf8_and_zero_width_binaries_are_refused(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"id": [1], "s": ["ok"]}))
    before = state(t)
    offsets = pa.py_buffer(np.array([0, 2], np.int32).tobytes())
    bad = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(b"\xff\xfe")])
    with pytest.raises(neve.InvalidInputError) as e:
        t.insert(pa.table({"id": [2], "s": bad}))
    assert "'s'" in str(e.value) and "UTF" in str(e.value).upper()
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": [3], "fb0": pa.array([b""], pa.binary(0))}))
    assert "fb0" in str(e.value)
    assert state(t) == before
    assert t.sql("SELECT s FROM t").column("s").to_pylist() == ["ok"]


def test_decimals_beyond_their_precision_are_refused(tmp_path):
    """An array built without validation can hold 10**10 in decimal(3,0): Parquet would store it
    cut to the precision's 32 bits. Refused with its row, top level and nested."""
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"id": [1], "d": pa.array([Decimal("7")], pa.decimal128(3, 0))}))
    before = state(t)
    values = np.zeros(4, np.int64)
    values[0], values[2] = 5, 10**10  # little-endian 128-bit: low word, then high word 0
    bad = pa.Array.from_buffers(pa.decimal128(3, 0), 2, [None, pa.py_buffer(values.tobytes())])
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": [2, 3], "d": bad}))
    m = str(e.value)
    assert "row 2" in m and "'d'" in m and "10000000000" in m and "decimal(3,0)" in m, m
    nested = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), bad)
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": [4, 5], "l": nested}))
    assert "row 2" in str(e.value) and "'l'" in str(e.value), e.value
    assert state(t) == before


class Boom(Exception):
    pass


def test_an_exception_of_the_source_is_raised_as_it_was(tmp_path):
    t = neve.create_table(tmp_path / "t")
    schema = pa.schema([("v", pa.int64())])

    def gen():
        yield pa.record_batch([pa.array([1])], schema=schema)
        raise Boom("the source failed")

    with pytest.raises(Boom):
        t.insert(pa.RecordBatchReader.from_batches(schema, gen()))
    assert t.version == 0


def test_pandas_index_named_levels_become_columns(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pd.DataFrame({"v": [1, 2]}, index=[10, 11]))
    t.insert(pd.DataFrame({"v": [3]}, index=pd.Index(["x"], name="key")))
    assert t.schema.names == ["v", "key"]
    rows = t.sql("SELECT v, key FROM t ORDER BY v").to_pylist()
    assert rows == [{"v": 1, "key": None}, {"v": 2, "key": None}, {"v": 3, "key": "x"}]


def test_a_lone_string_for_a_list_is_a_type_error(tmp_path):
    with pytest.raises(TypeError):
        neve.create_table(tmp_path / "a", sort_by="user_id")
    with pytest.raises(TypeError):
        neve.create_table(tmp_path / "b", iceberg="no")
    t = neve.create_table(tmp_path / "c", partition_by="identity(k)")
    t.insert([{"k": "a", "v": 1}])
    with pytest.raises(TypeError):
        t.drop_partitions("k=a")
    with pytest.raises(TypeError):
        t.merge(partitions="k=a")
    assert t.version == 1


def _use_in_child(address, q):
    try:
        neve.Table(address).version
        q.put("answered")
    except neve.NeveError as e:
        q.put(f"{type(e).__name__}: {e}")


def test_a_child_forked_after_neve_started_gets_an_error_not_a_hang(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert([{"v": 1}])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_use_in_child, args=(str(tmp_path / "t"), q))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert got.startswith("NeveError") and "spawn" in got, got
    # The parent is unaffected.
    assert t.version == 1


def test_query_table_names_that_cannot_be_told_apart_are_refused(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert([{"v": 1}])
    with pytest.raises(neve.InvalidInputError) as e:
        neve.sql("SELECT 1", tables={"a": t, "A": t})
    assert "ignore case" in str(e.value)
    with pytest.raises(neve.InvalidInputError):
        neve.sql("SELECT 1", tables={"information_schema.tables": t})


def test_a_negative_decimal_scale_is_refused(tmp_path):
    import decimal

    t = neve.create_table(tmp_path / "t")
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"d": pa.array([decimal.Decimal("100")], pa.decimal128(5, -2))}))
    assert "'d'" in str(e.value) and "scale" in str(e.value)
    assert t.version == 0


def test_a_tilde_is_the_home_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    t = neve.create_table("~/lake/t")
    assert t.address.startswith(str(tmp_path / "lake")), t.address
    assert not (tmp_path / "~").exists()
    assert neve.Table("~/lake/t").version == 0


def test_a_nul_in_a_column_name_is_refused_not_cut(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"a": [1]}))
    before = state(t)
    for data in (pa.table({"a\x00b": [7]}), [{"a\x00b": 7}], pd.DataFrame({"a\x00b": [7]})):
        with pytest.raises(neve.InvalidInputError, match="NUL"):
            t.insert(data)
    assert state(t) == before


def test_rows_without_columns_are_refused_not_dropped(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"a": [1]}))
    before = state(t)
    for data in ([{}, {}, {}], pa.table({"x": [1, 2, 3]}).drop_columns(["x"])):
        with pytest.raises(neve.InvalidInputError, match="3 rows have no columns"):
            t.insert(data)
    assert state(t) == before
    # Nothing at all is still nothing: no commit, no error.
    assert t.insert([]).version is None
    assert state(t) == before


def test_rows_of_dicts_keep_every_key_of_every_row(tmp_path):
    """A key only later rows have is a column too (pyarrow's from_pylist drops it silently);
    rows without a key hold null there."""
    t = neve.create_table(tmp_path / "t")
    t.insert([{"id": 1}, {"id": 2, "note": "x"}, {"note": "y", "id": 3, "n": 7}])
    got = t.sql("SELECT id, note, n FROM t ORDER BY id").to_pylist()
    assert got == [{"id": 1, "note": None, "n": None}, {"id": 2, "note": "x", "n": None},
                   {"id": 3, "note": "y", "n": 7}]
    before = state(t)
    for rows, message in (
        ([{"id": 4}, ("id", 5)], "row 2 is a tuple"),
        ([{"id": 4}, {5: "x"}], "row 2 has the key 5"),
        ([{"id": 4}, {"id": "five"}], "column 'id'"),
    ):
        with pytest.raises(neve.InvalidInputError, match=message):
            t.insert(rows)
        assert state(t) == before


def test_extension_types_that_would_lose_their_meaning_are_refused(tmp_path):
    """A pandas Period is an int64 of ordinals under an Arrow extension type: stored as its
    storage it would read back as 648, not 2024-01. Such columns are refused, naming the type;
    an extension whose storage is the value itself (a UUID's bytes) is kept."""
    import uuid

    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"id": [1]}))
    before = state(t)
    periods = pd.DataFrame({"id": [2, 3], "p": pd.period_range("2024-01", periods=2, freq="M")})
    stored = pa.Table.from_pandas(periods, preserve_index=False).column("p").combine_chunks()
    nested = pa.table({"id": [2, 3], "s": pa.StructArray.from_arrays([stored], names=["p"])})
    for data in (periods, nested):
        with pytest.raises(neve.SchemaError, match="pandas.period") as e:
            t.insert(data)
        assert "'p'" in str(e.value) or "'s.p'" in str(e.value), e.value
    assert state(t) == before
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    t.insert(pa.table({"id": [4], "u": pa.array([u.bytes], pa.uuid())}))
    assert t.sql("SELECT u FROM t WHERE id = 4").column("u").to_pylist() == [u.bytes]


def test_arguments_of_the_wrong_kind_name_themselves(tmp_path):
    t = neve.create_table(tmp_path / "t", partition_by="identity(k)")
    t.insert(pa.table({"k": ["a"], "v": [1]}))
    before = state(t)
    with pytest.raises(neve.InvalidInputError, match="min_files"):
        t.merge(min_files=1)
    with pytest.raises(neve.InvalidInputError, match="limit"):
        t.history(limit=-1)
    with pytest.raises(TypeError, match="limit"):
        t.history(limit="3")
    for grace in ("²h", float("nan"), float("inf"), 10**20, -5):
        with pytest.raises(neve.InvalidInputError, match="grace"):
            t.gc(grace=grace)
    with pytest.raises(TypeError, match="grace"):
        t.gc(grace=[1])
    with pytest.raises(TypeError, match="storage_options"):
        neve.Table(tmp_path / "t", storage_options=[("region", "x")])
    with pytest.raises(TypeError, match="tables"):
        neve.sql("SELECT 1", tables=None)
    with pytest.raises(TypeError, match="alter"):
        t.alter(None)
    with pytest.raises(neve.InvalidInputError, match="nothing to drop"):
        t.drop_partitions([])
    assert state(t) == before
    # A timedelta is a duration; None in a mapping leaves the key unset.
    assert t.gc(grace=dt.timedelta(hours=2), dry_run=True) is not None
    assert neve.Table(tmp_path / "t", storage_options={"region": None}).version == before[0]


def test_a_handle_to_a_deleted_table_does_not_start_a_new_log(tmp_path):
    import shutil

    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"a": [1]}))
    shutil.rmtree(tmp_path / "t")
    (tmp_path / "t").mkdir()
    with pytest.raises(neve.NotFoundError):
        t.insert(pa.table({"a": [2]}))
    assert list((tmp_path / "t").iterdir()) == []


def test_file_urls_are_decoded(tmp_path):
    t = neve.create_table(tmp_path / "sp ace%t")
    t.insert(pa.table({"a": [1]}))
    url = (tmp_path / "sp ace%t").as_uri()
    assert "%20" in url and "%25" in url
    assert neve.sql("SELECT a FROM t", tables={"t": url}).to_pylist() == [{"a": 1}]
    assert neve.Table(url).name == "sp ace%t"
    with pytest.raises(neve.InvalidInputError):
        neve.Table(url + "?x=1")


def test_a_polars_null_column_is_taken(tmp_path):
    import polars as pl
    t = neve.create_table(tmp_path / "t")
    t.insert(pl.DataFrame({"id": [3], "n": [None]}))
    assert t.sql("SELECT id, n FROM t").to_pylist() == [{"id": 3, "n": None}]


def test_zoned_timestamps_of_another_zone_keep_their_instant(tmp_path):
    """A zone only says how to show an instant: UTC values go into a Paris column unchanged, and
    the column keeps its zone. A naive timestamp has no instant and is still refused."""
    t = neve.create_table(tmp_path / "t")
    paris = pa.timestamp("us", tz="Europe/Paris")
    t.insert(pa.table({"id": [1], "at": pa.array([1_700_000_000_000_000], paris)}))
    with pytest.raises(neve.SchemaError):
        t.insert(pa.table({"id": [2, 3], "at": pa.array([1, 2], pa.timestamp("us"))}))
    # Nanoseconds that are whole microseconds; the instants are the same.
    utc = pa.array([1_700_000_000_000_001_000, None], pa.timestamp("ns", tz="UTC"))
    t.insert(pa.table({"id": [2, 3], "at": utc}))
    out = t.sql("SELECT id, at FROM t ORDER BY id")
    assert out.schema.field("at").type == paris
    assert out.column("at").cast(pa.int64()).to_pylist() == [
        1_700_000_000_000_000, 1_700_000_000_000_001, None]

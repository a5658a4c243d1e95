"""Bad input raises the exception named for what happened, with the CLI's message, and leaves
the table exactly as it was."""
import pyarrow as pa
import pytest

import neve


def state(t):
    info = t.info()
    return info["version"], info["rows"], info["files"], info["schema_ddl"]


def test_exceptions_form_a_tree():
    assert issubclass(neve.SchemaError, neve.InvalidInputError)
    assert issubclass(neve.SqlError, neve.InvalidInputError)
    for e in (neve.InvalidInputError, neve.NotFoundError, neve.ConflictError, neve.StorageError, neve.InternalError):
        assert issubclass(e, neve.NeveError)


def test_schema_errors_leave_the_table_unchanged(where):
    t = neve.create_table(where, schema="id int64 not null, name string", settings={"strict_schema": True})
    t.insert(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]}))
    before = state(t)
    # A value that does not fit its column: the row and the column are named.
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": pa.array(["1", "x"], pa.string()), "name": ["c", "d"]}))
    assert "id" in str(e.value)
    # A new column on a strict table.
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": pa.array([3], pa.int64()), "extra": [1]}))
    assert "extra" in str(e.value)
    # A null in a not null column.
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"id": pa.array([None], pa.int64()), "name": ["e"]}))
    assert "id" in str(e.value)
    assert state(t) == before
    assert t.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [2]


def test_sql_errors(tmp_path):
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"a": [1]}))
    with pytest.raises(neve.SqlError):
        t.sql("SELEC a FROM t")
    with pytest.raises(neve.SqlError) as e:
        t.sql("SELECT nope FROM t")
    assert "nope" in str(e.value)
    # Integer arithmetic past its type is an error, not a wrapped value.
    with pytest.raises(neve.SqlError) as e:
        t.sql("SELECT a + 9223372036854775807 FROM t")
    assert "Overflow" in str(e.value)
    assert t.sql("SELECT a + 1 AS b FROM t").column("b").to_pylist() == [2]


def test_an_error_met_while_a_stream_is_read_is_the_neve_exception(tmp_path):
    """The query plans, then fails on a value: reading the stream raises what `sql` raises,
    with the same message, whether read whole, batch by batch, or through `neve.sql_stream`."""
    t = neve.create_table(tmp_path / "t", partition_by="p")
    t.insert(pa.table({"p": [1, 1, 2], "s": ["1", "2", "x"]}))
    bad = "SELECT CAST(s AS BIGINT) AS v FROM t"
    with pytest.raises(neve.SqlError) as whole:
        t.sql(bad)
    assert "'x'" in str(whole.value)
    reader = t.sql_stream(bad)
    assert reader.schema.names == ["v"]
    with pytest.raises(neve.SqlError) as e:
        reader.read_all()
    assert str(e.value) == str(whole.value)
    with pytest.raises(neve.SqlError):
        for _ in neve.sql_stream(bad, tables={"t": t}):
            pass
    # A stream that does not fail reads every row.
    ok = t.sql_stream("SELECT CAST(s AS BIGINT) AS v FROM t WHERE s <> 'x'").read_all()
    assert sorted(ok.column("v").to_pylist()) == [1, 2]
    # Read on after its error, a stream says it failed: never a clean, short end.
    from neve import _neve

    batches = _neve._sql_stream(bad, [("t", t._t)], None, False)
    with pytest.raises(neve.SqlError):
        while next(batches):
            pass
    for _ in range(2):
        with pytest.raises(neve.InternalError, match="failed before"):
            next(batches)


def test_bad_paths(where):
    with pytest.raises(neve.NotFoundError) as e:
        neve.Table(where + "-missing")
    assert "missing" in str(e.value)
    with pytest.raises(neve.InvalidInputError):
        neve.Table("ftp://host/x")
    t = neve.create_table(where)
    t.insert(pa.table({"id": [1, 2]}))
    before = state(t)
    # Created again over itself: refused, and the table is as it was.
    with pytest.raises(neve.ConflictError):
        neve.create_table(where, schema="other string")
    assert state(neve.Table(where)) == before
    with pytest.raises(neve.NotFoundError):
        t.sql("SELECT 1 FROM t", as_of=7)
    with pytest.raises(neve.InvalidInputError):
        t.gc(grace="soon")
    with pytest.raises(TypeError):
        t.insert(42)
    assert state(t) == before


def test_bad_storage_options(s3_address, minio_options):
    with pytest.raises(neve.InvalidInputError) as e:
        neve.create_table(s3_address, storage_options={"endpoint_urll": "http://x"})
    assert "endpoint_urll" in str(e.value)
    # Wrong keys: the store refuses, named as a storage failure; nothing was created.
    wrong = dict(minio_options, secret_access_key="wrong-secret")
    with pytest.raises(neve.StorageError):
        neve.create_table(s3_address, storage_options=wrong)
    with pytest.raises(neve.NotFoundError):
        neve.Table(s3_address, storage_options=minio_options)


def test_a_bad_chunk_cache_size_is_named_not_ignored(tmp_path):
    # Read once per process, so a fresh interpreter gets the bad value.
    import subprocess
    import sys

    code = (
        "import neve, pyarrow as pa, sys\n"
        f"t = neve.create_table({str(tmp_path / 't')!r})\n"
        "t.insert(pa.table({'a': [1]}))\n"
        "try:\n"
        "    t.sql('SELECT a FROM t')\n"
        "except neve.InvalidInputError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
    )
    env = {**__import__("os").environ, "NEVE_CHUNK_CACHE_MB": "lots"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 3, p.stderr
    assert "NEVE_CHUNK_CACHE_MB" in p.stdout and "lots" in p.stdout


def test_a_strict_table_keeps_its_types(where):
    """pandas and pyarrow give int64 and wide decimals; a strict table keeps its declared types
    and takes such values only when each fits exactly."""
    import decimal
    import pandas as pd

    t = neve.create_table(where, schema="n int32, amount decimal(10,2)", settings={"strict_schema": True})
    t.insert(pd.DataFrame({"n": [1, -5, 2**31 - 1],
                           "amount": [decimal.Decimal("1.5"), decimal.Decimal("-2.25"), None]}))
    assert t.schema.field("n").type == pa.int32()
    assert t.schema.field("amount").type == pa.decimal128(10, 2)
    before = state(t)
    # Out of range for int32, in the third row.
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"n": pa.array([7, 8, 2**31], pa.int64())}))
    assert "row 3" in str(e.value) and "'n'" in str(e.value) and "int32" in str(e.value), str(e.value)
    # More fraction digits than the column keeps: refused, never rounded.
    wide = pa.array([decimal.Decimal("1.2300"), decimal.Decimal("1.2345")], pa.decimal128(14, 4))
    with pytest.raises(neve.SchemaError) as e:
        t.insert(pa.table({"amount": wide}))
    assert "row 2" in str(e.value) and "1.2345" in str(e.value), str(e.value)
    assert state(t) == before
    got = t.sql("SELECT n, amount FROM t ORDER BY n").to_pylist()
    assert got == [{"n": -5, "amount": decimal.Decimal("-2.25")}, {"n": 1, "amount": decimal.Decimal("1.50")},
                   {"n": 2**31 - 1, "amount": None}]

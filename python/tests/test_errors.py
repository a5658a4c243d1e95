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


def test_bad_paths(tmp_path):
    with pytest.raises(neve.NotFoundError) as e:
        neve.Table(tmp_path / "missing")
    assert "missing" in str(e.value)
    with pytest.raises(neve.InvalidInputError):
        neve.Table("ftp://host/x")
    t = neve.create_table(tmp_path / "t")
    with pytest.raises(neve.ConflictError):
        neve.create_table(tmp_path / "t")
    with pytest.raises(neve.NotFoundError):
        t.sql("SELECT 1 FROM t", as_of=7)
    with pytest.raises(neve.InvalidInputError):
        t.gc(grace="soon")
    with pytest.raises(TypeError):
        t.insert(42)


def test_bad_storage_options(s3_address, minio_options):
    with pytest.raises(neve.InvalidInputError) as e:
        neve.create_table(s3_address, storage_options={"endpoint_urll": "http://x"})
    assert "endpoint_urll" in str(e.value)
    # Wrong keys: the store refuses, named as a storage failure; nothing was created.
    wrong = dict(minio_options, secret_access_key="wrong-secret")
    with pytest.raises(neve.NeveError) as e:
        neve.create_table(s3_address, storage_options=wrong)
    assert isinstance(e.value, (neve.StorageError, neve.InvalidInputError)), type(e.value)
    with pytest.raises(neve.NotFoundError):
        neve.Table(s3_address, storage_options=minio_options)

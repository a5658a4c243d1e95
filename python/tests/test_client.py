"""`neve.connect` against the built `neve serve`: create, insert, retry, refuse."""
import subprocess

import pyarrow as pa
import pytest

import neve


@pytest.fixture
def server(neve_bin, tmp_path):
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(tmp_path / "w"), "--listen", "127.0.0.1:0", "--token", "s3cret",
         "--flush-interval", "50ms", "--no-maintenance"],
        stdout=subprocess.PIPE, text=True,
    )
    line = p.stdout.readline().strip()
    assert line.startswith("neve serve listening on "), line
    yield line.rsplit(" ", 1)[1], tmp_path / "w"
    p.terminate()
    p.wait(30)


def test_insert_through_the_server(server):
    url, warehouse = server
    c = neve.connect(url, token="s3cret")
    c.create_table("events", partition_by="identity(region)", sort_by=["id"])
    assert c.tables() == ["events"]
    ack = c.insert("events", pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}))
    assert ack["rows"] == 3 and ack["version"] == 1
    # The same key again: answered with the first commit, nothing added.
    c.insert("events", [{"id": 4, "region": "eu"}], idempotency_key="k-1")
    again = c.insert("events", [{"id": 4, "region": "eu"}], idempotency_key="k-1")
    assert again.get("duplicate") is True
    assert c.info("events")["rows"] == 4
    # The table is an ordinary neve table.
    t = neve.Table(warehouse / "events")
    assert t.sql("SELECT count(DISTINCT id) AS n FROM events").column("n").to_pylist() == [4]


def test_refusals_raise_named_errors(server):
    url, _ = server
    c = neve.connect(url, token="s3cret")
    c.create_table("t", schema="id int64 not null", strict_schema=True)
    with pytest.raises(neve.ConflictError):
        c.create_table("t")
    with pytest.raises(neve.InvalidInputError) as e:
        c.insert("t", pa.table({"id": ["x"]}))
    assert "id" in str(e.value)
    with pytest.raises(neve.SchemaError):
        c.insert("t", pa.table({"id": [1], "other": [2]}))
    with pytest.raises(neve.NotFoundError):
        c.insert("missing", pa.table({"id": [1]}))
    with pytest.raises(neve.AuthError):
        neve.connect(url, token="wrong").tables()
    assert c.info("t")["rows"] == 0

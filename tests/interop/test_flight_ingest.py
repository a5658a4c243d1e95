"""Flight SQL bulk ingest (`CommandStatementIngest`) with the ADBC driver's `adbc_ingest`,
against the built `neve serve`: rows land exactly as sent, through the same checks, roles and
limits as `POST /v1/tables/NAME/insert`, and a refused ingest leaves the table as it was."""
import datetime
import subprocess

import pyarrow as pa
import pytest

from test_sql_server import Server

ADMIN, WRITER, READER = "ingest-admin", "ingest-writer", "ingest-reader"


@pytest.fixture(scope="module")
def server(neve_bin, tmp_path_factory):
    def hash_token(t):
        return subprocess.run([neve_bin, "hash-token", t], capture_output=True, text=True,
                              check=True).stdout.strip()

    d = tmp_path_factory.mktemp("ingest")
    config = d / "neve.toml"
    config.write_text(
        '[ingest]\nmax_body_bytes = "256KiB"\nflush_interval = "50ms"\n'
        '[[tenants]]\nname = "t"\ntokens = ['
        f'{{ sha256 = "{hash_token(ADMIN)}", role = "admin" }}, '
        f'{{ sha256 = "{hash_token(WRITER)}", role = "write" }}, '
        f'{{ sha256 = "{hash_token(READER)}", role = "read" }}]\n'
    )
    s = Server(neve_bin, str(d / "lake"), "--config", str(config))
    yield s
    s.stop()


def rows(first, n):
    return pa.table({
        "id": pa.array(range(first, first + n), pa.int64()),
        "name": pa.array([None if i % 7 == 0 else f"n{i}" for i in range(first, first + n)]),
        "ts": pa.array([datetime.datetime(2026, 12, 5, 12, 0, i % 60, 123456, tzinfo=datetime.timezone.utc)
                        for i in range(first, first + n)], pa.timestamp("us", tz="UTC")),
        "x": pa.array([i / 4 for i in range(first, first + n)], pa.float64()),
    })


def read(server, sql, token=ADMIN):
    with server.adbc(token=token) as conn, conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def test_ingest_creates_appends_and_the_rows_are_the_ones_sent(server):
    with server.adbc(token=ADMIN) as conn, conn.cursor() as cur:
        assert cur.adbc_ingest("events", rows(0, 300), mode="create") == 300
        assert cur.adbc_ingest("events", rows(300, 200), mode="append") == 200
        # create_append appends to a table that exists.
        assert cur.adbc_ingest("events", rows(500, 10), mode="create_append") == 10
    got = read(server, "SELECT id, name, ts, x FROM events ORDER BY id")
    want = rows(0, 510)
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("x").to_pylist() == want.column("x").to_pylist()
    assert got.column("ts").to_pylist() == want.column("ts").to_pylist()


def test_ingest_into_a_namespace(server):
    with server.adbc(token=ADMIN) as conn, conn.cursor() as cur:
        assert cur.adbc_ingest("cpu", rows(0, 5), mode="create", db_schema_name="metrics") == 5
    assert read(server, "SELECT count(*) AS n FROM metrics.cpu").column("n").to_pylist() == [5]


def test_refused_ingests_name_why_and_change_nothing(server):
    import adbc_driver_manager

    with server.adbc(token=ADMIN) as conn, conn.cursor() as cur:
        cur.adbc_ingest("strict", rows(0, 10), mode="create")

        def refused(data, mode="append", name="strict", token=None):
            c = server.adbc(token=token) if token else None
            target = c.cursor() if c else cur
            try:
                with pytest.raises(adbc_driver_manager.Error) as e:
                    target.adbc_ingest(name, data, mode=mode)
                return str(e.value)
            finally:
                if c:
                    target.close()
                    c.close()

        # A column of another type: named, with what was expected.
        bad = rows(10, 3).set_column(0, "id", pa.array(["a", "b", "c"]))
        assert "id" in refused(bad)
        # Mode create on a table that exists; replace; a table that does not exist.
        assert "exists" in refused(rows(10, 3), mode="create")
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("strict", rows(10, 3), mode="create")
        assert e.value.status_code == adbc_driver_manager.AdbcStatusCode.ALREADY_EXISTS, e.value
        assert "replacing a table is not supported" in refused(rows(10, 3), mode="replace")
        assert "strict-missing" in refused(rows(10, 3), name="strict-missing")
        # Over the server's body limit (256 KiB): refused whole; when it was to create the
        # table, no empty table is left behind.
        assert "over" in refused(rows(10, 20_000))
        assert "over" in refused(rows(10, 20_000), mode="create", name="too-big")
        # A namespace SQL reserves could never be queried.
        with pytest.raises(adbc_driver_manager.Error) as e:
            cur.adbc_ingest("t", rows(0, 1), mode="create", db_schema_name="information_schema")
        assert "reserves" in str(e.value)
        # Roles: a reader may not insert; a writer may insert but not create a table.
        assert "may not insert" in refused(rows(10, 3), token=READER)
        assert "may not create" in refused(rows(10, 3), mode="create", name="new-one", token=WRITER)
    with server.adbc(token=WRITER) as conn, conn.cursor() as cur:
        assert cur.adbc_ingest("strict", rows(10, 2), mode="append") == 2
    assert read(server, "SELECT count(*) AS n FROM strict").column("n").to_pylist() == [12]
    names = read(server, "SHOW TABLES").column("table_name").to_pylist()
    assert "new-one" not in names and "strict-missing" not in names and "too-big" not in names


def test_many_clients_ingesting_at_once_each_row_lands_once(server):
    """Eight ADBC connections, five ingests each, into one table at once: group commits, and
    every row exactly once."""
    from concurrent.futures import ThreadPoolExecutor

    with server.adbc(token=ADMIN) as conn, conn.cursor() as cur:
        cur.adbc_ingest("busy", rows(0, 1), mode="create")

    def client(c):
        with server.adbc(token=WRITER) as conn, conn.cursor() as cur:
            return sum(cur.adbc_ingest("busy", rows(1 + (c * 5 + i) * 100, 100), mode="append")
                       for i in range(5))

    with ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(client, range(8))) == 4000
    got = read(server, "SELECT count(*) AS n, count(DISTINCT id) AS d, min(id) AS lo, max(id) AS hi FROM busy")
    assert got.to_pylist() == [{"n": 4001, "d": 4001, "lo": 0, "hi": 4000}]

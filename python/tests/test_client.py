"""`neve.connect` against the built `neve serve`: create, insert, retry, refuse, query."""
import json
import subprocess
import time

import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest

import neve


@pytest.fixture
def server(neve_bin, tmp_path):
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(tmp_path / "w"), "--listen", "127.0.0.1:0", "--token", "s3cret",
         "--flush-interval", "50ms", "--no-maintenance", "--max-concurrent-queries", "1"],
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


def test_the_client_raises_what_table_insert_raises(server, tmp_path):
    """The same rows refused by a table in hand and through the server raise the same
    exception (the server's code names it)."""
    url, _ = server
    c = neve.connect(url, token="s3cret")
    c.create_table("strict", schema="id int64 not null", strict_schema=True)
    c.create_table("loose", partition_by="identity(region)")
    local = {
        "strict": neve.create_table(tmp_path / "strict", schema="id int64 not null",
                                    settings={"strict_schema": True}),
        "loose": neve.create_table(tmp_path / "loose", partition_by="identity(region)"),
    }
    for table, rows in (
        ("strict", pa.table({"id": ["x"]})),
        ("strict", pa.table({"id": pa.array([None], pa.int64())})),
        ("strict", pa.table({"id": [1], "other": [2]})),
        ("loose", pa.table({"id": [1]})),
        ("loose", pa.table({"region": ["eu"], "d": pa.array([1], pa.duration("s"))})),
    ):
        with pytest.raises(neve.NeveError) as here:
            local[table].insert(rows)
        with pytest.raises(neve.NeveError) as there:
            c.insert(table, rows)
        assert type(there.value) is type(here.value), (table, rows.schema, here.value, there.value)
    assert [c.info(t)["rows"] for t in local] == [0, 0]


def test_sql_through_the_server(server):
    url, warehouse = server
    c = neve.connect(url, token="s3cret")
    c.create_table("events", partition_by="identity(region)", sort_by=["id"])
    first = c.insert("events", pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}))
    c.insert("events", pa.table({"id": [4, 5], "region": ["us", "ap"]}))
    query = "SELECT region, count(*) AS n, sum(id) AS s FROM events GROUP BY region ORDER BY region"
    got = c.sql(query)
    assert isinstance(got, pa.Table)
    # The same answer as reading the table in-process.
    assert got == neve.Table(warehouse / "events").sql(query)
    assert got.to_pylist() == [
        {"region": "ap", "n": 1, "s": 5},
        {"region": "eu", "n": 2, "s": 4},
        {"region": "us", "n": 2, "s": 6},
    ]
    # As of the first insert's version: its rows only.
    old = c.sql("SELECT count(*) AS n FROM events", as_of=first["version"])
    assert old.column("n").to_pylist() == [3]
    shown = c.sql("SHOW TABLES").to_pylist()
    assert [t["table_name"] for t in shown if t["table_schema"] != "information_schema"] == ["events"]
    # Through pandas, with the types the table has.
    df = c.sql("SELECT id FROM events ORDER BY id").to_pandas()
    assert df["id"].tolist() == [1, 2, 3, 4, 5]


def test_sql_refusals_raise_named_errors(server):
    url, _ = server
    c = neve.connect(url, token="s3cret")
    with pytest.raises(neve.SqlError) as e:
        c.sql("SELEC 1")
    assert "sql_syntax" in str(e.value)
    with pytest.raises(neve.InvalidInputError):  # SqlError is an InvalidInputError
        c.sql("SELECT no_such_column FROM range(3)")
    with pytest.raises(neve.NotFoundError):
        c.sql("SELECT * FROM missing")
    with pytest.raises(neve.QueryTimeoutError) as e:
        c.sql("SELECT count(*) FROM range(100000000000)", timeout="300ms")
    assert isinstance(e.value, TimeoutError)
    with pytest.raises(neve.AuthError):
        neve.connect(url, token="wrong").sql("SELECT 1")
    assert c.sql("SELECT 1 AS one").column("one").to_pylist() == [1]


def test_sql_stream_reads_as_it_arrives_and_closing_cancels(server):
    url, _ = server
    c = neve.connect(url, token="s3cret", retries=0)
    # 8 GB of results if read to the end; the client takes three batches.
    reader = c.sql_stream("SELECT value AS a, value * 2 AS b FROM range(500000000)")
    assert reader.schema.names == ["a", "b"]
    got = [reader.read_next_batch() for _ in range(3)]
    for b in got:
        assert b.num_rows > 0
        assert pa.compute.all(pa.compute.equal(b.column("b"), pa.compute.multiply(b.column("a"), 2))).as_py()
    # The server runs one query at a time: while this one streams, another is refused.
    with pytest.raises(neve.ServerBusyError):
        c.sql("SELECT 1")
    del reader
    # Dropping the reader hung up, which stopped the query and freed its slot.
    deadline = time.monotonic() + 20
    while True:
        try:
            assert c.sql("SELECT 1 AS one").column("one").to_pylist() == [1]
            break
        except neve.ServerBusyError:
            assert time.monotonic() < deadline, "the closed stream still holds the server's query slot"
            time.sleep(0.1)


def test_a_stalled_query_client_holds_neither_a_slot_past_the_timeout_nor_the_server_past_its_grace(
    neve_bin, tmp_path
):
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(tmp_path / "w"), "--listen", "127.0.0.1:0", "--token", "s3cret",
         "--no-maintenance", "--shutdown-grace", "2s", "--max-concurrent-queries", "1", "--query-timeout", "2s"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = p.stdout.readline().strip().rsplit(" ", 1)[1]
        c = neve.connect(url, token="s3cret")
        # Read one batch of a huge result, then stop reading without closing.
        reader = c.sql_stream("SELECT value FROM range(100000000000)")
        reader.read_next_batch()
        # Nothing reads the rest: the server is blocked on a full socket. Its slot comes back
        # at the query's timeout all the same.
        other = neve.connect(url, token="s3cret", retries=0)
        with pytest.raises(neve.ServerBusyError):
            other.sql("SELECT 1")
        deadline = time.monotonic() + 20
        while True:
            try:
                assert other.sql("SELECT 2 AS two").column("two").to_pylist() == [2]
                break
            except neve.ServerBusyError:
                assert time.monotonic() < deadline, "a stalled client kept its slot past the timeout"
                time.sleep(0.2)
        started = time.monotonic()
        p.terminate()
        assert p.wait(30) == 0
        assert time.monotonic() - started < 15
    finally:
        p.kill()


def _serve(neve_bin, warehouse, listen="127.0.0.1:0"):
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(warehouse), "--listen", listen, "--token", "s3cret",
         "--flush-interval", "50ms", "--no-maintenance"],
        stdout=subprocess.PIPE, text=True,
    )
    line = p.stdout.readline().strip()
    assert line.startswith("neve serve listening on "), line
    return p, line.rsplit(" ", 1)[1]


def test_a_server_not_there_raises_unreachable_error(neve_bin, tmp_path):
    p, url = _serve(neve_bin, tmp_path / "w")
    p.terminate()
    assert p.wait(30) == 0
    # Nothing listens on the port now: refused at once, each of the client's tries.
    started = time.monotonic()
    with pytest.raises(neve.UnreachableError) as e:
        neve.connect(url, token="s3cret", retries=2).tables()
    assert isinstance(e.value, ConnectionError) and isinstance(e.value, neve.NeveError)
    assert "connection refused, 3 tries" in str(e.value), e.value
    assert isinstance(e.value.__cause__, ConnectionRefusedError)
    # Backed off between the tries: 0.25 s, then 0.5 s.
    assert time.monotonic() - started >= 0.7


def test_an_insert_with_no_answer_names_the_key_to_repeat_it_with(tmp_path):
    """A server that takes the request and never answers: the insert may have been committed,
    so the error carries the idempotency key the client made, the only safe way to repeat it."""
    import socket
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    held = []
    threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(neve.UnreachableError) as e:
            neve.connect(url, token="s3cret", timeout=0.5, retries=0).insert("t", pa.table({"id": [1]}))
        key = e.value.idempotency_key
        assert key and f"idempotency_key={key!r}" in str(e.value), e.value
        with pytest.raises(neve.UnreachableError) as e:
            neve.connect(url, timeout=0.5, retries=0).insert("t", pa.table({"id": [1]}), idempotency_key="mine")
        assert e.value.idempotency_key == "mine"
    finally:
        listener.close()


def test_an_insert_waits_out_a_restart_of_the_server(neve_bin, tmp_path):
    warehouse = tmp_path / "w"
    p, url = _serve(neve_bin, warehouse)
    c = neve.connect(url, token="s3cret")
    c.create_table("events", sort_by=["id"])
    c.insert("events", pa.table({"id": [1, 2]}))
    p.terminate()
    assert p.wait(30) == 0
    # The server comes back on the same port a second later (a rolling restart); the insert
    # sent meanwhile is refused, retried, and lands once.
    listen = url.removeprefix("http://")
    restarted = {}

    def restart():
        time.sleep(1.0)
        restarted["p"], _ = _serve(neve_bin, warehouse, listen)

    import threading

    t = threading.Thread(target=restart)
    t.start()
    try:
        ack = c.insert("events", pa.table({"id": [3, 4, 5]}))
        assert ack["rows"] == 3 and ack["version"] == 2
        t.join()
        assert c.info("events")["rows"] == 5
        assert neve.Table(warehouse / "events").sql("SELECT count(DISTINCT id) AS n FROM events").column(
            "n").to_pylist() == [5]
    finally:
        t.join()
        if "p" in restarted:
            restarted["p"].terminate()
            restarted["p"].wait(30)


def count_connections(monkeypatch):
    """The addresses of the connections opened from now on (`socket.create_connection`)."""
    import socket

    opened = []
    real = socket.create_connection

    def counting(*a, **k):
        opened.append(a[0])
        return real(*a, **k)

    monkeypatch.setattr(socket, "create_connection", counting)
    return opened


def test_calls_keep_one_connection_and_survive_its_idle_close(neve_bin, tmp_path, monkeypatch):
    opened = count_connections(monkeypatch)
    config = tmp_path / "neve.toml"
    config.write_text('header_read_timeout = "1s"\n')
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(tmp_path / "w"), "--listen", "127.0.0.1:0", "--token", "s3cret",
         "--flush-interval", "20ms", "--no-maintenance", "--config", str(config)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        url = p.stdout.readline().strip().rsplit(" ", 1)[1]
        with neve.connect(url, token="s3cret") as c:
            c.create_table("kept", sort_by=["id"])
            for i in range(10):
                assert c.insert("kept", pa.table({"id": [i]}))["rows"] == 1
            assert c.tables() == ["kept"]
            with pytest.raises(neve.NotFoundError):  # an error answer keeps the connection too
                c.info("missing")
            assert c.sql("SELECT count(*) AS n FROM kept").column("n").to_pylist() == [10]
            assert len(opened) == 1, opened
            # Idle past the server's header_read_timeout: it closed the connection, and the
            # next call goes out on a new one, once.
            time.sleep(1.5)
            assert c.insert("kept", pa.table({"id": [10]}))["rows"] == 1
            assert len(opened) == 2, opened
            assert c.info("kept")["rows"] == 11
        # A query's stream has its connection to itself: the next call opens another.
        c = neve.connect(url, token="s3cret")
        reader = c.sql_stream("SELECT value FROM range(10)")
        assert c.tables() == ["kept"]
        assert reader.read_all().num_rows == 10
        assert len(opened) == 4, opened
    finally:
        p.terminate()
        p.wait(30)


def test_one_client_shared_by_threads_each_with_its_connection(server, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    url, warehouse = server
    c = neve.connect(url, token="s3cret")
    c.create_table("shared", sort_by=["id"])
    opened = count_connections(monkeypatch)

    def worker(w):
        for i in range(20):
            assert c.insert("shared", pa.table({"id": [w * 100 + i]}))["rows"] == 1
        return w

    with ThreadPoolExecutor(8) as pool:
        assert sorted(pool.map(worker, range(8))) == list(range(8))
    # One connection a thread, kept for its twenty inserts.
    assert len(opened) == 8, opened
    got = neve.Table(warehouse / "shared").sql("SELECT count(*) AS n, count(DISTINCT id) AS d FROM shared")
    assert got.to_pylist() == [{"n": 160, "d": 160}]


@pytest.fixture
def fake_server():
    """An HTTP server on loopback answering each request with `answer(handler)`; its URL."""
    import http.server
    import threading

    answers = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            answers[0](self)

        do_GET = do_PUT = do_POST

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def start(answer):
        answers[:] = [answer]
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    httpd.shutdown()


def test_urls_and_tokens_are_checked_and_never_echoed(server):
    url, _ = server
    # A token read from a file ends in a newline: the whitespace around it is not the token.
    assert neve.connect(url, token="s3cret\n").tables() == []
    with pytest.raises(neve.InvalidInputError) as e:
        neve.connect(url, token="s3c\nret")
    assert "s3c" not in str(e.value), e.value
    with pytest.raises(neve.InvalidInputError, match="no user or password") as e:
        neve.connect("http://admin:hunter2@127.0.0.1:1")
    assert "hunter2" not in str(e.value)
    with pytest.raises(neve.InvalidInputError, match="port"):
        neve.connect("http://127.0.0.1:port")
    # An IPv6 host without a port: its default port, not its last group read as one.
    c = neve.connect("http://[fd00::8080]")
    assert (c._host, c._port) == ("fd00::8080", 80)
    assert neve.connect("https://[::1]")._port == 443


def test_a_redirect_is_an_error_naming_where_not_a_success(fake_server):
    def redirect(h):
        h.send_response(308)
        h.send_header("Location", "https://neve.example/v1/tables/t/insert")
        h.send_header("Content-Length", "0")
        h.end_headers()

    url = fake_server(redirect)
    with pytest.raises(neve.InvalidInputError, match="redirects \\(308\\) to https://neve.example"):
        neve.connect(url, token="t").insert("t", pa.table({"id": [1]}))


def test_retry_after_in_any_form_waits_a_bounded_time():
    from neve._client import _retry_after

    assert _retry_after("2", 0) == 2.0
    assert _retry_after("-5", 0) == 0.0
    assert _retry_after("100000", 0) == 30.0
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 3))
    assert 1.0 <= _retry_after(later, 0) <= 3.5
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 0) == 0.0  # in the past
    assert _retry_after("soon", 2) == 1.0  # backs off as for a refused connection
    assert _retry_after(None, 0) == 0.25


def test_a_query_may_take_longer_than_the_client_timeout_when_it_says_so(fake_server):
    table = pa.table({"n": [42]})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    body = sink.getvalue().to_pybytes()

    def slow(h):
        time.sleep(1.5)
        h.send_response(200)
        h.send_header("Content-Type", "application/vnd.apache.arrow.stream")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    url = fake_server(slow)
    c = neve.connect(url, token="t", timeout=0.5, retries=0)
    assert c.sql("SELECT 42 AS n", timeout="3s").column("n").to_pylist() == [42]
    with pytest.raises(neve.UnreachableError, match="no answer within 0.5 s"):
        c.sql("SELECT 42 AS n")


def test_a_forked_child_never_shares_the_parent_s_connection(server):
    import os

    url, _ = server
    c = neve.connect(url, token="s3cret")
    c.create_table("f")
    parent_conn = c._idle.conn
    assert parent_conn is not None
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = c.tables() == ["f"] and c._idle.conn is not parent_conn
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    # The parent's connection is still its own, and still works.
    assert c.tables() == ["f"] and c._idle.conn is parent_conn


def test_create_table_takes_settings(server):
    url, warehouse = server
    c = neve.connect(url, token="s3cret")
    c.create_table("tuned", settings={"merge_min_files": 7, "gc_grace": None})
    assert neve.Table(warehouse / "tuned").info()["settings"]["mergeMinFiles"] == 7
    with pytest.raises(TypeError, match="settings"):
        c.create_table("bad", settings=["merge_min_files"])


def test_a_create_the_store_failed_under_is_not_sent_again(fake_server):
    """A 503 from the store may come after the table was made: sending it again would answer
    ConflictError for a table this call created. Refusals before any work are retried."""
    calls = []

    def answer(code):
        def respond(h):
            calls.append(h.command)
            body = json.dumps({"error": {"code": code, "message": "x"}}).encode()
            h.send_response(503)
            h.send_header("Content-Type", "application/json")
            h.send_header("Retry-After", "0")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        return respond

    c = neve.connect(fake_server(answer("storage_unavailable")), token="t", retries=2)
    with pytest.raises(neve.StorageError):
        c.create_table("t")
    assert calls == ["PUT"]
    calls.clear()
    c = neve.connect(fake_server(answer("shutting_down")), token="t", retries=2)
    with pytest.raises(neve.ServerBusyError):
        c.create_table("t")
    assert calls == ["PUT"] * 3


def test_answers_of_a_proxy_in_front_are_named_by_their_status(fake_server):
    def status(n):
        def respond(h):
            h.send_response(n)
            h.send_header("Content-Type", "text/html")
            h.send_header("Content-Length", "9")
            h.end_headers()
            h.wfile.write(b"<h1>x</h1"[:9])
        return respond

    for n, cls in [(401, neve.AuthError), (403, neve.AuthError), (504, neve.UnreachableError),
                   (502, neve.UnreachableError)]:
        with pytest.raises(cls):
            neve.connect(fake_server(status(n)), token="t", retries=0).tables()
    # A gateway giving up on an insert: the key to repeat it with is named.
    with pytest.raises(neve.UnreachableError) as e:
        neve.connect(fake_server(status(504)), token="t", retries=0).insert("t", [{"id": 1}])
    assert e.value.idempotency_key

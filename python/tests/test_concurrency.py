"""Many Python processes and threads insert into one table at once: every row exactly once."""
import multiprocessing as mp
import threading
import time

import pyarrow as pa

import neve

PROCS, INSERTS, ROWS = 8, 5, 200


def _writer(address, k):
    t = neve.Table(address)
    for i in range(INSERTS):
        first = (k * INSERTS + i) * ROWS
        t.insert(pa.table({"id": pa.array(range(first, first + ROWS), pa.int64()), "w": [k] * ROWS}))


def test_eight_processes_insert_at_once(where):
    neve.create_table(where, partition_by="identity(w)")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(where, k)) for k in range(PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    t = neve.Table(where)
    n, d = t.sql("SELECT count(*) AS n, count(DISTINCT id) AS d FROM t").to_pylist()[0].values()
    assert n == d == PROCS * INSERTS * ROWS
    assert t.version == PROCS * INSERTS


def test_threads_insert_and_query_at_once(tmp_path):
    """The GIL is released while neve works: threads make progress together."""
    t = neve.create_table(tmp_path / "t")
    errors = []

    def insert(k):
        try:
            for i in range(5):
                t.insert(pa.table({"id": pa.array(range(k * 1000 + i * 100, k * 1000 + i * 100 + 100), pa.int64())}))
                t.sql("SELECT count(*) FROM t")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=insert, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert t.sql("SELECT count(DISTINCT id) AS d FROM t").column("d").to_pylist() == [2000]


def test_python_threads_run_while_neve_works(tmp_path):
    """Two threads' neve calls overlap in time: the GIL is released inside them. (Held, a
    thread could not even read the clock before its call while the other was inside one, so
    the intervals could never overlap.)"""
    t = neve.create_table(tmp_path / "t")
    t.insert(pa.table({"k": pa.array(range(300_000), pa.int64()), "v": pa.array(range(300_000), pa.float64())}))
    query = "SELECT k % 1000 AS g, sum(v) AS s, count(DISTINCT k) AS d FROM t GROUP BY 1 ORDER BY 1"
    barrier = threading.Barrier(2)
    spans = {0: [], 1: []}

    def run(i):
        for _ in range(3):
            barrier.wait()
            start = time.monotonic()
            assert t.sql(query).num_rows == 1000
            spans[i].append((start, time.monotonic()))

    threads = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    overlaps = [max(a[0], b[0]) < min(a[1], b[1]) for a, b in zip(spans[0], spans[1])]
    assert any(overlaps), spans


def test_reading_an_input_stream_leaves_the_gil_to_other_threads(tmp_path):
    """A producer in C++ (pyarrow's CSV reader, handed over by the C stream interface alone,
    as a foreign library's stream is) parses as neve reads it: other Python threads run
    meanwhile. (With the GIL held through the read, a thread ticking beside it would stop for
    as long as the parse takes.)"""
    import pyarrow.csv as csv

    path = tmp_path / "rows.csv"
    n = 2_000_000
    csv.write_csv(pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"row {i}" for i in range(n)]}), path)
    options = csv.ReadOptions(use_threads=False, block_size=1 << 20)
    started = time.monotonic()
    assert csv.read_csv(path, read_options=options).num_rows == n
    parse = time.monotonic() - started

    class Stream:
        """Only `__arrow_c_stream__`, as a foreign producer has."""

        def __init__(self, reader):
            self.reader = reader

        def __arrow_c_stream__(self, requested_schema=None):
            return self.reader.__arrow_c_stream__(requested_schema)

    t = neve.create_table(tmp_path / "t")
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        t.insert(Stream(csv.open_csv(path, read_options=options)))
    finally:
        stop.set()
        ticker.join()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    assert t.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [n]
    assert max(gaps) < parse / 2, (max(gaps), parse)

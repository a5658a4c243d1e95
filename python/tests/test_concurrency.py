"""Many Python processes and threads insert into one table at once: every row exactly once."""
import multiprocessing as mp
import threading

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

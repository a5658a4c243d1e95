"""The six seed queries (bench/seed_queries.json) give the same answers through neve's own
engine, DuckDB reading `neve files --format duckdb`, and chdb reading
`neve files --format clickhouse`, on a taxi table in MinIO. Approximate medians are compared
within a tolerance; counts and means exactly (means to float precision)."""
import json
import math
import os
import pathlib

import pytest

QUERIES = json.loads(
    (pathlib.Path(__file__).parents[2] / "bench" / "seed_queries.json").read_text()
)["queries"]
ROWS = 300_000


@pytest.fixture(scope="module")
def taxi(neve_bin, tmp_path_factory):
    """A month-partitioned, sorted taxi table on MinIO, loaded in two inserts."""
    import subprocess
    import uuid

    def run(*args):
        p = subprocess.run([neve_bin, *map(str, args)], capture_output=True, text=True)
        assert p.returncode == 0, f"neve {args}: {p.stderr}"
        return p.stdout

    d = tmp_path_factory.mktemp("taxi")
    table = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}/taxi"
    run("create", table, "--partition-by", "month(trip_start_timestamp) as d",
        "--sort-by", "payment_type,trip_start_timestamp")
    for seed in (1, 2):
        path = d / f"taxi-{seed}.parquet"
        run("bench", "gen", path, "--rows", ROWS // 2, "--seed", seed)
        run("insert", table, path)
    return {
        "table": table,
        "duckdb": run("files", table, "--format", "duckdb").strip(),
        "clickhouse": run("files", table, "--format", "clickhouse").strip(),
    }


def neve_rows(neve, taxi, sql):
    out = neve("sql", sql.format(table="taxi"), "--table", f"taxi={taxi['table']}", "--format", "json").stdout
    return json.loads(out)


def duck_rows(duck, taxi, sql):
    cur = duck.execute(sql.format(table=taxi["duckdb"]))
    names = [c[0] for c in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def ch_rows(taxi, sql):
    import chdb

    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    expr = taxi["clickhouse"].replace(", 'Parquet')", f", '{key}', '{secret}', 'Parquet')")
    out = str(chdb.query(sql.format(table=expr), "JSONEachRow"))
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def norm(rows):
    """Comparable rows: months as YYYY-MM, numbers as floats, keyed by the non-measure columns."""
    out = []
    for r in rows:
        n = {}
        for k, v in r.items():
            if k == "mnth":
                n[k] = str(v)[:7]
            elif isinstance(v, (int, float)) or (isinstance(v, str) and k in ("cnt", "m") ):
                n[k] = float(v)
            elif hasattr(v, "__float__"):
                n[k] = float(v)
            else:
                n[k] = v
        out.append(n)
    return out


def keyed(rows):
    keys = [k for k in ("mnth", "payment_type", "m") if rows and k in rows[0]]
    return {tuple(r[k] for k in keys): r for r in rows}


def close(a, b, name):
    if name.startswith("med_"):
        # Approximate quantiles (t-digest, DuckDB's, ClickHouse's reservoir) differ a little.
        return math.isclose(a, b, rel_tol=0.05, abs_tol=1.0)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def assert_same_answers(ours, others):
    """Each engine's rows (normalised) have neve's groups and values."""
    for engine, other in others.items():
        a, b = keyed(ours), keyed(other)
        assert a.keys() == b.keys(), f"{engine}: different groups"
        for key, row in a.items():
            for col, v in row.items():
                w = b[key][col]
                if isinstance(v, float):
                    assert close(v, w, col), f"{engine} {key} {col}: neve {v}, {engine} {w}"
                else:
                    assert v == w, f"{engine} {key} {col}: neve {v}, {engine} {w}"


@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_seed_query_same_answer_everywhere(q, neve, duck, taxi):
    ours = norm(neve_rows(neve, taxi, q["neve"]))
    duckdb = norm(duck_rows(duck, taxi, q["duckdb"]))
    clickhouse = norm(ch_rows(taxi, q["clickhouse"]))
    if q["name"] == "limit_1000":
        assert len(ours) == len(duckdb) == len(clickhouse) == 1000
        # DuckDB and ClickHouse add the Hive folder key ('d') as a column of their own.
        for other in (duckdb, clickhouse):
            assert set(ours[0]) <= set(other[0]) and set(other[0]) - set(ours[0]) <= {"d"}
        return
    assert len(ours) > 0
    assert_same_answers(ours, {"duckdb": duckdb, "clickhouse": clickhouse})
    if q["name"] == "count_by_month":
        assert sum(r["cnt"] for r in ours) == ROWS
        assert [r["mnth"] for r in ours] == sorted((r["mnth"] for r in ours), reverse=True)


def test_count_by_month_reads_no_data(neve, taxi):
    q = next(q for q in QUERIES if q["name"] == "count_by_month")
    p = neve("sql", q["neve"].format(table="taxi"), "--table", f"taxi={taxi['table']}",
             "--format", "csv", "--stats")
    assert "read 0 B" in p.stderr, p.stderr


def test_limit_reads_a_little(neve, taxi):
    info = json.loads(neve("info", taxi["table"], "--json").stdout)
    p = neve("sql", "SELECT * FROM taxi LIMIT 1000", "--table", f"taxi={taxi['table']}",
             "--format", "csv", "--stats")
    read = p.stderr.split("read ")[1].split(" in ")[0]
    value, unit = read.split()
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
    assert float(value) * scale < info["bytes"] / 10, (p.stderr, info["bytes"])

"""Tables with merge semantics read by DuckDB and chdb through the SQL `neve files` prints for
them: the same rows as `neve sql`, before and after `neve merge`."""
import csv
import io
import json
import os
import random

import pytest


def write_inserts(tmp_path, n_inserts=4, keys=300, seed=7):
    """CSV inserts of updates, stale updates and deletes over `keys` users; versions never tie
    (engines cannot see commit order)."""
    rnd = random.Random(seed)
    paths = []
    version = 0
    for i in range(n_inserts):
        p = tmp_path / f"u{i}.csv"
        lines = ["region,user_id,version,plan,is_deleted,views"]
        for k in rnd.sample(range(keys), keys // 2):
            version += 1
            v = version if rnd.random() > 0.1 else -version  # some stale updates
            lines.append(f"{'eu' if k % 2 else 'us'},{k},{v},p{rnd.randrange(5)},{str(rnd.random() < 0.05).lower()},{rnd.randrange(100)}")
        p.write_text("\n".join(lines) + "\n")
        paths.append(p)
    return paths


def neve_rows(neve, table, query):
    out = neve("sql", query, "--table", f"t={table}", "--format", "csv").stdout
    return [tuple(r) for r in csv.reader(io.StringIO(out))][1:]


@pytest.mark.parametrize("spec,cols,query", [
    ("replace(key = [user_id], version = version, deleted = is_deleted)", "user_id,plan,version",
     "SELECT user_id, plan, version FROM {t} ORDER BY user_id"),
    ("aggregate(key = [user_id], sum = [views], max = [version])", "user_id,views,version",
     "SELECT user_id, views, version FROM {t} ORDER BY user_id"),
])
def test_engines_read_what_neve_reads(tmp_path, neve, duck, s3_prefix, spec, cols, query):
    import chdb

    table = f"{s3_prefix}/sem-{spec.split('(')[0]}"
    neve("create", table, "--partition-by", "region", "--sort-by", "user_id,version",
         "--schema", "region string, user_id int64, version int64, plan string, is_deleted boolean, views int64",
         "--merge", spec)
    for p in write_inserts(tmp_path):
        neve("insert", table, p)
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]

    def check():
        ours = neve_rows(neve, table, query.format(t="t"))
        assert len(ours) > 100
        rel = neve("files", table, "--format", "duckdb").stdout.strip()
        theirs = [tuple(str(v) for v in r) for r in duck.execute(query.format(t=rel)).fetchall()]
        assert theirs == ours
        rel = neve("files", table, "--format", "clickhouse").stdout.strip()
        rel = rel.replace(", 'Parquet')", f", '{key}', '{secret}', 'Parquet')")
        out = str(chdb.query(query.format(t=rel), "CSV"))
        ch = [tuple(r) for r in csv.reader(io.StringIO(out))]
        assert ch == ours
        raw = neve("files", table, "--format", "duckdb", "--raw").stdout.strip()
        stored = duck.execute(f"SELECT count(*) FROM {raw}").fetchone()[0]
        return ours, stored

    before, stored_before = check()
    neve("merge", table, "--min-files", "2")
    after, stored_after = check()
    assert after == before
    assert stored_after < stored_before


def _cell(v):
    """One value as text, the same from every engine: NULL as empty."""
    return "" if v is None or v == "\\N" else str(v)


def _row(r):
    """A row without its timestamp (each engine prints its own text), the float `v` as a
    float (2 or 2.0); a header as it is."""
    r = [_cell(c) for c in r]
    v = r[6]
    if v and v != "v":
        v = repr(float(v))
    return r[:3] + r[4:6] + [v]


@pytest.mark.parametrize("store", ["local", "minio"])
@pytest.mark.parametrize("spec", [None, "replace(key = [id], version = v)"])
def test_engines_read_partition_values_as_stored(tmp_path, neve, duck, s3_prefix, store, spec):
    """Partition columns come from the files, not the folder names the engines' Hive
    partitioning would read (escaped, retyped, NULL as __HIVE_DEFAULT_PARTITION__, a
    `ts_month` column added); columns named like the SQL's helper columns stay the table's;
    a NaN version wins in every engine as in neve."""
    import chdb

    table = str(tmp_path / "t") if store == "local" else f"{s3_prefix}/hive-{bool(spec)}"
    args = ["create", table, "--partition-by", "region, zip, month(ts)", "--schema",
            "id int64, region string, zip string, ts timestamp, filename string, neve_rn int64, v float64"]
    if spec:
        args += ["--merge", spec, "--sort-by", "id"]
    neve(*args)
    regions = ["United States", "a/b%c", "it's", None, "__HIVE_DEFAULT_PARTITION__", "x\\y"]
    first = tmp_path / "first.ndjson"
    second = tmp_path / "second.ndjson"
    with open(first, "w") as a, open(second, "w") as b:
        for i, region in enumerate(regions):
            row = {"id": i, "region": region, "zip": "02139" if i % 2 else None,
                   "ts": f"2024-0{i + 1}-05T00:00:00", "filename": f"f{i}", "neve_rn": 7}
            a.write(json.dumps({**row, "v": "NaN" if i == 0 else 10.0 * i}) + "\n")
            b.write(json.dumps({**row, "neve_rn": 8, "v": 1.5}) + "\n")
    neve("insert", table, first)
    neve("insert", table, second)
    query = "SELECT * FROM {t} ORDER BY id, neve_rn"
    out = neve("sql", query.format(t="t"), "--table", f"t={table}", "--format", "csv").stdout
    ours = [list(r) for r in csv.reader(io.StringIO(out))]
    assert ours[0] == ["id", "region", "zip", "ts", "filename", "neve_rn", "v"]
    assert len(ours) == 1 + (len(regions) if spec else 2 * len(regions))
    if spec:
        # The NaN version of id 0 wins over 1.5; the others' later 1.5 loses to 2.0, 3.0, …
        assert [r[5] for r in ours[1:]] == ["7"] * len(regions)
        assert ours[1][6].lower() == "nan"
    ours = [_row(r) for r in ours]

    rel = neve("files", table, "--format", "duckdb").stdout.strip()
    cur = duck.execute(query.format(t=rel))
    names = [d[0] for d in cur.description]
    assert [_row(r) for r in [names] + cur.fetchall()] == ours

    rel = neve("files", table, "--format", "clickhouse").stdout.strip()
    if store == "minio":
        key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
        rel = rel.replace(", 'Parquet')", f", '{key}', '{secret}', 'Parquet')")
    out = str(chdb.query(query.format(t=rel), "CSVWithNames"))
    assert [_row(r) for r in csv.reader(io.StringIO(out))] == ours

"""Tables with merge semantics read by DuckDB and chdb through the SQL `neve files` prints for
them: the same rows as `neve sql`, before and after `neve merge`."""
import csv
import io
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

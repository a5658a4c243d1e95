"""Tables with merge semantics from Python: exact reads from pandas inserts, before and after a
merge, and the stored rows with `raw=True`."""
import pandas as pd
import pytest

import neve


def test_aggregate_reads_one_row_per_key(where):
    t = neve.create_table(
        where,
        partition_by="identity(day) as d",
        sort_by=["site", "page", "day"],
        schema="site string, page string, day date, views int64, first_seen timestamp, rows int64",
        merge="aggregate(key = [site, page, day], sum = [views], min = [first_seen], count = rows)",
    )
    day = pd.Timestamp("2026-11-01").date()
    for views, seen in [(3, "2026-11-01 10:00"), (4, "2026-11-01 09:00"), (5, "2026-11-01 11:00")]:
        t.insert(pd.DataFrame({
            "site": ["a", "b"], "page": ["/", "/x"], "day": [day, day],
            "views": [views, 1], "first_seen": pd.to_datetime([seen, seen]),
        }))
    want = [
        {"site": "a", "page": "/", "views": 12, "first_seen": pd.Timestamp("2026-11-01 09:00"), "rows": 3},
        {"site": "b", "page": "/x", "views": 3, "first_seen": pd.Timestamp("2026-11-01 09:00"), "rows": 3},
    ]
    q = f'SELECT site, page, views, first_seen, "rows" FROM "{t.name}" ORDER BY site'
    assert t.sql(q).to_pandas().to_dict("records") == want
    assert t.sql(f'SELECT count(*) AS n FROM "{t.name}"', raw=True).column("n").to_pylist() == [6]
    t.merge(min_files=2)
    assert t.sql(q).to_pandas().to_dict("records") == want
    assert t.sql(f'SELECT count(*) AS n FROM "{t.name}"', raw=True).column("n").to_pylist() == [2]
    assert "aggregate(" in t.info()["merge"]


def test_a_bad_spec_is_refused_and_creates_nothing(where):
    with pytest.raises(neve.InvalidInputError, match="must be a prefix of the sort key"):
        neve.create_table(where, sort_by=["ts"], schema="id int64, ts timestamp", merge="dedupe(key = [id])")
    with pytest.raises(neve.NotFoundError):
        neve.Table(where)


def test_a_dataset_of_stored_rows_must_be_asked_for(tmp_path):
    t = neve.create_table(str(tmp_path / "ev"), sort_by=["id"], merge="dedupe(key = [id])")
    t.insert([{"id": 1, "v": "a"}])
    t.insert([{"id": 1, "v": "b"}])
    with pytest.raises(neve.InvalidInputError, match="raw=True"):
        t.to_pyarrow_dataset()
    assert t.to_pyarrow_dataset(raw=True).count_rows() == 2
    assert t.sql(f'SELECT v FROM "{t.name}"').column("v").to_pylist() == ["a"]

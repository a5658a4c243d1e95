"""Files neve writes, read back by pyarrow and DuckDB: same row count, same values."""
import datetime as dt
import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest


def source_table(n=5000):
    base = dt.datetime(2021, 1, 1)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "ts": pa.array([base + dt.timedelta(hours=7 * i) for i in range(n)], pa.timestamp("us")),
        "fare": pa.array([round(i * 0.25, 2) if i % 10 else None for i in range(n)], pa.float64()),
        "payment_type": pa.array([["Cash", "Credit Card", "Mobile"][i % 3] for i in range(n)]),
        "small": pa.array([i % 100 for i in range(n)], pa.int32()),
    })


def alive_files(neve, table):
    return json.loads(neve("files", table, "--format", "json").stdout)["files"]


def sorted_by_id(t):
    return t.sort_by("id")


@pytest.mark.parametrize("fmt", ["parquet", "csv", "ndjson"])
def test_local_pyarrow_reads_what_neve_wrote(tmp_path, neve, fmt):
    src = source_table()
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(src, path)
    elif fmt == "csv":
        import pyarrow.csv as pcsv
        pcsv.write_csv(src, path)
    else:
        with open(path, "w") as f:
            for row in src.to_pylist():
                row["ts"] = row["ts"].isoformat()
                f.write(json.dumps(row) + "\n")
    table = tmp_path / "t"
    neve("create", table, "--partition-by", "month(ts) as d", "--sort-by", "payment_type,id")
    neve("insert", table, path)
    files = alive_files(neve, table)
    assert sum(f["rows"] for f in files) == src.num_rows
    got = pa.concat_tables([pq.read_table(f["url"]) for f in files])
    assert got.num_rows == src.num_rows
    got = sorted_by_id(got)
    assert got["id"].to_pylist() == src["id"].to_pylist()
    assert got["ts"].to_pylist() == src["ts"].to_pylist()
    assert got["fare"].to_pylist() == src["fare"].to_pylist()
    assert got["payment_type"].to_pylist() == src["payment_type"].to_pylist()
    assert got["small"].to_pylist() == src["small"].to_pylist()
    # Each file holds one month and is sorted by the sort keys.
    for f in files:
        t = pq.read_table(f["url"])
        months = set(pc.strftime(t["ts"], format="%Y-%m").to_pylist())
        assert months == {f["partition_values"]["d"]}
        keys = list(zip(t["payment_type"].to_pylist(), t["id"].to_pylist()))
        assert keys == sorted(keys)
        md = pq.ParquetFile(f["url"]).metadata
        assert md.row_group(0).column(0).compression == "ZSTD"
        assert md.row_group(0).column(0).statistics is not None
        # A rising key is stored without a dictionary; repeated strings keep theirs.
        names = [md.schema.column(i).name for i in range(md.num_columns)]
        assert not md.row_group(0).column(names.index("id")).has_dictionary_page
        assert md.row_group(0).column(names.index("payment_type")).has_dictionary_page


def test_duckdb_reads_neve_table_on_minio(tmp_path, neve, duck, s3_prefix):
    src = source_table(20000)
    path = tmp_path / "in.parquet"
    pq.write_table(src, path)
    table = f"{s3_prefix}/duck"
    neve("create", table, "--partition-by", "month(ts)", "--sort-by", "id")
    neve("insert", table, path)
    expr = neve("files", table, "--format", "duckdb").stdout.strip()
    n, total, nulls, distinct_ids = duck.execute(
        f"SELECT count(*), sum(fare), count(*) - count(fare), count(DISTINCT id) FROM {expr}"
    ).fetchone()
    assert n == src.num_rows
    assert distinct_ids == src.num_rows
    assert nulls == src["fare"].null_count
    assert total == pytest.approx(pc.sum(src["fare"]).as_py())
    by_type = dict(duck.execute(f"SELECT payment_type, count(*) FROM {expr} GROUP BY 1").fetchall())
    assert by_type == {"Cash": 6667, "Credit Card": 6667, "Mobile": 6666}
    first = duck.execute(f"SELECT id, ts, small FROM {expr} ORDER BY id LIMIT 3").fetchall()
    assert first == [(0, dt.datetime(2021, 1, 1, 0, 0), 0), (1, dt.datetime(2021, 1, 1, 7, 0), 1), (2, dt.datetime(2021, 1, 1, 14, 0), 2)]


def test_schema_evolution_visible_to_duckdb(tmp_path, neve, duck, s3_prefix):
    table = f"{s3_prefix}/evolve"
    neve("create", table)
    a = tmp_path / "a.ndjson"
    a.write_text('{"id": 1, "name": "x"}\n{"id": 2, "name": "y"}\n')
    b = tmp_path / "b.ndjson"
    b.write_text('{"id": 3, "name": "z", "score": 1.5}\n')
    neve("insert", table, a)
    neve("insert", table, b)
    info = json.loads(neve("info", table, "--json").stdout)
    assert [c["name"] for c in info["schema"]] == ["id", "name", "score"]
    expr = neve("files", table, "--format", "duckdb").stdout.strip()
    rows = duck.execute(f"SELECT id, name, score FROM {expr} ORDER BY id").fetchall()
    assert rows == [(1, "x", None), (2, "y", None), (3, "z", 1.5)]


def test_boto3_sees_log_and_data(neve, s3_prefix, tmp_path):
    import boto3, os
    table = f"{s3_prefix}/layout"
    neve("create", table, "--partition-by", "identity(k)")
    p = tmp_path / "k.csv"
    p.write_text("k,v\na,1\nb,2\n")
    neve("insert", table, p)
    bucket, _, prefix = table.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    keys = sorted(o["Key"].removeprefix(prefix + "/") for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"])
    assert keys[-2:] == ["_log/00000000000000000000.json", "_log/00000000000000000001.json"]
    assert [k.split("/")[1] for k in keys[:2]] == ["k=a", "k=b"]
    # A log entry is plain JSON lines any language can read.
    body = s3.get_object(Bucket=bucket, Key=f"{prefix}/_log/00000000000000000001.json")["Body"].read().decode()
    actions = [json.loads(l) for l in body.splitlines()]
    assert actions[0]["commitInfo"]["operation"] == "INSERT"
    assert sorted(a["add"]["partitionValues"]["k"] for a in actions if "add" in a) == ["a", "b"]


def test_chdb_reads_neve_table_on_minio(tmp_path, neve, s3_prefix):
    import os
    import chdb

    src = source_table(12000)
    path = tmp_path / "in.parquet"
    pq.write_table(src, path)
    table = f"{s3_prefix}/chdb"
    neve("create", table, "--partition-by", "month(ts) as d", "--sort-by", "payment_type")
    neve("insert", table, path)
    expr = neve("files", table, "--format", "clickhouse").stdout.strip()
    # A subquery that reads the partition column from the files, not from folder names.
    assert expr.startswith("(SELECT * FROM s3('http://")
    assert expr.endswith(", 'Parquet') SETTINGS use_hive_partitioning = 0)")
    # neve never prints secrets; add MinIO's credentials the way a user would.
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    expr = expr.replace(", 'Parquet')", f", '{key}', '{secret}', 'Parquet')")
    out = str(chdb.query(f"SELECT count(), countDistinct(id), sum(small) FROM {expr}", "CSV"))
    n, distinct, small = map(int, out.strip().split(","))
    assert (n, distinct, small) == (src.num_rows, src.num_rows, pc.sum(src["small"]).as_py())
    files = alive_files(neve, table)
    call = expr.removeprefix("(SELECT * FROM ").removesuffix(" SETTINGS use_hive_partitioning = 0)")
    paths = str(chdb.query(f"SELECT countDistinct(_path) FROM {call}", "CSV")).strip()
    assert int(paths) == len(files)


def test_chdb_reads_local_table(tmp_path, neve):
    import chdb

    src = source_table(3000)
    path = tmp_path / "in.csv"
    import pyarrow.csv as pcsv
    pcsv.write_csv(src, path)
    table = tmp_path / "t"
    neve("create", table, "--partition-by", "day(ts)")
    neve("insert", table, path)
    expr = neve("files", table, "--format", "clickhouse").stdout.strip()
    assert expr.startswith("(SELECT * FROM file('")
    out = str(chdb.query(f"SELECT count(), min(id), max(id) FROM {expr}", "CSV"))
    assert out.strip() == f"{src.num_rows},0,{src.num_rows - 1}"


@pytest.mark.parametrize("merge", [None, "replace(key = [id])"], ids=["plain", "replace"])
def test_engines_read_unsigned_columns_as_their_table_types(tmp_path, neve, duck, merge):
    """Data files store uint8/16/32 as wider signed integers; the relations `neve files`
    prints for DuckDB and ClickHouse read them back as the table's types, values equal."""
    import chdb

    src = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "a": pa.array([0, 255, None], pa.uint8()),
        "b": pa.array([65535, 1, 2], pa.uint16()),
        "c": pa.array([4294967295, None, 7], pa.uint32()),
    })
    path = tmp_path / "in.parquet"
    pq.write_table(src, path)
    table = tmp_path / "u"
    neve("create", table, "--sort-by", "id", *(["--merge", merge] if merge else []))
    neve("insert", table, path)
    want = [tuple(r.values()) for r in src.to_pylist()]

    expr = neve("files", table, "--format", "duckdb").stdout.strip()
    cur = duck.execute(f"SELECT id, a, b, c FROM {expr} ORDER BY id")
    assert cur.fetchall() == want
    types = duck.execute(f"SELECT typeof(a), typeof(b), typeof(c) FROM {expr} LIMIT 1").fetchone()
    assert types == ("UTINYINT", "USMALLINT", "UINTEGER")

    expr = neve("files", table, "--format", "clickhouse").stdout.strip()
    out = str(chdb.query(f"SELECT id, a, b, c, toTypeName(a), toTypeName(c) FROM {expr} "
                         "ORDER BY id", "JSONCompactEachRow"))
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert [tuple(int(x) if x is not None else None for x in r[:4]) for r in rows] == want
    assert {(r[4], r[5]) for r in rows} == {("Nullable(UInt8)", "Nullable(UInt32)")}

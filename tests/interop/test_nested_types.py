"""Every type neve stores, nested at depth 3 included, in from Parquet, Arrow and NDJSON, read
back by pyarrow (neve's files) and DuckDB (on MinIO) with equal values."""
import base64
import datetime as dt
import decimal
import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def source_table(n=300):
    utc = dt.timezone.utc
    rows = []
    for i in range(n):
        rows.append({
            "id": i,
            "ts": dt.datetime(1969, 12, 31, 23, 0, tzinfo=utc) + dt.timedelta(hours=13 * i, microseconds=i),
            "d": dt.date(2024, 2, 29) - dt.timedelta(days=200 * i),
            "at": dt.time(i % 24, i % 60, i % 60, i),
            "amount": decimal.Decimal(i * 7 - 1000).scaleb(-2),
            "uid": uuid.UUID(int=i * 7919).bytes,
            "blob": bytes([i % 256, 0, 255]) if i % 5 else None,
            "small": (i % 256) - 128,
            # depth 3: a struct holding a list of structs
            "user": None if i % 7 == 0 else {
                "id": i * 10,
                "plan": ["free", "pro", "team"][i % 3],
                "sessions": [{"n": j, "tags": ["a" * j, None]} for j in range(i % 4)],
            },
            "tags": None if i % 11 == 0 else [f"t{j}" for j in range(i % 3)],
            "attrs": [(f"k{j}", None if j == 1 else f"v{i}") for j in range(i % 3)],
        })
    schema = pa.schema([
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("at", pa.time64("us")),
        ("amount", pa.decimal128(12, 2)),
        ("uid", pa.binary(16)),
        ("blob", pa.binary()),
        ("small", pa.int8()),
        ("user", pa.struct([
            ("id", pa.int64()),
            ("plan", pa.string()),
            ("sessions", pa.large_list(pa.struct([("n", pa.int32()), ("tags", pa.list_(pa.string()))]))),
        ])),
        ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.string())),
    ])
    return pa.Table.from_pylist(rows, schema=schema)


def to_ndjson(t, path):
    def plain(v):
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            if v and isinstance(v[0], tuple):
                return {k: plain(x) for k, x in v}
            return [plain(x) for x in v]
        if isinstance(v, dt.datetime):
            return v.isoformat()
        if isinstance(v, (dt.date, dt.time)):
            return v.isoformat()
        if isinstance(v, decimal.Decimal):
            return str(v)
        if isinstance(v, bytes):
            return str(uuid.UUID(bytes=v)) if len(v) == 16 else base64.b64encode(v).decode()
        return v
    with open(path, "w") as f:
        for row in t.to_pylist():
            row["attrs"] = dict(row["attrs"])  # a map is a JSON object, empty or not
            f.write(json.dumps(plain(row)) + "\n")


def read_back(neve, table):
    files = json.loads(neve("files", table, "--format", "json").stdout)["files"]
    return files, pa.concat_tables([pq.read_table(f["url"]) for f in files]).sort_by("id")


def same_values(got, src):
    for name in src.column_names:
        assert got[name].to_pylist() == src[name].to_pylist(), name


@pytest.mark.parametrize("fmt", ["parquet", "arrow", "ndjson"])
def test_every_type_round_trips(tmp_path, neve, fmt):
    src = source_table()
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(src, path)
    elif fmt == "arrow":
        with pa.ipc.new_file(path, src.schema) as w:
            w.write_table(src)
    else:
        to_ndjson(src, path)
    table = tmp_path / "t"
    schema = ("id int64, ts timestamp(UTC), d date, at time, amount decimal(12,2), uid uuid, blob binary, "
              "small int8, user struct<id int64, plan string, sessions list<struct<n int32, tags list<string>>>>, "
              "tags list<string>, attrs map<string, string>")
    neve("create", table, "--schema", schema, "--partition-by", "year(ts)", "--sort-by", "id")
    neve("insert", table, path)
    files, got = read_back(neve, table)
    assert got.num_rows == src.num_rows
    same_values(got, src)
    # Every column and nested field carries its id as the Parquet field id.
    pf = pq.ParquetFile(files[0]["url"])
    arrow_schema = pf.schema_arrow
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in arrow_schema}
    assert ids["id"] == 1 and ids["ts"] == 2
    user = arrow_schema.field("user")
    nested_ids = [int(user.type.field(i).metadata[b"PARQUET:field_id"]) for i in range(user.type.num_fields)]
    assert nested_ids == sorted(nested_ids) and nested_ids[0] > ids["small"]
    # neve's own SQL reads the same values.
    out = neve("sql", 'SELECT id, "user".plan AS plan, cardinality("user".sessions) AS s FROM t ORDER BY id',
               "--table", f"t={table}", "--format", "ndjson").stdout
    rows = [json.loads(l) for l in out.splitlines()]
    want = [(r["id"], r["user"]["plan"] if r["user"] else None,
             len(r["user"]["sessions"]) if r["user"] else None) for r in src.to_pylist()]
    assert [(r["id"], r.get("plan"), r.get("s")) for r in rows] == want


def test_duckdb_reads_nested_columns_on_minio(tmp_path, neve, duck, s3_prefix):
    src = source_table(1000)
    path = tmp_path / "in.parquet"
    pq.write_table(src, path)
    table = f"{s3_prefix}/nested"
    neve("insert", table, path, "--create", "--partition-by", "year(ts)", "--sort-by", "id")
    expr = neve("files", table, "--format", "duckdb").stdout.strip()
    got = duck.execute(
        f"""SELECT id, "user".plan, len("user".sessions), tags, attrs['k0'], amount, "at" FROM {expr} ORDER BY id"""
    ).fetchall()
    want = [
        (r["id"], r["user"]["plan"] if r["user"] else None, len(r["user"]["sessions"]) if r["user"] else None,
         r["tags"], dict(r["attrs"]).get("k0"), r["amount"], r["at"])
        for r in src.to_pylist()
    ]
    assert got == want
    # The other columns, depth 3 included: zoned and pre-1970 times, dates, a 16-byte id,
    # binaries, int8, and every session's fields.
    got = duck.execute(
        f"""SELECT id, epoch_us(ts), d, uid, blob, small, "user".id, "user".sessions FROM {expr} ORDER BY id"""
    ).fetchall()
    EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    as_bytes = lambda v: v.bytes if isinstance(v, uuid.UUID) else v  # noqa: E731
    got = [(i, ts, d, as_bytes(u), b, s, uid, sessions) for i, ts, d, u, b, s, uid, sessions in got]
    want = [
        (r["id"], (r["ts"] - EPOCH) // dt.timedelta(microseconds=1), r["d"], r["uid"], r["blob"], r["small"],
         r["user"]["id"] if r["user"] else None,
         r["user"]["sessions"] if r["user"] else None)
        for r in src.to_pylist()
    ]
    assert got == want

"""`Table.to_pyarrow_dataset`: one version's files as a pyarrow dataset.

neve computes the per-file statistics from its log; this module only turns them into pyarrow
objects: a filesystem for the store and, for each file, a guarantee `min <= col <= max` that
lets pyarrow (and DuckDB and polars scanning the dataset) skip the file for a filter it
contradicts, without a request.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from neve._neve import InvalidInputError

_FIELD_ID = b"PARQUET:field_id"


def _filesystem(store: dict, options: dict):
    if store["kind"] == "local":
        return pafs.LocalFileSystem()
    if store["kind"] != "s3":
        raise InvalidInputError(f"a {store['kind']} table cannot be read as a pyarrow dataset")

    def opt(*names):
        for n in names:
            for k, v in options.items():
                if k.lower() in (n, "aws_" + n):
                    return v
        return None

    endpoint = opt("endpoint_url", "endpoint") or store.get("endpoint")
    kwargs = {"region": opt("region") or store.get("region") or "us-east-1"}
    if endpoint:
        scheme, _, rest = endpoint.partition("://")
        kwargs["endpoint_override"] = rest or scheme
        kwargs["scheme"] = scheme if rest else "https"
    key, secret = opt("access_key_id"), opt("secret_access_key")
    if key and secret:
        kwargs["access_key"], kwargs["secret_key"] = key, secret
        token = opt("session_token", "token")
        if token:
            kwargs["session_token"] = token
    return pafs.S3FileSystem(**kwargs)


def _path(url: str, store: dict) -> str:
    # pyarrow's S3 paths are bucket/key.
    return url[len("s3://"):] if store["kind"] == "s3" else url


def _ids(schema: pa.Schema) -> dict:
    """Field id -> dotted name, for every field with an id."""
    out = {}

    def walk(field: pa.Field, prefix: str):
        name = prefix + field.name
        meta = field.metadata or {}
        if _FIELD_ID in meta:
            out[int(meta[_FIELD_ID])] = name
        t = field.type
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i), name + ".")
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, name + "[].")

    for f in schema:
        walk(f, "")
    return out


def _check_names(schema: pa.Schema, paths: list, fs) -> None:
    """pyarrow reads columns by name: refuse files whose columns had other names (a rename or
    a drop and add since they were written), rather than read their values as nulls."""
    table_ids = _ids(schema)
    by_name = {v: k for k, v in table_ids.items()}

    def check(path):
        file_ids = _ids(pq.read_schema(path, filesystem=fs))
        for fid, name in file_ids.items():
            if fid in table_ids and table_ids[fid] != name:
                return f"{path} holds column '{table_ids[fid]}' under its old name '{name}'"
            if fid not in table_ids and name in by_name:
                return f"{path} holds an older column '{name}' that was dropped and added again"
        return None

    with ThreadPoolExecutor(max_workers=8) as pool:
        for problem in pool.map(check, paths):
            if problem:
                raise InvalidInputError(
                    f"cannot read this table as a pyarrow dataset: {problem}; pyarrow matches "
                    "columns by name. Query it with t.sql(), or rewrite the old files first."
                )


def _guarantee(stats: pa.RecordBatch, i: int, columns: list):
    """`min <= c <= max` for every column the log has bounds of in file `i`."""
    expr = None
    for c in columns:
        s = stats.column(c)
        lo, hi, nulls = s.field("min")[i], s.field("max")[i], s.field("nulls")[i]
        if not lo.is_valid or not hi.is_valid:
            continue
        bound = (pc.field(c) >= lo) & (pc.field(c) <= hi)
        if not nulls.is_valid or nulls.as_py() > 0:
            bound = bound | pc.field(c).is_null()
        expr = bound if expr is None else expr & bound
    return expr if expr is not None else pc.scalar(True)


def build(table, as_of, filesystem=None):
    schema, stats, format_version, store = table._t._dataset(as_of)
    store = json.loads(store)
    fs = filesystem if filesystem is not None else _filesystem(store, table._storage_options)
    urls = stats.column("url").to_pylist()
    paths = [_path(u, store) for u in urls]
    if format_version >= 2 and paths:
        _check_names(schema, paths, fs)
    columns = [n for n in stats.schema.names if n not in ("url", "rows")]
    # Float bounds exclude NaN, which a filter could still match: no guarantee for floats.
    columns = [c for c in columns if not pa.types.is_floating(schema.field(c).type)]
    guarantees = [_guarantee(stats, i, columns) for i in range(len(paths))]
    return ds.FileSystemDataset.from_paths(
        paths,
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=fs,
        partitions=guarantees,
    )


__all__ = ["build"]

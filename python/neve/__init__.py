"""neve: a serverless data lake engine on object storage, from Python.

Tables are folders of partitioned, sorted Parquet plus a log, on a local disk or in S3
(MinIO, ...). Arrow crosses between Python and neve without a copy (the Arrow PyCapsule
interface); results are pyarrow objects. Every call releases the GIL while neve works.

    import neve
    t = neve.create_table("./lake/events", partition_by="day(ts)", sort_by=["user_id", "ts"])
    t.insert(arrow_table)
    t.sql("SELECT user_id, count(*) FROM events GROUP BY 1").to_pandas()
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shlex
import urllib.parse
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Union

import pyarrow as pa

from neve._neve import (  # noqa: F401  (re-exported)
    ConflictError,
    InternalError,
    InvalidInputError,
    NeveError,
    NotFoundError,
    SchemaError,
    SqlError,
    StorageError,
    __version__,
)
from neve import _neve

__all__ = [
    "Table",
    "create_table",
    "sql",
    "sql_stream",
    "InsertReport",
    "NeveError",
    "InvalidInputError",
    "SchemaError",
    "SqlError",
    "NotFoundError",
    "ConflictError",
    "StorageError",
    "InternalError",
    "connect",
    "Client",
    "AuthError",
    "ServerBusyError",
    "QueryTimeoutError",
    "UnreachableError",
]

AsOf = Union[int, str, None]


@dataclass(frozen=True)
class InsertReport:
    """What an insert committed: the new `version`, `rows`, `files` written, `bytes`, and
    `partitions` touched (`None` for `version` when there was nothing to insert)."""

    version: Optional[int]
    rows: int
    files: int
    bytes: int
    partitions: int
    raw: dict


def _checked(reader: pa.RecordBatchReader, failure: list) -> Iterable[pa.RecordBatch]:
    """The reader's batches, each checked against the reader's schema (pyarrow does not check
    when it exports a reader through the C stream interface, and a batch of other types would
    be read as the declared ones); an exception the source raises is kept in `failure`, so
    that `insert` raises it as it was."""
    schema = reader.schema
    try:
        for i, batch in enumerate(reader):
            if not batch.schema.equals(schema):
                raise SchemaError(
                    f"batch {i + 1} of the RecordBatchReader has the columns ({batch.schema.to_string(show_schema_metadata=False)}) "
                    f"but the reader declares ({schema.to_string(show_schema_metadata=False)})".replace("\n", ", ")
                )
            yield batch
    except BaseException as e:  # noqa: B036 (KeyboardInterrupt too: it is raised again as it was)
        failure.append(e)
        raise


def _pandas(df: Any) -> pa.Table:
    """A DataFrame's columns; a named index (levels) becomes columns, as `reset_index` would
    make them, and an unnamed one (the default range, or any other) is left out."""
    named = [n for n in df.index.names if n is not None]
    if named:
        df = df.reset_index(level=named)
    return pa.Table.from_pandas(df, preserve_index=False)


def _rows(rows: list) -> pa.Table:
    """list[dict]: typed by pyarrow's inference, then by the table's rules. Every key of every
    row is a column, null in the rows without it (pyarrow's `from_pylist` takes the first row's
    keys and drops the others' values without a word)."""
    names: dict = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InvalidInputError(f"row {i + 1} is a {type(row).__name__}, not a dict: a list given to insert() holds one dict a row")
        for name in row:
            if not isinstance(name, str):
                raise InvalidInputError(f"row {i + 1} has the key {name!r}: column names are strings")
            names.setdefault(name, None)
    if rows and not names:
        # pyarrow makes no rows of them: refused, as neve refuses rows without columns.
        raise InvalidInputError(f"{len(rows)} rows have no columns: a row needs a value to be stored")
    columns = {}
    for name in names:
        try:
            columns[name] = pa.array([row.get(name) for row in rows])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise InvalidInputError(f"column '{name}': {e}") from None
    return pa.table(columns) if columns else pa.Table.from_pylist([])


def _reader(batches: Any) -> pa.RecordBatchReader:
    """A running query's batches as a pyarrow reader. pyarrow raises what a Python iterator
    raised, so an error met while reading is the neve exception of its kind."""
    return pa.RecordBatchReader.from_batches(batches.schema, batches)


def _arrow_stream(data: Any, failure: Optional[list] = None) -> Any:
    """Anything insertable as an object with `__arrow_c_stream__` (or a pyarrow reader)."""
    module = type(data).__module__.split(".")[0]
    if module == "pandas" and hasattr(data, "index") and hasattr(data, "columns"):
        # Before `__arrow_c_stream__`, which pandas DataFrames have too and which would keep
        # their index as a column named `__index_level_0__`.
        return _pandas(data)
    if module == "polars" and hasattr(data, "schema") and any(str(d) == "Null" for d in dict(data.schema).values()):
        # polars exports a Null column with a buffer the C interface says it has not, which
        # Arrow refuses; pyarrow's conversion gives it the standard form.
        return data.to_arrow()
    if isinstance(data, pa.RecordBatchReader):
        return pa.RecordBatchReader.from_batches(data.schema, _checked(data, failure if failure is not None else []))
    if hasattr(data, "__arrow_c_stream__"):
        return data
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, list):
        return _rows(data)
    module = type(data).__module__.split(".")[0]
    if module == "polars":
        return data.to_arrow()
    if module == "duckdb":
        # A DuckDB relation (older DuckDB without the PyCapsule interface).
        return data.arrow()
    if hasattr(data, "to_arrow"):
        return data.to_arrow()
    raise TypeError(
        "insert() takes a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars "
        "DataFrame, a DuckDB relation, a list of dicts, or any object with __arrow_c_stream__; "
        f"got {type(data).__name__}"
    )


def _address(address: Union[str, os.PathLike]) -> str:
    """A folder as the shell would name it: `~/lake/t` is in the home folder (not a folder
    named `~` under the current one)."""
    text = os.fspath(address)
    return os.path.expanduser(text) if isinstance(text, str) and text.startswith("~") else text


def _names(values: Iterable[str], what: str) -> list:
    """A list of names; a lone string would otherwise be split into its letters."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what} takes a list of names, e.g. [{values!r}], not a single string")
    return list(values)


def _as_of(as_of: AsOf) -> Optional[str]:
    """A version or a time as neve's text. A naive `datetime` is this machine's local time, as
    Python's own `timestamp()` reads it; a time as text without a zone is UTC, as in the CLI."""
    if isinstance(as_of, datetime.datetime) and as_of.tzinfo is None:
        as_of = as_of.astimezone()
    return None if as_of is None else str(as_of)


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)", re.ASCII)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
# Ten years: longer is surely a mistake, and would overflow neve's milliseconds.
_MAX_DURATION_MS = 10 * 366 * 86_400_000


def _duration_ms(d: Union[str, int, float, "datetime.timedelta", None], name: str) -> Optional[int]:
    """`"1h"`, `"30m"`, `"15s"`, `"250ms"`, a `datetime.timedelta`, or seconds as a number."""
    if d is None:
        return None
    if isinstance(d, datetime.timedelta):
        ms = d / datetime.timedelta(milliseconds=1)
    elif isinstance(d, (int, float)) and not isinstance(d, bool):
        ms = d * 1000
    elif isinstance(d, str):
        m = _DURATION.fullmatch(d.strip().lower())
        if not m:
            raise InvalidInputError(f"{name}: '{d}' is not a duration (e.g. 1h, 30m, 15s, 250ms)")
        ms = float(m.group(1)) * _UNIT_MS[m.group(2)]
    else:
        raise TypeError(f"{name} takes a duration ('1h', seconds, a timedelta), not {type(d).__name__}")
    if not math.isfinite(ms) or ms < 0 or ms > _MAX_DURATION_MS:
        raise InvalidInputError(f"{name}: {d!r} is not a duration from 0 to 10 years")
    return int(ms)


def _count(value: Optional[int], name: str, minimum: int) -> Optional[int]:
    """A whole number of at least `minimum`, named in the error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} takes a whole number, not {type(value).__name__}")
    if value < minimum:
        raise InvalidInputError(f"{name}: {value} is below the least allowed, {minimum}")
    return value


def _check_names(names: Iterable[str]) -> None:
    """Column names go to neve as C strings: a NUL would cut one short, silently."""
    for n in names:
        if isinstance(n, str) and "\x00" in n:
            raise InvalidInputError(f"column {n!r}: a column name may not hold a NUL character")


class Table:
    """A neve table at `address`: a folder, `file:///abs/dir`, or `s3://bucket/prefix`.

    `storage_options` override the `AWS_*` environment for S3: `endpoint_url`, `region`,
    `access_key_id`, `secret_access_key`, `session_token`, `allow_http`, ... An unknown key
    raises `InvalidInputError`. Opening a table that does not exist raises `NotFoundError`.
    """

    def __init__(self, address: Union[str, os.PathLike], storage_options: Optional[Mapping[str, str]] = None):
        self._t = _neve.Table(_address(address), _options(storage_options))
        self._storage_options = dict(storage_options or {})

    @classmethod
    def _wrap(cls, inner: Any, storage_options: Optional[Mapping[str, str]]) -> "Table":
        t = cls.__new__(cls)
        t._t = inner
        t._storage_options = dict(storage_options or {})
        return t

    @property
    def address(self) -> str:
        return self._t.address

    @property
    def name(self) -> str:
        """The table's folder name: what `sql()` calls it."""
        name = self._t.address.rstrip("/").rsplit("/", 1)[-1]
        # A file: URL's escapes are decoded, as the folder is found.
        return urllib.parse.unquote(name) if self._t.address.startswith("file:") else name

    @property
    def version(self) -> int:
        """The latest version (reads the log)."""
        return self._t.version

    @property
    def schema(self) -> pa.Schema:
        """The table's schema as a pyarrow schema."""
        return self._t.schema

    def __repr__(self) -> str:
        return f"neve.Table({self.address!r})"

    def insert(self, data: Any) -> InsertReport:
        """Insert rows in one commit; returns an `InsertReport`.

        `data` may be a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars
        DataFrame, a DuckDB relation, a list of dicts, or any object with
        `__arrow_c_stream__`. New columns are added to the table's schema; a value that does
        not fit its column raises `SchemaError` naming the row and column, and nothing is
        committed. Several threads and processes may insert at once.
        """
        failure: list = []
        stream = _arrow_stream(data, failure)
        schema = getattr(stream, "schema", None)
        if isinstance(schema, pa.Schema):
            _check_names(schema.names)
        elif hasattr(data, "columns") and not callable(data.columns):
            _check_names(data.columns)
        try:
            raw = json.loads(self._t._insert(stream))
        except NeveError:
            if failure:
                # The source's own exception (a KeyboardInterrupt stays one), not neve's
                # account of the stream it broke off.
                raise failure[0] from None
            raise
        return InsertReport(
            version=raw.get("version"),
            rows=raw.get("rows", 0),
            files=raw.get("files", 0),
            bytes=raw.get("bytes", 0),
            partitions=raw.get("partitions", 0),
            raw=raw,
        )

    def sql(self, query: str, as_of: AsOf = None, raw: bool = False) -> pa.Table:
        """Run `query`, where this table is named by its folder name (`self.name`).

        A table with merge semantics reads one row per key; `raw=True` reads the stored
        rows, unmerged."""
        return _neve._sql(query, [(self.name, self._t)], _as_of(as_of), raw)

    def sql_stream(self, query: str, as_of: AsOf = None, raw: bool = False) -> pa.RecordBatchReader:
        """Like `sql`, as a RecordBatchReader: batches are computed as they are read."""
        return _reader(_neve._sql_stream(query, [(self.name, self._t)], _as_of(as_of), raw))

    def merge(
        self,
        min_files: Optional[int] = None,
        target_file_size: Optional[int] = None,
        partitions: Optional[Iterable[str]] = None,
        max_input_bytes: Optional[int] = None,
    ) -> dict:
        """Merge small files (as `neve merge`); returns the merge report."""
        return json.loads(
            self._t._merge(
                _count(min_files, "min_files", 2),
                _count(target_file_size, "target_file_size", 1),
                _names(partitions, "partitions") if partitions is not None else None,
                _count(max_input_bytes, "max_input_bytes", 1),
            )
        )

    def gc(
        self,
        grace: Union[str, int, float, datetime.timedelta] = "1h",
        retention: Union[str, int, float, datetime.timedelta, None] = None,
        dry_run: bool = False,
    ) -> dict:
        """Delete files no version within `retention` needs (as `neve gc`). Durations are
        text (`"1h"`, `"30m"`), seconds, or a `datetime.timedelta`.

        `grace` must outlast the longest insert in progress: an insert's files are unreferenced
        until it commits. A table's `gc_grace` setting is a floor: no run waits less."""
        return json.loads(self._t._gc(_duration_ms(grace, "grace"), _duration_ms(retention, "retention"), dry_run))

    def iceberg_sync(self, full: bool = False) -> dict:
        """Bring the table's Iceberg metadata (`metadata/`) up to its latest version, as
        `neve iceberg sync` (a table with the setting `iceberg`); `full` rebuilds it from the
        log. Returns the sync report."""
        return json.loads(self._t._iceberg_sync(full))

    def delete(self, predicate: str) -> dict:
        """Delete the rows matching a SQL predicate, e.g. `"fare = 0"` (as `neve delete`)."""
        return json.loads(self._t._delete(predicate))

    def drop_partitions(self, partitions: Iterable[str]) -> dict:
        """Drop whole partitions by folder name, e.g. `["d=2013-01"]`."""
        return json.loads(self._t._drop_partitions(_names(partitions, "partitions")))

    def alter(self, change: str) -> int:
        """A schema or settings change as `neve alter` takes it, e.g. `"add column country string"`,
        `"rename column tags to labels"`, `"set merge_min_files=4"`. Returns the new version.

        The text is split into words as a shell splits the command line, so quotes group words
        as they do there: `'add column "note string not null"'`, `'rename column "a b" to c'`."""
        if not isinstance(change, str):
            raise TypeError(f"alter takes the change as text, e.g. 'add column c string', not {type(change).__name__}")
        try:
            words = shlex.split(change)
        except ValueError as e:
            raise InvalidInputError(f"alter {change!r}: {e} (quotes group words as in a shell)") from None
        return self._t._alter(words)

    def info(self, as_of: AsOf = None) -> dict:
        """What `neve info --json` prints."""
        return json.loads(self._t._info(_as_of(as_of)))

    def history(self, limit: Optional[int] = None) -> list:
        """The commits, oldest first (the last `limit`)."""
        return json.loads(self._t._history(_count(limit, "limit", 0)))

    def files(self, as_of: AsOf = None) -> list:
        """The alive data files of a version: path, url, partition values, rows, size."""
        return json.loads(self._t._files(_as_of(as_of)))["files"]

    def to_pyarrow_dataset(self, as_of: AsOf = None, filesystem=None, raw: bool = False):
        """A `pyarrow.dataset.Dataset` of one version's files, for DuckDB, polars and pyarrow
        to scan lazily. Each file carries the bounds the log knows of its columns, so a
        filter skips files without opening them; row groups are pruned from the footers.

        `filesystem` (a `pyarrow.fs.FileSystem`) replaces the one built from the table's
        address and storage options. Tables whose older files hold renamed columns raise
        `InvalidInputError`: pyarrow matches columns by name (use `sql`).

        The files of a table with merge semantics hold several rows per key until merged: such
        a table raises `InvalidInputError` unless `raw=True` says the stored rows are wanted
        (`sql` reads it merged)."""
        from neve import _dataset

        merge = self.info(as_of).get("merge")
        if merge and not raw:
            raise InvalidInputError(
                f"table {self.name} merges rows by key ({merge}): its files hold several rows per key "
                "until merged; query it with sql(), or pass raw=True for the stored rows"
            )
        return _dataset.build(self, _as_of(as_of), filesystem)


def _text_map(mapping: Optional[Mapping[str, Any]], name: str) -> dict:
    """Settings and options as neve reads them: text, booleans as `true`/`false`; a key whose
    value is None is left unset."""
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{name} takes a mapping of names to values, not {type(mapping).__name__}")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in mapping.items() if v is not None}


def _options(storage_options: Optional[Mapping[str, str]]) -> Optional[dict]:
    return None if storage_options is None else _text_map(storage_options, "storage_options")


def create_table(
    address: Union[str, os.PathLike],
    partition_by: Optional[str] = None,
    sort_by: Optional[Iterable[str]] = None,
    schema: Optional[str] = None,
    settings: Optional[Mapping[str, Any]] = None,
    storage_options: Optional[Mapping[str, str]] = None,
    merge: Optional[str] = None,
    iceberg: bool = False,
) -> Table:
    """Create a table (as `neve create`) and return it.

    `partition_by`: e.g. `"day(ts)"`, `"month(pickup) as d, identity(region)"`.
    `sort_by`: the columns rows are sorted by inside each file.
    `schema`: declared columns, e.g. `"id string not null, ts timestamp(UTC)"`; otherwise the
    first insert sets it. `settings`: table settings, e.g. `{"merge_min_files": 4}`.
    `merge`: what several rows of one key mean, read exactly by every query, e.g.
    `"replace(key = [user_id], version = updated_at, deleted = is_deleted)"`,
    `"aggregate(key = [site, day], sum = [views], count = rows)"`, `"dedupe(key = [id])"`;
    the key must lead `sort_by` (docs/FORMAT.md, Merge semantics).
    `iceberg`: also write Iceberg metadata after every commit, so Spark, DuckDB's
    `iceberg_scan`, pyiceberg and ClickHouse read the table (docs/ENGINES.md).
    Raises `ConflictError` when a table is there already.
    """
    if not isinstance(iceberg, bool):
        raise TypeError(f"iceberg is True or False, not {iceberg!r}")
    if iceberg:
        settings = {**(settings or {}), "iceberg": True}
    inner = _neve._create(
        _address(address),
        partition_by,
        _names(sort_by, "sort_by") if sort_by is not None else None,
        schema,
        _text_map(settings, "settings"),
        _options(storage_options),
        merge,
    )
    return Table._wrap(inner, storage_options)


def _resolve(tables: Mapping[str, Union[str, os.PathLike, Table]], storage_options) -> list:
    if not isinstance(tables, Mapping):
        raise TypeError(f"tables takes a mapping of SQL names to tables, not {type(tables).__name__}")
    out = []
    for name, t in tables.items():
        if not isinstance(t, Table):
            t = Table(t, storage_options)
        out.append((name, t._t))
    return out


def sql(
    query: str,
    tables: Mapping[str, Union[str, os.PathLike, Table]],
    as_of: AsOf = None,
    storage_options: Optional[Mapping[str, str]] = None,
    raw: bool = False,
) -> pa.Table:
    """Run `query` over several tables, each named by its key in `tables` (an address or a
    `Table`), all at their latest version or at `as_of` (a version or a timestamp); `raw`
    reads tables with merge semantics unmerged."""
    return _neve._sql(query, _resolve(tables, storage_options), _as_of(as_of), raw)


def sql_stream(
    query: str,
    tables: Mapping[str, Union[str, os.PathLike, Table]],
    as_of: AsOf = None,
    storage_options: Optional[Mapping[str, str]] = None,
    raw: bool = False,
) -> pa.RecordBatchReader:
    """Like `sql`, as a RecordBatchReader with bounded memory."""
    return _reader(_neve._sql_stream(query, _resolve(tables, storage_options), _as_of(as_of), raw))


from neve._client import AuthError, Client, QueryTimeoutError, ServerBusyError, UnreachableError, connect  # noqa: E402

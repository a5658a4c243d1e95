"""`spark.read.format("neve")`: a Spark data source for neve's own log (pyspark >= 4.1).

    import neve.spark
    neve.spark.register(spark)
    df = (spark.read.format("neve")
          .option("versionAsOf", 42)                 # or timestampAsOf; default: the latest
          .option("endpoint_url", "http://minio:9000")  # any other option: a storage option
          .load("s3://lake/taxi"))

The driver reads the log once, pins one version, and splits its files: one Spark input
partition per split (a partition's files, cut at `maxPartitionBytes`; a table with merge
semantics keeps each partition's files together, so the merge stays exact). Spark's filters
prune files by the log's statistics, exactly as `neve sql` does with the same WHERE, and each
task reads its split through neve (field ids, merge semantics, the filter again) and hands
Spark Arrow batches. Spark still applies every filter itself: neve only narrows what is read.

Executors need `neve` importable and can reach the table with the same options.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Iterator, List, Optional

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructField,
    StructType,
)

import neve
from neve import InvalidInputError, SchemaError

__all__ = ["NeveDataSource", "register"]

#: The options the source reads itself; every other option is a storage option.
_OWN = {"path", "versionasof", "timestampasof", "maxpartitionbytes"}
_DEFAULT_PARTITION_BYTES = 128 * 1024 * 1024
_PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def register(spark) -> None:
    """Register the `neve` format with `spark` and turn on Python filter pushdown, which
    the source needs to prune files (`spark.sql.python.filterPushdown.enabled`)."""
    spark.conf.set(_PUSHDOWN, "true")
    spark.dataSource.register(NeveDataSource)


def _spark_type(at: pa.DataType) -> DataType:
    """Spark's type for an Arrow type; unsigned integers widen to the next signed type that
    holds every value (uint64 to decimal(20, 0)), since Spark has none."""
    t = pa.types
    if t.is_uint8(at):
        return ShortType()
    if t.is_uint16(at):
        return IntegerType()
    if t.is_uint32(at):
        return LongType()
    if t.is_uint64(at):
        return DecimalType(20, 0)
    if t.is_struct(at):
        return StructType([StructField(f.name, _spark_type(f.type), f.nullable) for f in at])
    if t.is_list(at) or t.is_large_list(at):
        return ArrayType(_spark_type(at.value_type), at.value_field.nullable)
    if t.is_map(at):
        return MapType(_spark_type(at.key_type), _spark_type(at.item_type), at.item_field.nullable)
    return from_arrow_type(at, prefer_timestamp_ntz=True)


def _spark_schema(schema: pa.Schema) -> StructType:
    fields = []
    for f in schema:
        try:
            fields.append(StructField(f.name, _spark_type(f.type), f.nullable))
        except Exception as e:  # pyspark's own type error, named for the column
            raise InvalidInputError(f"column '{f.name}' of type {f.type} has no Spark type: {e}") from e
    return StructType(fields)


def _options(options) -> dict:
    return {str(k).lower(): v for k, v in dict(options).items()}


def _storage_options(options: dict) -> dict:
    return {k: v for k, v in options.items() if k not in _OWN}


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: Any, column: pa.Field) -> Optional[str]:
    """`value` as a neve SQL literal of `column`'s type, or None where the translation could
    prune a file Spark would keep (then the filter only runs in Spark)."""
    at = column.type
    if isinstance(value, bool):
        return ("TRUE" if value else "FALSE") if pa.types.is_boolean(at) else None
    if isinstance(value, int):
        return str(value) if pa.types.is_integer(at) else None
    if isinstance(value, float):
        # Never: neve's engine orders floats totally (-0.0 below 0.0, a NaN with its sign bit
        # below -inf), Spark does not (-0.0 = 0.0, every NaN above every number), so a
        # pushed float filter would drop rows Spark keeps.
        return None
    if isinstance(value, str):
        if pa.types.is_string(at) or pa.types.is_large_string(at):
            return "'" + value.replace("'", "''") + "'"
        return None
    if isinstance(value, _dt.datetime):
        if not pa.types.is_timestamp(at):
            return None
        if at.tz is None:
            # TimestampNTZ: Spark hands the wall time, naive.
            return None if value.tzinfo else "TIMESTAMP '" + value.isoformat(sep=" ") + "'"
        # Timestamp (with zone): naive values are the Python worker's local time. The literal
        # carries the column's zone, so no engine reinterprets it.
        utc = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        tz = at.tz.replace('"', "")
        return f"arrow_cast('{utc.isoformat()}Z', 'Timestamp(Microsecond, Some(\"{tz}\"))')"
    if isinstance(value, _dt.date):
        return "DATE '" + value.isoformat() + "'" if pa.types.is_date32(at) else None
    return None


_COMPARE = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}


def _translate(f: Filter, schema: pa.Schema) -> Optional[str]:
    """A Spark filter as a neve SQL predicate, or None when it has no exact translation."""
    if isinstance(f, Not):
        inner = _translate(f.child, schema)
        return None if inner is None else f"NOT ({inner})"
    path = getattr(f, "attribute", None)
    if not path or len(path) != 1 or path[0] not in schema.names:
        return None
    column = schema.field(path[0])
    col = _ident(path[0])
    if isinstance(f, IsNull):
        return f"{col} IS NULL"
    if isinstance(f, IsNotNull):
        return f"{col} IS NOT NULL"
    if isinstance(f, EqualNullSafe):
        if f.value is None:
            return f"{col} IS NULL"
        lit = _literal(f.value, column)
        return None if lit is None else f"{col} IS NOT DISTINCT FROM {lit}"
    op = _COMPARE.get(type(f))
    if op is not None:
        lit = _literal(f.value, column)
        return None if lit is None else f"{col} {op} {lit}"
    if isinstance(f, In):
        lits = [_literal(v, column) for v in f.value if v is not None]
        if not lits or any(lit is None for lit in lits):
            return None
        return f"{col} IN ({', '.join(lits)})"
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        lit = _literal(f.value, column)
        if lit is None:
            return None
        if isinstance(f, StringStartsWith):
            return f"starts_with({col}, {lit})"
        if isinstance(f, StringEndsWith):
            return f"ends_with({col}, {lit})"
        return f"strpos({col}, {lit}) > 0"
    return None


class NeveSplit(InputPartition):
    """The files one Spark task reads."""

    def __init__(self, partition: str, paths: List[str], rows: int, size: int):
        super().__init__(partition)
        self.paths = paths
        self.rows = rows
        self.size = size


class NeveDataSource(DataSource):
    """The `neve` format: `spark.read.format("neve").load(uri)`."""

    @classmethod
    def name(cls) -> str:
        return "neve"

    def _table(self) -> "neve.Table":
        options = _options(self.options)
        if "path" not in options:
            raise InvalidInputError("the neve source reads a table: spark.read.format('neve').load(uri)")
        return neve.Table(options["path"], _storage_options(options) or None)

    def _as_of(self) -> Optional[str]:
        options = _options(self.options)
        version, timestamp = options.get("versionasof"), options.get("timestampasof")
        if version is not None and timestamp is not None:
            raise InvalidInputError("give versionAsOf or timestampAsOf, not both")
        if version is not None:
            text = str(version).strip()
            if not text.isdigit():
                raise InvalidInputError(f"versionAsOf: '{version}' is not a version number")
            return text
        if timestamp is None:
            return None
        text = str(timestamp).strip()
        # All digits would be read as a version number: a time is written as one.
        if text.isdigit():
            raise InvalidInputError(
                f"timestampAsOf: '{timestamp}' is not a time; write one as '2024-05-01 14:00:00' "
                "(UTC) or with its offset, or ask for a version with versionAsOf")
        return text

    def schema(self) -> StructType:
        table = self._table()
        version = table.info(self._as_of())["version"]
        return _spark_schema(table._t._dataset(str(version))[0])

    def reader(self, schema: StructType) -> "NeveReader":
        options = _options(self.options)
        table = self._table()
        version = table.info(self._as_of())["version"]
        target = options.get("maxpartitionbytes", _DEFAULT_PARTITION_BYTES)
        try:
            target = int(target)
        except ValueError:
            raise InvalidInputError(f"maxPartitionBytes: '{target}' is not a number of bytes") from None
        table_schema = table._t._dataset(str(version))[0]
        _check_columns(schema, table_schema, version)
        return NeveReader(
            address=options["path"],
            storage_options=_storage_options(options),
            version=version,
            table_schema=table_schema,
            spark_schema=schema,
            target_bytes=target,
        )


def _check_columns(wanted: StructType, table_schema: pa.Schema, version) -> None:
    """Each column the DataFrame reads is in the version read, with the same Spark type: the
    table may have changed since `load()` (which read the latest schema then), or a schema
    given with `.schema(...)` may name columns in another order or that do not exist."""
    have = _spark_schema(table_schema)
    by_name = {f.name: f for f in have.fields}
    for f in wanted.fields:
        mine = by_name.get(f.name)
        if mine is None:
            raise SchemaError(
                f"column '{f.name}' is not in version {version} of the table (a concurrent "
                f"change, or a schema given to the reader): load the table again, or pin "
                f"versionAsOf; its columns: {', '.join(by_name)}"
            )
        if mine.dataType != f.dataType:
            raise SchemaError(
                f"column '{f.name}' is {mine.dataType.simpleString()} in version {version} of the "
                f"table, not {f.dataType.simpleString()}: load the table again, or pin versionAsOf"
            )


class NeveReader(DataSourceReader):
    """Reads one pinned version of a table; picklable (Spark ships it to executors)."""

    def __init__(self, address, storage_options, version, table_schema, spark_schema, target_bytes):
        self.address = address
        self.storage_options = storage_options
        self.version = version
        self.table_schema = table_schema
        self.spark_schema = spark_schema
        self.target_bytes = target_bytes
        self.predicate: Optional[str] = None

    def pushFilters(self, filters: List[Filter]) -> Iterator[Filter]:
        """Keep the filters neve can translate exactly, to prune files and rows; return them
        all, since Spark must still apply each one to the rows."""
        parts = [p for p in (_translate(f, self.table_schema) for f in filters) if p is not None]
        self.predicate = " AND ".join(f"({p})" for p in parts) or None
        return iter(filters)

    def _table(self) -> "neve.Table":
        return neve.Table(self.address, self.storage_options or None)

    def partitions(self) -> List[NeveSplit]:
        plan = json.loads(self._table()._t._splits(str(self.version), self.predicate, self.target_bytes))
        return [NeveSplit(s["partition"], s["paths"], s["rows"], s["bytes"]) for s in plan["splits"]]

    def read(self, partition: Optional[NeveSplit]) -> Iterator[pa.RecordBatch]:
        if partition is None:
            return  # no splits: Spark still runs one task, with no partition
        target = to_arrow_schema(self.spark_schema)
        reader = self._table()._t._scan(self.version, partition.paths, self.predicate)
        for batch in reader:
            if batch.num_rows:
                # Safe casts only: a value that would change (a uint64 beyond decimal(20,0)
                # cannot happen; an out-of-range narrowing would) raises instead.
                # By name: the DataFrame's columns may be fewer, or in another order.
                yield pa.RecordBatch.from_arrays(
                    [batch.column(f.name).cast(f.type) for f in target],
                    schema=target,
                )

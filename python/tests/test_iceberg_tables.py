"""Iceberg metadata from Python: a table created with `iceberg=True` is read by pyiceberg with
the same rows, at every version; `iceberg_sync` reports; what Iceberg cannot describe is a
SchemaError that leaves the table as it was."""
import os

import pyarrow as pa
import pytest

import neve


def static(address):
    from pyiceberg.table import StaticTable

    props = {
        "s3.endpoint": os.environ["AWS_ENDPOINT_URL"],
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": "us-east-1",
    }
    if address.startswith("s3://"):
        import boto3

        bucket, prefix = address[len("s3://"):].split("/", 1)
        s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
        n = s3.get_object(Bucket=bucket, Key=f"{prefix}/metadata/version-hint.text")["Body"].read()
    else:
        n = open(os.path.join(address, "metadata", "version-hint.text"), "rb").read()
    return StaticTable.from_metadata(f"{address}/metadata/v{int(n)}.metadata.json", properties=props)


def test_pyiceberg_reads_what_neve_wrote_at_every_version(where):
    t = neve.create_table(where, partition_by="bucket(4, id) as b", sort_by=["id"], iceberg=True)
    t.insert(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]}))
    t.insert(pa.table({"id": pa.array([4, 5], pa.int64()), "name": ["d", "e"]}))
    t.delete("id = 2")
    ice = static(where)
    assert ice.metadata.current_snapshot_id == t.version == 3
    for v, ids in [(1, [1, 2, 3]), (2, [1, 2, 3, 4, 5]), (3, [1, 3, 4, 5])]:
        got = ice.scan(snapshot_id=v).to_arrow().sort_by("id")
        assert got.column("id").to_pylist() == ids
    assert ice.scan(row_filter="id >= 4").to_arrow().num_rows == 2
    report = t.iceberg_sync()
    assert report["up_to_date"] and report["version"] == 3
    rebuilt = t.iceberg_sync(full=True)
    assert rebuilt["version"] == 3 and rebuilt["snapshots"] == 3


def test_a_type_iceberg_cannot_describe_is_refused(tmp_path):
    t = neve.create_table(tmp_path / "t", iceberg=True)
    t.insert(pa.table({"id": pa.array([1], pa.int64())}))
    with pytest.raises(neve.SchemaError, match="uint64"):
        t.insert(pa.table({"id": pa.array([2], pa.int64()), "big": pa.array([2**64 - 1], pa.uint64())}))
    assert t.version == 1
    plain = neve.create_table(tmp_path / "plain")
    with pytest.raises(neve.InvalidInputError, match="iceberg enable"):
        plain.iceberg_sync()


def test_a_replace_table_reads_one_row_per_key_through_iceberg(where):
    # Position deletes hide the rows that lose to another row of their key.
    t = neve.create_table(where, sort_by=["id", "v"], iceberg=True, schema="id bigint, v bigint",
                          merge="replace(key = [id], version = v)")
    t.insert(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array([1, 1, 1], pa.int64())}))
    t.insert(pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([2, 0], pa.int64())}))
    ice = static(where)
    for version in (1, 2):
        ours = sorted(t.sql(f"SELECT id, v FROM {t.name}", as_of=version).to_pylist(), key=lambda r: r["id"])
        got = sorted(ice.scan(snapshot_id=version).to_arrow().to_pylist(), key=lambda r: r["id"])
        assert got == ours
    assert got == [{"id": 1, "v": 2}, {"id": 2, "v": 1}, {"id": 3, "v": 1}]


def test_an_aggregating_table_does_not_write_iceberg_metadata(tmp_path):
    # Its rows are folded from the stored rows of a key: Iceberg cannot describe that.
    merge = "aggregate(key = [id], sum = [n])"
    with pytest.raises(neve.InvalidInputError, match=r"merge semantics .*neve files --format"):
        neve.create_table(tmp_path / "a", sort_by=["id"], merge=merge, iceberg=True,
                          schema="id bigint, n bigint")
    assert not (tmp_path / "a" / "_log").exists() or not any((tmp_path / "a" / "_log").iterdir())
    t = neve.create_table(tmp_path / "b", sort_by=["id"], merge=merge, schema="id bigint, n bigint")
    t.insert(pa.table({"id": pa.array([1, 1], pa.int64()), "n": pa.array([1, 2], pa.int64())}))
    with pytest.raises(neve.InvalidInputError, match="merge semantics"):
        t.alter("set iceberg=true")
    assert t.version == 1 and not (tmp_path / "b" / "metadata").exists()
    assert t.sql("SELECT n FROM b").column("n").to_pylist() == [3]

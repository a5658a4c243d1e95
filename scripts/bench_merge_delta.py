"""delta-rs peer for `neve bench merge`: the same rows appended in the same small inserts
(`write_deltalake(mode="append")`, partitioned by month), then `optimize.compact()` to the same
target size, which is timed. delta-rs compaction bin-packs and does not keep a sort order;
neve's merge does. Prints one JSON object."""
import argparse, json, os, time

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

ap = argparse.ArgumentParser()
ap.add_argument("--input", required=True)
ap.add_argument("--target", required=True)
ap.add_argument("--insert-rows", type=int, required=True)
ap.add_argument("--target-size", type=int, default=512 << 20)
a = ap.parse_args()

table = pa.ipc.open_file(pa.memory_map(a.input)).read_all()
table = table.append_column("d", pc.strftime(table["trip_start_timestamp"], format="%Y-%m"))
opts = None
if a.target.startswith("s3://"):
    opts = {
        "AWS_ENDPOINT_URL": os.environ.get("AWS_ENDPOINT_URL", ""),
        "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", ""),
        "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
        "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
t = time.perf_counter()
for start in range(0, table.num_rows, a.insert_rows):
    write_deltalake(a.target, table.slice(start, a.insert_rows), mode="append",
                    partition_by=["d"], storage_options=opts)
load_s = time.perf_counter() - t
dt = DeltaTable(a.target, storage_options=opts)
files_before = len(dt.file_uris())
t = time.perf_counter()
metrics = dt.optimize.compact(target_size=a.target_size)
compact_s = time.perf_counter() - t
added = metrics.get("filesAdded") or {}
if isinstance(added, str):
    added = json.loads(added)
print(json.dumps({
    "load_s": load_s, "compact_s": compact_s, "files_before": files_before,
    "files_removed": metrics.get("numFilesRemoved"), "files_added": metrics.get("numFilesAdded"),
    "bytes_out": added.get("totalSize"),
}))

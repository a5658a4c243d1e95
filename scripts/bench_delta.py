"""delta-rs peer for `neve bench ingest` and `neve bench nested`: write_deltalake of the same
Arrow data, partitioned by a string derived from a timestamp column (month by default). Reading the IPC file and deriving the partition column are not timed; only
write_deltalake is. Prints one JSON object: {"runs_s": [...]}."""
import argparse, json, os, time

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake

ap = argparse.ArgumentParser()
ap.add_argument("--input", required=True)
ap.add_argument("--target", required=True)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--ts-column", default="trip_start_timestamp")
ap.add_argument("--ts-format", default="%Y-%m")
a = ap.parse_args()

table = pa.ipc.open_file(a.input).read_all()
table = table.append_column("d", pc.strftime(table[a.ts_column], format=a.ts_format))
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
runs = []
for i in range(a.runs):
    t = time.perf_counter()
    write_deltalake(f"{a.target}-{i}", table, partition_by=["d"], storage_options=opts)
    runs.append(time.perf_counter() - t)
print(json.dumps({"runs_s": runs}))

"""neve's `t.insert` and delta-rs's `write_deltalake` of one in-memory table, by turns in one
process, each run's wall time, CPU and (with --minio-pid) MinIO's CPU printed, then the medians.
What `BENCHMARKS.md` (issue 15, "Twenty-first session") compares builds with:

    python bench/python_insert_turns.py --arrow taxi.arrow --target DIR_OR_S3 --rounds 3 \
        --variant neve --variant delta [--variant neve:NAME=VALUE ...] [--minio-pid PID]

`taxi.arrow` from `neve bench gen taxi.arrow --rows N`, cut into batches of 65,536 rows as in
bench/python_ingest.py. A variant `neve:NAME=VALUE` runs neve with that environment variable
set for its inserts (for a build patched to read one); `neve` with none. For S3 the endpoint
and keys come from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION.
Tables are month-partitioned and sorted as in bench/python_ingest.py; they are left in place.
"""
import argparse
import os
import resource
import statistics
import time
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arrow", required=True)
    ap.add_argument("--target", required=True, help="a local folder or s3://bucket/prefix")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--minio-pid", type=int)
    a = ap.parse_args()
    with open(a.arrow, "rb") as f:
        tbl = ipc.open_file(pa.BufferReader(f.read())).read_all()
    tbl = pa.Table.from_batches(tbl.to_batches(max_chunksize=65_536))

    def minio_cpu():
        if not a.minio_pid:
            return 0.0
        f = open(f"/proc/{a.minio_pid}/stat").read().split()
        return (int(f[13]) + int(f[14])) / os.sysconf("SC_CLK_TCK")

    s3 = a.target.startswith("s3://")
    env = os.environ
    secs = {}
    for r in range(a.rounds):
        for v in a.variant:
            uri = f"{a.target}/turns-{uuid.uuid4().hex[:8]}"
            if v == "delta":
                from deltalake import write_deltalake
                with_month = tbl.append_column(
                    "d", pc.strftime(tbl.column("trip_start_timestamp"), format="%Y-%m"))
                opts = None
                if s3:
                    opts = {k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
                                                "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
                    opts.update(AWS_ALLOW_HTTP="true", AWS_S3_ALLOW_UNSAFE_RENAME="true")
                c0, m0, t0 = cpu(), minio_cpu(), time.perf_counter()
                write_deltalake(uri, with_month, partition_by=["d"], storage_options=opts)
            else:
                import neve
                name, _, setting = v.partition(":")
                assert name == "neve", f"unknown variant {v}"
                key, _, value = setting.partition("=")
                if key:
                    env[key] = value
                kw = {}
                if s3:
                    kw["storage_options"] = {
                        "endpoint_url": env["AWS_ENDPOINT_URL"],
                        "access_key_id": env["AWS_ACCESS_KEY_ID"],
                        "secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
                        "region": env.get("AWS_REGION", "us-east-1"), "allow_http": "true"}
                t = neve.create_table(uri, partition_by="month(trip_start_timestamp) as d",
                                      sort_by=["payment_type", "trip_start_timestamp"], **kw)
                c0, m0, t0 = cpu(), minio_cpu(), time.perf_counter()
                t.insert(tbl)
                if key:
                    del env[key]
            wall = time.perf_counter() - t0
            print(f"round {r + 1} {v}: {wall:.2f} s, CPU {cpu() - c0:.2f} s, "
                  f"MinIO CPU {minio_cpu() - m0:.2f} s", flush=True)
            secs.setdefault(v, []).append(wall)
    for v, s in secs.items():
        print(f"{v}: median {statistics.median(s):.2f} s")


if __name__ == "__main__":
    main()

"""MinIO's CPU for the same bytes as many small objects or as few large ones (issue 15).

Prints figures, asserts nothing. Run against a MinIO started by hand, with its pid:

    python bench/minio_objects.py --pid PID --endpoint http://127.0.0.1:PORT \
        [--bytes 1050000000] [--objects 924,132] [--rounds 3]

Each round PUTs the same random bytes, eight at a time, once per object count; MinIO's CPU
time is read from /proc/PID/stat around each.
"""

import argparse
import concurrent.futures as cf
import os
import time

import boto3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--bytes", type=int, default=1_050_000_000)
    ap.add_argument("--objects", default="924,132")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket", default="minio-objects")
    a = ap.parse_args()
    s3 = boto3.client(
        "s3",
        endpoint_url=a.endpoint,
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "neveadmin"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "nevesecret123"),
        region_name="us-east-1",
    )
    try:
        s3.create_bucket(Bucket=a.bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    tick = os.sysconf("SC_CLK_TCK")

    def cpu():
        fields = open(f"/proc/{a.pid}/stat").read().split(")")[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    data = os.urandom(a.bytes)
    for r in range(a.rounds):
        for n in (int(x) for x in a.objects.split(",")):
            size = a.bytes // n
            c0, t0 = cpu(), time.perf_counter()
            with cf.ThreadPoolExecutor(8) as ex:
                list(
                    ex.map(
                        lambda i: s3.put_object(
                            Bucket=a.bucket, Key=f"r{r}n{n}/{i}", Body=data[i * size : (i + 1) * size]
                        ),
                        range(n),
                    )
                )
            print(
                f"round {r}: {n} objects of {size / 1e6:.2f} MB: MinIO {cpu() - c0:.2f} CPU-s, "
                f"{time.perf_counter() - t0:.2f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()

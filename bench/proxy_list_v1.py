"""Warm listings of a 10,000-file table through `neve proxy`, ListObjectsV2 and ListObjects
(v1), from one or more builds in turns: what `BENCHMARKS.md` (issue 16, "ListObjects (v1) from
the kept elements too") compares. Each round starts a fresh proxy of each build on a local
folder (no link, no MinIO), lists the table once with each version, then `--listings` more
times, and prints the medians. Pages are fetched with SigV4-signed plain requests, and only
the next page's token or marker is read from them, so the time is the server's.

    python bench/proxy_list_v1.py --warehouse /tmp/lw10k --neve-bin OLD --neve-bin NEW \\
        [--rounds 3] [--listings 15]

The table `<warehouse>/listing10000` is made as `neve bench proxy` makes it (one insert of
10,000 rows, one file per partition) when it is not there.
"""
import argparse
import http.client
import os
import re
import statistics
import subprocess
import time
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import proxy as bp

KEY, SECRET = "AKBENCH", "bench-secret-123"
FILES = 10_000


def listing(endpoint, bucket, version):
    """Page through the whole listing; how many keys it held."""
    creds = Credentials(KEY, SECRET)
    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    n, token = 0, None
    while True:
        q = {"list-type": "2"} if version == 2 else {}
        if token:
            q["continuation-token" if version == 2 else "marker"] = token
        query = urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
        url = f"{endpoint}/{bucket}" + (f"?{query}" if query else "")
        req = AWSRequest(method="GET", url=url)
        S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
        conn.request("GET", url[len(endpoint):], headers=dict(req.headers))
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body[:300]
        n += body.count(b"<Key>")
        tag = rb"NextContinuationToken" if version == 2 else rb"NextMarker"
        m = re.search(rb"<" + tag + rb">([^<]+)</" + tag + rb">", body)
        if not m:
            break
        token = m.group(1).decode()
    conn.close()
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--warehouse", required=True, help="a local folder")
    ap.add_argument("--neve-bin", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--listings", type=int, default=15)
    a = ap.parse_args()

    table = os.path.join(a.warehouse, f"listing{FILES}")
    bp.listing_table(a.neve_bin[0], table, FILES)
    bucket = os.path.basename(table)
    for r in range(a.rounds):
        for b in a.neve_bin:
            proc = subprocess.Popen(
                [b, "proxy", "--warehouse", a.warehouse, "--listen", "127.0.0.1:0",
                 "--access-key-id", KEY, "--secret-access-key", SECRET],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            endpoint = proc.stdout.readline().split()[-1]
            try:
                medians = []
                for version in (2, 1):
                    listing(endpoint, bucket, version)
                    times = []
                    for _ in range(a.listings):
                        t = time.perf_counter()
                        assert listing(endpoint, bucket, version) == FILES
                        times.append(time.perf_counter() - t)
                    medians.append(f"v{version} {statistics.median(times) * 1000:.1f} ms")
            finally:
                proc.terminate()
                proc.wait()
            print(f"round {r + 1}  {b}  " + "  ".join(medians), flush=True)


if __name__ == "__main__":
    main()

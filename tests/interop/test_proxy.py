"""`neve proxy`: a warehouse's tables as read-only S3 buckets, read by real clients (boto3,
DuckDB httpfs, chdb's s3(), pyarrow's S3FileSystem) through the built binary, over MinIO; and
everything it must refuse, refused with the S3 error code."""
import datetime
import http.client
import urllib.parse
import json
import os
import subprocess
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from test_seed_queries import QUERIES, assert_same_answers, norm

ROWS = 200_000
ACME = ("AKIAACME", "acme-secret-123")
ACME_TAXI_ONLY = ("AKIAACMETAXI", "acme-taxi-secret")
GLOBEX = ("AKIAGLOBEX", "globex-secret-123")


class Response:
    def __init__(self, status, body, headers=()):
        self.status_code, self.content = status, body
        self.text = body.decode(errors="replace")[:2000]
        self.headers = {k.lower(): v for k, v in headers}


def raw_request(method, url, headers=None):
    """One plain HTTP request with the path sent as given (no dot-segment clean-up, which
    other clients do before sending), so the proxy sees what an attacker would send."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    target = u.path + (f"?{u.query}" if u.query else "")
    conn.request(method, target, headers=headers or {})
    r = conn.getresponse()
    out = Response(r.status, r.read(), r.getheaders())
    conn.close()
    return out


def _run(neve_bin, *args):
    p = subprocess.run([neve_bin, *map(str, args)], capture_output=True, text=True)
    assert p.returncode == 0, f"neve {args}: {p.stderr}"
    return p.stdout


class Proxy:
    """`neve proxy` on a free port; stopped with SIGTERM."""

    def __init__(self, neve_bin, *args, env=None):
        self.proc = subprocess.Popen(
            [neve_bin, "proxy", "--listen", "127.0.0.1:0", *map(str, args)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            self.proc.kill()
            raise AssertionError(f"proxy did not start: {line} {self.proc.stderr.read()}")
        self.url = line.strip().split()[-1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def lake(neve_bin, tmp_path_factory):
    """A warehouse on MinIO with two tenants: acme (taxi, events, and metrics/cpu) and
    globex (its own taxi)."""
    base = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}"
    d = tmp_path_factory.mktemp("proxy")
    for tenant in ("acme", "globex"):
        table = f"{base}/{tenant}/taxi"
        _run(neve_bin, "create", table, "--partition-by", "month(trip_start_timestamp) as d",
             "--sort-by", "payment_type,trip_start_timestamp")
        for seed in (1, 2):
            path = d / f"taxi-{seed}.parquet"
            if not path.exists():
                _run(neve_bin, "bench", "gen", path, "--rows", ROWS // 2, "--seed", seed)
            _run(neve_bin, "insert", table, path)
    rows = d / "events.ndjson"
    rows.write_text("".join(json.dumps({"id": i, "kind": f"k{i % 3}"}) + "\n" for i in range(30)))
    for t in ("events", "metrics/cpu"):
        _run(neve_bin, "create", f"{base}/acme/{t}", "--partition-by", "kind")
        _run(neve_bin, "insert", f"{base}/acme/{t}", rows)
    config = d / "neve.toml"
    config.write_text(f"""
warehouse = "{base}"
[proxy]
removed_files_readable = "10m"
[[tenants]]
name = "acme"
access_keys = [
  {{ id = "{ACME[0]}", secret = "{ACME[1]}" }},
  {{ id = "{ACME_TAXI_ONLY[0]}", secret_env = "ACME_TAXI_SECRET", buckets = ["taxi"] }},
]
[[tenants]]
name = "globex"
access_keys = [{{ id = "{GLOBEX[0]}", secret = "{GLOBEX[1]}" }}]
""")
    proxy = Proxy(neve_bin, "--config", config, env={"ACME_TAXI_SECRET": ACME_TAXI_ONLY[1]})
    yield {"base": base, "url": proxy.url, "config": config}
    proxy.stop()


def s3(lake, key=ACME, **kw):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=lake["url"], aws_access_key_id=key[0], aws_secret_access_key=key[1],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                      signature_version=kw.pop("signature_version", "s3v4"), **kw),
    )


def alive_keys(neve_bin, table):
    """The table's alive files relative to `_data/`, as `neve files` lists them."""
    out = _run(neve_bin, "files", table, "--format", "json")
    return sorted(f["path"].removeprefix("_data/") for f in json.loads(out)["files"])


def code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def test_list_buckets_shows_the_keys_tables(lake):
    names = sorted(b["Name"] for b in s3(lake).list_buckets()["Buckets"])
    assert names == ["events", "metrics.cpu", "taxi"]
    assert [b["Name"] for b in s3(lake, ACME_TAXI_ONLY).list_buckets()["Buckets"]] == ["taxi"]
    assert [b["Name"] for b in s3(lake, GLOBEX).list_buckets()["Buckets"]] == ["taxi"]


def test_listing_is_the_alive_files_with_prefix_delimiter_and_paging(neve_bin, lake):
    c = s3(lake)
    want = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")
    assert len(want) >= 10
    pages = list(c.get_paginator("list_objects_v2").paginate(Bucket="taxi", PaginationConfig={"PageSize": 3}))
    assert len(pages) > 3
    got = [o["Key"] for p in pages for o in p.get("Contents", [])]
    assert got == want
    # Sizes and ETags as HEAD reports them.
    first = pages[0]["Contents"][0]
    head = c.head_object(Bucket="taxi", Key=first["Key"])
    assert head["ContentLength"] == first["Size"]
    assert head["ETag"] == first["ETag"]
    # Delimiter: one common prefix per month folder.
    r = c.list_objects_v2(Bucket="taxi", Delimiter="/")
    folders = [p["Prefix"] for p in r["CommonPrefixes"]]
    assert folders == sorted({k.split("/")[0] + "/" for k in want})
    assert "Contents" not in r
    # Prefix and start-after.
    month = folders[1]
    r = c.list_objects_v2(Bucket="taxi", Prefix=month)
    assert [o["Key"] for o in r["Contents"]] == [k for k in want if k.startswith(month)]
    r = c.list_objects_v2(Bucket="taxi", StartAfter=want[4])
    assert [o["Key"] for o in r["Contents"]] == want[5:]
    # ListObjects (v1) with a marker.
    r = c.list_objects(Bucket="taxi", MaxKeys=4)
    assert [o["Key"] for o in r["Contents"]] == want[:4] and r["IsTruncated"]
    r = c.list_objects(Bucket="taxi", Marker=want[3])
    assert [o["Key"] for o in r["Contents"]] == want[4:]
    pages = list(c.get_paginator("list_objects").paginate(Bucket="taxi", PaginationConfig={"PageSize": 3}))
    assert len(pages) > 3
    assert [o["Key"] for p in pages for o in p.get("Contents", [])] == want
    r = c.list_objects(Bucket="taxi", Delimiter="/")
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == folders and "Contents" not in r
    # Paged by NextMarker, which is a common prefix here: each folder once.
    pages = list(c.get_paginator("list_objects").paginate(
        Bucket="taxi", Delimiter="/", PaginationConfig={"PageSize": 2}))
    assert len(pages) > 2
    assert [p["Prefix"] for page in pages for p in page.get("CommonPrefixes", [])] == folders
    # A nested table is a dotted bucket name.
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="metrics.cpu")["Contents"]]
    assert sorted(k.split("/")[0] for k in keys) == ["kind=k0", "kind=k1", "kind=k2"]
    assert c.get_bucket_location(Bucket="taxi")["LocationConstraint"] in (None, "")


def test_get_ranged_get_and_presigned_get_serve_the_files_bytes(neve_bin, lake):
    import boto3

    c = s3(lake)
    key = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")[0]
    body = c.get_object(Bucket="taxi", Key=key)["Body"].read()
    direct = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    bucket = os.environ["NEVE_TEST_BUCKET"]
    prefix = lake["base"].removeprefix(f"s3://{bucket}/")
    assert body == direct.get_object(Bucket=bucket, Key=f"{prefix}/acme/taxi/_data/{key}")["Body"].read()
    assert body[:4] == b"PAR1" and body[-4:] == b"PAR1"
    r = c.get_object(Bucket="taxi", Key=key, Range="bytes=100-199")
    assert r["Body"].read() == body[100:200]
    assert r["ContentRange"] == f"bytes 100-199/{len(body)}"
    assert c.get_object(Bucket="taxi", Key=key, Range="bytes=-8")["Body"].read() == body[-8:]
    url = c.generate_presigned_url("get_object", Params={"Bucket": "taxi", "Key": key}, ExpiresIn=300)
    r = raw_request("GET", url)
    assert r.status_code == 200 and r.content == body, r.text
    with pytest.raises(Exception) as e:
        c.get_object(Bucket="taxi", Key="d=1999-01/nope.parquet")
    assert code(e) == "NoSuchKey"
    # Preconditions as RFC 9110 has them, lists of tags included.
    etag = c.head_object(Bucket="taxi", Key=key)["ETag"]
    url = f"{lake['url']}/taxi/{urllib.parse.quote(key)}"
    future, past = "Sun, 01 Jan 2090 00:00:00 GMT", "Sat, 01 Jan 2000 00:00:00 GMT"
    for headers, status in (
        ({"If-None-Match": f'"nope", {etag}'}, 304),
        ({"If-None-Match": f"W/{etag}"}, 304),
        ({"If-None-Match": '"nope"'}, 200),
        ({"If-Match": f'"nope", {etag}'}, 200),
        ({"If-Match": f"W/{etag}"}, 412),
        # A tag without its quotes, as S3 takes it (AWS SDK for Java v1 sends them so).
        ({"If-Match": etag.strip('"')}, 200),
        ({"If-None-Match": etag.strip('"')}, 304),
        ({"If-Modified-Since": future}, 304),
        ({"If-Modified-Since": past}, 200),
        ({"If-Unmodified-Since": past}, 412),
        ({"If-Unmodified-Since": future}, 200),
        ({"If-Match": etag, "If-Unmodified-Since": past}, 200),
        ({"If-None-Match": '"nope"', "If-Modified-Since": future}, 200),
    ):
        for method in ("GET", "HEAD"):
            r = _sigv4(url, headers=headers, method=method)
            assert r.status_code == status, (method, headers, r.status_code, r.text)
            if status == 304:
                assert r.headers.get("etag") == etag, r.headers
    r = _sigv4(url, headers={"Range": f"bytes={len(body) + 10}-"})
    assert r.status_code == 416 and r.headers.get("content-range") == f"bytes */{len(body)}", r.headers
    # HEAD with a range answers as S3 (here MinIO) does: 206, the range's length, 416 past the end.
    real = f"{prefix}/acme/taxi/_data/{key}"
    for rng in ("bytes=100-199", "bytes=-8", f"bytes={len(body) - 10}-"):
        got, want = c.head_object(Bucket="taxi", Key=key, Range=rng), direct.head_object(Bucket=bucket, Key=real, Range=rng)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == want["ResponseMetadata"]["HTTPStatusCode"] == 206, rng
        assert (got["ContentLength"], got["ContentRange"]) == (want["ContentLength"], want["ContentRange"]), rng
    r = _sigv4(url, headers={"Range": f"bytes={len(body) + 10}-"}, method="HEAD")
    assert r.status_code == 416, r.headers
    # No versions and no parts: refused, not answered with the whole object.
    for kw in ({"VersionId": "xyz"}, {"PartNumber": 2}):
        with pytest.raises(Exception) as e:
            c.get_object(Bucket="taxi", Key=key, **kw)
        assert code(e) == "InvalidArgument", kw
    assert c.get_object(Bucket="taxi", Key=key, VersionId="null")["Body"].read() == body


def test_a_range_s3_does_not_understand_is_answered_as_s3_answers_it(neve_bin, lake):
    """A list of ranges, a typo or a missing `bytes=`: S3 serves the whole object (200), and a
    range that ends before it starts is `InvalidRange` (416). MinIO, the S3 at hand, is the
    reference: the proxy answers each as it does, GET and HEAD, conditions still applied."""
    c = s3(lake)
    key = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")[0]
    body = c.get_object(Bucket="taxi", Key=key)["Body"].read()
    plain = _sigv4(f"{lake['url']}/taxi/{urllib.parse.quote(key)}")
    bucket = os.environ["NEVE_TEST_BUCKET"]
    prefix = lake["base"].removeprefix(f"s3://{bucket}/")
    real = f"{os.environ['AWS_ENDPOINT_URL']}/{bucket}/{urllib.parse.quote(f'{prefix}/acme/taxi/_data/{key}')}"
    minio = (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    url = f"{lake['url']}/taxi/{urllib.parse.quote(key)}"
    for rng in ("bytes=0-1,3-4", "bytes=abc", "bytes=5", "bites=0-9", "bytes=-", "bytes=+1-5",
                "bytes=0-", "bytes=10-5", "bytes=100-199,300-"):
        for method in ("GET", "HEAD"):
            got = _sigv4(url, headers={"Range": rng}, method=method)
            want = _sigv4(real, key=minio, headers={"Range": rng}, method=method)
            assert got.status_code == want.status_code, (rng, method, got.status_code, want.status_code, got.text)
            if got.status_code in (200, 206):
                for h in ("content-length", "content-range"):
                    assert got.headers.get(h) == want.headers.get(h), (rng, method, h)
            if got.status_code == 200:
                assert got.content == (body if method == "GET" else b""), (rng, method)
                # The same answer as a read without a range, header for header.
                for h in ("etag", "last-modified", "content-type", "accept-ranges", "content-length"):
                    assert got.headers.get(h) == plain.headers.get(h), (rng, method, h)
            elif got.status_code == 206:  # `bytes=0-`, a range both read
                assert got.content == want.content, (rng, method)
            else:
                assert got.status_code == 416, (rng, method, got.text)
                assert method == "HEAD" or b"InvalidRange" in got.content, (rng, method, got.text)
    # Conditions still hold, and the policy still runs on the exact key.
    etag = plain.headers["etag"]
    assert _sigv4(url, headers={"Range": "bytes=0-1,3-4", "If-None-Match": etag}).status_code == 304
    assert _sigv4(url, headers={"Range": "bytes=0-1,3-4", "If-Match": '"nope"'}).status_code == 412
    r = _sigv4(f"{lake['url']}/taxi/d%3D1999-01/nope.parquet", headers={"Range": "bytes=abc"})
    assert r.status_code == 404 and b"NoSuchKey" in r.content, r.text
    r = _sigv4(f"{lake['url']}/events/kind%3Dk0/x.parquet", key=ACME_TAXI_ONLY, headers={"Range": "bytes=abc"})
    assert r.status_code == 403 and b"AccessDenied" in r.content, r.text
    r = _sigv4(url, key=(ACME[0], "wrong"), headers={"Range": "bytes=abc"})
    assert r.status_code == 403 and b"SignatureDoesNotMatch" in r.content, r.text
    r = _sigv4(f"{lake['url']}/taxi/d%3D2021-08/%2e%2e/%2e%2e/globex/taxi/_data/{urllib.parse.quote(key)}",
               headers={"Range": "bytes=abc"})
    assert r.status_code in (400, 403, 404) and body not in r.content, r.text


@pytest.mark.parametrize("q", QUERIES, ids=[q["name"] for q in QUERIES])
def test_duckdb_and_chdb_through_the_proxy_answer_as_neve_does(q, neve, lake, tmp_path):
    import chdb
    import duckdb
    import duckdb_ext  # noqa: F401
    import pathlib

    table = f"{lake['base']}/acme/taxi"
    ours = norm(json.loads(neve("sql", q["neve"].format(table="taxi"), "--table", f"taxi={table}",
                                "--format", "json").stdout))
    host = lake["url"].removeprefix("http://")
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{pathlib.Path(list(duckdb_ext.__path__)[0]) / 'extensions'}'")
    con.execute("LOAD httpfs")
    con.execute(f"""CREATE SECRET proxy (TYPE s3, KEY_ID '{ACME[0]}', SECRET '{ACME[1]}', ENDPOINT '{host}',
                    URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')""")
    cur = con.execute(q["duckdb"].format(
        table="read_parquet('s3://taxi/**/*.parquet', hive_partitioning = true)"))
    names = [c[0] for c in cur.description]
    duck = norm([dict(zip(names, r)) for r in cur.fetchall()])
    ch_table = f"s3('{lake['url']}/taxi/**/*.parquet', '{ACME[0]}', '{ACME[1]}', 'Parquet')"
    out = str(chdb.query(q["clickhouse"].format(table=ch_table), "JSONEachRow"))
    ch = norm([json.loads(l) for l in out.splitlines() if l.strip()])
    if q["name"] == "limit_1000":
        assert len(ours) == len(duck) == len(ch) == 1000
        return
    assert_same_answers(ours, {"duckdb": duck, "chdb": ch})


def test_pyarrow_s3filesystem_reads_a_file_and_the_bucket_as_a_dataset(neve_bin, lake):
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyarrow import fs

    f = fs.S3FileSystem(access_key=ACME[0], secret_key=ACME[1], endpoint_override=lake["url"],
                        scheme="http", region="us-east-1")
    key = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")[0]
    t = pq.read_table(f"taxi/{key}", filesystem=f)
    assert t.num_rows > 0 and "payment_type" in t.column_names
    # The whole bucket as a dataset: pyarrow asks HeadBucket first.
    d = ds.dataset("taxi", filesystem=f, format="parquet", partitioning="hive")
    assert d.count_rows() == ROWS
    assert s3(lake).head_bucket(Bucket="taxi")["ResponseMetadata"]["HTTPStatusCode"] == 200
    for key, bucket, err in ((ACME, "nope", "404"), (ACME_TAXI_ONLY, "events", "403")):
        with pytest.raises(Exception) as e:
            s3(lake, key).head_bucket(Bucket=bucket)
        assert code(e) == err, e.value


def test_a_pinned_listing_stays_readable_through_merge_and_gc(neve_bin, neve, lake, tmp_path):
    """A reader lists version V, the table is merged and gc'd; every file V listed still reads
    (gc keeps them for its grace), and `bucket--vV` answers as before."""
    table = f"{lake['base']}/acme/events"
    c = s3(lake)
    # Two more inserts, so the merge has something to do.
    rows = tmp_path / "more.ndjson"
    rows.write_text("".join(json.dumps({"id": 100 + i, "kind": f"k{i % 3}"}) + "\n" for i in range(30)))
    _run(neve_bin, "insert", table, rows)
    version = json.loads(neve("info", table, "--json").stdout)["version"]
    pinned = f"events--v{version}"
    def pinned_rows():
        """Every row the pinned bucket serves, read from its objects' bytes."""
        out = []
        for o in c.list_objects_v2(Bucket=pinned)["Contents"]:
            body = c.get_object(Bucket=pinned, Key=o["Key"])["Body"].read()
            out += pq.read_table(pa.BufferReader(body), columns=["id"]).column("id").to_pylist()
        return sorted(out)

    answer = pinned_rows()
    out = neve("sql", "SELECT id FROM t ORDER BY id", "--table", f"t={table}", "--as-of", version,
               "--format", "ndjson").stdout
    assert answer == [json.loads(line)["id"] for line in out.splitlines()] and answer
    objects = c.list_objects_v2(Bucket="events", MaxKeys=2)["Contents"]
    listed = [o["Key"] for o in objects]
    page1 = c.list_objects_v2(Bucket="events", MaxKeys=2)
    bodies = {k: c.get_object(Bucket="events", Key=k)["Body"].read() for k in listed}
    time.sleep(1.1)  # the merge's time is not the files' Last-Modified, to the second
    _run(neve_bin, "merge", table, "--min-files", "2")
    _run(neve_bin, "gc", table, "--grace", "1h", "--retention", "0s")
    # The latest listing changed; the old files are still served, and the listing that began
    # before the merge goes on in its snapshot.
    assert [o["Key"] for o in c.list_objects_v2(Bucket="events")["Contents"]] != listed
    for o in objects:
        got = c.get_object(Bucket="events", Key=o["Key"])
        assert got["Body"].read() == bodies[o["Key"]]
        # As listed: an object's ETag and Last-Modified do not change when its table drops it.
        assert (got["ETag"], got["LastModified"]) == (o["ETag"], o["LastModified"].replace(microsecond=0)), o
    page2 = c.list_objects_v2(Bucket="events", MaxKeys=100, ContinuationToken=page1["NextContinuationToken"])
    before = [o["Key"] for o in page1["Contents"] + page2["Contents"]]
    assert [o["Key"] for o in c.list_objects_v2(Bucket=pinned)["Contents"]] == before
    for k in before:
        c.head_object(Bucket=pinned, Key=k)
    # The pinned version's answer has not changed.
    assert pinned_rows() == answer


# --- Refusals -------------------------------------------------------------------------------


def test_wrong_secret_and_unknown_key_are_refused(lake):
    with pytest.raises(Exception) as e:
        s3(lake, (ACME[0], "not-the-secret")).list_objects_v2(Bucket="taxi")
    assert code(e) == "SignatureDoesNotMatch"
    with pytest.raises(Exception) as e:
        s3(lake, ("AKIANOBODY", "whatever-secret")).list_objects_v2(Bucket="taxi")
    assert code(e) == "InvalidAccessKeyId"


def test_another_tenants_bucket_is_not_reachable(neve_bin, lake):
    """globex's `taxi` is globex's own table; acme's key limited to taxi cannot read events."""
    acme_keys = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")
    globex_keys = [o["Key"] for o in s3(lake, GLOBEX).list_objects_v2(Bucket="taxi")["Contents"]]
    assert set(globex_keys).isdisjoint(acme_keys)
    with pytest.raises(Exception) as e:
        s3(lake, GLOBEX).get_object(Bucket="taxi", Key=acme_keys[0])
    assert code(e) == "NoSuchKey"
    for bucket in ("events", "metrics.cpu"):
        with pytest.raises(Exception) as e:
            s3(lake, ACME_TAXI_ONLY).list_objects_v2(Bucket=bucket)
        assert code(e) == "AccessDenied"
    with pytest.raises(Exception) as e:
        s3(lake, GLOBEX).list_objects_v2(Bucket="events")
    assert code(e) == "NoSuchBucket"


def test_every_write_is_refused_and_changes_nothing(neve_bin, lake):
    c = s3(lake)
    before = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")
    calls = [
        lambda: c.put_object(Bucket="taxi", Key="d=2021-08/evil.parquet", Body=b"x"),
        lambda: c.delete_object(Bucket="taxi", Key=before[0]),
        lambda: c.delete_objects(Bucket="taxi", Delete={"Objects": [{"Key": before[0]}]}),
        lambda: c.create_bucket(Bucket="newtable"),
        lambda: c.copy_object(Bucket="taxi", Key="copy.parquet", CopySource={"Bucket": "taxi", "Key": before[0]}),
        lambda: c.create_multipart_upload(Bucket="taxi", Key="x.parquet"),
        lambda: c.delete_bucket(Bucket="taxi"),
    ]
    for call in calls:
        with pytest.raises(Exception) as e:
            call()
        assert code(e) == "AccessDenied", e.value
    with pytest.raises(Exception) as e:
        c.get_bucket_acl(Bucket="taxi")
    assert code(e) == "NotImplemented"
    assert alive_keys(neve_bin, f"{lake['base']}/acme/taxi") == before
    assert [o["Key"] for o in c.list_objects_v2(Bucket="taxi")["Contents"]] == before


def test_a_refused_write_closes_its_connection(lake):
    """boto3 sends PutObject with `Expect: 100-continue` and, once refused, never sends the body
    but reuses the connection. The proxy must close it: kept open, the next request's first
    byte was read as the unsent body (a DeleteObject arrived as `ELETE` and failed its
    signature)."""
    import socket

    u = urllib.parse.urlsplit(lake["url"])
    with socket.create_connection((u.hostname, u.port), timeout=20) as sock:
        sock.sendall(
            f"PUT /taxi/d=2021-08/evil.parquet HTTP/1.1\r\nHost: {u.netloc}\r\n"
            "Content-Length: 1\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    # A `100 Continue` interim answer may come first; the final answer is the last head.
    head = received.split(b"\r\n\r\n")[-2].decode().lower()
    assert head.startswith("http/1.1 403"), received
    assert "connection: close" in head, received


def test_anonymous_and_sigv2_requests_are_refused(lake):
    r = raw_request("GET", f"{lake['url']}/taxi?list-type=2")
    assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text
    r = raw_request("GET", f"{lake['url']}/")
    assert r.status_code == 403
    # A correctly computed SigV2 signature is still refused.
    from botocore.auth import HmacV1Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    for url in (f"{lake['url']}/taxi", f"{lake['url']}/taxi?list-type=2"):
        req = AWSRequest(method="GET", url=url)
        HmacV1Auth(Credentials(*ACME)).add_auth(req)
        r = raw_request("GET", req.url, headers=dict(req.headers))
        assert r.status_code == 403 and "<Code>AccessDenied</Code>" in r.text, r.text
    # And a SigV2 presigned URL (what botocore makes when not told s3v4).
    v2 = s3(lake, signature_version="s3").generate_presigned_url(
        "list_objects", Params={"Bucket": "taxi"}, ExpiresIn=300)
    assert "Signature=" in v2 and "X-Amz-Signature" not in v2
    r = raw_request("GET", v2)
    assert r.status_code == 403 and "<Code>" in r.text and b"<ListBucketResult" not in r.content, r.text


def _sigv4(url, key=ACME, when=None, headers=None, method="GET"):
    """A SigV4-signed request, optionally at another time (for clock skew)."""
    from unittest import mock

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method=method, url=url, headers=headers or {})
    if when is None:
        S3SigV4Auth(Credentials(*key), "s3", "us-east-1").add_auth(req)
    else:
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            S3SigV4Auth(Credentials(*key), "s3", "us-east-1").add_auth(req)
    return raw_request(method, req.url, headers=dict(req.headers))


def test_clock_skew_over_15_minutes_is_refused(lake):
    url = f"{lake['url']}/taxi?list-type=2"
    assert _sigv4(url).status_code == 200
    now = datetime.datetime.now(datetime.timezone.utc)
    assert _sigv4(url, when=now - datetime.timedelta(minutes=10)).status_code == 200
    for off in (-20, 20):
        r = _sigv4(url, when=now + datetime.timedelta(minutes=off))
        assert r.status_code == 403 and "RequestTimeTooSkewed" in r.text, r.text


def test_expired_tampered_and_overlong_presigned_urls_are_refused(neve_bin, lake):
    c = s3(lake)
    keys = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")
    url = c.generate_presigned_url("get_object", Params={"Bucket": "taxi", "Key": keys[0]}, ExpiresIn=1)
    import time

    time.sleep(2.5)
    r = raw_request("GET", url)
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text
    url = c.generate_presigned_url("get_object", Params={"Bucket": "taxi", "Key": keys[0]}, ExpiresIn=300)
    tampered = url.replace("X-Amz-Expires=300", "X-Amz-Expires=30000")
    assert tampered != url
    r = raw_request("GET", tampered)
    assert r.status_code == 403 and "SignatureDoesNotMatch" in r.text, r.text
    long = c.generate_presigned_url("get_object", Params={"Bucket": "taxi", "Key": keys[0]},
                                    ExpiresIn=8 * 24 * 3600)
    r = raw_request("GET", long)
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text
    # The same for listings, which the proxy answers on a route of its own.
    listing = c.generate_presigned_url("list_objects_v2", Params={"Bucket": "taxi"}, ExpiresIn=300)
    r = raw_request("GET", listing)
    assert r.status_code == 200 and b"<ListBucketResult" in r.content, r.text
    r = raw_request("GET", listing.replace("X-Amz-Expires=300", "X-Amz-Expires=30000"))
    assert r.status_code == 403 and "SignatureDoesNotMatch" in r.text, r.text
    long = c.generate_presigned_url("list_objects_v2", Params={"Bucket": "taxi"}, ExpiresIn=8 * 24 * 3600)
    r = raw_request("GET", long)
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text
    # The cap holds for every spelling of the parameter, not the first one found: a URL signed
    # for 8 days with a lowercase `x-amz-expires=60` of its own.
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="GET", url=f"{lake['url']}/taxi/{keys[0]}?x-amz-expires=60")
    S3SigV4QueryAuth(Credentials(*ACME), "s3", "us-east-1", expires=8 * 24 * 3600).add_auth(req)
    r = raw_request("GET", req.url)
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text


def test_a_forged_continuation_token_is_refused(lake):
    import base64

    c = s3(lake)
    page = c.list_objects_v2(Bucket="taxi", MaxKeys=1)
    token = page["NextContinuationToken"]
    body, tag = token.split(".")
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
    forged_body = base64.urlsafe_b64encode(raw.replace('"b":"taxi"', '"b":"events"').encode()).decode().rstrip("=")
    for forged in (f"{forged_body}.{tag}", token[:-2] + "AA", "x", token.replace(".", "")):
        with pytest.raises(Exception) as e:
            c.list_objects_v2(Bucket="taxi", ContinuationToken=forged)
        assert code(e) == "InvalidArgument", forged
    # Another key cannot continue acme's listing, not even of its own `taxi`.
    with pytest.raises(Exception) as e:
        s3(lake, GLOBEX).list_objects_v2(Bucket="taxi", ContinuationToken=token)
    assert code(e) == "InvalidArgument"


@pytest.mark.parametrize("path", [
    "/taxi/../acme/taxi/_log/00000000000000000000.json",
    "/taxi/d=2021-08/../../_log/00000000000000000000.json",
    "/taxi/%2e%2e/_log/00000000000000000000.json",
    "/taxi/%252e%252e/_log/00000000000000000000.json",
    "/taxi/d%3D2021-08/%2E%2E/%2E%2E/_log/00000000000000000000.json",
    "/taxi/_log/00000000000000000000.json",
])
def test_paths_that_leave_the_bucket_are_refused(lake, path):
    r = _sigv4(lake["url"] + path)
    assert r.status_code in (400, 403, 404), (r.status_code, r.text)
    assert "<Code>" in r.text and r.content[:4] != b"PAR1" and b'"commitInfo"' not in r.content, r.text
    if "_log/" in path and ".." not in path and "%2" not in path.lower():
        # Not a file of the view: the log is not in the bucket.
        assert "NoSuchKey" in r.text
    elif "%2e" in path.lower() and "%25" not in path:
        # Clients sign a percent-encoded dot in its decoded form; either the signature or the
        # key check refuses it (the key check is unit-tested on these keys: buckets.rs).
        assert "AccessDenied" in r.text or "SignatureDoesNotMatch" in r.text, r.text
    else:
        assert "AccessDenied" in r.text, r.text


def test_unsigned_host_is_refused(lake):
    """A signature that does not cover Host could be replayed against another endpoint."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class NoHost(S3SigV4Auth):
        def headers_to_sign(self, request):
            h = super().headers_to_sign(request)
            del h["host"]
            return h

    req = AWSRequest(method="GET", url=f"{lake['url']}/taxi?list-type=2")
    NoHost(Credentials(*ACME), "s3", "us-east-1").add_auth(req)
    r = raw_request("GET", req.url, headers=dict(req.headers))
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text
    # Nor may the signer name Host elsewhere: in a query parameter of a header-signed request
    # (only a presigned URL's own list counts), or in a region with a comma in it.
    req = AWSRequest(method="GET", url=f"{lake['url']}/taxi?list-type=2&X-Amz-SignedHeaders=host")
    NoHost(Credentials(*ACME), "s3", "us-east-1").add_auth(req)
    r = raw_request("GET", req.url, headers=dict(req.headers))
    assert r.status_code == 403 and "AccessDenied" in r.text, r.text
    req = AWSRequest(method="GET", url=f"{lake['url']}/taxi?list-type=2")
    NoHost(Credentials(*ACME), "s3", "x,SignedHeaders=host;y").add_auth(req)
    assert ",SignedHeaders=host;y/s3/aws4_request" in req.headers["Authorization"]
    r = raw_request("GET", req.url, headers=dict(req.headers))
    assert r.status_code in (400, 403) and b"<ListBucketResult" not in r.content, r.text


def _metric(url, name):
    # The whole exposition: `.text` is cut for error messages.
    text = raw_request("GET", f"{url}/_neve/metrics").content.decode()
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + " ") or l.startswith(name + "{"))


@pytest.mark.parametrize("cache", [["--cache-memory", "0"], ["--cache-memory", "1MiB", "--cache-disk", "64MiB"]],
                         ids=["no-cache", "memory-and-disk"])
def test_a_second_scan_is_served_from_the_cache(neve_bin, lake, tmp_path, cache):
    """The same answers with no cache and with a (small memory, disk) cache; with the cache, a
    second full scan sends no request to the store."""
    import chdb

    args = [*cache, "--cache-dir", tmp_path / "cache"] if "--cache-disk" in cache else cache
    p = Proxy(neve_bin, "--config", lake["config"], *args, env={"ACME_TAXI_SECRET": ACME_TAXI_ONLY[1]})
    try:
        q = (f"SELECT count(), sum(fare), min(trip_start_timestamp) FROM "
             f"s3('{p.url}/taxi/**/*.parquet', '{ACME[0]}', '{ACME[1]}', 'Parquet') WHERE NOT ignore(*)")
        first = str(chdb.query(q, "CSV"))
        upstream = _metric(p.url, "neve_proxy_upstream_requests_total")
        assert upstream > 0
        assert first.startswith(f"{ROWS},"), first
        second = str(chdb.query(q, "CSV"))
        assert second == first
        again = _metric(p.url, "neve_proxy_upstream_requests_total")
        if "0" in cache:
            assert again > upstream
            assert _metric(p.url, "neve_proxy_cache_hits_total") == 0
        else:
            assert again == upstream, "a hot scan reads nothing from the store"
            assert _metric(p.url, "neve_proxy_cache_hits_total") > 0
            used = sum(f.stat().st_blocks * 512 for f in (tmp_path / "cache").iterdir())
            assert 0 < used <= 64 << 20
    finally:
        p.stop()


def test_neve_serve_answers_s3_with_s3_listen(neve_bin, lake, tmp_path):
    """`neve serve --s3-listen`: the ingest server and the proxy in one process, one config."""
    config = tmp_path / "serve.toml"
    # serve's own keys come with its tenants: give acme a token beside its access keys.
    text = lake["config"].read_text().replace(
        'name = "acme"\n', 'name = "acme"\ntokens = [{ sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", role = "write" }]\n')
    config.write_text(text)
    proc = subprocess.Popen(
        [neve_bin, "serve", "--config", config, "--listen", "127.0.0.1:0", "--s3-listen", "127.0.0.1:0",
         "--no-maintenance"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "ACME_TAXI_SECRET": ACME_TAXI_ONLY[1]})
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert any("neve serve listening" in l for l in lines), lines
        s3_url = next(l for l in lines if "neve proxy listening" in l).split()[-1]
        http_url = next(l for l in lines if "neve serve listening" in l).split()[-1]
        # A row inserted through the server ("test" hashes to the token above) is listed by
        # the proxy right after its acknowledgement.
        body = "\n".join(json.dumps({"id": 1000 + i, "kind": "k9"}) for i in range(3)).encode()
        conn = http.client.HTTPConnection(urllib.parse.urlsplit(http_url).hostname, urllib.parse.urlsplit(http_url).port)
        conn.request("POST", "/v1/tables/events/insert", body=body,
                     headers={"Authorization": "Bearer test", "Content-Type": "application/x-ndjson"})
        r = conn.getresponse()
        assert r.status == 200, r.read()
        c = s3({"url": s3_url})
        keys = [o["Key"] for o in c.list_objects_v2(Bucket="events")["Contents"]]
        assert any(k.startswith("kind=k9/") for k in keys), keys
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_idle_tables_leave_memory_and_come_back_from_the_log(neve_bin, lake, tmp_path):
    """With `keep_idle_tables`, tables no request asked for are dropped from memory (a proxy in
    front of thousands of tables holds the ones in use); the next listing reads the log again
    and shows the same alive files."""
    config = tmp_path / "idle.toml"
    config.write_text(lake["config"].read_text().replace(
        'removed_files_readable = "10m"\n', 'removed_files_readable = "10m"\nkeep_idle_tables = "1s"\n'))
    p = Proxy(neve_bin, "--config", config, env={"ACME_TAXI_SECRET": ACME_TAXI_ONLY[1]})
    try:
        c = s3({"url": p.url})
        listed = {b: sorted(o["Key"] for o in c.list_objects_v2(Bucket=b)["Contents"]) for b in ("taxi", "events")}
        deadline = time.time() + 30
        while _metric(p.url, "neve_proxy_tables_forgotten_total") < 2 and time.time() < deadline:
            time.sleep(0.5)
        assert _metric(p.url, "neve_proxy_tables_forgotten_total") == 2
        assert _metric(p.url, "neve_proxy_tables_in_memory") == 0
        again = sorted(o["Key"] for o in c.list_objects_v2(Bucket="taxi")["Contents"])
        assert again == listed["taxi"] == alive_keys(neve_bin, f"{lake['base']}/acme/taxi")
        assert c.get_object(Bucket="taxi", Key=again[0])["ContentLength"] > 0
    finally:
        p.stop()


def test_files_of_partition_values_that_need_escaping_are_readable(neve_bin, lake, tmp_path):
    """Values such as '..', '.', 'a%20b' are escaped into keys with '%2E' and '%25': each key
    listed is read, with the bytes of the file in the store."""
    import boto3

    table = f"{lake['base']}/acme/weird"
    values = ["..", ".", "a%20b", "a b", "100%", "x/y", "plain"]
    rows = tmp_path / "weird.ndjson"
    rows.write_text("".join(json.dumps({"id": i, "kind": v}) + "\n" for i, v in enumerate(values)))
    _run(neve_bin, "create", table, "--partition-by", "kind")
    _run(neve_bin, "insert", table, rows)
    c = s3(lake)
    keys = [o["Key"] for o in c.list_objects_v2(Bucket="weird")["Contents"]]
    assert sorted(keys) == alive_keys(neve_bin, table) and len(keys) == len(values)
    direct = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    bucket = os.environ["NEVE_TEST_BUCKET"]
    prefix = lake["base"].removeprefix(f"s3://{bucket}/")
    for k in keys:
        body = c.get_object(Bucket="weird", Key=k)["Body"].read()
        # In the store, object_store escapes the '%' of the log's paths once more.
        stored = f"{prefix}/acme/weird/_data/{k}".replace("%", "%25")
        assert body == direct.get_object(Bucket=bucket, Key=stored)["Body"].read()
        assert c.head_object(Bucket="weird", Key=k)["ContentLength"] == len(body)
    # With encoding-type=url every echoed field is encoded as the keys are (boto3 decodes them).
    r = _sigv4(f"{lake['url']}/weird?list-type=2&delimiter=%25&encoding-type=url")
    assert r.status_code == 200 and "<Delimiter>%25</Delimiter>" in r.text, r.text
    r = _sigv4(f"{lake['url']}/weird?delimiter=%25&marker=kind%3Da%20b&encoding-type=url")
    assert r.status_code == 200, r.text
    assert "<Delimiter>%25</Delimiter>" in r.text and "<Marker>kind%3Da%20b</Marker>" in r.text, r.text
    r = _sigv4(f"{lake['url']}/weird?list-type=2&encoding-type=bogus")
    assert r.status_code == 400 and "InvalidArgument" in r.text, r.text
    # Traversal is still refused, encoded or not.
    for bad in ("%2E%2E/_log/00000000000000000000.json", "%252E%252E/_log/00000000000000000000.json"):
        r = _sigv4(f"{lake['url']}/weird/{bad}")
        assert r.status_code in (400, 403, 404), (r.status_code, r.text)
        assert r.content[:4] != b"PAR1" and b'"commitInfo"' not in r.content, r.text


def acme_proxy(neve_bin, base, tmp_path, proxy_settings, *args):
    """A proxy of its own over `base`, for tenant acme, with `[proxy]` settings."""
    config = tmp_path / "neve.toml"
    config.write_text(f"""
warehouse = "{base}"
[proxy]
{proxy_settings}
[[tenants]]
name = "acme"
access_keys = [{{ id = "{ACME[0]}", secret = "{ACME[1]}" }}]
""")
    return Proxy(neve_bin, "--config", config, *args)


def test_a_removed_file_is_not_answered_from_memory_past_its_window(neve_bin, tmp_path):
    """HEAD and GET of a file merged away and gc'd: within `removed_files_readable` of the
    merge it is served; past it, and once gc has deleted it, NoSuchKey (the snapshot in memory
    is read again, even with no listing in between)."""
    base = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}"
    table = f"{base}/acme/t"
    rows = tmp_path / "rows.ndjson"
    _run(neve_bin, "create", table, "--set", "gc_grace=2s")
    for i in range(2):
        rows.write_text(json.dumps({"id": i}) + "\n")
        _run(neve_bin, "insert", table, rows)
    proxy = acme_proxy(neve_bin, base, tmp_path, 'removed_files_readable = "2s"')
    try:
        c = s3({"url": proxy.url})
        keys = [o["Key"] for o in c.list_objects_v2(Bucket="t")["Contents"]]
        assert len(keys) == 2
        _run(neve_bin, "merge", table, "--min-files", "2")
        # Just merged: the old files are still served.
        for k in keys:
            assert c.head_object(Bucket="t", Key=k)["ContentLength"] > 0
        time.sleep(3)
        _run(neve_bin, "gc", table, "--grace", "2s", "--retention", "0s")
        for k in keys:
            with pytest.raises(Exception) as e:
                c.head_object(Bucket="t", Key=k)
            assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e.value
            with pytest.raises(Exception) as e:
                c.get_object(Bucket="t", Key=k)
            assert code(e) == "NoSuchKey"
    finally:
        proxy.stop()


def test_a_data_file_shorter_than_its_log_fails_cleanly(neve_bin, tmp_path):
    """A data file replaced in the store by a shorter object: a ranged GET through the cache is
    an InternalError (not a dropped connection, not a panic, not the short bytes), which names
    no path of the warehouse; the proxy goes on serving."""
    import boto3

    base = f"s3://{os.environ['NEVE_TEST_BUCKET']}/interop/{uuid.uuid4()}"
    rows = tmp_path / "rows.ndjson"
    rows.write_text("".join(json.dumps({"id": i, "s": "x" * 50}) + "\n" for i in range(200)))
    for t in ("broken", "fine"):
        _run(neve_bin, "create", f"{base}/acme/{t}")
        _run(neve_bin, "insert", f"{base}/acme/{t}", rows)
    bucket = os.environ["NEVE_TEST_BUCKET"]
    prefix = base.removeprefix(f"s3://{bucket}/")
    direct = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    [key] = alive_keys(neve_bin, f"{base}/acme/broken")
    direct.put_object(Bucket=bucket, Key=f"{prefix}/acme/broken/_data/{key}", Body=b"PAR1xxxxx")
    proxy = acme_proxy(neve_bin, base, tmp_path, "", "--cache-memory", "16MiB")
    try:
        c = s3({"url": proxy.url})
        for rng in ("bytes=100-200", "bytes=-50", None):
            with pytest.raises(Exception) as e:
                kw = {"Range": rng} if rng else {}
                c.get_object(Bucket="broken", Key=key, **kw)["Body"].read()
            # The file is one block, fetched before the answer: an error answer, not a cut.
            assert code(e) == "InternalError", e.value
            message = e.value.response["Error"]["Message"]
            assert prefix not in message and "acme" not in message, message
        [ok] = [o["Key"] for o in c.list_objects_v2(Bucket="fine")["Contents"]]
        assert c.get_object(Bucket="fine", Key=ok)["Body"].read()[:4] == b"PAR1"
        assert proxy.proc.poll() is None
    finally:
        proxy.stop()
    assert "panicked" not in proxy.proc.stderr.read()


def test_sighup_puts_the_files_access_keys_in_force_and_a_bad_file_changes_nothing(neve_bin, lake, tmp_path):
    import botocore.exceptions
    import signal
    import urllib.request

    new_key = ("AKIAACMENEW", "acme-new-secret-1")
    config = tmp_path / "neve.toml"

    def write(keys, tenant="acme"):
        listed = ", ".join(f'{{ id = "{k}", secret = "{s}" }}' for k, s in keys)
        config.write_text(f'warehouse = "{lake["base"]}"\n[[tenants]]\nname = "{tenant}"\naccess_keys = [{listed}]\n')

    def metric(url, name):
        with urllib.request.urlopen(f"{url}/_neve/metrics", timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        raise AssertionError(name)

    def reaches(url, name, value):
        deadline = time.time() + 20
        while metric(url, name) != value:
            assert time.time() < deadline, f"{name} never reached {value}"
            time.sleep(0.05)

    def lists(url, key):
        try:
            s3({"url": url}, key=key).list_objects_v2(Bucket="events")
            return True
        except botocore.exceptions.ClientError as e:
            assert code_of(e) in ("InvalidAccessKeyId", "AccessDenied"), e
            return False

    def code_of(e):
        return e.response["Error"]["Code"]

    write([ACME])
    proxy = Proxy(neve_bin, "--config", config)
    try:
        assert lists(proxy.url, ACME) and not lists(proxy.url, new_key)
        # The old key revoked, a new one in its place: no restart.
        write([new_key])
        proxy.proc.send_signal(signal.SIGHUP)
        reaches(proxy.url, "neve_proxy_key_reloads_total", 1)
        assert lists(proxy.url, new_key) and not lists(proxy.url, ACME)
        # A file that does not parse, and one with a short secret: refused, keys kept.
        config.write_text("[[tenants]\nname =")
        proxy.proc.send_signal(signal.SIGHUP)
        reaches(proxy.url, "neve_proxy_key_reload_failures_total", 1)
        write([("AKIASHORT", "short")])
        proxy.proc.send_signal(signal.SIGHUP)
        reaches(proxy.url, "neve_proxy_key_reload_failures_total", 2)
        assert lists(proxy.url, new_key) and not lists(proxy.url, ACME)
        assert not lists(proxy.url, ("AKIASHORT", "short"))
        assert metric(proxy.url, "neve_proxy_key_reloads_total") == 1
    finally:
        proxy.stop()


@pytest.mark.parametrize("verbosity", [("NEVE_LOG=debug",), ("-vv",)])
def test_debug_logs_hold_no_signature_or_credential(neve_bin, lake, verbosity):
    """At the most verbose logging an operator can ask for, no request's credentials reach the
    log: not an Authorization header, not a presigned URL's signature or credential, not the
    signature a key's secret makes for a tampered request (s3s, the S3 layer, prints all of
    them at debug level)."""
    env = {k: v for k, v in os.environ.items() if k != "NEVE_LOG"}
    env["ACME_TAXI_SECRET"] = ACME_TAXI_ONLY[1]
    args = [neve_bin, "proxy", "--listen", "127.0.0.1:0", "--config", str(lake["config"])]
    if verbosity[0] == "-vv":
        args.append("-vv")
    else:
        env["NEVE_LOG"] = "debug"
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, line
        at = {**lake, "url": line.strip().split()[-1]}
        c = s3(at)
        key = alive_keys(neve_bin, f"{lake['base']}/acme/taxi")[0]
        c.head_object(Bucket="taxi", Key=key)
        url = c.generate_presigned_url("get_object", Params={"Bucket": "taxi", "Key": key}, ExpiresIn=300)
        assert raw_request("GET", url).status_code == 200
        sig = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["X-Amz-Signature"][0]
        tampered = url.replace(sig, ("1" if sig[0] == "0" else "0") + sig[1:])
        assert raw_request("GET", tampered).status_code == 403
        with pytest.raises(Exception) as e:
            s3(at, key=(ACME[0], "not-the-secret")).head_object(Bucket="taxi", Key=key)
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "answered" in err, "the debug log is on"
    for secret in ("X-Amz-Signature", "X-Amz-Credential", "Credential=", "Signature=", sig,
                   ACME[1], "signature mismatch"):
        assert secret not in err, f"{secret!r} in the log:\n{err[-3000:]}"

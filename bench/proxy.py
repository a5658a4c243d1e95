"""`neve bench proxy` (issue 16): chdb over the taxi table through `neve proxy` and direct, both
across an S3-like link to MinIO (Toxiproxy: latency before the first byte and a per-connection
bandwidth cap), cold (a fresh proxy, empty cache) and hot; the floor of a hot read (chdb on
local copies of the same files); the floor of a cold read through any caching proxy (a fresh
`neve bench relay --keep` in front of the same link, read as direct is); and a 10,000-file
table's listing through the proxy against listing its `_data/` directly on the same link.

    python bench/proxy.py --neve-bin target/release/neve --toxiproxy TOXIPROXY_SERVER \
        --table s3://bucket/prefix/taxi [--rows 10000000] [--runs 3] [--threads 2,8,32]

Needs AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (MinIO) in the environment;
chdb and boto3 in this Python. Prints one line per measurement and a JSON summary at the end.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from ports import free_port

KEY, SECRET = "AKIABENCH", "bench-secret-123"


def listing_table(neve, table, files):
    """The table listings are timed on, as `neve bench proxy` makes it: one insert of `files`
    rows, one file per partition; made only when it is not there."""
    if subprocess.run([neve, "info", table], capture_output=True).returncode == 0:
        return
    subprocess.run([neve, "create", table, "--partition-by", "k"], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as d:
        rows = f"{d}/rows.ndjson"
        with open(rows, "w") as f:
            f.writelines(json.dumps({"k": i, "v": i * 2}) + "\n" for i in range(files))
        subprocess.run([neve, "insert", table, rows], check=True, capture_output=True)


def proc_cpu(pid):
    """CPU seconds (user + system) a process has used, from /proc; 0 without a pid."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu():
    """CPU seconds of this process: chdb runs in it, on its own threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class CpuMeter:
    """CPU seconds used during a measurement by chdb (this process), the proxy, Toxiproxy and
    MinIO: on a 2-core machine their sum over the cores is a floor under the wall time."""

    def __init__(self, pids):
        self.pids = pids

    def __enter__(self):
        self.t0 = {"chdb": self_cpu(), **{k: proc_cpu(p) for k, p in self.pids.items()}}
        return self

    def __exit__(self, *exc):
        t1 = {"chdb": self_cpu(), **{k: proc_cpu(p) for k, p in self.pids.items()}}
        self.cpu = {k: t1[k] - self.t0[k] for k in t1}


def api(base, path, body):
    req = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")


def start_toxiproxy(toxiproxy, name, upstream):
    """A Toxiproxy server with one proxy `name` to `upstream`, no toxics yet: the process, its
    API's base URL and the proxy's address."""
    api_port, port = free_port(), free_port()
    proc = subprocess.Popen([toxiproxy, "-host", "127.0.0.1", "-port", str(api_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{api_port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{base}/version")
            break
        except OSError:
            time.sleep(0.1)
    api(base, "/proxies", {"name": name, "listen": f"127.0.0.1:{port}", "upstream": upstream})
    return proc, base, f"http://127.0.0.1:{port}"


def start_link(toxiproxy, upstream, latency_ms, rate_kbs):
    """Toxiproxy between the reader and MinIO: `latency_ms` on the way back (so before the
    first byte of every response) and `rate_kbs` per connection."""
    proc, base, link = start_toxiproxy(toxiproxy, "s3", upstream)
    api(base, "/proxies/s3/toxics", {"name": "latency", "type": "latency", "stream": "downstream",
                                      "attributes": {"latency": latency_ms, "jitter": 0}})
    api(base, "/proxies/s3/toxics", {"name": "bandwidth", "type": "bandwidth", "stream": "downstream",
                                      "attributes": {"rate": rate_kbs}})
    return proc, link


def start_relay(kind, binary, upstream):
    """A process in front of `upstream` that reads and writes every byte and does nothing else
    (the floor of any proxy in the path): `neve bench relay` (`kind` "neve"; "neve-keep" also
    keeps every byte it sends back in fresh memory, as a cache that fills does: the floor of a
    caching proxy) or a Toxiproxy with no toxics."""
    if kind in ("neve", "neve-keep"):
        keep = ["--keep"] if kind == "neve-keep" else []
        proc = subprocess.Popen([binary, "bench", "relay", "--to", upstream, *keep],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return proc, f"http://{proc.stdout.readline().strip()}"
    proc, _, relay = start_toxiproxy(binary, "relay", upstream)
    return proc, relay


class NeveProxy:
    def __init__(self, neve_bin, warehouse, link, cache_dir):
        env = {**os.environ, "AWS_ENDPOINT_URL": link, "NEVE_PROXY_ACCESS_KEY_ID": KEY,
               "NEVE_PROXY_SECRET_ACCESS_KEY": SECRET}
        self.proc = subprocess.Popen(
            [neve_bin, "proxy", "--warehouse", warehouse, "--listen", "127.0.0.1:0",
             "--cache-memory", "4GiB", "--cache-disk", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        line = self.proc.stdout.readline()
        assert "listening on" in line, line
        self.url = line.split()[-1]

    def counters(self):
        """This proxy's Prometheus counters: served bytes, client requests (all operations),
        upstream GETs and bytes."""
        out = {"served": 0, "requests": 0, "upstream_requests": 0, "upstream_bytes": 0}
        with urllib.request.urlopen(f"{self.url}/_neve/metrics") as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.rpartition(" ")
                key = {"neve_proxy_served_bytes_total": "served",
                       "neve_proxy_upstream_requests_total": "upstream_requests",
                       "neve_proxy_upstream_bytes_total": "upstream_bytes"}.get(name)
                if name.startswith("neve_proxy_requests_total{"):
                    key = "requests"
                if key:
                    out[key] += int(float(value))
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def chdb_time(sql):
    import chdb

    t = time.perf_counter()
    out = str(chdb.query(sql, "CSV"))
    return time.perf_counter() - t, out.strip()


def queries(url, key, secret, threads):
    src = f"s3('{url}', '{key}', '{secret}', 'Parquet')" if key else f"file('{url}', 'Parquet')"
    return {
        "scan": f"SELECT count() FROM {src} WHERE NOT ignore(*) SETTINGS max_threads = {threads}",
        "point": (f"SELECT count(), sum(cityHash64(*)) FROM {src} WHERE trip_start_timestamp >= '2021-08-15 00:00:00' "
                  f"AND trip_start_timestamp < '2021-08-16 00:00:00' SETTINGS max_threads = {threads}"),
    }


def list_all(endpoint, key, secret, bucket, prefix):
    """Page through ListObjectsV2 with SigV4-signed plain requests (botocore's signer, no XML
    parsing but a regex for the token), so the time is the server's and the link's, not the
    client's: boto3 parses 1,000 keys in about as long as a round trip."""
    import re
    import http.client

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port)
    creds = Credentials(key, secret)
    t = time.perf_counter()
    n, token = 0, None
    while True:
        q = {"list-type": "2", "prefix": prefix}
        if token:
            q["continuation-token"] = token
        url = f"{endpoint}/{bucket}?{urllib.parse.urlencode(q, quote_via=urllib.parse.quote)}"
        req = AWSRequest(method="GET", url=url)
        S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
        target = url[len(endpoint):]
        conn.request("GET", target, headers=dict(req.headers))
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200, body[:500]
        n += body.count(b"<Key>")
        m = re.search(rb"<NextContinuationToken>([^<]+)</NextContinuationToken>", body)
        if not m:
            break
        token = m.group(1).decode()
    conn.close()
    return time.perf_counter() - t, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--neve-bin", required=True)
    ap.add_argument("--toxiproxy", required=True)
    ap.add_argument("--table", required=True, help="s3://bucket/prefix/taxi (created and loaded if absent)")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", default="2,8,32")
    ap.add_argument("--latency-ms", type=int, default=30)
    ap.add_argument("--rate-kbs", type=int, default=51_200, help="per-connection cap, KB/s")
    ap.add_argument("--list-files", type=int, default=10_000,
                    help="files of the table whose listing is timed (one insert, one file per partition)")
    a = ap.parse_args()

    minio = os.environ["AWS_ENDPOINT_URL"]
    mkey, msecret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    bucket, _, table_key = a.table.removeprefix("s3://").partition("/")
    warehouse, _, name = a.table.rpartition("/")

    def neve(*args):
        p = subprocess.run([a.neve_bin, *map(str, args)], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"neve {args}: {p.stderr}")
        return p.stdout

    if subprocess.run([a.neve_bin, "info", a.table], capture_output=True).returncode != 0:
        neve("create", a.table, "--partition-by", "month(trip_start_timestamp) as d",
             "--sort-by", "payment_type,trip_start_timestamp")
        with tempfile.TemporaryDirectory() as d:
            step = 2_000_000
            for i, start in enumerate(range(0, a.rows, step)):
                path = f"{d}/taxi-{i}.parquet"
                neve("bench", "gen", path, "--rows", min(step, a.rows - start), "--seed", i + 1)
                neve("insert", a.table, path)
                os.remove(path)
    info = json.loads(neve("info", a.table, "--json"))
    listing_table = f"{warehouse}/listing{a.list_files}"
    if subprocess.run([a.neve_bin, "info", listing_table], capture_output=True).returncode != 0:
        neve("create", listing_table, "--partition-by", "k")
        with tempfile.TemporaryDirectory() as d:
            rows = f"{d}/rows.ndjson"
            with open(rows, "w") as f:
                f.writelines(json.dumps({"k": i, "v": i * 2}) + "\n" for i in range(a.list_files))
            neve("insert", listing_table, rows)
    listing_info = json.loads(neve("info", listing_table, "--json"))
    listing_key = listing_table.removeprefix(f"s3://{bucket}/")
    print(f"table {a.table}: {info['rows']:,} rows, {info['files']} files, {info['bytes'] / 1e9:.2f} GB", file=sys.stderr)

    # The floor of a hot read: chdb on local copies of the same files, from the page cache
    # (no network, no proxy), one warm-up run first.
    floor = {}
    with tempfile.TemporaryDirectory() as local:
        import boto3

        c = boto3.client("s3", endpoint_url=minio, region_name="us-east-1")
        data_prefix = f"{table_key}/_data/"
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=data_prefix):
            for o in page.get("Contents", []):
                dst = os.path.join(local, o["Key"][len(data_prefix):])
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                c.download_file(bucket, o["Key"], dst)
        for threads in [int(t) for t in a.threads.split(",")]:
            for q, sql in queries(f"{local}/**/*.parquet", None, None, threads).items():
                chdb_time(sql)
                floor[(q, threads)] = statistics.median(chdb_time(sql)[0] for _ in range(a.runs))
                print(f"  {q} max_threads={threads}: local files {floor[(q, threads)]:.2f}s", file=sys.stderr)
    # The floor of a hot read over the S3 protocol: chdb's s3() on MinIO itself, on loopback
    # with no link (the data in MinIO's page cache), one warm-up run first. Any S3 endpoint,
    # the proxy's cache included, pays at least this client's cost per request and byte.
    s3_floor = {}
    for threads in [int(t) for t in a.threads.split(",")]:
        for q, sql in queries(f"{minio}/{bucket}/{table_key}/_data/**/*.parquet", mkey, msecret, threads).items():
            chdb_time(sql)
            s3_floor[(q, threads)] = statistics.median(chdb_time(sql)[0] for _ in range(a.runs))
            print(f"  {q} max_threads={threads}: MinIO on loopback {s3_floor[(q, threads)]:.2f}s", file=sys.stderr)

    minio_pid = int(os.environ.get("NEVE_MINIO_PID") or 0)
    upstream = urllib.parse.urlsplit(minio).netloc
    link_proc, link = start_link(a.toxiproxy, upstream, a.latency_ms, a.rate_kbs)
    results = []
    try:
        with tempfile.TemporaryDirectory() as cache_dir:
            for threads in [int(t) for t in a.threads.split(",")]:
                for q in ("scan", "point"):
                    cold, hot, direct, kept, served, answers = [], [], [], [], [], set()
                    cpu = {"cold": [], "hot": [], "direct": [], "keeping relay": []}
                    counts = {"cold": [], "hot": []}
                    for run in range(a.runs):
                        p = NeveProxy(a.neve_bin, warehouse, link, cache_dir)
                        pids = {"proxy": p.proc.pid, "toxiproxy": link_proc.pid, "minio": minio_pid}
                        try:
                            sql = queries(f"{p.url}/{name}/**/*.parquet", KEY, SECRET, threads)[q]
                            for mode, times in (("cold", cold), ("hot", hot)):
                                before = p.counters()
                                with CpuMeter(pids) as m:
                                    s, out = chdb_time(sql)
                                after = p.counters()
                                times.append(s)
                                answers.add(out)
                                cpu[mode].append(m.cpu)
                                counts[mode].append({k: after[k] - before[k] for k in after})
                            served.append(counts["hot"][-1]["served"])
                        finally:
                            p.stop()
                        sql = queries(f"{link}/{bucket}/{table_key}/_data/**/*.parquet", mkey, msecret, threads)[q]
                        with CpuMeter({"toxiproxy": link_proc.pid, "minio": minio_pid}) as m:
                            s, out = chdb_time(sql)
                        direct.append(s)
                        answers.add(out)
                        cpu["direct"].append(m.cpu)
                        # The floor of a cold read through any caching proxy, in the same run: a
                        # fresh relay in front of the link that forwards the bytes and keeps each
                        # in fresh memory, as a filling cache does (BENCHMARKS.md, "The floor of
                        # a caching proxy").
                        relay_proc, relay = start_relay("neve-keep", a.neve_bin, urllib.parse.urlsplit(link).netloc)
                        try:
                            sql = queries(f"{relay}/{bucket}/{table_key}/_data/**/*.parquet", mkey, msecret, threads)[q]
                            with CpuMeter({"relay": relay_proc.pid, "toxiproxy": link_proc.pid, "minio": minio_pid}) as m:
                                s, out = chdb_time(sql)
                        finally:
                            relay_proc.terminate()
                            relay_proc.wait()
                        kept.append(s)
                        answers.add(out)
                        cpu["keeping relay"].append(m.cpu)
                        fmt = lambda c: " ".join(f"{k} {v:.2f}" for k, v in c.items())
                        print(f"  {q} max_threads={threads} run {run + 1}: proxy cold {cold[-1]:.2f}s hot {hot[-1]:.2f}s, "
                              f"direct {direct[-1]:.2f}s, keeping relay {kept[-1]:.2f}s; CPU-s cold: {fmt(cpu['cold'][-1])}; hot: {fmt(cpu['hot'][-1])}; "
                              f"direct: {fmt(cpu['direct'][-1])}; keeping relay: {fmt(cpu['keeping relay'][-1])}; cold requests {counts['cold'][-1]['requests']}, "
                              f"upstream GETs {counts['cold'][-1]['upstream_requests']} "
                              f"({counts['cold'][-1]['upstream_bytes'] / 1e9:.2f} GB)", file=sys.stderr)
                    assert len(answers) == 1, f"different answers: {answers}"
                    r = {"query": q, "max_threads": threads, "cold_s": statistics.median(cold),
                         "hot_s": statistics.median(hot), "direct_s": statistics.median(direct),
                         "keeping_relay_s": statistics.median(kept), "cold_runs": cold, "hot_runs": hot,
                         "direct_runs": direct, "keeping_relay_runs": kept, "answer": answers.pop()}
                    r["hot_speedup"] = r["cold_s"] / r["hot_s"]
                    r["local_files_s"] = floor[(q, threads)]
                    r["minio_loopback_s"] = s3_floor[(q, threads)]
                    r["hot_served_bytes"] = statistics.median(served)
                    r["cold_over_direct"] = r["cold_s"] / r["direct_s"]
                    # What any caching proxy's cold read costs over direct, in the same runs.
                    r["keeping_relay_over_direct"] = r["keeping_relay_s"] / r["direct_s"]
                    # Medians of each process's CPU seconds, per mode; the floors they set on
                    # 2 cores: a hot read cannot end before chdb's own CPU is spent, whatever
                    # the proxy costs; a cold read not before everyone's.
                    r["cpu"] = {mode: {k: statistics.median(c[k] for c in runs) for k in runs[0]}
                                for mode, runs in cpu.items()}
                    r["cold_counts"] = {k: statistics.median(c[k] for c in counts["cold"]) for k in counts["cold"][0]}
                    cores = os.cpu_count()
                    r["hot_floor_s"] = r["cpu"]["hot"]["chdb"] / cores
                    r["hot_over_cold_max"] = r["cold_s"] / r["hot_floor_s"]
                    r["cold_floor_s"] = sum(r["cpu"]["cold"].values()) / cores
                    r["direct_floor_s"] = sum(r["cpu"]["direct"].values()) / cores
                    print(f"  {q} max_threads={threads}: hot floor (chdb CPU {r['cpu']['hot']['chdb']:.2f} s / {cores} cores) "
                          f"{r['hot_floor_s']:.3f}s, so hot/cold <= {r['hot_over_cold_max']:.2f}x; "
                          f"CPU floor cold {r['cold_floor_s']:.2f}s, direct {r['direct_floor_s']:.2f}s", file=sys.stderr)
                    results.append(r)
            # Listing: a table of `list_files` files through the proxy (cold: a fresh proxy,
            # then warm) and its `_data/` directly, on the same link.
            lname = listing_table.rpartition("/")[2]
            via_cold, via_warm, direct_l = [], [], []
            for run in range(a.runs):
                p = NeveProxy(a.neve_bin, warehouse, link, cache_dir)
                try:
                    s, n_proxy = list_all(p.url, KEY, SECRET, lname, "")
                    via_cold.append(s)
                    s, _ = list_all(p.url, KEY, SECRET, lname, "")
                    via_warm.append(s)
                finally:
                    p.stop()
                s, n_direct = list_all(link, mkey, msecret, bucket, f"{listing_key}/_data/")
                direct_l.append(s)
                assert n_proxy == n_direct == listing_info["files"], (n_proxy, n_direct, listing_info["files"])
                print(f"  list {n_proxy} files run {run + 1}: proxy cold {via_cold[-1] * 1e3:.1f} ms, warm "
                      f"{via_warm[-1] * 1e3:.1f} ms, direct {direct_l[-1] * 1e3:.1f} ms", file=sys.stderr)
            results.append({"query": "list", "files": listing_info["files"],
                            "cold_s": statistics.median(via_cold), "hot_s": statistics.median(via_warm),
                            "direct_s": statistics.median(direct_l), "cold_runs": via_cold,
                            "hot_runs": via_warm, "direct_runs": direct_l})
    finally:
        link_proc.terminate()
    print(f"\nlink: {a.latency_ms} ms before each response, {a.rate_kbs / 1024:.0f} MB/s per connection; "
          f"medians of {a.runs}")
    print(f"{'measure':<22} {'proxy cold':>11} {'proxy hot':>10} {'direct':>9} {'local files':>12} "
          f"{'MinIO loopback':>15} {'hot/cold':>9} {'cold/direct':>12} {'hot/local':>10} {'hot GB sent':>12} "
          f"{'hot floor':>10} {'hot/cold max':>13} {'keeping relay':>14} {'relay/direct':>13}")
    for r in results:
        label = r["query"] if r["query"] == "list" else f"{r['query']} max_threads={r['max_threads']}"
        local = r.get("local_files_s")
        print(f"{label:<22} {r['cold_s']:>10.3f}s {r['hot_s']:>9.3f}s {r['direct_s']:>8.3f}s "
              + (f"{local:>11.3f}s {r['minio_loopback_s']:>14.3f}s " if local else f"{'':>12} {'':>15} ")
              + f"{r['cold_s'] / r['hot_s']:>8.2f}x {r['cold_s'] / r['direct_s']:>11.2f}x "
              + (f"{r['hot_s'] / local:>9.2f}x {r['hot_served_bytes'] / 1e9:>11.2f} "
                 f"{r['hot_floor_s']:>9.3f}s {r['hot_over_cold_max']:>12.2f}x "
                 f"{r['keeping_relay_s']:>13.3f}s {r['keeping_relay_over_direct']:>12.2f}x" if local else ""))
    print(json.dumps({"table": a.table, "rows": info["rows"], "files": info["files"], "results": results}))


if __name__ == "__main__":
    main()

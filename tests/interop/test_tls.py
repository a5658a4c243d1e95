"""`neve serve --tls-cert … --tls-key …` read by real clients over TLS with the test CA of
`tests/tls`: `neve.connect` (https), the ADBC Flight SQL driver (grpc+tls) and boto3 through
the S3 port (https). A client that does not trust the CA gets nothing."""
import pathlib
import ssl
import subprocess

import pyarrow as pa
import pytest

TLS = pathlib.Path(__file__).resolve().parent.parent / "tls"
TOKEN = "tls-interop-token"
KEY_ID, SECRET = "AKIDTLSINTEROP", "tls-interop-secret"


def serve_tls(neve_bin, warehouse, *extra):
    """`neve serve` with its three ports over TLS (test pair 1), `extra` flags added: the process
    and each port's URL by the name its line gives it."""
    p = subprocess.Popen(
        [neve_bin, "serve", "--warehouse", str(warehouse), "--listen", "127.0.0.1:0",
         "--flight-listen", "127.0.0.1:0", "--s3-listen", "127.0.0.1:0", "--no-maintenance",
         "--flush-interval", "50ms", "--token", TOKEN,
         "--access-key-id", KEY_ID, "--secret-access-key", SECRET,
         "--tls-cert", str(TLS / "server1.pem"), "--tls-key", str(TLS / "server1.key"), *extra],
        stdout=subprocess.PIPE, text=True,
    )
    lines = [p.stdout.readline().strip() for _ in range(3)]
    urls = {line.split(" listening on ")[0]: line.rsplit(" ", 1)[1] for line in lines if " listening on " in line}
    assert set(urls) == {"neve serve", "neve flight sql", "neve proxy"}, lines
    return p, urls


@pytest.fixture(scope="module")
def server(neve_bin, tmp_path_factory):
    warehouse = tmp_path_factory.mktemp("tls") / "lake"
    p, urls = serve_tls(neve_bin, warehouse)
    yield urls, warehouse
    p.terminate()
    p.wait(30)


def test_the_python_client_over_https(server):
    import neve

    urls, warehouse = server
    url = urls["neve serve"]
    assert url.startswith("https://")
    c = neve.connect(url, token=TOKEN, ca_cert=str(TLS / "ca1.pem"))
    c.create_table("events", partition_by="identity(region)", sort_by=["id"])
    ack = c.insert("events", pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}))
    assert ack["rows"] == 3
    assert c.sql("SELECT sum(id) AS s FROM events").column("s").to_pylist() == [6]
    # The system's CAs do not include the test CA; another CA is not it either.
    for ca in (None, str(TLS / "ca2.pem")):
        with pytest.raises(neve.UnreachableError) as e:
            neve.connect(url, token=TOKEN, ca_cert=ca).tables()
        assert isinstance(e.value.__cause__, ssl.SSLCertVerificationError), e.value
        assert "not trusted" in str(e.value) and "ca_cert=" in str(e.value), e.value
    # Plain HTTP to the TLS port: the server closes the connection, and the client says so.
    with pytest.raises(neve.UnreachableError) as e:
        neve.connect(url.replace("https://", "http://"), token=TOKEN, retries=0).tables()
    assert "https:// server closes a plain http:// connection" in str(e.value), e.value


def test_flight_sql_over_tls(server):
    import adbc_driver_flightsql.dbapi as flight_sql
    import adbc_driver_manager
    import neve

    urls, _ = server
    grpc = urls["neve flight sql"]
    assert grpc.startswith("grpc+tls://")
    c = neve.connect(urls["neve serve"], token=TOKEN, ca_cert=str(TLS / "ca1.pem"))
    c.create_table("flights")
    c.insert("flights", pa.table({"n": list(range(100))}))
    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}",
              "adbc.flight.sql.client_option.tls_root_certs": (TLS / "ca1.pem").read_text()}
    with flight_sql.connect(grpc, db_kwargs=kwargs, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) AS c, sum(n) AS s FROM flights")
        assert cur.fetchall() == [(100, 4950)]
    kwargs["adbc.flight.sql.client_option.tls_root_certs"] = (TLS / "ca2.pem").read_text()
    with pytest.raises(adbc_driver_manager.Error):
        with flight_sql.connect(grpc, db_kwargs=kwargs, autocommit=True) as conn, conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()


def test_boto3_through_the_s3_port_over_https(server):
    import boto3
    import botocore.config
    import botocore.exceptions
    import neve

    urls, warehouse = server
    endpoint = urls["neve proxy"]
    assert endpoint.startswith("https://")
    c = neve.connect(urls["neve serve"], token=TOKEN, ca_cert=str(TLS / "ca1.pem"))
    c.create_table("files")
    c.insert("files", pa.table({"k": ["a", "b"], "v": [1, 2]}))

    def s3(verify):
        return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID,
                            aws_secret_access_key=SECRET, region_name="us-east-1", verify=verify,
                            config=botocore.config.Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                                          retries={"max_attempts": 1}))

    client = s3(str(TLS / "ca1.pem"))
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="files")["Contents"]]
    assert len(keys) == 1 and keys[0].endswith(".parquet")
    body = client.get_object(Bucket="files", Key=keys[0])["Body"].read()
    assert body == (warehouse / "files" / "_data" / keys[0]).read_bytes()
    # A presigned URL over https, fetched by a plain HTTP client trusting the CA.
    import urllib.request
    url = client.generate_presigned_url("get_object", Params={"Bucket": "files", "Key": keys[0]}, ExpiresIn=300)
    assert url.startswith("https://")
    ctx = ssl.create_default_context(cafile=str(TLS / "ca1.pem"))
    with urllib.request.urlopen(url, context=ctx, timeout=30) as r:
        assert r.read() == body
    with pytest.raises(botocore.exceptions.SSLError):
        s3(str(TLS / "ca2.pem")).list_objects_v2(Bucket="files")


@pytest.fixture(scope="module")
def mtls_server(neve_bin, tmp_path_factory):
    """The same ports with `--tls-client-ca`: clients must present a certificate it signed."""
    warehouse = tmp_path_factory.mktemp("mtls") / "lake"
    p, urls = serve_tls(neve_bin, warehouse, "--tls-client-ca", str(TLS / "client-ca.pem"))
    yield urls, warehouse
    p.terminate()
    p.wait(30)


def test_mutual_tls_for_the_python_client_adbc_and_boto3(mtls_server):
    import adbc_driver_flightsql.dbapi as flight_sql
    import adbc_driver_manager
    import boto3
    import botocore.config
    import botocore.exceptions
    import neve

    urls, warehouse = mtls_server
    ca = str(TLS / "ca1.pem")
    mine = (str(TLS / "client.pem"), str(TLS / "client.key"))
    c = neve.connect(urls["neve serve"], token=TOKEN, ca_cert=ca, client_cert=mine[0], client_key=mine[1])
    c.create_table("m")
    assert c.insert("m", pa.table({"n": list(range(10))}))["rows"] == 10
    assert c.sql("SELECT sum(n) AS s FROM m").column("s").to_pylist() == [45]
    # No certificate, or one another CA signed: refused in the handshake, and told why.
    for cert in (None, (str(TLS / "other.pem"), str(TLS / "other.key"))):
        kwargs = {"client_cert": cert[0], "client_key": cert[1]} if cert else {}
        with pytest.raises(neve.UnreachableError) as e:
            neve.connect(urls["neve serve"], token=TOKEN, ca_cert=ca, retries=0, **kwargs).tables()
        assert "client_cert=" in str(e.value), e.value
    with pytest.raises(neve.InvalidInputError):
        neve.connect(urls["neve serve"], ca_cert=ca, client_cert=str(TLS / "nope.pem"))

    kwargs = {"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}",
              "adbc.flight.sql.client_option.tls_root_certs": (TLS / "ca1.pem").read_text()}
    with pytest.raises(adbc_driver_manager.Error):
        with flight_sql.connect(urls["neve flight sql"], db_kwargs=kwargs, autocommit=True) as conn, \
                conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()
    kwargs["adbc.flight.sql.client_option.mtls_cert_chain"] = (TLS / "client.pem").read_text()
    kwargs["adbc.flight.sql.client_option.mtls_private_key"] = (TLS / "client.key").read_text()
    with flight_sql.connect(urls["neve flight sql"], db_kwargs=kwargs, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT count(*) AS c FROM m")
        assert cur.fetchall() == [(10,)]

    def s3(client_cert):
        return boto3.client("s3", endpoint_url=urls["neve proxy"], aws_access_key_id=KEY_ID,
                            aws_secret_access_key=SECRET, region_name="us-east-1", verify=ca,
                            config=botocore.config.Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                                                          retries={"max_attempts": 1}, client_cert=client_cert))

    keys = [o["Key"] for o in s3(mine).list_objects_v2(Bucket="m")["Contents"]]
    assert len(keys) == 1 and keys[0].endswith(".parquet")
    with pytest.raises((botocore.exceptions.SSLError, botocore.exceptions.EndpointConnectionError,
                        botocore.exceptions.ConnectionClosedError)):
        s3(None).list_objects_v2(Bucket="m")

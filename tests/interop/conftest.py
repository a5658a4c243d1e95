"""Shared fixtures: the neve binary, MinIO started by `make test`, DuckDB with httpfs."""
import os
import pathlib
import subprocess
import uuid

import pytest


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the interop tests through `make test`, which starts MinIO")
    return value


@pytest.fixture(scope="session")
def neve_bin():
    return _env("NEVE_BIN")


@pytest.fixture(scope="session")
def s3_prefix():
    return f"s3://{_env('NEVE_TEST_BUCKET')}/interop/{uuid.uuid4()}"


@pytest.fixture
def neve(neve_bin):
    def run(*args, check=True, stdin=None):
        p = subprocess.run([neve_bin, *map(str, args)], capture_output=True, text=True, input=stdin)
        if check and p.returncode != 0:
            raise AssertionError(f"neve {args} failed ({p.returncode}): {p.stderr}")
        return p
    return run


@pytest.fixture(scope="session")
def duck():
    import duckdb
    import duckdb_ext  # noqa: F401  (the httpfs extension package)

    ext_dir = pathlib.Path(list(duckdb_ext.__path__)[0]) / "extensions"
    con = duckdb.connect()
    con.execute(f"SET extension_directory = '{ext_dir}'")
    con.execute("LOAD httpfs")
    endpoint = _env("AWS_ENDPOINT_URL").removeprefix("http://")
    con.execute(
        f"""CREATE SECRET minio (TYPE s3, KEY_ID '{_env('AWS_ACCESS_KEY_ID')}', SECRET '{_env('AWS_SECRET_ACCESS_KEY')}',
            ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"""
    )
    return con


def _free_port():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A Spark standalone cluster on loopback (a master and two one-core workers) with
    Iceberg's Spark runtime, and a session on it; stopped at the end."""
    import socket
    import time

    import pyspark
    from pyspark.sql import SparkSession

    jar = _env("NEVE_ICEBERG_SPARK_JAR")
    home = pathlib.Path(pyspark.__file__).parent
    logs = tmp_path_factory.mktemp("spark-logs")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": os.environ.get("NEVE_TEST_PYTHON", "python3")}
    spark_class = str(home / "bin" / "spark-class")
    port = _free_port()
    procs = []

    def start(name, *args):
        log = open(logs / f"{name}.log", "w")
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))

    start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
          "--port", str(port), "--webui-port", str(_free_port()))
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline:
                raise AssertionError((logs / "master.log").read_text())
            time.sleep(0.5)
    for i in range(2):
        start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
              "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
              "--webui-port", str(_free_port()), "--work-dir", str(logs / f"work-{i}"))
    session = (
        SparkSession.builder.master(f"spark://127.0.0.1:{port}")
        .appName("neve-interop")
        .config("spark.jars", jar)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.executor.memory", "768m")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        # Both workers' executors registered (the driver counts as one more).
        deadline = time.time() + 120
        while session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:
            if time.time() > deadline:
                raise AssertionError("Spark executors did not register: "
                                     + "".join(p.read_text() for p in logs.glob("*.log")))
            time.sleep(0.5)
        yield session
    finally:
        session.stop()
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()

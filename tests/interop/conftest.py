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


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A Spark standalone cluster on loopback (a master and two one-core workers) with
    Iceberg's Spark runtime, and a session on it; stopped at the end (bench/spark_cluster.py)."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))
    from spark_cluster import cluster

    with cluster(_env("NEVE_ICEBERG_SPARK_JAR"), tmp_path_factory.mktemp("spark-logs"),
                 os.environ.get("NEVE_TEST_PYTHON", "python3")) as session:
        yield session

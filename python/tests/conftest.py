"""Fixtures of the Python package's tests: tables on a local folder and on the MinIO `make test`
starts (its address and keys come from the environment)."""
import os
import uuid

import pytest


def _env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the Python tests through `make test`, which starts MinIO")
    return value


@pytest.fixture(params=["local", "minio"])
def where(request, tmp_path):
    """A fresh table address on each store."""
    if request.param == "local":
        return str(tmp_path / "lake" / "t")
    return f"s3://{_env('NEVE_TEST_BUCKET')}/python/{uuid.uuid4()}/t"


@pytest.fixture
def s3_address():
    return f"s3://{_env('NEVE_TEST_BUCKET')}/python/{uuid.uuid4()}/t"


@pytest.fixture(scope="session")
def minio_options():
    """The MinIO settings as explicit storage options (the environment has them too)."""
    return {
        "endpoint_url": _env("AWS_ENDPOINT_URL"),
        "access_key_id": _env("AWS_ACCESS_KEY_ID"),
        "secret_access_key": _env("AWS_SECRET_ACCESS_KEY"),
        "region": "us-east-1",
    }


@pytest.fixture(scope="session")
def neve_bin():
    return _env("NEVE_BIN")

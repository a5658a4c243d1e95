"""The wheel `make test` packs installs into a fresh venv and imports with only pyarrow."""
import os
import pathlib
import subprocess
import sys

import pytest


def test_the_wheel_installs_into_a_fresh_venv(tmp_path):
    wheel = os.environ.get("NEVE_WHEEL")
    if not wheel:
        pytest.fail("NEVE_WHEEL is not set: run the Python tests through `make test`")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel], check=True)
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], check=True, capture_output=True, text=True).stdout
    names = sorted(line.split("==")[0].split(" @ ")[0].lower() for line in freeze.splitlines() if line.strip())
    assert names == ["neve", "pyarrow"], names
    table = tmp_path / "t"
    code = (
        "import neve, pyarrow as pa, sys\n"
        "t = neve.create_table(sys.argv[1])\n"
        "t.insert(pa.table({'a': [1, 2, 3]}))\n"
        "print(t.sql('SELECT sum(a) AS s FROM t').column('s')[0].as_py(), neve.__version__)\n"
        "help(neve.Table.insert)\n"
    )
    out = subprocess.run([str(py), "-c", code, str(table)], check=True, capture_output=True, text=True).stdout
    assert out.splitlines()[0].startswith("6 ")
    assert "__arrow_c_stream__" in out
    assert pathlib.Path(py).exists()

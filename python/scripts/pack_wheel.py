"""Pack the `neve` wheel from an already built `_neve` library, for `make test`.

`pip install ./python` builds the wheel with maturin (release). Tests instead pack the library
cargo built for them (same profile and target folder as the Rust tests, so DataFusion is not
built a second time) with the package's Python files, and let `wheel pack` write the archive.

    python pack_wheel.py TARGET/debug/lib_neve.so OUT_DIR
"""

import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # python/


def main(library: str, out: str) -> None:
    cargo = tomllib.loads((HERE.parent / "Cargo.toml").read_text())
    version = cargo["workspace"]["package"]["version"]
    pyproject = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / f"neve-{version}"
        pkg = root / "neve"
        shutil.copytree(HERE / "neve", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        shutil.copy(library, pkg / "_neve.abi3.so")
        info = root / f"neve-{version}.dist-info"
        info.mkdir()
        requires = "".join(f"Requires-Dist: {d}\n" for d in pyproject["dependencies"])
        for extra, deps in pyproject.get("optional-dependencies", {}).items():
            requires += f"Provides-Extra: {extra}\n"
            requires += "".join(f"Requires-Dist: {d}; extra == '{extra}'\n" for d in deps)
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\n"
            f"Name: neve\nVersion: {version}\n"
            f"Summary: {pyproject['description']}\n"
            f"Requires-Python: {pyproject['requires-python']}\n{requires}"
        )
        (info / "WHEEL").write_text(
            "Wheel-Version: 1.0\nGenerator: neve pack_wheel.py\nRoot-Is-Purelib: false\n"
            f"Tag: cp39-abi3-{platform}\n"
        )
        Path(out).mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "wheel", "pack", str(root), "-d", out], check=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

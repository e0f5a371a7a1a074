"""`samebits lock` of a direct-URL requirement (``name @ URL``), as examples/paper-cpu locks
PyTorch's own CPU wheel: real uv, a local wheel outside the index, its dependencies from it."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from samebits.lock.model import parse_lock
from tests.fixtures.lock import TmpProject

WHEEL = "torch-2.13.0-py3-none-manylinux_2_28_x86_64.whl"
SPEC = """\
generation = "hopper"
python = "3.12"
[platforms.linux-64]
glibc = "2.28"
[cuda]
version = "13.0"
[pypi]
index = "@WHEELS@"
requirements = ["torch @ {url}"]
"""


def test_direct_url_locks_to_that_url(project: TmpProject, tmp_path: Path) -> None:
    """The lock names the URL the spec gave, with the sha256 of that file; the dependencies
    the wheel declares come from the index."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wheel = elsewhere / WHEEL
    shutil.copyfile(Path(project.wheels.removeprefix("file://")) / WHEEL, wheel)
    project.spec("env", SPEC.format(url=wheel.as_uri()))
    res = project.samebits("lock", "env")
    assert res.returncode == 0, res.stderr
    pkgs = {p.name: p for p in parse_lock(project.lockfile("env")).packages_for("linux-64",
                                                                                 "pip")}
    assert set(pkgs) == {"torch", "numpy", "nvidia-cuda-runtime"}
    assert (pkgs["torch"].url, pkgs["torch"].sha256) == (
        wheel.as_uri(), hashlib.sha256(wheel.read_bytes()).hexdigest())
    assert dict(pkgs["torch"].dependencies) == {"numpy": "*", "nvidia-cuda-runtime": "*"}

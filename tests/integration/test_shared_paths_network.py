"""opencv-python and opencv-python-headless 4.8.0.76 (PyPI, August 2023: the releases of the
albumentations 1.3.1 era; albumentations requires the headless one, papers list the other)
both write ``cv2/`` and differ in ``cv2/cv2.abi3.so`` and ``cv2/version.py``. From an empty
cache: the lock records those paths with the winner pip's order gives, the install places it
with a warning, verify env is identical, and real pip given the lock's pins (the same wheels,
from samebits' archive cache) leaves byte-identical ``cv2/`` files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from tests.fixtures.lock import TmpProject

SITE = "lib/python3.11/site-packages"
SPEC = """\
generation = "cpu"
python = "3.11"
exclude-newer = "2023-09-01T00:00:00Z"
[platforms.linux-64]
glibc = "2.28"
[pypi]
requirements = ["opencv-python==4.8.0.76", "opencv-python-headless==4.8.0.76"]
"""


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.network
@pytest.mark.slow
def test_opencv_pair_placed_as_pip_places_it(project: TmpProject, tmp_path: Path) -> None:
    """Both depend on numpy and declare Requires-Python, so they weigh the same in pip's order
    and pip installs opencv-python-headless first (the later name of two equal weights goes
    first): opencv-python's cv2 files stay, in the lock's record, samebits' prefix and pip's."""
    cache = tmp_path / "cache"
    project.spec("cv", SPEC)
    res = project.samebits("lock", "--cache-dir", str(cache))
    assert res.returncode == 0, res.stderr
    lock = parse_lock(project.lockfile("cv"))
    shared = [f"{SITE}/cv2/cv2.abi3.so", f"{SITE}/cv2/version.py"]
    assert json.loads(lock.custom["samebits.shared.linux-64"]) == {
        "format": 1, "order": "pip 26.3",
        "shared": [{"writers": ["opencv-python-headless", "opencv-python"], "paths": shared}]}

    prefix = tmp_path / "env"
    res = subprocess.run([sys.executable, "-m", "samebits", "install", "cv", "--target",
                          str(prefix), "--cache-dir", str(cache), "--no-bytecode"],
                         cwd=project.root, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ("  warning    2 files written with different bytes by opencv-python-headless and "
            "opencv-python: opencv-python's placed over opencv-python-headless's, as pip "
            f"installs them (the lock records it): {', '.join(shared)}") in res.stdout
    res = project.samebits("verify", "env", "cv", "--prefix", str(prefix), "--json",
                           "--no-linkage")
    doc = json.loads(res.stdout)
    assert (res.returncode, doc["identical"], doc["findings"]) == (0, True, [])

    venv = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pins = tmp_path / "requirements.txt"
    pins.write_text("".join(f"{p.name}=={p.version}\n" for p in lock.packages))
    archives = [str(p) for p in sorted((cache / "archives").iterdir())]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "--no-index", *(f"--find-links={a}" for a in archives),
                    "--no-compile", "--disable-pip-version-check", "-r", str(pins)],
                   check=True, capture_output=True, timeout=900)
    theirs, ours = _tree(venv / SITE / "cv2"), _tree(prefix / SITE / "cv2")
    assert theirs == ours
    assert len(ours) > 20

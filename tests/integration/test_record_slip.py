"""A wheel whose own RECORD is wrong about one of its files (PyPI's torchvision 0.13.1 and torch
1.12.1: METADATA edited after RECORD was written): ``samebits install`` places the locked
archive's bytes and says so, and ``verify env`` of an environment pip made from it is identical,
the RECORD's slip a note, because the file is the locked archive's own member.

Offline: a wheel of torchvision 0.13.1's real METADATA, WHEEL, top_level.txt and version.py with
their real RECORD rows (tests/data/pypi/README.md). Network: the whole 19 MB wheel from PyPI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from urllib.request import urlopen

import pytest

from tests.fixtures.install import locked_wheel, write_lock
from tests.fixtures.pythons import pyenv_python, skip_reason

ROOT = Path(__file__).resolve().parents[2]
TV = ROOT / "tests" / "data" / "pypi" / "torchvision-0.13.1"
NAME = "torchvision-0.13.1-cp310-cp310-manylinux1_x86_64.whl"
URL = ("https://files.pythonhosted.org/packages/03/bb/8d6aade7c39bbc55a75054fcbd6c3292f080d05c"
       "7d9cff092f2813a65c10/" + NAME)
METADATA = "lib/python3.10/site-packages/torchvision-0.13.1.dist-info/METADATA"


def members_wheel(folder: Path) -> Path:
    rows = (TV / "RECORD.rows").read_text().splitlines()
    path = folder / NAME
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for row in rows:
            member = row.split(",")[0]
            zf.writestr(member, (TV / "members" / member).read_bytes())
        zf.writestr("torchvision-0.13.1.dist-info/RECORD",
                    "\n".join([*rows, "torchvision-0.13.1.dist-info/RECORD,,"]) + "\n")
    return path


def real_wheel(folder: Path) -> Path:
    path = folder / NAME
    folder.mkdir(parents=True, exist_ok=True)
    with urlopen(URL, timeout=120) as r, open(path, "wb") as f:
        while chunk := r.read(1 << 20):
            f.write(chunk)
    return path


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


@pytest.mark.parametrize("source", [
    members_wheel, pytest.param(real_wheel, marks=pytest.mark.network)],
    ids=["its real members", "the whole wheel"])
def test_a_wheel_whose_record_lies_installs_and_verifies(tmp_path: Path, source) -> None:
    python = pyenv_python("3.10")
    if python is None:
        pytest.skip(skip_reason("3.10"))
    whl = source(tmp_path / "wheels")
    lock = write_lock(tmp_path / "tv.conda-lock.yml", [locked_wheel(whl)], python="3.10").path
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    # samebits: the archive's bytes placed, the RECORD's slip said
    ours = tmp_path / "ours"
    proc = run("install", str(lock), "--target", str(ours), "--python", str(python),
               "--platform", "linux-64", "--json", env=env)
    doc = json.loads(proc.stdout)
    # every file is the lock's; the whole torchvision without torch has libraries that do not
    # resolve (libtorch_cpu.so ...), which alone makes the install's verify exit 1
    assert doc["identical"] is True, proc.stdout
    assert proc.returncode == (0 if source is members_wheel else 1), proc.stdout + proc.stderr
    said = [n for n in json.dumps(doc).split('"') if "RECORD is wrong about it" in n]
    assert said and all("torchvision-0.13.1.dist-info/METADATA" in n for n in said), said
    # pip: the wheel's RECORD copied as it is, so the file's row lies; the file is the locked
    # archive's member, so verify env against the lock is identical, the slip a note
    theirs = tmp_path / "theirs"
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(theirs)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(theirs / "bin/python"),
                    "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
                    str(whl)], check=True, capture_output=True, timeout=300)
    proc = run("verify", "env", "--prefix", str(theirs), str(lock), "--platform", "linux-64",
               "--no-linkage", "--json", env=env)
    doc = json.loads(proc.stdout)
    assert (proc.returncode, doc["identical"], doc["findings"]) == (0, True, []), doc["findings"]
    (note,) = [n for n in doc["notes"] if "RECORD is wrong about it" in n]
    assert note.startswith(f"pip:torchvision==0.13.1: {METADATA}: the wheel's own RECORD is "
                           "wrong about it (sha256 ")
    # the same file with other bytes is still drift: the slip covers the archive's bytes only
    meta = theirs / METADATA
    meta.write_bytes(meta.read_bytes() + b"\n")
    proc = run("verify", "env", "--prefix", str(theirs), str(lock), "--platform", "linux-64",
               "--no-linkage", "--json", env=env)
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert [(f["kind"], f["path"]) for f in doc["findings"]] == [("modified", METADATA)]

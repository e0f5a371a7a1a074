"""The real cpu lock (~2.8 GB of PyPI archives for linux-64): bundled twice in different
folders, umasks and time zones to the same bytes, checked, and installed with no network."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.programs import no_network as _no_network
from tests.fixtures.render import run_cli

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "bench" / "cpu-cache"  # shared with `python -m tests.bench bundle`


def python312() -> str:
    """A working Python 3.12 (the cpu lock's PyPI part is for 3.12), or skip."""
    for cand in [shutil.which("python3.12"),
                 *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))]:
        if cand and subprocess.run([cand, "-c", "import sys; assert sys.version_info[:2] == "
                                    "(3, 12)"], capture_output=True).returncode == 0:
            return cand
    pytest.skip("no Python 3.12 interpreter here (the cpu lock's venv runs on one)")


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.heavy
def test_cpu_lock_bundle_is_reproducible_and_installs_offline(tmp_path: Path) -> None:
    """Same bytes from two folders, umasks and TZs; --check ok; unshare -n install from it
    verifies identical to the lock."""
    netless = _no_network()
    python = python312()
    tars = []
    for name, umask, tz in (("a", 0o022, "UTC"), ("deeper/b", 0o077, "Asia/Kathmandu")):
        cwd = tmp_path / name
        cwd.mkdir(parents=True)
        proc = run_cli("bundle", "cpu", "--platform", "linux-64", "--root", str(ROOT),
                       "--cache-dir", str(CACHE), "--out", "cpu.bundle.tar", "--json",
                       cwd=cwd, umask=umask, env={"TZ": tz})
        assert proc.returncode == 0, proc.stderr
        tars.append((cwd / "cpu.bundle.tar", json.loads(proc.stdout)["sha256"]))
    (first, sha_a), (second, sha_b) = tars
    assert sha_a == sha_b
    assert subprocess.run(["cmp", str(first), str(second)]).returncode == 0
    first.unlink()
    check = run_cli("bundle", "check", str(second), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([*netless, sys.executable, "-m", "samebits", "install",
                           "--from-bundle", str(second), "--target", str(tmp_path / "env"),
                           "--platform", "linux-64", "--python", python, "--cache-dir",
                           str(tmp_path / "fresh-cache"), "--json"],
                          capture_output=True, text=True, env=env, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["identical"] is True
    assert "torch==2.13.0" in report["pip"]

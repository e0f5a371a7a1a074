"""A digest is compared as a value, never as its spelling: a lock that writes its hex in
capitals (the formats allow it) installs, verifies and bundles as the same lock in lower case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from samebits.install import install_prefix
from samebits.lock.read import load_lock
from tests.fixtures.install import locked_wheel, wheel, write_lock

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_a_lock_with_capital_hex_is_the_same_lock(tmp_path: Path) -> None:
    whl = wheel(tmp_path / "wheels", "demo", "1.0", {"demo/__init__.py": b"x = 1\n"})
    p = locked_wheel(whl)
    assert p.sha256 is not None
    lock = write_lock(tmp_path / "t.conda-lock.yml", [p], python=LINE).path
    lock.write_text(lock.read_text().replace(p.sha256, p.sha256.upper()))
    assert p.sha256.upper() in lock.read_text()
    env = load_lock(lock)
    prefix = tmp_path / "env"
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                   interpreter=sys.executable)
    run = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                           str(lock), "--platform", "linux-64", "--no-linkage"],
                          capture_output=True, text=True, cwd=ROOT, env=run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "samebits", "bundle", str(lock), "--platform",
                           "linux-64", "--out", str(tmp_path / "b.tar")],
                          capture_output=True, text=True, cwd=ROOT, env=run)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "samebits", "bundle", "check",
                           str(tmp_path / "b.tar")], capture_output=True, text=True, cwd=ROOT,
                          env=run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [q.sha256 for q in env.lock.packages] == [p.sha256]

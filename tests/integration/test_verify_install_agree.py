"""`samebits install` and a standalone `verify env` on the same fresh prefix: one verdict.

The Containerfile's last step runs `python -m verify env --prefix P --lockfile L --platform X`
on what it just installed; here that same command runs on a fresh `samebits install` of each
local lock (a conda + PyPI lock and a PyPI-only venv), and must agree with install's own
verify: exit 0, identical, every library resolving.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    package_cache,
    render_project,
    render_wheel_dir,
)

# whole installs, then verify env: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def containerfile_verify_step(prefix: Path, lockfile: Path, *extra: str
                              ) -> tuple[int, dict]:
    """The Containerfile's verify command (samebits.render.containerfile), with --json."""
    proc = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                           str(lockfile), "--platform", "linux-64", "--json",
                           *extra], capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("env", ["gpu", "venv"],
                         ids=["conda-and-pypi-lock", "pypi-only-venv"])
def test_install_and_standalone_verify_agree(render_project: RenderProject,
                                             package_cache: Path, tmp_path: Path,
                                             env: str) -> None:
    """install says identical; the Containerfile's verify step on that prefix exits 0 too,
    with and without samebits' cache (which adds the archives' modes and links)."""
    prefix = tmp_path / "env"
    proc = render_project.samebits("install", env, "--target", str(prefix), "--platform",
                                   "linux-64", "--python", sys.executable,
                                   "--cache-dir", str(package_cache), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["identical"] is True
    lockfile = render_project.lockfile(env)
    for extra in ((), ("--cache-dir", str(package_cache))):
        code, doc = containerfile_verify_step(prefix, lockfile, *extra)
        assert (code, doc["identical"], doc["ok"], doc["findings"]) == (0, True, True, [])
    # the venv runs on this interpreter; the conda lock's python is a synthetic package
    assert doc["interpreter"]["runs_here"] is (env == "venv")

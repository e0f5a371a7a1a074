"""Interruptions: kill -9 during lock, install and render leaves the previous result intact and
the next run succeeds; concurrent `samebits lock` runs never leave a torn file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from tests.fixtures.lock import TmpProject, conda_spec
from tests.fixtures.render import RenderProject

ROOT = Path(__file__).resolve().parents[2]
KILL_AFTER = (0.05, 0.3, 0.6, 0.9, 1.3, 2.0)


def spawn(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "samebits", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_after(proc: subprocess.Popen, seconds: float) -> None:
    time.sleep(seconds)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_kill_during_lock_keeps_old_or_new_lockfile(project: TmpProject, tmp_path: Path) -> None:
    """At any kill point the lockfile is the old bytes or the complete new bytes."""
    project.spec("env", conda_spec())
    assert project.samebits("lock").returncode == 0
    old = project.lockfile("env").read_bytes()
    project.spec("env", conda_spec(deps='"python 3.12.*", "pytorch", "typing-extensions"'))
    expected_dir = tmp_path / "expected"
    assert project.samebits("lock", "--lockfiles", str(expected_dir)).returncode == 0
    new = (expected_dir / "env.conda-lock.yml").read_bytes()
    assert old != new
    for delay in KILL_AFTER:
        project.lockfile("env").write_bytes(old)
        kill_after(spawn(["lock"], project.root), delay)
        assert project.lockfile("env").read_bytes() in (old, new), f"torn after {delay} s"
    assert project.samebits("lock").returncode == 0
    assert project.lockfile("env").read_bytes() == new


@pytest.mark.slow
def test_concurrent_locks_never_tear(project: TmpProject) -> None:
    """Four `samebits lock` runs at once on one project all succeed; the file is whole."""
    project.spec("env", conda_spec(platform="linux-aarch64"))
    procs = [spawn(["lock"], project.root) for _ in range(4)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0, 0]
    lock = parse_lock(project.lockfile("env"))
    assert {p.name for p in lock.packages} >= {"pytorch", "python"}
    assert not list(project.lockfile("env").parent.glob(".*.tmp"))


def _verify(prefix: Path, lockfile: Path) -> dict:
    res = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                          str(lockfile), "--platform", "linux-64", "--json",
                          "--no-linkage"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_kill_during_install_keeps_previous_prefix(render_project: RenderProject,
                                                   package_cache: Path, tmp_path: Path) -> None:
    """Replacing a prefix is staged: a kill leaves the old prefix verifying identical."""
    prefix = tmp_path / "env"
    common = ["--target", str(prefix), "--platform", "linux-64", "--cache-dir",
              str(package_cache)]
    res = render_project.samebits("install", "gpu", *common)
    assert res.returncode == 0, res.stderr
    for delay in KILL_AFTER[:4]:
        kill_after(spawn(["install", "gpu2", *common, "--replace"], render_project.root), delay)
        gpu, gpu2 = (_verify(prefix, render_project.lockfile(e))["identical"]
                     for e in ("gpu", "gpu2"))
        assert gpu or gpu2, f"prefix torn after {delay} s"
        if gpu2:  # the kill came too late: the new install had landed; go back
            assert render_project.samebits("install", "gpu", *common, "--replace").returncode == 0
    res = render_project.samebits("install", "gpu2", *common, "--replace")
    assert res.returncode == 0, res.stderr
    assert _verify(prefix, render_project.lockfile("gpu2"))["identical"] is True


def _layout_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    return index["manifests"][0]["digest"]


@pytest.mark.slow
@pytest.mark.requires("skopeo")
def test_kill_during_render_oci_keeps_previous_layout(render_project: RenderProject,
                                                      package_cache: Path,
                                                      tmp_path: Path) -> None:
    """A killed image rebuild leaves the previous layout readable by skopeo, digest unchanged."""
    out = tmp_path / "oci"
    common = ["--platform", "linux-64", "--out", str(out), "--cache-dir", str(package_cache)]
    assert render_project.samebits("render", "oci", "gpu", *common).returncode == 0
    before = _layout_digest(out)
    for delay in KILL_AFTER[:4]:
        kill_after(spawn(["render", "oci", "gpu2", *common, "--replace"], render_project.root),
                   delay)
        now = _layout_digest(out)
        if now != before:  # finished before the kill: put the old image back
            assert render_project.samebits("render", "oci", "gpu", *common,
                                           "--replace").returncode == 0
        res = subprocess.run(["skopeo", "inspect", f"oci:{out}"], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0, (delay, res.stderr)
    assert render_project.samebits("render", "oci", "gpu2", *common, "--replace").returncode == 0
    assert _layout_digest(out) != before

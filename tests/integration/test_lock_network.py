"""Indexes and channels that do not answer, and one lock against the real PyPI."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from tests.fixtures.lock import TmpProject


@pytest.mark.parametrize("part", ["pypi", "conda"])
def test_silent_source_fails_within_seconds(project: TmpProject, silent_server: str,
                                            part: str) -> None:
    """A source that never answers is an 'unreachable' error (exit 4) within seconds, no hang."""
    if part == "pypi":
        body = f'[pypi]\nindex = "{silent_server}/simple"\nrequirements = ["numpy"]\n'
    else:
        body = f'[conda]\nchannels = ["{silent_server}/chan"]\ndependencies = ["numpy"]\n'
    project.spec("env", 'generation = "cpu"\npython = "3.12"\n[platforms.linux-64]\n'
                 f'glibc = "2.28"\n{body}')
    start = time.monotonic()
    res = project.samebits("lock", "--timeout", "2")
    elapsed = time.monotonic() - start
    assert res.returncode == 4, res.stderr
    assert "did not answer" in res.stderr
    assert elapsed < 90  # the 2 s timeout, not a hang; the rest: a busy machine
    assert not project.lockfile("env").exists()


@pytest.mark.network
def test_real_pypi(project: TmpProject) -> None:
    """uv resolves against the real PyPI (metadata only); the lock names the chosen wheels."""
    project.spec("env", 'generation = "cpu"\npython = "3.12"\n'
                 'exclude-newer = "2026-11-01T00:00:00Z"\n'
                 '[platforms.linux-64]\nglibc = "2.28"\n[platforms.linux-aarch64]\nglibc = "2.28"\n'
                 '[pypi]\nrequirements = ["numpy==2.1.3"]\n')
    res = project.samebits("lock")
    assert res.returncode == 0, res.stderr
    lock = parse_lock(project.lockfile("env"))
    for plat, arch in (("linux-64", "x86_64"), ("linux-aarch64", "aarch64")):
        (numpy,) = lock.packages_for(plat)
        assert numpy.url.startswith("https://files.pythonhosted.org/")
        assert "cp312" in numpy.url and arch in numpy.url
        assert len(numpy.sha256 or "") == 64


ROOT = Path(__file__).resolve().parents[2]


def test_committed_locks_are_fresh() -> None:
    """Every committed lockfile records the digest of its spec as it is now."""
    res = subprocess.run(
        [sys.executable, "-m", "samebits", "lock", "--check", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout


def _lock_copy(tmp_path: Path, name: str, *args: str) -> dict[str, bytes]:
    """`samebits lock` of a copy of the curated specs; the lockfiles' bytes by name."""
    root = tmp_path / name
    shutil.copytree(ROOT / "environments", root / "environments")
    res = subprocess.run([sys.executable, "-m", "samebits", "lock", "--root", str(root), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return {p.name: p.read_bytes() for p in sorted((root / "lockfiles").glob("*.yml"))}


@pytest.mark.network
def test_committed_locks_reproduce_cold_warm_and_offline(tmp_path: Path) -> None:
    """Re-solving the curated specs against real PyPI gives the committed bytes: with an empty
    cache (every answer fetched), warm (answered from the cache), and warm with --offline."""
    committed = {p.name: p.read_bytes() for p in sorted((ROOT / "lockfiles").glob("*.yml"))}
    assert len(committed) == 6
    cache = str(tmp_path / "cache")
    assert _lock_copy(tmp_path, "cold", "--cache-dir", cache) == committed
    assert list((tmp_path / "cache" / "pypi-v1").rglob("solves/*.json"))
    assert _lock_copy(tmp_path, "warm", "--cache-dir", cache) == committed
    assert _lock_copy(tmp_path, "offline", "--cache-dir", cache, "--offline") == committed


@pytest.mark.slow
@pytest.mark.network
def test_cached_answers_equal_a_full_online_relock(tmp_path: Path) -> None:
    """For every curated spec and platform, uv reading PyPI itself (no samebits cache) and the
    cached route (filled, then read back) pick the same wheels, hashes and dependencies."""
    import asyncio
    import datetime as dt

    from samebits.project import Project
    from samebits.solve.indexproxy import IndexProxy
    from samebits.solve.pypi import solve_pypi
    from samebits.spec.read import read_spec

    project = Project.at(ROOT)
    specs = [read_spec(project.spec_path(i), root=ROOT) for i in project.default_ids()]
    pairs = [(s, t) for s in specs for t in s.platforms]

    async def run(proxy: IndexProxy | None) -> list[object]:
        return list(await asyncio.gather(*(solve_pypi(s, t, timeout=60, proxy=proxy)
                                           for s, t in pairs)))

    direct = asyncio.run(run(None))
    now = dt.datetime.now(dt.timezone.utc)
    for refresh in (True, False):  # fill (every answer fetched), then read back
        with IndexProxy(root=tmp_path / "cache", timeout=60, now=now, refresh=refresh) as proxy:
            assert asyncio.run(run(proxy)) == direct
            assert [r.unsupported for r in proxy.routes()] == [None]
            assert bool(proxy.routes()[0].fetched) is refresh


def test_refused_channel_is_unreachable_at_once(project: TmpProject) -> None:
    """A channel whose host refuses the connection is named unreachable at once, exit 4."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: connections are refused
    project.spec("env", 'generation = "cpu"\npython = "3.12"\n[platforms.linux-64]\n'
                 f'glibc = "2.28"\n[conda]\nchannels = ["http://127.0.0.1:{port}/chan"]\n'
                 'dependencies = ["numpy"]\n')
    start = time.monotonic()
    res = project.samebits("lock", "--timeout", "20")
    assert res.returncode == 4
    assert f"channel http://127.0.0.1:{port}/chan (http://127.0.0.1:{port}/chan) is " \
           "unreachable: [Errno 111] Connection refused" in res.stderr
    assert time.monotonic() - start < 60  # at once; the process start on a busy machine

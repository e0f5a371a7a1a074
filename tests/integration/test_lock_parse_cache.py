"""A lock read before is not judged again: ``samebits.lock.model``'s parse cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from samebits.errors import LockfileError
from samebits.lock.model import PARSE_CACHE, parse_lock

ROOT = Path(__file__).resolve().parents[2]
LOCKS = sorted((ROOT / "lockfiles").glob("*.conda-lock.yml"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "samebits" / PARSE_CACHE


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name.split(".")[0])
def test_every_committed_lock_reads_the_same_from_the_cache(lock: Path, cache: Path) -> None:
    first = parse_lock(lock)
    (entry,) = cache.glob("*/*.json")
    second = parse_lock(lock)
    assert second == first and second.header == first.header
    assert [p.size for p in second.packages] == [p.size for p in first.packages]
    entry.write_bytes(b"{")  # torn: read from the lock again, and kept again
    assert parse_lock(lock) == first
    assert entry.read_bytes() != b"{"


def test_a_remembered_read_imports_no_conda_lock(tmp_path: Path) -> None:
    code = ("import sys; from samebits.lock.model import parse_lock; "
            f"parse_lock({str(LOCKS[0])!r}); print('conda_lock' in sys.modules)")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=120) for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["True", "False"], runs[-1].stderr


def test_other_bytes_and_bad_locks(tmp_path: Path, cache: Path) -> None:
    """Each text has its own entry (a one-byte change is read afresh); a lock with a problem
    is refused every time and never kept."""
    src = LOCKS[0].read_text()
    a, b, bad = tmp_path / "a.conda-lock.yml", tmp_path / "b.conda-lock.yml", tmp_path / "x.yml"
    a.write_text(src)
    b.write_text(src.replace("sha256: ", "sha256:  ", 1))
    bad.write_text(src.replace("sha256: ", "sha256: zz", 1))
    assert parse_lock(a) == parse_lock(b)
    assert len(list(cache.glob("*/*.json"))) == 2
    for _ in range(2):
        with pytest.raises(LockfileError):
            parse_lock(bad)
    assert len(list(cache.glob("*/*.json"))) == 2


def test_loading_a_conda_lock_imports_no_network_or_other_reader(tmp_path: Path) -> None:
    """What a warm install reads its lock with brings no other lock format's reader (the
    requirements reader imports urllib and http.client) and no asyncio: they were 30 ms of
    every install's start. The second run: the first parses the lock with conda-lock, which
    imports requests (and so all of them); a warm install reads its remembered parse."""
    code = ("import sys; from samebits.lock.read import load_lock; "
            "import samebits.install.prefix, samebits_app.cli; "
            f"load_lock(__import__('pathlib').Path({str(LOCKS[0])!r})); "
            "print(sorted(m for m in ('samebits.net', 'http.client', 'urllib.request', "
            "'asyncio', 'samebits.foreign.requirements') if m in sys.modules))")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120) for _ in range(2)][-1]
    assert run.stdout.strip() == "[]", run.stdout + run.stderr

"""What install's verify learns of the interpreter outlives a new ``--cache-dir`` (issue 44).

The stat memo of a venv's base interpreter files and the bytecode verdicts are keyed by the
interpreter's files and identity, not by the archives of one cache: install keeps them in the
user's samebits cache (``XDG_CACHE_HOME``), so an install into a new, empty ``--cache-dir``
does not hash the stdlib and compile its pycs' verdicts again (9 s of a cold install of the cpu
lock). ``--no-cache-interpreter`` keeps them in ``--cache-dir`` only: what a first machine
pays. Nothing the memo holds hides a write: a stdlib pyc rewritten in place after it was
learnt is named by the next install from another empty cache.

The base interpreter is a private copy of the one running the tests (its stdlib without
pycs), with real pycs this Python's ``py_compile`` wrote for two modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.install import locked_wheel, wheel, write_lock
from tests.fixtures.producers import LINE, interpreter_with_pycs

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("textwrap", "colorsys")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """(a lock of one wheel, the base interpreter's binary, its two stdlib pycs)."""
    base, pycs = interpreter_with_pycs(tmp_path / "base", MODULES)
    w = wheel(tmp_path / "wheels", "alpha", "1.0", {"alpha/__init__.py": b"A = 1\n"})
    lock = write_lock(tmp_path / "lockfiles" / "one.conda-lock.yml", [locked_wheel(w)],
                      python=LINE).path
    return lock, base, pycs


def _install(lock: Path, base: Path, cache: Path, xdg: Path, prefix: Path,
             *extra: str) -> tuple[int, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SAMEBITS_FIND_LINKS": str(lock.parent.parent),
           "XDG_CACHE_HOME": str(xdg)}
    proc = subprocess.run([sys.executable, "-m", "samebits", "install", str(lock), "--target",
                           str(prefix), "--platform", "linux-64", "--python", str(base),
                           "--cache-dir", str(cache), "--json", "--replace", *extra],
                          cwd=lock.parent, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    return proc.returncode, json.loads(proc.stdout)


def _verdicts(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (folder / "bytecode").glob("*")} \
        if (folder / "bytecode").is_dir() else {}


def test_a_new_cache_dir_does_not_learn_the_interpreter_again(
        setup: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    lock, base, _ = setup
    xdg, env = tmp_path / "xdg", tmp_path / "env"
    code, first = _install(lock, base, tmp_path / "c1", xdg, env)
    assert code == 0 and first["verify"]["proof"]["by_memo"] == 0  # nothing known yet
    learnt = _verdicts(xdg / "samebits")
    assert learnt and not _verdicts(tmp_path / "c1")  # kept in the user's cache
    code, second = _install(lock, base, tmp_path / "c2", xdg, env)
    assert code == 0 and second["verify"]["proof"]["by_memo"] > 0  # the stdlib by its stat
    assert _verdicts(xdg / "samebits") == learnt  # no verdict compiled again
    assert second["verify"]["digests"] == first["verify"]["digests"]
    # what a first machine pays: nothing taken from, or written to, the user's cache
    code, third = _install(lock, base, tmp_path / "c3", xdg, env, "--no-cache-interpreter")
    assert code == 0 and third["verify"]["proof"]["by_memo"] == 0
    assert _verdicts(tmp_path / "c3").keys() == learnt.keys()
    assert _verdicts(xdg / "samebits") == learnt
    assert third["verify"]["digests"] == first["verify"]["digests"]


def test_a_stdlib_pyc_rewritten_after_it_was_learnt_is_named_from_a_new_cache(
        setup: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """One letter of a constant of textwrap's pyc, rewritten in place with its size, mode
    and times kept (its header still matches the source, so Python loads it): the install
    from another empty cache does not take the memo's word for it and names it."""
    lock, base, pycs = setup
    xdg, env = tmp_path / "xdg", tmp_path / "env"
    assert _install(lock, base, tmp_path / "c1", xdg, env)[0] == 0
    pyc = pycs["textwrap"]
    st = pyc.stat()
    data = pyc.read_bytes()
    assert data.count(b"Text wrapping") == 1  # the module's docstring, a constant
    pyc.write_bytes(data.replace(b"Text wrapping", b"Text wrappinG"))
    os.utime(pyc, ns=(st.st_atime_ns, st.st_mtime_ns))
    code, doc = _install(lock, base, tmp_path / "c2", xdg, env)
    assert code == 1
    assert str(pyc) in {f["path"] for f in doc["verify"]["findings"] if f["kind"] == "bytecode"}

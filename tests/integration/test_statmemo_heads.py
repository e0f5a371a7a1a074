"""The heads of a venv's base interpreter files (issue 44): a stdlib pyc's header, and an ELF
file's facts, kept beside the stat memo (``CACHE/statmemo/<name>/heads.json``) by the sha256
the memo proves, so that a warm ``verify env --trust-seal`` (install's own verify, ``verify
node``) opens none of the 5,133 stdlib pycs of CPython 3.12; used only where the memo proves the
file, never by a plain ``verify env``, and never hiding a write.

The base interpreter is a private copy of the one running the tests, with real pycs that this
Python's own ``py_compile`` wrote for two of its stdlib modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.producers import interpreter_with_pycs, run
from verify.env.statmemo import FOLDER

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("textwrap", "colorsys")


def _verify(env: Path, cache: Path, *extra: str) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, "-m", "verify", "env", "--prefix", str(env), "--json",
                          "--cache-dir", str(cache), *extra], capture_output=True, text=True,
                         timeout=900, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode in (0, 1), res.stderr
    return res.returncode, json.loads(res.stdout)


@pytest.fixture
def based(tmp_path: Path) -> tuple[Path, Path, dict[str, Path]]:
    """(a venv, its base interpreter's copy, each module's pyc in that base's stdlib)."""
    base, pycs = interpreter_with_pycs(tmp_path / "base", MODULES)
    run(base, "-m", "venv", "--without-pip", tmp_path / "env")
    return tmp_path / "env", base, pycs


def _heads(cache: Path) -> tuple[Path, dict]:
    (path,) = (cache / FOLDER).glob("*/heads.json")
    return path, json.loads(path.read_bytes())


def _bytecode(doc: dict) -> set[str]:
    return {f["path"] for f in doc["findings"] if f["kind"] == "bytecode"}


def test_stdlib_pyc_headers_are_remembered_by_the_sha256_the_memo_proves(
        based: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """The first verify reads every byte and keeps each pyc's header beside the memo; the
    trusted verifies that follow report what a verify that reads every byte reports."""
    env, _, pycs = based
    cache = tmp_path / "cache"
    code, plain = _verify(env, cache)
    assert (code, plain["findings"]) == (0, [])
    path, doc = _heads(cache)
    import hashlib

    for pyc in pycs.values():
        data = pyc.read_bytes()
        elf, head = doc["heads"][hashlib.sha256(data).hexdigest()]
        assert (elf, head) == (None, data[:16].hex())
    before = path.read_bytes()
    for _ in range(2):
        code, trusted = _verify(env, cache, "--trust-seal")
        assert (code, trusted["findings"]) == (0, [])
        assert trusted["digests"] == plain["digests"]
        assert trusted["bytecode"] == plain["bytecode"]
    assert path.read_bytes() == before  # nothing new to remember: not written again


def test_the_heads_are_believed_only_where_the_memo_is_trusted(
        based: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """Proof that the remembered header stands in for the read, and where: headers edited to
    record another source mtime make the trusted verify call those pycs stale (Python would
    not load them; the cache's owner could as well edit the memo: the documented boundary),
    never the plain one, which reads every header and puts the true ones back."""
    env, _, pycs = based
    cache = tmp_path / "cache"
    _verify(env, cache)
    path, doc = _heads(cache)
    edited = 0
    for value in doc["heads"].values():
        if value[1] is not None:
            value[1] = value[1][:16] + "00000000" + value[1][24:]  # source mtime 1970
            edited += 1
    path.write_text(json.dumps(doc))
    _, trusted = _verify(env, cache, "--trust-seal")
    assert trusted["bytecode"]["stale"] == edited >= len(pycs)  # with those the probe wrote
    assert str(pycs["colorsys"]) in trusted["bytecode"]["stale_files"]  # the first 20 listed
    _, plain = _verify(env, cache)
    assert plain["bytecode"]["stale"] == 0
    _, trusted = _verify(env, cache, "--trust-seal")
    assert trusted["bytecode"] == plain["bytecode"]


def test_a_stdlib_pyc_rewritten_in_place_is_caught_with_the_memo(
        based: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """A stdlib pyc of the base rewritten in place (one letter of a constant), its size, mode
    and times kept: its ctime moved, so the memo proves nothing of it and its remembered
    header is not taken; the trusted verify reads it and names it, as the plain one does."""
    env, _, pycs = based
    cache = tmp_path / "cache"
    _verify(env, cache)
    assert _verify(env, cache, "--trust-seal")[0] == 0  # the memo and the heads are used
    pyc = pycs["textwrap"]
    st = pyc.stat()
    data = pyc.read_bytes()
    assert data.count(b"Text wrapping") == 1  # the module's docstring, a constant
    pyc.write_bytes(data.replace(b"Text wrapping", b"Text wrappinG"))  # a valid header still
    os.utime(pyc, ns=(st.st_atime_ns, st.st_mtime_ns))
    for extra in ((), ("--trust-seal",)):
        code, doc = _verify(env, cache, *extra)
        assert code == 1, extra
        assert str(pyc) in _bytecode(doc), (extra, doc["findings"])


def test_a_memo_written_without_the_linkage_check_learns_which_files_are_elf(
        based: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """A memo written by a verify without the linkage check (``--no-linkage``, as ``verify
    node`` runs it) does not know which files are ELF; the first trusted verify with the
    check reads their heads once and writes what it learnt (before, every trusted verify read
    the heads of the stdlib's 2,400 sources again: 2,507 files in the install's progress)."""
    env, _, _ = based
    cache = tmp_path / "cache"
    _verify(env, cache, "--no-linkage")
    memo = next((cache / FOLDER).glob("*.json"))
    assert {f[-1] for f in json.loads(memo.read_bytes())["files"]} == {None}
    _verify(env, cache, "--trust-seal")
    flags = [f[-1] for f in json.loads(memo.read_bytes())["files"]]
    assert None not in flags and True in flags and False in flags  # lib-dynload's .so files
    code, doc = _verify(env, cache, "--trust-seal")
    assert code == 0 and doc["proof"]["by_memo"] == len(flags)


NO_CHILD = ("import sys; import samebits.forked as f; f.spawn_call = lambda *a: None; "
            "from verify.cli import main; sys.exit(main(sys.argv[1:]))")


def test_the_base_files_walked_on_the_other_core_are_what_a_walk_here_gives(
        based: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    """A trusted verify walks the base interpreter's files in a fresh interpreter while it
    walks the prefix (``check_env``, ``verify.env.basefiles``): its report is the report of
    the same walk in the verifying process (no child started), byte for byte, first with
    the memo to write and then proven by it; a stdlib pyc rewritten in place is named by
    both."""
    env, _, pycs = based
    docs = {}
    for how in ("apart", "here"):
        cache = tmp_path / f"cache-{how}"
        runs = []
        for extra in ((), ("--trust-seal",), ("--trust-seal",)):
            args = ["env", "--prefix", str(env), "--json", "--cache-dir", str(cache), *extra]
            cmd = ([sys.executable, "-m", "verify", *args] if how == "apart"
                   else [sys.executable, "-c", NO_CHILD, *args])
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
            assert res.returncode == 0, res.stderr
            runs.append(json.loads(res.stdout.replace(str(cache), "CACHE")))
        docs[how] = runs
    assert docs["apart"] == docs["here"]
    assert docs["apart"][2]["proof"]["by_memo"] > 0
    pyc = pycs["textwrap"]
    st = pyc.stat()
    pyc.write_bytes(pyc.read_bytes().replace(b"Text wrapping", b"Text wrappinG"))
    os.utime(pyc, ns=(st.st_atime_ns, st.st_mtime_ns))
    for how in ("apart", "here"):
        args = ["env", "--prefix", str(env), "--json", "--cache-dir",
                str(tmp_path / f"cache-{how}"), "--trust-seal"]
        cmd = ([sys.executable, "-m", "verify", *args] if how == "apart"
               else [sys.executable, "-c", NO_CHILD, *args])
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
        assert res.returncode == 1, (how, res.stderr)
        assert str(pyc) in _bytecode(json.loads(res.stdout)), how

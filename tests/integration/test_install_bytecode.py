"""Bytecode compiled at install: by the prefix's own interpreter, checked-hash, byte-stable."""

from __future__ import annotations

import importlib.util
import marshal
import os
import subprocess
import sys
from pathlib import Path

from samebits.install import install_prefix
from samebits.install.sources import Sources
from tests.fixtures.install import (
    CondaPkg,
    locked_conda,
    locked_wheel,
    wheel,
    write_channel,
    write_lock,
)

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
TAG = sys.implementation.cache_tag
SOURCES = {
    "bc/__init__.py": b"from bc.util import twice\nVALUES = {'a', 'b', 'c', 'd', 1.5}\n",
    "bc/util.py": b"def twice(x):\n    return 2 * x\n\n\nclass K:\n    pass\n",
    "bc/broken.py": b"def (:\n",   # does not compile: pip skips such files, and so do we
}


def bc_lock(tmp_path: Path):
    whl = wheel(tmp_path / "wheels", "bc", "1.0", SOURCES)
    return write_lock(tmp_path / "lockfiles" / "bc.conda-lock.yml", [locked_wheel(whl)],
                      python=LINE)


def pycs(prefix: Path) -> dict[str, bytes]:
    site = prefix / "lib" / f"python{LINE}" / "site-packages"
    return {p.relative_to(prefix).as_posix(): p.read_bytes() for p in site.rglob("*.pyc")}


def test_pycs_are_byte_stable(tmp_path: Path) -> None:
    """Two installs of one lock into one path, each compiling afresh (two caches), write the
    same pyc bytes; a third from a warm cache places those bytes without compiling."""
    env = bc_lock(tmp_path)
    prefix = tmp_path / "env"
    got = []
    for cache in ("cache1", "cache2", "cache2"):
        if prefix.exists():
            subprocess.run(["rm", "-rf", str(prefix)], check=True)
        report = install_prefix(env, "linux-64", prefix, final=str(prefix),
                                cache=tmp_path / cache, interpreter=sys.executable,
                                bytecode=True, sources=Sources(file_roots=(tmp_path,)))
        got.append((pycs(prefix), report.bytecode))
    assert got[0][0] == got[1][0] == got[2][0]
    assert sorted(got[0][0]) == [f"lib/python{LINE}/site-packages/bc/__pycache__/{m}.{TAG}.pyc"
                                 for m in ("__init__", "util")]
    first, _, warm = (b for _, b in got)
    assert (first.compiled, first.reused, warm.compiled, warm.reused) == (2, 0, 0, 2)
    assert first.failed == warm.failed == (
        "lib/python3.11/site-packages/bc/broken.py: SyntaxError: invalid syntax "
        "(broken.py, line 1)".replace("3.11", LINE),)


def test_pyc_header_and_code_name_the_installed_file(tmp_path: Path) -> None:
    """Checked-hash header of the source; the code's co_filename is the prefix-relative path
    (the same bytes wherever the prefix is), and the running code names the installed file:
    Python loads the pycs as they are, fixes co_filename to the source's real path and leaves
    the files alone."""
    env = bc_lock(tmp_path)
    stage, final = tmp_path / "stage", tmp_path / "final"
    install_prefix(env, "linux-64", stage, final=str(final), cache=tmp_path / "cache",
                   interpreter=sys.executable, bytecode=True,
                   sources=Sources(file_roots=(tmp_path,)))
    os.rename(stage, final)
    site = final / "lib" / f"python{LINE}" / "site-packages"
    pyc = site / "bc" / "__pycache__" / f"util.{TAG}.pyc"
    data = pyc.read_bytes()
    source = (site / "bc" / "util.py").read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(data[4:8], "little") == 0b11        # hash-based, checked
    assert data[8:16] == importlib.util.source_hash(source)
    assert marshal.loads(data[16:]).co_filename == f"lib/python{LINE}/site-packages/bc/util.py"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in site.rglob("*.pyc")}
    run = subprocess.run([str(final / "bin" / "python"), "-c",
                          "import bc, traceback; print(bc.twice(21), bc.util.__file__, "
                          "bc.twice.__code__.co_filename, bc.util.K.__module__); "
                          "bc.twice(None)"], capture_output=True, text=True)
    util = site / "bc" / "util.py"
    assert run.stdout == f"42 {util} {util} bc.util\n", run.stderr
    assert f'File "{util}", line 2, in twice' in run.stderr  # the traceback names the file
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in site.rglob("*.pyc")} == before


def test_another_prefix_path_reuses_the_pycs(tmp_path: Path) -> None:
    """The pycs do not name the prefix: an install into another path places the same bytes
    from the cache, compiling nothing, and the second install's verify proves them by their
    seal (a stat) from the verdicts the first one left."""
    env = bc_lock(tmp_path)
    cache = tmp_path / "cache"
    a = install_prefix(env, "linux-64", tmp_path / "a", final=str(tmp_path / "a"), cache=cache,
                       interpreter=sys.executable, bytecode=True,
                   sources=Sources(file_roots=(tmp_path,)))
    b = install_prefix(env, "linux-64", tmp_path / "b", final=str(tmp_path / "b"), cache=cache,
                       interpreter=sys.executable, bytecode=True,
                   sources=Sources(file_roots=(tmp_path,)))
    assert (a.bytecode.compiled, b.bytecode.compiled, b.bytecode.reused) == (2, 0, 2)
    assert pycs(tmp_path / "a") == pycs(tmp_path / "b") != {}
    assert b.bytecode.checked  # the entry's seal was checked before it was placed


def test_no_interpreter_that_runs_compiles_nothing(tmp_path: Path) -> None:
    """A conda prefix whose python does not run here: nothing compiled, and the report says
    why; a prefix for another platform is not even tried."""
    py = CondaPkg(name="python", version=f"{LINE}.0",
                  files={f"bin/python{LINE}": b"#!/bin/sh\nexit 3\n"},
                  executables=(f"bin/python{LINE}",))
    noarch = CondaPkg(name="purepy", version="1.0", build="pyh0_0", subdir="noarch",
                      noarch="python", files={"site-packages/purepy.py": b"X = 1\n"})
    archives = write_channel(tmp_path / "channel", [py, noarch])
    env = write_lock(tmp_path / "c.conda-lock.yml",
                     [locked_conda(a) for a in archives.values()])
    prefix = tmp_path / "env"
    report = install_prefix(env, "linux-64", prefix, final=str(prefix),
                            cache=tmp_path / "cache", bytecode=True)
    assert report.bytecode.skipped == (f"{prefix}/bin/python{LINE} cannot run here: exit 3")
    assert not list(prefix.rglob("*.pyc"))
    other = install_prefix(env, "linux-64", tmp_path / "env2", final=str(tmp_path / "env2"),
                           cache=tmp_path / "cache", bytecode=True, host="linux-aarch64")
    assert other.bytecode.skipped == ("the environment is for linux-64, this machine is "
                                      "linux-aarch64")


def test_a_relative_cache_folder_keeps_its_pycs(tmp_path: Path, monkeypatch) -> None:
    """``--cache-dir cache`` (relative): the compilers run in folders of their own, yet their
    pycs land in the cache, and a second install places them (before, the entry's tree was
    empty and every later install failed: 'missing from the cache')."""
    env = bc_lock(tmp_path)
    monkeypatch.chdir(tmp_path)
    reports = []
    for target in ("a", "a2"):
        prefix = tmp_path / target
        reports.append(install_prefix(env, "linux-64", prefix, final=str(tmp_path / "a"),
                                      cache=Path("cache"), interpreter=sys.executable,
                                      bytecode=True, sources=Sources(file_roots=(tmp_path,))))
    first, second = (r.bytecode for r in reports)
    assert (first.compiled, second.compiled, second.reused) == (2, 0, 2)
    assert pycs(tmp_path / "a") == pycs(tmp_path / "a2") != {}


def test_a_damaged_pyc_entry_is_compiled_again(tmp_path: Path) -> None:
    """A pyc missing from its cache entry (or of another size) makes the entry evicted and
    compiled afresh, never an install that cannot place it."""
    env = bc_lock(tmp_path)
    cache = tmp_path / "cache"

    def install(target: str):
        return install_prefix(env, "linux-64", tmp_path / target, final=str(tmp_path / "a"),
                              cache=cache, interpreter=sys.executable, bytecode=True,
                              sources=Sources(file_roots=(tmp_path,))).bytecode

    install("a")
    (util,) = (cache / "pyc").glob(f"*/*/tree/**/util.{TAG}.pyc")
    util.unlink()
    again = install("b")
    assert (again.compiled, again.reused) == (2, 0)
    (init,) = (cache / "pyc").glob(f"*/*/tree/**/__init__.{TAG}.pyc")
    data = init.read_bytes()
    init.unlink()  # another inode: prefix a, linked to the old one, keeps its bytes
    init.write_bytes(data + b"\0")
    assert (install("c").compiled, install("d").reused) == (2, 2)
    assert pycs(tmp_path / "a") == pycs(tmp_path / "b") == pycs(tmp_path / "c") \
        == pycs(tmp_path / "d")
    (util,) = (cache / "pyc").glob(f"*/*/tree/**/util.{TAG}.pyc")
    os.chmod(util, 0o644)  # a write in place that keeps the size and the mode: the seal sees
    with open(util, "r+b") as f:  # the moved ctime, the hash the other bytes
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    os.chmod(util, 0o444)
    assert install("e").compiled == 2


def _verify_side(prefix: Path):
    """The prefix as ``verify env`` sees it: its manifest (with the base interpreter's binary
    and libpython, not its whole stdlib), the interpreter's identity and its probe."""
    from verify.env.interpreter import identity, locate, probe
    from verify.env.manifest import build_manifest
    from verify.env.scaffold import read_pyvenv_cfg

    loc = locate(prefix, "venv", read_pyvenv_cfg(prefix))
    manifest = build_manifest(prefix, outside=tuple(p for p in (loc.binary, loc.libpython) if p))
    found = probe(loc.executable)
    return manifest, identity(manifest, loc, found), found, loc.executable


def test_the_install_hands_its_verdicts_to_its_verify(tmp_path: Path) -> None:
    """Each pyc the install compiles comes with the checker's verdict on the bytes written
    (``same hash-ok``); the verify takes them for its own interpreter only, they are exactly
    what the checker answers on a cache of its own, and a pyc changed after the install is
    compiled and found."""
    from verify.env.bytecode import check_bytecode
    from verify.env.pycheck import Handed, run_checker

    env = bc_lock(tmp_path)
    prefix = tmp_path / "env"
    report = install_prefix(env, "linux-64", prefix, final=str(prefix), cache=tmp_path / "cache",
                            interpreter=sys.executable, bytecode=True,
                            sources=Sources(file_roots=(tmp_path,)))
    bc = report.bytecode
    assert sorted(v for *_, v in bc.verdicts) == ["same hash-ok", "same hash-ok"]
    calls: list[int] = []

    def runner(executable, batch):
        calls.append(len(batch))
        return run_checker(executable, batch)

    def check(folder: str, handed):
        manifest, ident, found, exe = _verify_side(prefix)
        return check_bytecode(manifest, executable=exe, runs=True, cache_tag=found.cache_tag,
                              magic=found.magic, ident=ident, cache=tmp_path / folder,
                              handed=handed, runner=runner)

    got = check("v1", Handed(bc.identity, bc.verdicts))
    assert (got.checked, got.handed, got.compiled, got.findings, calls) == (2, 2, 0, (), [])
    fresh = check("v2", None)  # the checker itself, nothing handed
    assert (fresh.checked, fresh.handed, fresh.compiled, calls) == (2, 0, 2, [2])
    lines = [sorted((tmp_path / v / "bytecode").glob("*.v2")) for v in ("v1", "v2")]
    assert [p.name for p in lines[0]] == [p.name for p in lines[1]]  # one interpreter key
    assert sorted(lines[0][0].read_text().splitlines()) == \
        sorted(lines[1][0].read_text().splitlines())
    other = Handed({**bc.identity, "binary_sha256": "0" * 64}, bc.verdicts)
    calls.clear()
    assert (check("v3", other).handed, calls) == (0, [2])  # another interpreter's: not taken

    # a pyc replaced after the install (header valid for its source, another body)
    rel = f"lib/python{LINE}/site-packages/bc/__pycache__/util.{TAG}.pyc"
    head = (prefix / rel).read_bytes()[:16]
    code = compile("def twice(x):\n    return 3 * x\n", "util.py", "exec")
    (prefix / rel).unlink()
    (prefix / rel).write_bytes(head + marshal.dumps(code, 2))
    calls.clear()
    after = check("v4", Handed(bc.identity, bc.verdicts))
    assert (after.handed, calls) == (1, [1])
    assert [(f.path, f.detail) for f in after.findings] == [
        (rel, f"differs from a fresh compile of lib/python{LINE}/site-packages/bc/util.py")]

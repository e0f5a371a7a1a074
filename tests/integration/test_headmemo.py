"""The head memo (verify.env.headmemo, issue 44): a sealed ELF file's dynamic section and a
pyc's header are read once per cache entry, then taken from beside the seal; only where the seal
is trusted, only for a file the seal vouches for, and never hiding a write.

The ELF file is a real one: this interpreter's own ``math`` extension (its DT_NEEDED are the
C library's), installed as a wheel's member by real installs."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from samebits.install.cache import UNPACKED
from tests.fixtures.install import locked_wheel, wheel, write_lock
from tests.integration.test_install_seal import LINE, SITE, _restore_times, install, samebits
from verify.env import headmemo
from verify.env.elfinfo import read_elf_info

EXT = Path(math.__file__)  # lib-dynload/math.cpython-3XY-<platform>.so


def _lock(folder: Path) -> Path:
    w = wheel(folder / "wheels", "gamma", "1.0",
              {"gamma/__init__.py": b"G = 1\n", f"gamma/{EXT.name}": EXT.read_bytes()})
    return write_lock(folder / "lockfiles" / "g.conda-lock.yml", [locked_wheel(w)],
                      python=LINE).path


def _memo(cache: Path) -> tuple[Path, dict]:
    (path,) = (cache / UNPACKED).glob(f"*/{headmemo.FILE}")
    return path, json.loads(path.read_bytes())


def _verify(target: Path, lock: Path, cache: Path, *extra: str) -> tuple[int, dict]:
    """verify env with its linkage check (install's own verify has it too)."""
    proc = samebits("verify", "env", str(lock), "--prefix", str(target), "--platform",
                    "linux-64", "--cache-dir", str(cache), "--json", *extra, cwd=lock.parent)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.slow  # whole installs, as test_install_seal's second half
def test_heads_are_read_once_and_then_remembered(tmp_path: Path) -> None:
    """The first install's verify reads the .so's dynamic section and writes it beside the
    entry's seal, byte-stable, keyed by the file's sha256; a second install (and verify env
    --trust-seal) takes it from there and reports the same linkage, digests and findings as a
    verify that reads every byte."""
    lock, cache = _lock(tmp_path), tmp_path / "cache"
    rc, first = install(lock, tmp_path / "env", cache)
    assert rc == 0 and first["identical"] is True
    path, doc = _memo(cache)
    placed = tmp_path / "env" / SITE / "gamma" / EXT.name
    import hashlib

    sha = hashlib.sha256(placed.read_bytes()).hexdigest()
    with placed.open("rb") as f:
        real = read_elf_info(f)
    assert doc["kind"] == headmemo.KIND and doc["heads"][sha][0][3] == list(real.needed)
    before = path.read_bytes()
    rc, second = install(lock, tmp_path / "env2", cache)
    assert rc == 0 and second["identical"] is True
    assert path.read_bytes() == before  # nothing new to remember: not written again
    assert second["verify"]["linkage"] == first["verify"]["linkage"]
    rc, trusted = _verify(tmp_path / "env2", lock, cache, "--trust-seal")
    rc2, hashed = _verify(tmp_path / "env2", lock, cache)
    assert rc == rc2 == 0
    assert trusted["proof"]["trust_seal"] is True and hashed["proof"]["trust_seal"] is False
    for key in ("linkage", "digests", "findings"):
        assert trusted[key] == hashed[key], key


@pytest.mark.slow
def test_the_memo_is_used_only_where_the_seal_is_trusted(tmp_path: Path) -> None:
    """Proof that the memo stands in for the read, and where: a memo edited to say the .so
    needs a library that exists nowhere is believed by the trusted verify (the cache's owner
    could as well edit the seal: the documented boundary) and never by the plain verify env,
    which reads every head (and so every audit)."""
    lock, cache = _lock(tmp_path), tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    path, doc = _memo(cache)
    for fields in doc["heads"].values():
        if fields[0] is not None:
            fields[0][3] = ["libnowhere-samebits.so.9"]
    path.write_text(json.dumps(doc))
    rc, plain = _verify(tmp_path / "env", lock, cache)
    assert rc == 0 and "libnowhere-samebits.so.9" not in json.dumps(plain)
    rc, trusted = _verify(tmp_path / "env", lock, cache, "--trust-seal")
    assert "libnowhere-samebits.so.9" in json.dumps(trusted["linkage"])
    path.write_text("{torn")  # a memo that does not parse is read past and written again
    rc, again = _verify(tmp_path / "env", lock, cache, "--trust-seal")
    assert rc == 0 and again["linkage"] == plain["linkage"]
    assert _memo(cache)[1]["kind"] == headmemo.KIND


def test_a_write_through_a_link_is_caught_with_a_memo(tmp_path: Path) -> None:
    """The .so rewritten in place through its link, size and mtime kept: the seal no longer
    vouches (ctime moved), so neither verify takes its remembered head, and both name it.
    In CI (not slow): it also guards what a slow test alone had seen, that the RECORD-slip
    rule once hashed the 'archive member' from the cache's tree, which a default install
    hardlinks, and so explained this very write away as the wheel's own slip (exit 0)."""
    lock, cache = _lock(tmp_path), tmp_path / "cache"
    assert install(lock, tmp_path / "env", cache)[0] == 0
    assert install(lock, tmp_path / "env2", cache)[0] == 0  # the memo is there and used
    placed = tmp_path / "env2" / SITE / "gamma" / EXT.name
    st = placed.stat()
    os.chmod(placed, 0o755)
    data = bytearray(placed.read_bytes())
    data[-1] ^= 1
    with open(placed, "r+b") as f:
        f.write(data)
    os.chmod(placed, st.st_mode & 0o777)
    _restore_times(placed, st)
    for extra in ((), ("--trust-seal",)):
        rc, doc = _verify(tmp_path / "env2", lock, cache, *extra)
        assert rc == 1, extra
        assert ("modified", f"{SITE}/gamma/{EXT.name}") in {
            (f["kind"], f.get("path")) for f in doc["findings"]}

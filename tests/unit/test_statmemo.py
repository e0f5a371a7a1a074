"""The stat memo of the base interpreter's files: a stat proves a file only when it is the
remembered inode to the nanosecond, and only where the caller trusts it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from verify.env.manifest import build_manifest
from verify.env.statmemo import StatMemo


def _setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "pyvenv.cfg").write_text("home = /nowhere\n")
    base = tmp_path / "base"
    (base / "__pycache__").mkdir(parents=True)
    (base / "os.py").write_bytes(b"X = 1\n")
    (base / "big.bin").write_bytes(b"\1" * 70_000)
    return prefix, base, tmp_path / "cache"


def _outside(prefix: Path, base: Path, cache: Path, *, trusted: bool):
    memo = StatMemo(cache, [str(base)], trusted=trusted)
    m = build_manifest(prefix, jobs=1, elf=False, outside=(str(base),), memo=memo)
    return {e.path: e.sha256 for e in m.outside}, m


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_remembered_stat_proves_the_file_and_nothing_else(tmp_path: Path) -> None:
    prefix, base, cache = _setup(tmp_path)
    first, m1 = _outside(prefix, base, cache, trusted=True)
    # by_hash counts the prefix's pyvenv.cfg too (the memo is for outside files only)
    assert (m1.by_memo, m1.by_hash) == (0, 3)  # nothing remembered yet: both hashed
    again, m2 = _outside(prefix, base, cache, trusted=True)
    assert again == first and (m2.by_memo, m2.by_hash) == (2, 1)
    # the same size, the mtime set back: the ctime moved, so it is hashed again
    target = base / "big.bin"
    st = target.stat()
    target.write_bytes(b"\2" * 70_000)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed, m3 = _outside(prefix, base, cache, trusted=True)
    assert changed[str(target)] == _sha(target) != first[str(target)]
    assert (m3.by_memo, m3.by_hash) == (1, 2)


def test_an_untrusted_memo_is_never_used_but_is_refreshed(tmp_path: Path) -> None:
    prefix, base, cache = _setup(tmp_path)
    _outside(prefix, base, cache, trusted=False)
    _, m = _outside(prefix, base, cache, trusted=False)
    assert (m.by_memo, m.by_hash) == (0, 3)
    _, trusted = _outside(prefix, base, cache, trusted=True)
    assert trusted.by_memo == 2  # what the untrusted runs hashed was remembered


def test_a_damaged_memo_is_ignored(tmp_path: Path) -> None:
    prefix, base, cache = _setup(tmp_path)
    first, _ = _outside(prefix, base, cache, trusted=True)
    (memo_file,) = (cache / "statmemo").iterdir()
    memo_file.write_text('{"format": 1, "kind": "samebits.statmemo", "files": [[1]]}')
    again, m = _outside(prefix, base, cache, trusted=True)
    assert again == first and (m.by_memo, m.by_hash) == (0, 3)
    memo_file.write_bytes(b"\0not json")
    assert _outside(prefix, base, cache, trusted=True)[1].by_hash == 3
    assert _outside(prefix, base, cache, trusted=True)[1].by_memo == 2  # written again


def test_a_row_of_the_wrong_type_proves_nothing(tmp_path: Path) -> None:
    """The memo's rows are taken as JSON typed them: a stat field written as text never
    equals the stat, a sha256 that is not text drops the row; either way the file is hashed,
    and the memo written again from that hash."""
    prefix, base, cache = _setup(tmp_path)
    first, _ = _outside(prefix, base, cache, trusted=True)
    (memo_file,) = (f for f in (cache / "statmemo").iterdir() if f.suffix == ".json")
    doc = json.loads(memo_file.read_bytes())
    doc["files"][0][3] = str(doc["files"][0][3])  # the size as text
    doc["files"][1][7] = 0                          # a sha256 that is a number
    memo_file.write_text(json.dumps(doc))
    again, m = _outside(prefix, base, cache, trusted=True)
    assert again == first and (m.by_memo, m.by_hash) == (0, 3)
    assert _outside(prefix, base, cache, trusted=True)[1].by_memo == 2  # written again


def test_the_memo_file_is_byte_stable(tmp_path: Path) -> None:
    prefix, base, cache = _setup(tmp_path)
    _outside(prefix, base, cache, trusted=False)
    (memo_file,) = (cache / "statmemo").iterdir()
    data = memo_file.read_bytes()
    memo_file.unlink()
    _outside(prefix, base, cache, trusted=False)
    assert memo_file.read_bytes() == data


def test_the_interpreter_binary_is_read_once_while_its_stat_stays(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """``locate`` reads the interpreter binary's dynamic section (pyelftools) to find its
    libpython; with ``facts`` (where the seals are trusted) the answer is kept by the
    binary's stat and the next run neither opens the binary nor imports pyelftools; a binary
    rewritten in place (size and mtime kept) is read again; without ``facts`` it always is."""
    from tests.fixtures.producers import copy_interpreter
    from verify.env import interpreter

    binary = str(copy_interpreter(tmp_path / "base"))
    cache = tmp_path / "cache"
    reads: list[str] = []
    real = interpreter.read_elf_info

    def counted(stream):
        reads.append(stream.name)
        return real(stream)

    monkeypatch.setattr(interpreter, "read_elf_info", counted)
    first = interpreter.binary_facts(binary, cache)
    assert first is not None and first.error is None and reads == [binary]
    assert interpreter.binary_facts(binary, cache) == first and len(reads) == 1
    assert interpreter.binary_facts(binary, None) == first and len(reads) == 2
    st = os.stat(binary)
    data = Path(binary).read_bytes()
    Path(binary).write_bytes(data)  # the same bytes, the same size and mtime: ctime moved
    os.utime(binary, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert interpreter.binary_facts(binary, cache) == first and len(reads) == 3
    assert interpreter.binary_facts(binary, cache) == first and len(reads) == 3
    memo = cache / "statmemo" / interpreter.BINARIES
    doc = json.loads(memo.read_bytes())
    doc["files"][0][3] = str(doc["files"][0][3])  # the size as text: proves nothing
    memo.write_text(json.dumps(doc))
    assert interpreter.binary_facts(binary, cache) == first and len(reads) == 4

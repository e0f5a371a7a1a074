"""samebits.install.unpack: a proved archive into a cache entry, every way a wheel or a conda
package can lie about its own files named (RECORD, info/paths.json, links inside the archive).
Real archives written with zipfile and tarfile; nothing runs."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

from samebits.install.fetch import Fetched
from samebits.install.unpack import UnpackError, archive_kind, unpack
from tests.fixtures.install import locked_conda, locked_wheel

DIST = "demo-1.0.dist-info"


def _row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(folder: Path, members: list[tuple[str, bytes]], record: str | None = None) -> Path:
    """demo-1.0-py3-none-any.whl holding ``members`` (in order, duplicates kept) and a RECORD
    (by default the right one for them)."""
    path = folder / "demo-1.0-py3-none-any.whl"
    if record is None:
        record = "\n".join([*(_row(n, d) for n, d in members), f"{DIST}/RECORD,,"]) + "\n"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
            zf.writestr(f"{DIST}/RECORD", record)
    return path


WHEEL_META = [(f"{DIST}/METADATA", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"),
              (f"{DIST}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")]


def _unpack(path: Path, cache: Path, locked=locked_wheel):
    data = path.read_bytes()
    return unpack(Fetched(package=locked(path), path=path, sha256=hashlib.sha256(data)
                          .hexdigest(), md5=hashlib.md5(data).hexdigest(), size=len(data)),
                  cache)


def _problems(path: Path, tmp_path: Path, locked=locked_wheel) -> list[str]:
    with pytest.raises(UnpackError) as err:
        _unpack(path, tmp_path / "cache", locked)
    return err.value.problems


def test_archive_kind() -> None:
    assert [archive_kind(n) for n in ("a.whl", "a.conda", "a.tar.bz2")] == [
        "wheel", "conda", "conda"]
    with pytest.raises(UnpackError) as err:
        archive_kind("a.zip")
    assert err.value.problems == [
        "a.zip: not a conda package (.tar.bz2, .conda) or a wheel (.whl)"]


def test_a_good_wheel_unpacks_with_its_notes(tmp_path: Path) -> None:
    """Every member with its sha256 and size; bytecode the wheel ships is noted, not kept."""
    members = [*WHEEL_META, ("demo/__init__.py", b"x = 1\n"),
               ("demo/__pycache__/__init__.cpython-311.pyc", b"\0" * 8)]
    entry = _unpack(_wheel(tmp_path, members), tmp_path / "cache")
    got = {m.path: (m.sha256, m.size) for m in entry.members}
    assert got["demo/__init__.py"] == (hashlib.sha256(b"x = 1\n").hexdigest(), 6)
    assert not any("__pycache__" in p for p in got)
    assert entry.notes == ("demo/__pycache__/__init__.cpython-311.pyc: bytecode shipped in "
                           "the wheel, not installed",)
    assert (entry.tree / "demo" / "__init__.py").read_bytes() == b"x = 1\n"


def test_every_record_lie_is_named(tmp_path: Path) -> None:
    """A member RECORD does not list, one without hash or size, one hashed with md5, one
    whose bytes differ from its row: each named in a note, and the archive's own bytes
    unpacked (the archive is the one the lock pins; pip and uv install such a wheel)."""
    members = [*WHEEL_META, ("demo/a.py", b"a"), ("demo/b.py", b"b"), ("demo/c.py", b"c"),
               ("demo/d.py", b"d")]
    md5 = base64.urlsafe_b64encode(hashlib.md5(b"c").digest()).rstrip(b"=").decode()
    wrong = _row("demo/d.py", b"not d")
    record = "\n".join([*(_row(n, d) for n, d in WHEEL_META), "demo/b.py,,",
                        f"demo/c.py,md5={md5},1", wrong, f"{DIST}/RECORD,,"]) + "\n"
    entry = _unpack(_wheel(tmp_path, members, record), tmp_path / "cache")
    slip = "the wheel's RECORD is wrong about it (the archive is the locked one: its bytes " \
           "are placed, and the installed RECORD says what they are)"
    assert entry.notes == (
        f"demo/a.py: {slip}: not mentioned in it",
        f"demo/b.py: {slip}: no hash or size in it",
        f"demo/c.py: {slip}: its hash 'md5' is not an accepted algorithm",
        f"demo/d.py: {slip}: its hash / size ({wrong.split(',')[1]}, 5 bytes) are not the "
        "member's (1 bytes)")
    got = {m.path: (m.sha256, m.size) for m in entry.members}
    assert got["demo/d.py"] == (hashlib.sha256(b"d").hexdigest(), 1)  # the archive's bytes


@pytest.mark.parametrize("split", [False, True])
def test_a_large_wheel_written_on_threads_gives_the_same_entry(tmp_path: Path, monkeypatch,
                                                                split: bool) -> None:
    """A wheel above ``SPLIT_BYTES`` is written member by member on threads, largest first:
    the same members, hashes, modes and notes, in the archive's order, as one thread gives
    (the threshold lowered so a small wheel takes that path)."""
    from samebits.install import unpack as unpack_mod

    if split:
        monkeypatch.setattr(unpack_mod, "SPLIT_BYTES", 0)
    big = bytes(range(256)) * 4096
    members = [*WHEEL_META, *((f"demo/m{i:02}.py", bytes([i]) * (i * 97)) for i in range(40)),
               ("demo/big.bin", big), ("demo/__pycache__/x.cpython-312.pyc", b"pyc")]
    wrong = _row("demo/m07.py", b"no")
    record = "\n".join([*(_row(n, d) for n, d in members if n not in (
        "demo/m03.py", "demo/m07.py")), wrong, f"{DIST}/RECORD,,"]) + "\n"
    entry = _unpack(_wheel(tmp_path, members, record), tmp_path / "cache")
    slip = "the wheel's RECORD is wrong about it (the archive is the locked one: its bytes " \
           "are placed, and the installed RECORD says what they are)"
    assert entry.notes == (
        f"demo/m03.py: {slip}: not mentioned in it",
        f"demo/m07.py: {slip}: its hash / size ({wrong.split(',')[1]}, 2 bytes) are not the "
        "member's (679 bytes)",
        "demo/__pycache__/x.cpython-312.pyc: bytecode shipped in the wheel, not installed")
    got = {m.path: (m.sha256, m.size) for m in entry.members}
    assert got == {n: (hashlib.sha256(d).hexdigest(), len(d)) for n, d in
                   [*members[:-1], (f"{DIST}/RECORD", record.encode())]}
    assert (entry.tree / "demo/big.bin").read_bytes() == big


def test_a_member_twice_is_named(tmp_path: Path) -> None:
    members = [*WHEEL_META, ("demo/a.py", b"a"), ("demo/a.py", b"a")]
    wheel = _wheel(tmp_path, members)
    assert _problems(wheel, tmp_path) == [f"{wheel.name}: demo/a.py: member appears twice"]


def test_a_wheel_without_its_metadata_or_with_a_broken_record(tmp_path: Path) -> None:
    """No .dist-info at all: installer's own complaint, named by the file; a RECORD row
    installer cannot read: 'unreadable RECORD'."""
    bare = tmp_path / "bare" / "demo-1.0-py3-none-any.whl"
    bare.parent.mkdir()
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr("demo/__init__.py", b"")
    (problem,) = _problems(bare, tmp_path)
    assert problem.startswith(f"{bare.name}: ")
    broken = _wheel(tmp_path, [*WHEEL_META], record="a,b,c,d,e\n")
    (problem,) = _problems(broken, tmp_path)
    assert problem.startswith(f"{broken.name}: unreadable RECORD: ")


# --------------------------------------------------------------------------------- conda

def _conda(folder: Path, members: list[tarfile.TarInfo | tuple[str, bytes]],
           paths: object | None = None) -> Path:
    """demo-1.0-h0_0.tar.bz2 with ``members`` (files as (name, bytes), or TarInfos) and an
    info/paths.json (by default the right one for the files)."""
    files = [m for m in members if isinstance(m, tuple)]
    if paths is None:
        paths = {"paths_version": 1, "paths": [
            {"_path": n, "path_type": "hardlink", "sha256": hashlib.sha256(d).hexdigest(),
             "size_in_bytes": len(d)} for n, d in files]}
    path = folder / "demo-1.0-h0_0.tar.bz2"
    with tarfile.open(path, "w:bz2") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))

        add("info/index.json", json.dumps({"name": "demo", "version": "1.0"}).encode())
        add("info/paths.json", json.dumps(paths).encode() if not isinstance(paths, bytes)
            else paths)
        for m in members:
            if isinstance(m, tuple):
                add(*m)
            else:
                tar.addfile(m)
    return path


def _link(name: str, target: str, kind: bytes = tarfile.LNKTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, target, 0o755
    return info


def test_a_good_conda_package_with_links(tmp_path: Path) -> None:
    """Files, a softlink and a hardlink to an earlier file: all in the entry."""
    pkg = _conda(tmp_path, [("bin/tool", b"#!/bin/sh\n"), _link("bin/same", "bin/tool"),
                            _link("bin/soft", "tool", tarfile.SYMTYPE)])
    entry = _unpack(pkg, tmp_path / "cache", locked_conda)
    got = {m.path: m for m in entry.members}
    assert got["bin/same"].type == "file" and got["bin/same"].sha256 == got["bin/tool"].sha256
    assert (got["bin/soft"].type, got["bin/soft"].target) == ("symlink", "tool")


def test_a_hardlink_to_nothing_earlier_is_named(tmp_path: Path) -> None:
    pkg = _conda(tmp_path, [("lib/a", b"a"), _link("lib/b", "lib/later")])
    assert _problems(pkg, tmp_path, locked_conda) == [
        f"{pkg.name}: lib/b: hardlink to 'lib/later', which is not an earlier file of the "
        "archive"]


def test_paths_json_lies_are_named(tmp_path: Path) -> None:
    """paths.json listing a file the archive lacks, another sha256, another size, an entry
    without _path: each named."""
    paths = {"paths": [
        {"_path": "lib/a", "sha256": "0" * 64, "size_in_bytes": 1},
        {"_path": "lib/b", "sha256": hashlib.sha256(b"b").hexdigest(), "size_in_bytes": 9},
        {"_path": "lib/gone", "sha256": "1" * 64},
        {"_path": "lib/dir", "path_type": "directory"},
        {"no": "path"}]}
    pkg = _conda(tmp_path, [("lib/a", b"a"), ("lib/b", b"b")], paths)
    a = hashlib.sha256(b"a").hexdigest()
    assert _problems(pkg, tmp_path, locked_conda) == [
        f"{pkg.name}: lib/a: sha256 {a} differs from info/paths.json ({'0' * 64})",
        f"{pkg.name}: lib/b: 1 bytes, info/paths.json says 9",
        f"{pkg.name}: info/paths.json lists lib/gone, which the archive does not hold",
        f"{pkg.name}: info/paths.json: an entry without _path"]


def test_unreadable_paths_json_and_archive(tmp_path: Path) -> None:
    pkg = _conda(tmp_path, [("lib/a", b"a")], paths=b"{not json")
    (problem,) = _problems(pkg, tmp_path, locked_conda)
    assert problem.startswith(f"{pkg.name}: info/paths.json is unreadable: ")
    torn = tmp_path / "torn" / "demo-1.0-h0_0.tar.bz2"
    torn.parent.mkdir()
    torn.write_bytes(b"BZh91AY&SY" + bytes(range(256)) * 4)  # a bz2 header, then noise
    (problem,) = _problems(torn, tmp_path, locked_conda)  # the scan before the unpack sees it
    assert problem.startswith(f"{torn.name}: ") and "unreadable archive" in problem


CATBOOST = Path(__file__).resolve().parents[1] / "data" / "pypi" / "catboost-1.0.3"


def _catboost_wheel(folder: Path, *, record_rows: list[str] | None = None) -> Path:
    """A wheel of real catboost 1.0.3 members and their real RECORD rows, which pad the base64
    of every sha256 (tests/data/pypi/README.md)."""
    rows = record_rows or (CATBOOST / "RECORD.rows").read_text().splitlines()
    path = folder / "catboost-1.0.3-cp310-none-macosx_10_6_intel.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for row in rows:
            name = row.split(",")[0]
            zf.writestr(name, (CATBOOST / "members" / name).read_bytes())
        zf.writestr("catboost-1.0.3.dist-info/RECORD",
                    "\n".join([*rows, "catboost-1.0.3.dist-info/RECORD,,"]) + "\n")
    return path


def test_a_record_that_pads_its_base64_unpacks(tmp_path: Path) -> None:
    """catboost 1.0.3's RECORD writes ``sha256=...=``: the digests are compared as bytes, so
    every member whose bytes match its row unpacks (pip and installer accept the wheel)."""
    entry = _unpack(_catboost_wheel(tmp_path), tmp_path / "cache")
    version = (CATBOOST / "members" / "catboost" / "version.py").read_bytes()
    got = {m.path: (m.sha256, m.size) for m in entry.members}
    assert got["catboost/version.py"] == (hashlib.sha256(version).hexdigest(), len(version))
    assert len(got) == 7  # six members and the RECORD


@pytest.mark.parametrize(("row", "note"), [
    # padded, but of other bytes: still named
    ("catboost/version.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=,18",
     "its hash / size (sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU=, 18 bytes) are not "
     "the member's (18 bytes)"),
    # the right padded digest with a wrong size
    ("catboost/version.py,sha256=6TGDRMdxulJAbJLtMADbInJSxlqa-QPDo5hRjYk2Zzo=,19",
     "its hash / size (sha256=6TGDRMdxulJAbJLtMADbInJSxlqa-QPDo5hRjYk2Zzo=, 19 bytes) are not "
     "the member's (18 bytes)"),
    # not base64 at all
    ("catboost/version.py,sha256=6TGDRMdx!!,18",
     "its hash not <algorithm>=<base64 digest>: 'sha256=6TGDRMdx!!'"),
])
def test_a_padded_record_still_names_every_lie(tmp_path: Path, row: str, note: str) -> None:
    rows = [r if not r.startswith("catboost/version.py,") else row
            for r in (CATBOOST / "RECORD.rows").read_text().splitlines()]
    entry = _unpack(_catboost_wheel(tmp_path, record_rows=rows), tmp_path / "cache")
    assert [n for n in entry.notes if n.startswith("catboost/version.py: ")] == [
        "catboost/version.py: the wheel's RECORD is wrong about it (the archive is the locked "
        f"one: its bytes are placed, and the installed RECORD says what they are): {note}"]


@pytest.mark.network
def test_the_real_catboost_wheel_unpacks(tmp_path: Path) -> None:
    """The whole catboost 1.0.3 wheel for CPython 3.10 on linux (76 MB) from PyPI."""
    from urllib.request import urlopen

    url = ("https://files.pythonhosted.org/packages/05/10/10c4a4d0e63dc018578e70ec538d09ad4c727"
           "534f995b06016c4d7e550fb/catboost-1.0.3-cp310-none-manylinux1_x86_64.whl")
    path = tmp_path / url.rsplit("/", 1)[1]
    with urlopen(url, timeout=120) as r, open(path, "wb") as f:
        while chunk := r.read(1 << 20):
            f.write(chunk)
    entry = _unpack(path, tmp_path / "cache")
    assert any(m.path == "catboost/_catboost.so" for m in entry.members)

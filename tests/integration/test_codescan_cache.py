"""The code scan's cache: a file's device-code summary kept by its proven sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.fixtures.fatbin import Sec, elf, fatbin, ptx, sass
from verify.kernels.codescan import ScanCache, scan_prefix, scanner_digest


def prefix_with_kernels(root: Path) -> dict[str, str]:
    lib = root / "lib"
    lib.mkdir(parents=True)
    (lib / "libk.so").write_bytes(elf([Sec(".nv_fatbin", fatbin([sass(80), ptx(90)]))]))
    (lib / "libplain.so").write_bytes(elf([Sec(".text", b"\x90" * 64)]))
    (lib / "notes.so.txt").write_bytes(b"not an ELF file")
    return {f"lib/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
            for p in lib.iterdir()}


def test_cached_scan_is_the_scan(tmp_path: Path) -> None:
    """With a cache, the first scan writes one entry per proven file and the second reads
    them: both equal the scan without a cache, byte for byte in their documents."""
    prefix = tmp_path / "env"
    known = prefix_with_kernels(prefix)
    files = sorted(known)
    plain = scan_prefix(prefix, files=files, stack_paths=[], owners={})
    cache = tmp_path / "cache"
    first = scan_prefix(prefix, files=files, stack_paths=[], owners={}, known=known,
                        cache=cache)
    entries = sorted(p.name for p in (cache / "codescan").rglob("*.json"))
    assert entries == sorted(f"{sha}.json" for sha in known.values())
    second = scan_prefix(prefix, files=files, stack_paths=[], owners={}, known=known,
                         cache=cache)
    assert plain.to_dict() == first.to_dict() == second.to_dict()
    assert [lib.path for lib in plain.libraries] == ["lib/libk.so"]


def test_the_cache_is_read_by_sha256_and_scanner(tmp_path: Path) -> None:
    """An entry answers for its sha256 only, under the scanner's own digest: a file the
    caller proves to have other bytes is scanned, and entries of another scanner are never
    read."""
    prefix = tmp_path / "env"
    known = prefix_with_kernels(prefix)
    cache = tmp_path / "cache"
    files = sorted(known)
    scan_prefix(prefix, files=files, stack_paths=[], owners={}, known=known, cache=cache)
    # the kernel library's bytes change, and its caller says so (another sha256)
    k = prefix / "lib" / "libk.so"
    k.write_bytes(elf([Sec(".nv_fatbin", fatbin([sass(70)]))]))
    now = {**known, "lib/libk.so": hashlib.sha256(k.read_bytes()).hexdigest()}
    again = scan_prefix(prefix, files=files, stack_paths=[], owners={}, known=now, cache=cache)
    assert again.libraries[0].sass() == ["sm_70"]
    assert [p.name for p in (cache / "codescan").iterdir()] == [scanner_digest()[:16]]
    # a torn entry is scanned again, not believed
    sc = ScanCache(cache, now)
    sc._file(now["lib/libk.so"]).write_bytes(b"{")
    assert sc.get("lib/libk.so") is None
    third = scan_prefix(prefix, files=files, stack_paths=[], owners={}, known=now, cache=cache)
    assert third.to_dict() == again.to_dict()

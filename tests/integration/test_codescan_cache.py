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


def _stack_prefix(root: Path, release: bytes) -> dict[str, str]:
    """Files the stack reader reads: a ptxas (its release line among other bytes), a
    cuda_runtime_api.h beside its libcudart, torch's version.py."""
    import os

    files = {
        "bin/ptxas": os.urandom(1 << 16) + b"Cuda compilation tools, release " + release
        + b", V" + release + b".1\0" + os.urandom(1 << 16),
        "include/cuda_runtime_api.h": b"/* cuda */\n#define CUDART_VERSION 12040\nint x;\n",
        "lib/libcudart.so.12": b"\x7fELF not really",
        "torch/version.py": b"__version__ = '2.4.0'\ncuda: Optional[str] = '12.4'\n",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}


def test_the_stack_files_are_read_once_by_sha256(tmp_path: Path) -> None:
    """The stack reader's files (a ptxas is tens of MB for one line) are kept as their
    essence by their proven sha256: the stack read from the kept essences is the one read
    from the files; a ptxas rewritten in place, which the caller proves to be other bytes,
    is read again."""
    prefix = tmp_path / "env"
    known = _stack_prefix(prefix, b"12.4")
    stack = sorted(known)
    plain = scan_prefix(prefix, files=[], stack_paths=stack, owners={})
    assert plain.stack.ptxas == (("bin/ptxas", "12.4"),)
    assert (plain.stack.cuda_runtime, plain.stack.torch_cuda) == ("12.4", "12.4")
    cache = tmp_path / "cache"
    first = scan_prefix(prefix, files=[], stack_paths=stack, owners={}, known=known,
                        cache=cache)
    kept = sorted(p.name for p in (cache / "codescan").rglob("*.essence"))
    assert kept == sorted(f"{known[r]}.essence" for r in ("bin/ptxas", "torch/version.py",
                                                            "include/cuda_runtime_api.h"))
    second = scan_prefix(prefix, files=[], stack_paths=stack, owners={}, known=known,
                         cache=cache)
    assert plain.to_dict() == first.to_dict() == second.to_dict()
    now = {**known, **_stack_prefix(prefix, b"13.0")}
    assert now["bin/ptxas"] != known["bin/ptxas"]
    again = scan_prefix(prefix, files=[], stack_paths=stack, owners={}, known=now, cache=cache)
    assert again.stack.ptxas == (("bin/ptxas", "13.0"),)


def test_verify_env_hands_the_scan_what_it_proved(tmp_path: Path) -> None:
    """``scan_manifest`` (what ``verify env`` runs on its manifest) scans the ELF files the
    walk found with their owners and proven sha256s, and hands the stack files' sha256s too,
    so their essences are kept: the same coverage as a scan of the prefix from scratch."""
    from verify.env.manifest import build_manifest
    from verify.kernels.codescan import scan_manifest

    prefix = tmp_path / "env"
    known = {**prefix_with_kernels(prefix), **_stack_prefix(prefix, b"12.4")}
    (prefix / "conda-meta").mkdir()
    cache = tmp_path / "cache"
    got = scan_manifest(build_manifest(prefix, jobs=1), cache=cache)
    kept = sorted(p.name for p in (cache / "codescan").rglob("*.essence"))
    assert kept == sorted(f"{known[r]}.essence" for r in ("bin/ptxas", "torch/version.py",
                                                            "include/cuda_runtime_api.h"))
    assert [lib.path for lib in got.libraries] == ["lib/libk.so"]
    assert got.to_dict() == scan_prefix(prefix).to_dict()

"""verify.kernels.fatbin: the container and entry headers, where fatbins are looked for, and every
way a file can be malformed. The same reader on NVIDIA's real files:
tests/integration/test_coverage_network.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.fixtures.fatbin import EXEC, Sec, cubin, elf, fatbin, ptx, sass
from tests.fixtures.fatbin import E as Ent
from verify.kernels.fatbin import (
    FatbinError,
    parse_fatbin,
    read_code,
    read_file,
    search_fatbins,
    walk_fatbins,
)


@pytest.mark.parametrize(("entry", "name", "version", "compression"), [
    (sass(90), "sm_90", (1, 8), "zstd"),
    (sass(90, "a"), "sm_90a", (1, 8), "zstd"),
    (sass(103, "f", header_size=112), "sm_103f", (1, 8), "zstd"),
    (sass(70, compression="lz4", version=(1, 7)), "sm_70", (1, 7), "lz4"),
    (ptx(121, (9, 2), header_size=80), "compute_121", (9, 2), "zstd"),
    (ptx(86, (7, 1), compression="none", payload=b".version 7.1\n"), "compute_86", (7, 1),
     "none"),
    (Ent(kind=8, arch=75), "kind 8 (arch 75)", (1, 8), "zstd"),
])
def test_entry_headers(entry: Ent, name: str, version: tuple[int, int], compression: str) -> None:
    """Kind, architecture, arch- and family-specific flags, version and compression come from
    the entry header, whatever its length."""
    fat = parse_fatbin(fatbin([entry]), 0, len(fatbin([entry])))
    (e,) = fat.entries
    assert (e.name, e.version, e.compression) == (name, version, compression)


def test_entries_follow_each_other_by_their_own_sizes() -> None:
    """Entries with 64-, 80- and 112-byte headers and odd payloads are all found, in order."""
    entries = [sass(75), ptx(120, header_size=80, payload=b"p" * 13),
               sass(100, header_size=112, payload=b"z" * 999), sass(120, "f")]
    data = fatbin(entries)
    fat = parse_fatbin(data, 0, len(data))
    assert [e.name for e in fat.entries] == ["sm_75", "compute_120", "sm_100", "sm_120f"]
    assert fat.size == len(data)


def _bad(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


GOOD = fatbin([sass(90), sass(100)])


@pytest.mark.parametrize(("data", "message"), [
    (GOOD[:10], "offset 0x0: 10 bytes left, a fatbin header needs 16"),
    (_bad(GOOD, 0, "<I", 0xDEADBEEF), "offset 0x0: magic 0xdeadbeef, expected 0xba55ed50"),
    (_bad(GOOD, 4, "<H", 2), "offset 0x0: fatbin version 2, this reader knows 1"),
    (_bad(GOOD, 6, "<H", 8), "offset 0x0: header size 8, at least 16 expected"),
    (_bad(GOOD, 8, "<Q", 1 << 40),
     f"offset 0x0: the fatbin claims {16 + (1 << 40)} bytes, only {len(GOOD)} are left"),
    (_bad(GOOD, 16 + 4, "<I", 8),
     "entry at 0x10: header size 8, expected 64 to 4096"),
    (_bad(GOOD, 16, "<H", 0), "entry at 0x10: kind 0, 24 bytes stored in a 24-byte payload"),
    (_bad(GOOD, 16 + 16, "<I", 99), "entry at 0x10: kind 2, 99 bytes stored in a 24-byte payload"),
    (_bad(GOOD, 16 + 8, "<Q", 4096),
     f"entry at 0x10: its {64 + 4096} bytes run past the fatbin's end {len(GOOD):#x}"),
    (_bad(GOOD, 8, "<Q", len(GOOD) - 16 - 8) + b"",
     f"entry at 0x68: its 88 bytes run past the fatbin's end {len(GOOD) - 8:#x}"),
])
def test_malformed_fatbins(data: bytes, message: str) -> None:
    """Each inconsistency is an error that says where and what."""
    with pytest.raises(FatbinError) as err:
        parse_fatbin(data, 0, len(data))
    assert str(err.value) == message


def test_walk_skips_zero_padding_and_refuses_anything_else() -> None:
    """Zero padding between fatbins is fine in .nv_fatbin; other bytes there are an error."""
    padded = GOOD + b"\0" * 8 + GOOD
    assert len(list(walk_fatbins(padded, 0, len(padded)))) == 2
    junk = GOOD + b"\x01" * 8 + GOOD
    with pytest.raises(FatbinError, match=f"offset {len(GOOD):#x}: 8 bytes that are not a fatbin"):
        list(walk_fatbins(junk, 0, len(junk)))


def test_search_ignores_the_magic_inside_other_data() -> None:
    """In .data or .rodata, four magic bytes that do not start a consistent fatbin are data."""
    decoy = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 999)  # claims more than is there
    data = b"\x50\xed\x55\xba" + b"x" * 12 + decoy + GOOD + b"y" * 5
    found = list(search_fatbins(data, 0, len(data)))
    assert [(f.offset, [e.name for e in f.entries]) for f in found] == [
        (16 + len(decoy), ["sm_90", "sm_100"])]


def _file(tmp_path: Path, data: bytes, name: str = "libx.so") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_sections_searched_and_skipped(tmp_path: Path) -> None:
    """.nv_fatbin, .rodata and .cask_resource are read; __nv_relfatbin (device-link code),
    executable sections and .eh_frame are not."""
    sections = [Sec(".text", GOOD, flags=0x2 | EXEC), Sec(".rodata", b"r" * 5 + GOOD),
                Sec(".nv_fatbin", GOOD + GOOD), Sec(".cask_resource", GOOD),
                Sec("__nv_relfatbin", GOOD), Sec(".eh_frame", GOOD)]
    code = read_file(_file(tmp_path, elf(sections)))
    assert code.error is None
    assert [f.section for f in code.fatbins] == [".rodata", ".nv_fatbin", ".nv_fatbin",
                                                  ".cask_resource"]
    assert code.relocatable_bytes == len(GOOD)


def test_empty_translation_units_are_marked(tmp_path: Path) -> None:
    """A fatbin stored as is whose cubin defines no kernel is empty; with one kernel, or with a
    compressed entry (unknown), it is not."""
    def fat(payload: bytes, comp: str = "none") -> bytes:
        return fatbin([sass(75, compression=comp, payload=payload)])

    data = elf([Sec(".nv_fatbin", fat(cubin([])) + fat(cubin(["_Z6kernelv"]))
                    + fat(cubin([]), "zstd"))])
    assert [f.empty for f in read_file(_file(tmp_path, data)).fatbins] == [True, False, False]


@pytest.mark.parametrize(("data", "error"), [
    (b"", None),
    (b"#!/bin/sh\necho hi\n" * 8, None),
    (b"\x7fELF" + bytes([1, 1, 1]) + b"\0" * 80, None),  # 32-bit: not read
    (elf([Sec(".nv_fatbin", GOOD)])[:-10],
     "section table at 0x118 (3 x 64 bytes) lies outside the file's 462 bytes"),
    (elf([Sec(".nv_fatbin", GOOD[:-8])]),
     "section .nv_fatbin: offset 0x40: the fatbin claims 192 bytes, only 184 are left"),
])
def test_files_that_are_not_or_not_quite_cuda(tmp_path: Path, data: bytes,
                                              error: str | None) -> None:
    """Non-ELF files and 32-bit ELF files hold no code; a broken one says what is broken."""
    code = read_file(_file(tmp_path, data))
    assert (code.fatbins, code.error) == ((), error)


def test_read_code_keeps_fatbins_found_before_a_problem() -> None:
    """A bad second section does not discard the fatbins of the first."""
    data = elf([Sec(".rodata", GOOD), Sec(".nv_fatbin", b"\x05" * 16)])
    code = read_code(data, len(data))
    assert len(code.fatbins) == 1
    assert code.error == "section .nv_fatbin: offset 0x100: 16 bytes that are not a fatbin"

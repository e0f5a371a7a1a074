"""Byte-exact fatbins and minimal ELF files for the reader's tests, laid out as
``verify/kernels/fatbin.py``'s docstring describes (and as the real files the network tests read
are).

Real fatbins only come from NVIDIA's tools; the tests that need them download wheels
(tests/test_coverage_network.py). These build inputs for the failure modes and the rules.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from verify.kernels.fatbin import FLAG_ARCH_SPECIFIC, FLAG_FAMILY, FLAG_LZ4, FLAG_ZSTD, MAGIC

ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")


@dataclass(frozen=True)
class E:
    """One entry: ``kind`` 1 PTX / 2 ELF, ``arch`` 90, ``variant`` "a"/"f", ``compression``."""

    kind: int
    arch: int
    variant: str = ""
    compression: str = "zstd"
    version: tuple[int, int] = (1, 8)
    payload: bytes = b"\x28\xb5\x2f\xfd" + b"x" * 20
    header_size: int = 64


def sass(arch: int, variant: str = "", **kw: object) -> E:
    return E(kind=2, arch=arch, variant=variant, **kw)  # type: ignore[arg-type]


def ptx(arch: int, isa: tuple[int, int] = (9, 0), variant: str = "", **kw: object) -> E:
    return E(kind=1, arch=arch, variant=variant, version=isa, **kw)  # type: ignore[arg-type]


def entry_bytes(e: E) -> bytes:
    flags = 0x11
    flags |= {"zstd": FLAG_ZSTD, "lz4": FLAG_LZ4, "none": 0}[e.compression]
    flags |= {"a": FLAG_ARCH_SPECIFIC, "f": FLAG_FAMILY, "": 0}[e.variant]
    padded = (len(e.payload) + 7) & ~7
    stored = 0 if e.compression == "none" else len(e.payload)
    size = 0 if e.compression == "none" else 4 * len(e.payload)
    head = ENTRY.pack(e.kind, 0x0101, e.header_size, padded, stored, 0, e.version[1],
                      e.version[0], e.arch, 0, 0, flags, 0, size)
    head += b"\0" * (e.header_size - ENTRY.size)
    return head + e.payload + b"\0" * (padded - len(e.payload))


def fatbin(entries: Sequence[E]) -> bytes:
    body = b"".join(entry_bytes(e) for e in entries)
    return struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body


# ------------------------------------------------------------------ ELF files

SHT_PROGBITS, SHT_STRTAB = 1, 3
ALLOC, EXEC = 0x2, 0x4


@dataclass(frozen=True)
class Sec:
    name: str
    data: bytes
    flags: int = ALLOC
    type: int = SHT_PROGBITS


def elf(sections: Sequence[Sec], *, machine: int = 62) -> bytes:
    """A 64-bit little-endian ELF file with these sections (and a name table), no program
    headers: enough for any section-table reader."""
    names = b"\0" + b"".join(s.name.encode() + b"\0" for s in sections) + b".shstrtab\0"
    body = bytearray(b"\0" * 64)
    offsets = []
    for s in sections:
        while len(body) % 8:
            body += b"\0"
        offsets.append(len(body))
        body += s.data
    names_at = len(body)
    body += names
    while len(body) % 8:
        body += b"\0"
    shoff = len(body)
    shdr = struct.Struct("<IIQQQQIIQQ")
    table = shdr.pack(*([0] * 10))
    at = 1
    for s, off in zip(sections, offsets, strict=True):
        table += shdr.pack(at, s.type, s.flags, 0, off, len(s.data), 0, 0, 8, 0)
        at += len(s.name) + 1
    table += shdr.pack(at, SHT_STRTAB, 0, 0, names_at, len(names), 0, 0, 1, 0)
    count = len(sections) + 2
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 3, machine, 1, 0, 0, shoff, 0, 64, 56, 0,
                         64, count, count - 1)
    body[:64] = header
    return bytes(body) + table


def cubin(kernels: Sequence[str]) -> bytes:
    """A cubin-shaped ELF (machine EM_CUDA, 190) with one ``.text.<name>`` per kernel."""
    return elf([Sec(f".text.{k}", b"\0" * 16, ALLOC | EXEC) for k in kernels], machine=190)

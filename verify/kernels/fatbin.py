"""The GPU code inside a CUDA ELF file: its fatbins and their entries, read from the headers
alone (nothing is run, nothing is decompressed).

nvcc puts the device code of every translation unit into a *fatbin*: a container of entries,
one per target, each either SASS (a cubin, an ELF file for one real architecture, ``sm_90``)
or PTX (text for a virtual architecture, ``compute_90``, that the driver compiles on first
use). The CUDA runtime registers them from the ``.nv_fatbin`` section; some libraries (cuFFT)
keep theirs in ``.data`` and load them with the driver API. Every integer is little-endian.

Container header (16 bytes)::

    0   u32  magic 0xBA55ED50
    4   u16  version, 1
    6   u16  header size, 16: where the first entry starts
    8   u64  size of the entries that follow the header

Entry header (64 bytes, longer on newer toolkits: 80 to 144 seen; the extra bytes are
skipped)::

    0   u16  kind: 1 PTX, 2 ELF (SASS); other values are kept as ``kind N``
    2   u16  (0x0101)
    4   u32  header size: the payload starts right after it
    8   u64  payload size padded to 8 bytes: the next entry starts at header size + this
    16  u32  payload size compressed (0 when the payload is stored as is)
    20  u32  (0, or 64 with an extended header)
    24  u16  minor version }  PTX: the PTX ISA version, 9.0 (what the driver must know to JIT)
    26  u16  major version }  ELF: the cubin ABI, 1.7 (CUDA <= 12) or 1.8 (CUDA 13)
    28  u32  architecture: 90 for sm_90 and compute_90, 103 for sm_103f
    32  u32  name offset, 36 u32 name length (0 in every file read so far)
    40  u64  flags: 0x1 64-bit, 0x10 Linux, 0x2000 LZ4, 0x8000 zstd, 0x100000 arch-specific
             (``sm_90a``: runs on exactly 9.0), 0x200000 family-specific (``sm_103f``),
             0x1000000 extended header
    48  u64  (0)
    56  u64  payload size uncompressed (0 when the payload is stored as is)

The flags were checked against the cubins themselves (their ELF ``e_flags`` and the
``sm_90a``/``sm_103f`` names inside) in torch 2.7.1 (LZ4, CUDA 12.6) and 2.13.0 (zstd, CUDA
13.0), and the entries against ``cuobjdump --list-elf``/``--list-ptx``
(tests/integration/test_coverage_network.py, tests/gpu/cuobjdump_compare.py).

Compression: LZ4 (CUDA 11.x-12.x ``--compress-all``) and zstd (CUDA 12.8+/13 ``--compress-mode``)
entries are recognised and counted, never decompressed: the header says everything coverage
needs. One thing needs a payload: whether a translation unit had any kernel at all (cuFFTW's
only fatbin is an sm_75 cubin with no function in it, which no GPU ever launches). When every
entry of a fatbin is stored as is and none names a ``.text.<kernel>`` section (cubins) or an
``.entry`` (PTX), the fatbin is ``empty``; a fatbin with a compressed entry is assumed to hold
kernels. ``__nv_relfatbin`` (relocatable device code that
NCCL and NVSHMEM ship for device-side linking, never loaded as is) is left out.

Where fatbins are looked for: every allocated, non-executable PROGBITS section of a 64-bit
little-endian ELF file but the toolchain's own tables (``NOT_CODE``): ``.nv_fatbin``, and
``.rodata``, ``.ldata`` (cuFFT) and ``.cask_resource`` (cuBLASLt, cuSPARSELt and cuDNN keep
hundreds of fatbins there). ``.nv_fatbin`` must hold nothing but fatbins (zero padding between
them is allowed): anything else there is an error that names the offset. Elsewhere a candidate
(the magic) counts only when its header and every entry are consistent and the entries end
exactly where the header says; other matches are data that happen to hold those four bytes.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

MAGIC = 0xBA55ED50
MAGIC_BYTES = struct.pack("<I", MAGIC)
KIND_PTX, KIND_ELF = 1, 2
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
RELOCATABLE_SECTION = "__nv_relfatbin"
STRICT_SECTION = ".nv_fatbin"
# Sections the toolchain fills with its own tables, never with device code: not searched.
NOT_CODE = (".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt",
            ".init_array", ".fini_array", ".ctors", ".dtors", ".tdata", ".dynamic",
            ".nvFatBinSegment", "__nv_module_id", RELOCATABLE_SECTION)

_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
MIN_ENTRY_HEADER, MAX_ENTRY_HEADER = _ENTRY.size, 4096

Compression = Literal["none", "lz4", "zstd"]


class FatbinError(ValueError):
    """A fatbin whose headers do not add up; the message says where and what."""


class Entry(NamedTuple):
    """One target of a fatbin: SASS for ``sm_<arch><variant>`` or PTX for ``compute_<arch>``
    (a NamedTuple: a CUDA environment holds tens of thousands)."""

    kind: int
    arch: int                       # 90, 100, 121
    variant: str                    # "" | "a" (arch-specific) | "f" (family-specific)
    version: tuple[int, int]        # PTX ISA version (PTX) or cubin ABI version (SASS)
    compression: Compression
    stored: int                     # payload bytes in the file
    size: int                       # payload bytes uncompressed

    @property
    def is_sass(self) -> bool:
        return self.kind == KIND_ELF

    @property
    def is_ptx(self) -> bool:
        return self.kind == KIND_PTX

    @property
    def name(self) -> str:
        """"sm_90a", "compute_120", or "kind 4 (arch 90)" for kinds nobody documents."""
        if self.kind == KIND_ELF:
            return f"sm_{self.arch}{self.variant}"
        if self.kind == KIND_PTX:
            return f"compute_{self.arch}{self.variant}"
        return f"kind {self.kind} (arch {self.arch})"


class Fatbin(NamedTuple):
    offset: int                     # in the file
    size: int                       # header included
    section: str
    entries: tuple[Entry, ...]
    empty: bool = False             # known to define no kernel: nothing here is ever launched


@dataclass(frozen=True, slots=True)
class FileCode:
    """What one file carries: its fatbins, the bytes of relocatable device code it holds, and
    the reason it could not be read in full (the fatbins before the problem are kept)."""

    fatbins: tuple[Fatbin, ...] = ()
    relocatable_bytes: int = 0
    error: str | None = None

    @property
    def has_code(self) -> bool:
        return bool(self.fatbins)


# ------------------------------------------------------------------ fatbins


def parse_fatbin(buf: Any, pos: int, limit: int, *, section: str = "") -> Fatbin:
    """The fatbin whose header starts at ``pos``; it must end at or before ``limit``."""
    if pos + _HEADER.size > limit:
        raise FatbinError(f"offset {pos:#x}: {limit - pos} bytes left, a fatbin header needs 16")
    magic, version, header_size, body = _HEADER.unpack_from(buf, pos)
    if magic != MAGIC:
        raise FatbinError(f"offset {pos:#x}: magic {magic:#010x}, expected {MAGIC:#010x}")
    if version != 1:
        raise FatbinError(f"offset {pos:#x}: fatbin version {version}, this reader knows 1")
    if header_size < _HEADER.size:
        raise FatbinError(f"offset {pos:#x}: header size {header_size}, at least 16 expected")
    end = pos + header_size + body
    if end > limit:
        raise FatbinError(f"offset {pos:#x}: the fatbin claims {header_size + body} bytes, "
                          f"only {limit - pos} are left")
    entries: list[Entry] = []
    starts: list[int] = []
    at = pos + header_size
    while at < end:
        entry, span = _entry(buf, at, end)
        entries.append(entry)
        starts.append(at + span - entry.stored if entry.compression == "none" else 0)
        at += span
    if at != end:
        raise FatbinError(f"offset {pos:#x}: the entries end at {at:#x}, the header says "
                          f"{end:#x}")
    return Fatbin(pos, end - pos, section, tuple(entries), _empty(buf, entries, starts))


def _empty(buf: Any, entries: list[Entry], starts: list[int]) -> bool:
    """Every entry stored as is, and none defines a function (see the module docstring).
    ``starts``: where each payload begins (an uncompressed payload fills its padded span)."""
    if not entries or any(e.compression != "none" for e in entries):
        return False
    return not any(_defines_code(buf, at, e.stored, e.kind)
                   for e, at in zip(entries, starts, strict=True))


def _defines_code(buf: Any, start: int, size: int, kind: int) -> bool:
    """Whether a payload stored as is defines a function: a cubin names each kernel's code
    section ``.text.<kernel>`` in its section-name table (names there follow a NUL), a PTX
    text declares each with ``.entry``. Anything else counts as code (the cautious answer)."""
    if kind == KIND_PTX:
        return buf.find(b".entry", start, start + size) >= 0
    if kind == KIND_ELF and bytes(buf[start:start + 4]) == b"\x7fELF":
        return buf.find(b"\0.text.", start, start + size) >= 0
    return True


def _entry(buf: Any, at: int, end: int) -> tuple[Entry, int]:
    """The entry at ``at`` and how many bytes it takes (header + padded payload)."""
    if at + _ENTRY.size > end:
        raise FatbinError(f"entry at {at:#x}: {end - at} bytes left, an entry header needs 64")
    (kind, _, header_size, padded, stored, _, minor, major, arch, _, _, flags, _,
     size) = _ENTRY.unpack_from(buf, at)
    if not MIN_ENTRY_HEADER <= header_size <= MAX_ENTRY_HEADER:
        raise FatbinError(f"entry at {at:#x}: header size {header_size}, expected 64 to "
                          f"{MAX_ENTRY_HEADER}")
    if kind == 0 or stored > padded:
        raise FatbinError(f"entry at {at:#x}: kind {kind}, {stored} bytes stored in a "
                          f"{padded}-byte payload")
    span = header_size + padded
    if at + span > end:
        raise FatbinError(f"entry at {at:#x}: its {span} bytes run past the fatbin's end "
                          f"{end:#x}")
    compression: Compression = ("zstd" if flags & FLAG_ZSTD else
                                "lz4" if flags & FLAG_LZ4 else "none")
    variant = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    if compression == "none":
        stored = size = padded
    return Entry(kind, arch, variant, (major, minor), compression, stored, size), span


def walk_fatbins(buf: Any, start: int, end: int, *, section: str = STRICT_SECTION
                 ) -> Iterator[Fatbin]:
    """Every fatbin of a region that holds nothing else (``.nv_fatbin``); zero padding between
    them is skipped, anything else raises ``FatbinError``."""
    pos = start
    while pos < end:
        nxt = buf.find(MAGIC_BYTES, pos, end)
        gap_end = end if nxt < 0 else nxt
        if any(buf[pos:gap_end]):
            raise FatbinError(f"offset {pos:#x}: {gap_end - pos} bytes that are not a fatbin")
        if nxt < 0:
            return
        fat = parse_fatbin(buf, nxt, end, section=section)
        yield fat
        pos = nxt + fat.size


def search_fatbins(buf: Any, start: int, end: int, *, section: str = "") -> Iterator[Fatbin]:
    """Every consistent fatbin found in a region that holds other data too (``.data``)."""
    pos = start
    while True:
        pos = buf.find(MAGIC_BYTES, pos, end)
        if pos < 0:
            return
        try:
            fat = parse_fatbin(buf, pos, end, section=section)
        except FatbinError:
            pos += 4
            continue
        if not fat.entries:
            pos += 4
            continue
        yield fat
        pos += fat.size


# ------------------------------------------------------------------ ELF


@dataclass(frozen=True, slots=True)
class Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int


SHT_PROGBITS, SHF_ALLOC, SHF_EXECINSTR = 1, 0x2, 0x4
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")


class NotElf(ValueError):
    """Not a 64-bit little-endian ELF file: nothing to read here."""


def elf_sections(buf: Any, size: int) -> list[Section]:
    """The section headers of a 64-bit little-endian ELF file held in ``buf`` (``size`` bytes).

    Raises ``NotElf`` for anything else, ``FatbinError`` for an ELF file whose section table
    points outside it."""
    if size < _EHDR.size or bytes(buf[:4]) != b"\x7fELF":
        raise NotElf("no ELF magic")
    ident = bytes(buf[:16])
    if ident[4] != 2 or ident[5] != 1:
        raise NotElf("not a 64-bit little-endian ELF file")
    (_, _, _, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx) = _EHDR.unpack_from(buf, 0)
    if shnum == 0 or shoff == 0:
        return []
    if shentsize != _SHDR.size or shoff + shnum * _SHDR.size > size:
        raise FatbinError(f"section table at {shoff:#x} ({shnum} x {shentsize} bytes) lies "
                          f"outside the file's {size} bytes")
    raw = [_SHDR.unpack_from(buf, shoff + i * _SHDR.size) for i in range(shnum)]
    if shstrndx >= shnum:
        raise FatbinError(f"section name table index {shstrndx} >= {shnum} sections")
    str_off, str_size = raw[shstrndx][4], raw[shstrndx][5]
    if str_off + str_size > size:
        raise FatbinError("the section name table lies outside the file")
    names = bytes(buf[str_off:str_off + str_size])
    out = []
    for name_at, typ, flags, _addr, off, sz, *_ in raw:
        end = names.find(b"\0", name_at)
        name = names[name_at:end if end >= 0 else None].decode("latin-1") \
            if name_at < len(names) else ""
        out.append(Section(name=name, type=typ, flags=flags, offset=off, size=sz))
    return out


def code_sections(sections: list[Section]) -> list[Section]:
    """The sections that may hold loadable fatbins: allocated, non-executable PROGBITS."""
    return [s for s in sections if s.type == SHT_PROGBITS and s.flags & SHF_ALLOC
            and not s.flags & SHF_EXECINSTR and s.size >= _HEADER.size
            and s.name not in NOT_CODE and not s.name.startswith(".nvHR")]


def read_code(buf: Any, size: int) -> FileCode:
    """The fatbins of a whole ELF file held in ``buf`` (bytes or an mmap); never raises for
    bad bytes: a problem becomes ``FileCode.error``."""
    try:
        sections = elf_sections(buf, size)
    except NotElf:
        return FileCode()
    except (FatbinError, struct.error) as exc:
        return FileCode(error=str(exc))
    relocatable = sum(s.size for s in sections if s.name == RELOCATABLE_SECTION)
    fatbins: list[Fatbin] = []
    for s in code_sections(sections):
        end = s.offset + s.size
        if end > size:
            return FileCode(fatbins=tuple(fatbins), relocatable_bytes=relocatable,
                            error=f"section {s.name} ends at {end:#x}, past the file's end")
        try:
            if s.name == STRICT_SECTION:
                fatbins.extend(walk_fatbins(buf, s.offset, end, section=s.name))
            else:
                fatbins.extend(search_fatbins(buf, s.offset, end, section=s.name))
        except FatbinError as exc:
            return FileCode(fatbins=tuple(fatbins), relocatable_bytes=relocatable,
                            error=f"section {s.name}: {exc}")
    return FileCode(fatbins=tuple(fatbins), relocatable_bytes=relocatable)


def read_file(path: str | os.PathLike[str]) -> FileCode:
    """The fatbins of the file at ``path``: its section table first, then (only when it has
    sections that can hold fatbins) the file mapped into memory."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _EHDR.size or f.read(4) != b"\x7fELF":
            return FileCode()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return read_code(mm, size)

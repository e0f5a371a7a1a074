"""The facts the dynamic loader uses from one ELF file, read with pyelftools.

``read_elf_info(stream)`` returns class, machine, type and the dynamic section's DT_NEEDED,
DT_RPATH, DT_RUNPATH and DT_SONAME. It goes straight to the SHT_DYNAMIC section (falling back
to the PT_DYNAMIC segment when section headers are stripped) instead of building every section
object: pyelftools parses a GNU hash table on the way otherwise, which costs milliseconds a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, BinaryIO


@dataclass(frozen=True, slots=True)
class ElfInfo:
    elfclass: int                     # 32 or 64
    machine: str                      # e_machine, e.g. "EM_X86_64"
    type: str                         # e_type, e.g. "ET_DYN"
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()       # DT_RPATH entries, split on ':'
    runpath: tuple[str, ...] = ()     # DT_RUNPATH entries, split on ':'
    soname: str | None = None
    has_runpath: bool = False         # DT_RUNPATH present (then DT_RPATH is ignored)
    error: str | None = None          # pyelftools could not read it


def _split(value: str) -> tuple[str, ...]:
    return tuple(p for p in value.split(":") if p)


def read_elf_info(stream: BinaryIO) -> ElfInfo:
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(stream)
        header = elf.header
        base: dict[str, Any] = {"elfclass": elf.elfclass, "machine": str(header["e_machine"]),
                "type": str(header["e_type"])}
    except Exception as exc:  # ELFError, or construct's own errors on a short file
        return ElfInfo(0, "", "", error=f"not a readable ELF file: {exc}")
    try:
        dynamic = _dynamic(elf)
        if dynamic is None:
            return ElfInfo(**base)
        needed: list[str] = []
        rpath: tuple[str, ...] = ()
        runpath: tuple[str, ...] = ()
        soname = None
        has_runpath = False
        for tag in dynamic.iter_tags():
            kind = tag.entry.d_tag
            if kind == "DT_NEEDED":
                needed.append(tag.needed)
            elif kind == "DT_RPATH":
                rpath += _split(tag.rpath)
            elif kind == "DT_RUNPATH":
                runpath += _split(tag.runpath)
                has_runpath = True
            elif kind == "DT_SONAME":
                soname = tag.soname
        return ElfInfo(**base, needed=tuple(needed), rpath=rpath, runpath=runpath,
                       soname=soname, has_runpath=has_runpath)
    except Exception as exc:  # a truncated or corrupt dynamic section
        return ElfInfo(**base, error=f"unreadable dynamic section: {exc}")


def _dynamic(elf):  # -> DynamicSection | DynamicSegment | None
    header = getattr(elf, "_get_section_header", None)  # pyelftools' own, stable since 0.2x
    if header is None:  # pragma: no cover - a pyelftools without it: the slow public way
        for section in elf.iter_sections():
            if section["sh_type"] == "SHT_DYNAMIC":
                return section
    else:
        for i in range(elf.num_sections()):
            if header(i)["sh_type"] == "SHT_DYNAMIC":
                return elf.get_section(i)
    for segment in elf.iter_segments():
        if segment["p_type"] == "PT_DYNAMIC":
            return segment
    return None

"""The manifest of an installed prefix: every file and symlink, its hash, and who owns it.

``build_manifest(prefix)`` walks the prefix (no symlink is followed), hashes every regular file
in parallel (``verify.hashing``) while it walks, reads the installers' records
(``verify.records``) and gives each entry an owner and a category:

    package   claimed by a conda-meta record or a dist-info RECORD (owner: the package id)
    scaffold  made by ``python -m venv`` (pyvenv.cfg, bin/python*, bin/activate*, lib64)
    base      a base interpreter's own files (prefix kind "python": outside site-packages)
    meta      the installer's records: conda-meta/ and py-rattler's CACHEDIR.TAG
    cache     bytecode under __pycache__/ that no package hashes (Python rewrites it at will)
    unowned   none of the above: drift

Kinds of prefix: ``conda`` (has conda-meta/), ``venv`` (has pyvenv.cfg), ``python`` (a base
interpreter: bin/python3 and lib/python3.*). Anything else is an ``InputError``.
Directories are not entries; an empty directory is invisible to the manifest.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from samebits.errors import InputError
from verify.elfinfo import ElfInfo
from verify.hashing import FileHasher, Hashed
from verify.records import Claim, Records, read_records, site_packages

PrefixKind = Literal["conda", "venv", "python"]
EntryType = Literal["file", "symlink", "other"]
Category = Literal["package", "scaffold", "base", "meta", "cache", "unowned"]
IN_DIGEST: frozenset[str] = frozenset({"package", "scaffold", "base", "unowned"})

VENV_OWNER = "<venv>"
PYTHON_OWNER = "<python>"
INSTALLER_OWNER = "<installer>"
_VENV_SCAFFOLD = re.compile(
    r"^(pyvenv\.cfg|lib64|bin/(activate|activate\.csh|activate\.fish|Activate\.ps1"
    r"|python|python3|python3\.\d+))$")

Progress = Callable[[str, float | None], AbstractContextManager[Callable[..., None]]]


class Entry(NamedTuple):
    """One file, symlink or special file of the prefix (a NamedTuple: there are tens of
    thousands, and a frozen dataclass costs three times as much to make)."""

    path: str                      # prefix-relative, "/"-separated
    type: EntryType
    exec: bool = False             # owner-execute bit (files only)
    size: int = 0
    sha256: str | None = None      # files
    target: str | None = None      # symlinks: the link text, as stored
    owner: str | None = None       # Package.id, "<venv>", "<python>", "<installer>" or None
    category: Category = "unowned"
    claim: Claim | None = None     # the record this entry is checked against
    error: str | None = None       # the file could not be read
    elf: ElfInfo | None = None

    @property
    def in_digest(self) -> bool:
        return self.category in IN_DIGEST


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    prefix: Path
    kind: PrefixKind
    entries: tuple[Entry, ...]     # sorted by path
    records: Records
    unreadable: tuple[tuple[str, str], ...] = ()  # folders the walk could not list: (path, why)

    def by_path(self) -> dict[str, Entry]:
        return {e.path: e for e in self.entries}


def prefix_kind(prefix: Path) -> PrefixKind:
    if not prefix.is_dir():
        raise InputError(f"{prefix}: no such directory",
                         hint="pass --prefix with an installed environment")
    if (prefix / "conda-meta").is_dir():
        return "conda"
    if (prefix / "pyvenv.cfg").is_file():
        return "venv"
    if site_packages(prefix) and any((prefix / "bin").glob("python3*")):
        return "python"
    raise InputError(f"{prefix}: not an environment (no conda-meta/, no pyvenv.cfg, "
                     "no bin/python3 with lib/python3.*/site-packages)",
                     hint="pass --prefix with a conda prefix or a virtual environment")


def build_manifest(prefix: Path, *, jobs: int | None = None, elf: bool = True,
                   progress: Progress | None = None) -> Manifest:
    """Walk, hash and attribute every file under ``prefix``."""
    prefix = Path(os.path.abspath(prefix))
    kind = prefix_kind(prefix)
    with FileHasher(jobs=jobs, elf=elf, root=f"{prefix}/") as hasher:  # workers start now
        walked: list[tuple[str, os.stat_result, str | None, int]] = []
        first_of_inode: dict[tuple[int, int], int] = {}
        unreadable: list[tuple[str, str]] = []
        total = 0
        for rel, st, target in _walk(str(prefix), unreadable):
            n = -1
            if stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:  # another name for a file already seen is hashed once
                    inode = (st.st_dev, st.st_ino)
                    n = first_of_inode.get(inode, -1)
                if n < 0:
                    n = hasher.add(rel, st.st_size)
                    total += st.st_size
                    if st.st_nlink > 1:
                        first_of_inode[(st.st_dev, st.st_ino)] = n
            walked.append((rel, st, target, n))
        hasher.no_more()
        records = read_records(prefix)  # while the workers hash
        claims = records.claims
        sps = tuple(sp + "/" for sp in site_packages(prefix))
        entries: list[Entry | None] = [None] * len(walked)
        users: dict[int, int | list[int]] = {}  # hash index -> position(s) in walked
        for pos, (rel, st, target, n) in enumerate(walked):
            if n < 0:
                entries[pos] = _entry(kind, rel, st, target, None, claims.get(rel, ()), sps)
            elif n in users:  # hardlinks: one hash, several entries
                had = users[n]
                users[n] = [*(had if isinstance(had, list) else [had]), pos]
            else:
                users[n] = pos

        def each(n: int, h: Hashed) -> None:  # entries are made while the workers hash
            who = users[n]
            for pos in who if isinstance(who, list) else (who,):
                rel, st, target, _ = walked[pos]
                entries[pos] = _entry(kind, rel, st, target, h, claims.get(rel, ()), sps)

        what = f"hashing {len(users):,} files of {prefix} (MB)"
        bar = progress(what, total / 1e6) if progress else \
            nullcontext(lambda n=1: None)
        with bar as advance:
            hasher.wait(lambda nbytes: advance(nbytes / 1e6), each)
    done = sorted((e for e in entries if e is not None), key=lambda e: os.fsencode(e.path))
    return Manifest(prefix=prefix, kind=kind, entries=tuple(done), records=records,
                    unreadable=tuple(sorted(unreadable)))


def _walk(root: str, unreadable: list[tuple[str, str]]
          ) -> Iterator[tuple[str, os.stat_result, str | None]]:
    """(relative path, lstat, link target) for everything below ``root`` but directories;
    a folder that cannot be listed goes to ``unreadable`` (it may hide anything)."""
    cut = len(root) + 1
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError as exc:
            unreadable.append((folder[cut:] or ".", exc.strerror or str(exc)))
            continue
        with it:
            for d in it:
                try:
                    if d.is_dir(follow_symlinks=False):
                        stack.append(d.path)
                        continue
                    st = d.stat(follow_symlinks=False)
                    target = os.readlink(d.path) if stat.S_ISLNK(st.st_mode) else None
                except OSError:
                    continue
                yield d.path[cut:], st, target


def _entry(kind: PrefixKind, rel: str, st: os.stat_result, target: str | None,
           hashed: Hashed | None, claims: tuple[Claim, ...], sps: tuple[str, ...]) -> Entry:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        etype: EntryType = "file"
        size, exec_bit = st.st_size, bool(mode & stat.S_IXUSR)
    else:
        etype = "symlink" if stat.S_ISLNK(mode) else "other"
        size, exec_bit = 0, False
    sha, elf, error = hashed if hashed is not None else (None, None, None)
    claim = pick_claim(claims, etype, sha, target) if claims else None
    cached = rel.endswith(".pyc") and is_bytecode(rel)
    owner: str | None
    category: Category
    if claim is not None and not (cached and claim.sha256 is None):
        owner, category = claim.package, "package"
    elif cached:
        owner, category = (claim.package if claim else None), "cache"
    elif kind == "conda" and (rel.startswith("conda-meta/") or rel == "CACHEDIR.TAG"):
        owner, category = INSTALLER_OWNER, "meta"
    elif kind == "venv" and _VENV_SCAFFOLD.match(rel):
        owner, category = VENV_OWNER, "scaffold"
    elif kind == "python" and (not rel.startswith(sps)
                               or rel.endswith("site-packages/README.txt")):
        owner, category = PYTHON_OWNER, "base"
    else:
        owner, category = None, "unowned"
    return Entry(rel, etype, exec_bit, size, sha, target, owner, category, claim, error, elf)


def is_bytecode(rel: str) -> bool:
    return rel.endswith(".pyc") and "/__pycache__/" in f"/{rel}"


def pick_claim(claims: tuple[Claim, ...], etype: EntryType, sha256: str | None,
               target: str | None) -> Claim | None:
    """The claim this entry satisfies, or (none does) the last one: the last install wins."""
    if not claims:
        return None
    if len(claims) > 1:
        for c in claims:
            if c.type == "file" and etype == "file" and c.sha256 and c.sha256 == sha256:
                return c
            if c.type == "symlink" and etype == "symlink" and (
                    c.target == target or c.sha256 and c.sha256 == _sha_text(target)):
                return c
    return claims[-1]


def _sha_text(text: str | None) -> str | None:
    import hashlib

    return None if text is None else hashlib.sha256(os.fsencode(text)).hexdigest()

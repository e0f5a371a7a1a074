"""The manifest of an installed prefix: every file and symlink, its hash, and who owns it.

``build_manifest(prefix)`` walks the prefix (no symlink is followed), hashes every regular file
in parallel (``verify.env.hashing``) while it walks, reads the installers' records
(``verify.env.records``) and gives each entry an owner and a category:

    package   claimed by a conda-meta record or a dist-info RECORD (owner: the package id)
    scaffold  made by the tool that made the venv (``verify.env.scaffold``: python -m venv,
              virtualenv, uv venv; keyed on what pyvenv.cfg says made it)
    base      a base interpreter's own files (prefix kind "python": outside site-packages,
              except the files Python runs at start-up: sitecustomize, usercustomize, a zip
              on sys.path, which no record owns there and so are unowned)
    meta      the installer's records: conda-meta/ and py-rattler's CACHEDIR.TAG
    cache     bytecode under __pycache__/ (derived from its source, checked against the
              record's hash or a fresh compile by ``verify.env.bytecode``; Python rewrites it at
              will, so it stays out of the environment digest)
    unowned   none of the above: drift

``outside``: files of a venv's base interpreter (its binary, libpython, its stdlib folder),
hashed by the same workers, with absolute paths (``verify.env.interpreter`` says which).

``seals`` (``samebits.install.seal.SealIndex``, only when the caller trusts the cache's seal:
install's own verify, ``verify env --trust-seal``): a file that is a sealed cache inode, as a
stat shows (same device, inode, size, mtime, mode, and a ctime that has not moved but for
links), takes the sealed sha256 instead of being read; only an ELF file's or a pyc's head is
still read, and not even that where the entry's head memo (``verify.env.headmemo``) holds what
an earlier read of those bytes gave (with ``elf``, the default). ``memo``
(``verify.env.statmemo.StatMemo``): the same for the base interpreter's
files outside the prefix, by the hash an earlier run remembered with their stat; it is
refreshed from every outside file hashed now. ``placed`` (install's own verify: the files it
has just hardlinked, prefix path -> cache path): such a name that the walk finds as a regular
file takes its sealed facts without a stat, which ``samebits.install.seal.prove_placed``
makes instead, on the other core (the caller takes no report before that proof).
``Manifest.proof`` counts the files proven each way.

Kinds of prefix: ``conda`` (has conda-meta/), ``venv`` (has pyvenv.cfg), ``python`` (a base
interpreter: bin/python3 and lib/python3.*). Anything else is an ``InputError``.
Directories are not entries; an empty directory is invisible to the manifest.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from samebits.errors import InputError
from verify.env.elfinfo import ElfInfo
from verify.env.hashing import FileHasher, Hashed
from verify.env.headmemo import HeadMemo
from verify.env.records import Claim, Records, read_records, site_packages
from verify.env.scaffold import is_scaffold, producer, read_pyvenv_cfg

PrefixKind = Literal["conda", "venv", "python"]
EntryType = Literal["file", "symlink", "other"]
Category = Literal["package", "scaffold", "base", "meta", "cache", "unowned"]
IN_DIGEST: frozenset[str] = frozenset({"package", "scaffold", "base", "unowned"})

VENV_OWNER = "<venv>"
PYTHON_OWNER = "<python>"
INSTALLER_OWNER = "<installer>"
OUTSIDE_SKIP = frozenset({"site-packages", "dist-packages"})
# What a bare interpreter runs at start-up from its own folders (site.py's sitecustomize and
# usercustomize imports, a zip on sys.path): never "the interpreter's own" unless a record says.
STARTUP = re.compile(r"^lib/(python3\d+\.zip|python3\.\d+/(lib-dynload/)?"
                     r"(site|user)customize(\.py|\.pyc|/.*|\..*\.so))$")

Progress = Callable[[str, float | None], AbstractContextManager[Callable[..., None]]]

if TYPE_CHECKING:
    from samebits.install.seal import Sealed, SealIndex
    from verify.env.statmemo import StatMemo


class SealedStat(NamedTuple):
    """What the walk takes for a file an install has just linked, from its seal instead of a
    stat (``placed``: the module docstring), with the seal and its entry's folder."""

    st_mode: int
    st_size: int
    st_mtime: float    # as a stat gives it: seconds plus nanoseconds, one float addition
    sealed: Sealed
    root: str

    @classmethod
    def of(cls, sealed: Sealed, root: str) -> SealedStat:
        sec, ns = divmod(sealed.mtime_ns, 1_000_000_000)
        return cls(sealed.mode, sealed.size, sec + ns * 1e-9, sealed, root)


Stat = os.stat_result | SealedStat
Placing = Callable[[str], "tuple[Sealed, str] | None"]   # SealIndex.at


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
    mtime: int = 0                 # st_mtime in whole seconds (what a pyc header records)
    head: bytes | None = None      # a .pyc file's first 16 bytes

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
    venv: Mapping[str, str] = field(default_factory=dict)   # pyvenv.cfg
    made_by: str | None = None     # venv: "venv" | "virtualenv" | "uv"
    outside: tuple[Entry, ...] = ()  # absolute paths: a venv's base interpreter files
    by_hash: int = 0               # files read and hashed now
    by_identity: int = 0           # files proven by their seal (a stat), not read
    by_memo: int = 0               # outside files proven by the stat memo, not read
    # ``by_path``'s answer, made by its first call (each manifest's own: ``replace`` makes
    # a new one); the file checks, the bytecode check and the linkage each ask for it
    _by_path: dict[str, Entry] = field(default_factory=dict, init=False, repr=False,
                                       compare=False)

    def by_path(self) -> Mapping[str, Entry]:
        """Every entry by its path (one dict per manifest, not to be changed)."""
        if not self._by_path and self.entries:
            self._by_path.update((e.path, e) for e in self.entries)
        return self._by_path


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


class Outside(NamedTuple):
    """A venv's base interpreter files, walked apart from its prefix (``walk_outside``)."""

    entries: tuple[Entry, ...]     # sorted by path
    unreadable: tuple[tuple[str, str], ...] = ()
    by_hash: int = 0
    by_memo: int = 0


def build_manifest(prefix: Path, *, jobs: int | None = None, elf: bool = True,
                   progress: Progress | None = None, archives: Path | None = None,
                   outside: tuple[str, ...] = (), seals: SealIndex | None = None,
                   records: Records | None = None, memo: StatMemo | None = None,
                   placed: Mapping[str, str] | None = None) -> Manifest:
    """Walk, hash and attribute every file under ``prefix``; also hash ``outside`` (absolute
    files, or folders walked whole: a venv's base interpreter) with the same workers.
    ``seals``: sealed cache inodes whose sha256 is taken from their seal (module docstring);
    ``records``: the prefix's records when the caller read them already; ``placed``: what
    the calling install hardlinked (module docstring), with ``seals``. The caller starts
    no thread before it returns: the hashing workers, when there is enough to read for them,
    fork mid-walk (``verify.env.hashing``)."""
    prefix = Path(os.path.abspath(prefix))
    kind = prefix_kind(prefix)
    cfg = read_pyvenv_cfg(prefix) if kind == "venv" else {}
    made_by = producer(cfg) if kind == "venv" else None
    got = _scan(str(prefix), kind, made_by, outside, jobs=jobs, elf=elf, progress=progress,
                archives=archives, seals=seals, records=records, memo=memo, placed=placed)
    assert got.records is not None
    return Manifest(prefix=prefix, kind=kind, entries=tuple(by_path_bytes(got.inside)),
                    records=got.records, unreadable=tuple(sorted(got.unreadable)), venv=cfg,
                    made_by=made_by, outside=tuple(by_path_bytes(got.out)),
                    by_hash=got.by_hash, by_identity=got.by_identity, by_memo=got.by_memo)


def walk_outside(outside: tuple[str, ...], *, jobs: int | None = None, elf: bool = True,
                 memo: StatMemo | None = None) -> Outside:
    """``build_manifest``'s walk of ``outside`` alone (its entries, proofs and the memo's
    refresh the same), for a caller that walks them on another core: ``with_outside``."""
    got = _scan(None, None, None, outside, jobs=jobs, elf=elf, progress=None, archives=None,
                seals=None, records=None, memo=memo, placed=None)
    return Outside(entries=tuple(by_path_bytes(got.out)), unreadable=tuple(got.unreadable),
                   by_hash=got.by_hash, by_memo=got.by_memo)


def with_outside(manifest: Manifest, walked: Outside) -> Manifest:
    """The manifest of a prefix built without ``outside``, with those files walked apart."""
    return replace(manifest, outside=walked.entries,
                   unreadable=tuple(sorted((*manifest.unreadable, *walked.unreadable))),
                   by_hash=manifest.by_hash + walked.by_hash,
                   by_memo=manifest.by_memo + walked.by_memo)


class _Scanned(NamedTuple):
    inside: list[Entry]
    out: list[Entry]
    records: Records | None
    unreadable: list[tuple[str, str]]
    by_hash: int
    by_identity: int
    by_memo: int


def _scan(root: str | None, kind: PrefixKind | None, made_by: str | None,
          outside: tuple[str, ...], *, jobs: int | None, elf: bool,
          progress: Progress | None, archives: Path | None, seals: SealIndex | None,
          records: Records | None, memo: StatMemo | None,
          placed: Mapping[str, str] | None) -> _Scanned:
    """The walk of the prefix ``root`` (None: none) and of ``outside``, in one pass."""
    prefix = root or ""
    with FileHasher(jobs=jobs, elf=elf, root=f"{prefix}/") as hasher:
        # One pass: each entry is made as soon as what it needs is known. A file proven by
        # its seal or the stat memo, a symlink, a special file: at once, where the records
        # are read already (install's verify, --trust-seal); a file to hash (or whose head
        # is to be read): when its worker answers; the rest once the walk has ended.
        inside: list[Entry] = []
        out: list[Entry] = []
        later: list[tuple[str, Stat, str | None, Hashed | None]] = []
        # hash index -> the entries its hash makes (several: hardlinks within the prefix)
        waiting: dict[int, list[tuple[str, Stat, str | None]]] = {}
        first_of_inode: dict[tuple[int, int], int] = {}
        unreadable: list[tuple[str, str]] = []
        total = 0
        by_hash = by_identity = by_memo = 0
        remember: dict[str, os.stat_result] = {}  # outside files whose memo entry is written now
        heads = HeadMemo()
        head_of: dict[int, tuple[str, str]] = {}  # hash index -> (entry root, sealed sha256)
        claims = records.claims if records is not None else None
        sps = tuple(sp + "/" for sp in site_packages(Path(root))) if root else ()

        def made(rel: str, st: Stat, target: str | None, h: Hashed | None) -> None:
            if rel[0] == "/":
                assert isinstance(st, os.stat_result)
                out.append(_outside(rel, st, target, h))
            elif claims is not None:
                assert kind is not None
                inside.append(_entry(kind, made_by, rel, st, target, h, claims.get(rel, ()),
                                     sps))
            else:
                later.append((rel, st, target, h))

        def hash_later(n: int, rel: str, st: Stat, target: str | None) -> None:
            waiting.setdefault(n, []).append((rel, st, target))

        def proven(rel: str, st: Stat, target: str | None, sha256: str,
                   is_elf: bool | None, root: str) -> None:
            """A file whose bytes a stat proved (``root``: where the heads of its kind are
            remembered): its head taken from the memo, or read by a worker when it is
            needed (a pyc's header; an ELF file's facts where ``elf``)."""
            pyc = rel.endswith(".pyc")
            if not (pyc or (elf and is_elf is not False)):
                made(rel, st, target, Hashed(sha256))
                return
            got_head = heads.get(root, sha256) if pyc or is_elf else None
            if got_head is not None:  # a pyc is never ELF: its facts are None either way
                made(rel, st, target, Hashed(sha256, got_head[0] if elf else None, None,
                                             got_head[1]))
                return
            n = hasher.add(rel, st.st_size, known=sha256)
            if pyc or (elf and is_elf):  # remembered only what was read in full
                head_of[n] = (root, sha256)
            hash_later(n, rel, st, target)

        outside_heads = memo.heads_root if memo is not None else ""
        lookup = seals.lookup_in if seals is not None else None
        at = seals.at if seals is not None and placed else None
        for rel, st, target in _walk_all(root, outside, unreadable, placed, at):
            if isinstance(st, SealedStat):  # linked a moment ago: seal.prove_placed
                by_identity += 1
                proven(rel, st, None, st.sealed.sha256, st.sealed.elf, st.root)
                continue
            if not stat.S_ISREG(st.st_mode):
                made(rel, st, target, None)
                continue
            if lookup is not None and rel[0] != "/":
                found = lookup(st)
                if found is not None:
                    by_identity += 1
                    proven(rel, st, target, found[0].sha256, found[0].elf, found[1])
                    continue
            elif rel[0] == "/" and memo is not None:
                got = memo.lookup(rel, st)
                if got is not None:
                    by_memo += 1
                    if got[1] is None and elf:  # remembered by a run without the linkage
                        remember[rel] = st      # check: whether it is ELF, learnt now
                    proven(rel, st, target, got[0], got[1], outside_heads)
                    continue
                remember[rel] = st
            n = -1
            if st.st_nlink > 1:  # another name for a file already seen is hashed once
                n = first_of_inode.get((st.st_dev, st.st_ino), -1)
            if n < 0:
                n = hasher.add(rel, st.st_size)
                by_hash += 1
                total += st.st_size
                if st.st_nlink > 1:
                    first_of_inode[(st.st_dev, st.st_ino)] = n
            hash_later(n, rel, st, target)
        hasher.no_more()
        if records is None and root is not None:
            records = read_records(Path(root), archives=archives)  # while the workers hash
        claims = records.claims if records is not None else {}
        for rel, st, target, h in later:
            made(rel, st, target, h)

        def each(n: int, h: Hashed) -> None:  # entries are made while the workers hash
            if n in head_of and h[2] is None and h[0] == head_of[n][1]:  # a plain tuple
                heads.remember(head_of[n][0], head_of[n][1], h[1], h[3])
            for rel, st, target in waiting[n]:
                made(rel, st, target, h)

        what = (f"hashing {len(waiting):,} files of {root or 'the base interpreter'} "
                f"({total / 1e6:,.0f} MB)")
        bar = progress(what, total / 1e6) if progress else \
            nullcontext(lambda n=1: None)
        with bar as advance:
            hasher.wait(lambda nbytes: advance(nbytes / 1e6), each)
    if memo is not None:
        for e in out if remember else ():
            st_ = remember.get(e.path)
            if st_ is not None and e.sha256 and e.error is None:
                memo.remember(e.path, st_, e.sha256, e.elf is not None if elf else None)
                if e.path.endswith(".pyc") or (elf and e.elf is not None):
                    # what its bytes said, read with them: for the runs the memo proves
                    heads.remember(outside_heads, e.sha256, e.elf, e.head)
        memo.save()
    heads.save()
    return _Scanned(inside, out, records, unreadable, by_hash, by_identity, by_memo)


def _walk_all(root: str | None, outside: tuple[str, ...], unreadable: list[tuple[str, str]],
              placed: Mapping[str, str] | None = None, at: Placing | None = None
              ) -> Iterator[tuple[str, Stat, str | None]]:
    """The prefix's walk, then the outside's (chained: no generator between the walk and the
    loop that takes its 30,000 entries)."""
    walks = [_walk(root, unreadable, placed=placed, at=at)] if root is not None else []
    return itertools.chain(*walks, _walk_outside(outside, unreadable))


def _walk_outside(outside: tuple[str, ...], unreadable: list[tuple[str, str]]
                  ) -> Iterator[tuple[str, Stat, str | None]]:
    for path in outside:
        try:
            st = os.lstat(path)
        except OSError as exc:
            unreadable.append((path, exc.strerror or str(exc)))
            continue
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(path, unreadable, absolute=True)
        else:
            yield path, st, os.readlink(path) if stat.S_ISLNK(st.st_mode) else None


def _walk(root: str, unreadable: list[tuple[str, str]], *, absolute: bool = False,
          placed: Mapping[str, str] | None = None, at: Placing | None = None
          ) -> Iterator[tuple[str, Stat, str | None]]:
    """(relative path, lstat, link target) for everything below ``root`` but directories;
    a folder that cannot be listed goes to ``unreadable`` (it may hide anything). A name of
    ``placed`` that is a regular file (as the folder's listing says) and whose cache file
    ``at`` knows: (path, its ``SealedStat``, None), not stated here."""
    placed = placed if placed and at is not None else {}  # else every file is stated
    cut = 0 if absolute else len(root) + 1
    stack = [root]
    while stack:
        folder = stack.pop()
        if absolute and folder != root and os.path.basename(folder) in OUTSIDE_SKIP:
            continue  # a base interpreter's site-packages: not the venv's (see interpreter)
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
                    rel = d.path[cut:]
                    src = placed.get(rel)
                    if src is not None and at is not None and d.is_file(follow_symlinks=False):
                        got = at(src)
                        if got is not None:
                            yield rel, SealedStat.of(*got), None
                            continue
                    st = d.stat(follow_symlinks=False)
                    target = os.readlink(d.path) if stat.S_ISLNK(st.st_mode) else None
                except OSError:
                    continue
                yield rel, st, target


def _entry(kind: PrefixKind, made_by: str | None, rel: str, st: Stat,
           target: str | None, hashed: Hashed | None, claims: tuple[Claim, ...],
           sps: tuple[str, ...]) -> Entry:
    mode = st.st_mode
    if stat.S_ISREG(mode):
        etype: EntryType = "file"
        size, exec_bit = st.st_size, bool(mode & stat.S_IXUSR)
    else:
        etype = "symlink" if stat.S_ISLNK(mode) else "other"
        size, exec_bit = 0, False
    sha, elf, error, head = hashed if hashed is not None else (None, None, None, None)
    claim = pick_claim(claims, etype, sha, target) if claims else None
    owner: str | None
    category: Category
    if rel.endswith(".pyc") and is_bytecode(rel):  # derived: checked against its source
        owner, category = (claim.package if claim else None), "cache"
    elif claim is not None:
        owner, category = claim.package, "package"
    elif kind == "conda" and (rel.startswith("conda-meta/") or rel == "CACHEDIR.TAG"):
        owner, category = INSTALLER_OWNER, "meta"
    elif kind == "venv" and is_scaffold(rel, made_by or "venv"):
        owner, category = VENV_OWNER, "scaffold"
    elif kind == "python" and (not rel.startswith(sps)
                               or rel.endswith("site-packages/README.txt")) \
            and not STARTUP.match(rel):
        owner, category = PYTHON_OWNER, "base"
    else:
        owner, category = None, "unowned"
    return Entry(rel, etype, exec_bit, size, sha, target, owner, category, claim, error, elf,
                 int(st.st_mtime), head)


def _outside(path: str, st: os.stat_result, target: str | None, hashed: Hashed | None
             ) -> Entry:
    """A base interpreter's file (absolute path): its owner is decided by verify.env.interpreter."""
    mode = st.st_mode
    sha, elf, error, head = hashed if hashed is not None else (None, None, None, None)
    etype: EntryType = "file" if stat.S_ISREG(mode) else \
        "symlink" if stat.S_ISLNK(mode) else "other"
    category: Category = "cache" if is_bytecode(path) else "base"
    return Entry(path, etype, etype == "file" and bool(mode & stat.S_IXUSR),
                 st.st_size if etype == "file" else 0, sha, target, PYTHON_OWNER, category,
                 None, error, elf, int(st.st_mtime), head)


def by_path_bytes(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` sorted by the bytes of their paths (``os.fsencode``): the manifest's order
    and the digests'. Where every path is ASCII its text sorts as its bytes do, and the text
    is compared without encoding 30,000 paths first (a path of other characters, an
    undecodable byte among them, sorts all of them by their bytes)."""
    entries = list(entries)
    if all(e.path.isascii() for e in entries):
        return sorted(entries, key=_path_of)
    return sorted(entries, key=lambda e: os.fsencode(e.path))


_path_of = itemgetter(0)  # Entry.path


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

"""The seal of a cache entry: which inodes hold the proved bytes, so a stat can vouch for them.

When an archive has been proved against the lock and unpacked, with every member's sha256
computed from the archive's bytes and checked against its RECORD / ``info/paths.json``
(``samebits.install.unpack``), every file is read-only (0444 / 0555) and the entry gets a seal:

    CACHE/unpacked/<key>/seal.json     per file: path, st_dev, st_ino, size, mtime_ns,
                                       ctime_ns, st_mode, st_nlink, sha256, ELF or not; and
                                       the sha256 of the entry's manifest.json
    CACHE/unpacked/<key>/seal.sha256   the sha256 of seal.json
    CACHE/unpacked/<key>/seal.lock     flock'ed: shared to read the seal, exclusive to write it

The seal is canonical JSON of stat values, sorted by path: the same inodes give the same bytes.

**What a stat proves.** ``ctime`` cannot be set from user space: any change to an inode
(its bytes, its mode, its links, its times) moves it to now. So a file whose (dev, inode, size,
mtime_ns, mode) are the sealed ones and whose ctime has not moved is the sealed inode with the
sealed bytes; ``vouches`` says so, and a link to it in a prefix is proven by that stat alone
(``verify env`` in install; ``verify env --trust-seal``). Anything else is hashed.

**The window, honestly.** Linking a file into a prefix, and deleting a prefix linked from the
cache, change the link count and with it the ctime, and both are routine. A stat that differs
from the seal only in ctime *and* in the link count is therefore accepted as "links came or
went". The install that links checks every file against the seal first (``check``), then,
right after placing, re-stats each file it linked and seals its new ctime and link count when
its inode, size, mtime_ns and mode are still the sealed ones (``reseal``, under the entry's
exclusive lock, so two installs do not race; the lock is waited for at most
``LOCK_TIMEOUT`` seconds). ``samebits install`` makes that stat the proof of its own verify:
a stat of each path it linked in the prefix, by the same rule (``prove_placed``), and the
re-seal writes those stats (one stat of each linked file, not two). What that cannot see: a
write into the file in place that keeps its size, sets mtime back to the nanosecond
(``os.utime``) *and* happens while its link count also changes, or between an install's
check and that stat (the seconds it takes to place). Such a write is deliberate, by someone
who may write into the cache, who could as well rewrite the seal and its digest (both live
in that writable folder): the seal guards against accidents and against tools writing
through a link, not against the cache's owner (nothing on the same machine does; ``samebits
cache verify --full`` and ``verify env`` without ``--trust-seal`` re-hash every byte). A write
within the same clock tick as the stat that sealed the file (a few milliseconds after
unpacking) may leave mtime and ctime as they were; the seal is taken after the whole entry
is written. As root, the read-only modes stop nothing; the stat still shows a write.

**What is done with a seal that does not vouch** (``check``, before an install plans
anything): a seal that is missing (an entry of an older samebits) means every file is hashed
against the manifest and the entry sealed; a seal whose digest, key or manifest digest is wrong,
a file whose mode or size changed, or one whose bytes no longer hash to the manifest's value,
make the entry ``CorruptEntry``: the installer evicts it and unpacks the archive again (the
archive itself is re-proved against the lock's sha256). A file whose stat differs otherwise
(another inode, a moved ctime with the same link count, a copied cache) is hashed: the
manifest's bytes are re-sealed, others evict the entry.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from samebits.gcpause import paused_gc
from samebits.install.cache import PYC, UNPACKED, Entry, Member
from samebits.install.entryfiles import CorruptEntry, EntryGone

SEAL = "seal.json"
SEAL_DIGEST = "seal.sha256"
SEAL_LOCK = "seal.lock"
SEAL_FORMAT = 1
SEAL_KIND = "samebits.seal"
LOCK_TIMEOUT = 60.0       # seconds to wait for an entry's lock before giving up
# seconds for a child checking or re-sealing entries (``samebits.forked``) to answer: it may
# wait for an entry's lock twice (shared to read the seal, exclusive to write it)
CHILD_LIMIT = 2 * LOCK_TIMEOUT + 60.0
UNPACK_LOCK_TIMEOUT = 1800.0  # seconds to wait while another process unpacks that archive
LOCK_POLL = 0.01
HASH_BUFFER = 1 << 20
ELF_MAGIC = b"\x7fELF"
_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


class Sealed(NamedTuple):
    """One sealed file: its inode as stat saw it once its bytes were proved."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    mode: int
    nlink: int
    sha256: str
    elf: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Seal:
    root: Path
    key: str
    manifest: str                       # sha256 of manifest.json
    files: Mapping[str, Sealed]


class SealProblem(Exception):
    """A seal that is there but cannot be trusted (torn, edited, of another entry)."""


@dataclass(slots=True)
class CheckResult:
    """What ``check`` found in one entry (counts, for the install report)."""

    vouched: int = 0        # stat equal to the seal
    relinked: int = 0       # only ctime and the link count moved: re-sealed
    hashed: int = 0         # hashed against the manifest (and re-sealed): stat said nothing
    bytes_hashed: int = 0
    sealed_now: bool = False  # the entry had no seal: sealed from hashes now
    changed: int = 0        # files whose seal was written again


# ------------------------------------------------------------------------------ the stat rule

def vouches(s: Sealed, st: os.stat_result) -> bool:
    """Whether ``st`` is the sealed inode, unchanged but for links that came or went."""
    return (st.st_ino == s.ino and st.st_dev == s.dev and st.st_size == s.size
            and st.st_mtime_ns == s.mtime_ns and st.st_mode == s.mode
            and (st.st_ctime_ns == s.ctime_ns or st.st_nlink != s.nlink))


def unchanged_but_links(s: Sealed, st: os.stat_result) -> bool:
    """The rule for a file this process has just linked (``reseal``): the same inode, size,
    mtime and mode; its ctime and link count moved by the linking itself."""
    return (st.st_ino == s.ino and st.st_dev == s.dev and st.st_size == s.size
            and st.st_mtime_ns == s.mtime_ns and st.st_mode == s.mode)


def sealed_of(st: os.stat_result, sha256: str, elf: bool) -> Sealed:
    return Sealed(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                  st.st_mode, st.st_nlink, sha256, elf)


_READ, _EXEC = stat.S_IFREG | 0o444, stat.S_IFREG | 0o555


def expected_mode(m: Member) -> int:
    return _EXEC if m.exec else _READ


# ------------------------------------------------------------------------ reading and writing

def seal_bytes(key: str, manifest_sha256: str, files: Mapping[str, Sealed]) -> bytes:
    """The seal document: canonical JSON, files sorted by path (byte-stable)."""
    doc = {"format": SEAL_FORMAT, "kind": SEAL_KIND, "key": key, "manifest": manifest_sha256,
           "files": [[p, *s] for p, s in sorted(files.items())]}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _replace(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_seal(root: Path, key: str, manifest_sha256: str, files: Mapping[str, Sealed]) -> None:
    """seal.json, then its digest (the caller holds the exclusive lock, or the entry is not
    published yet)."""
    data = seal_bytes(key, manifest_sha256, files)
    digest = hashlib.sha256(data).hexdigest()
    _replace(root / SEAL, data)
    _replace(root / SEAL_DIGEST, (digest + "\n").encode())
    # what these bytes parse to is known: the next read of them (this install's verify)
    # still reads and hashes them, and parses them only if they are other bytes
    _remember(Seal(root=root, key=key, manifest=manifest_sha256, files=dict(files)), digest)


def read_seal(root: Path, key: str, manifest_sha256: str | None = None) -> Seal | None:
    """The entry's seal; None when it has none (an older entry); ``SealProblem`` when it has
    one that cannot be trusted. The caller holds the entry's lock (shared or exclusive)."""
    try:
        data = (root / SEAL).read_bytes()
    except FileNotFoundError:
        if (root / SEAL_DIGEST).exists():
            raise SealProblem(f"{SEAL} is gone but {SEAL_DIGEST} is there") from None
        return None
    except OSError as exc:
        raise SealProblem(f"{SEAL}: unreadable ({exc.strerror})") from None
    try:
        want = (root / SEAL_DIGEST).read_text().strip()
    except OSError as exc:
        raise SealProblem(f"{SEAL_DIGEST}: unreadable ({exc.strerror})") from None
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise SealProblem(f"{SEAL} hashes to {got}, {SEAL_DIGEST} says {want[:64]!r}")
    parsed = _PARSED.get((str(root), got))
    if parsed is not None and parsed.key == key and (manifest_sha256 is None
                                                    or parsed.manifest == manifest_sha256):
        return parsed  # these very bytes were parsed before in this process
    try:
        doc = json.loads(data)
        if doc.get("format") != SEAL_FORMAT or doc.get("kind") != SEAL_KIND:
            raise SealProblem(f"{SEAL}: format {doc.get('format')!r}, kind {doc.get('kind')!r}")
        if doc["key"] != key:
            raise SealProblem(f"{SEAL}: the seal of {doc['key']!r}, not of {key!r}")
        # each row taken as JSON typed it, unconverted (a check of every field costs more than
        # the parse): a field of the wrong type never equals a stat's, so its file is hashed
        make = Sealed._make
        files = {row[0]: make(row[1:]) for row in doc["files"] if len(row) == 10}
        if len(files) != len(doc["files"]) or not all(
                type(s.sha256) is str for s in files.values()):
            raise ValueError("a row is not [path, dev, ino, size, mtime, ctime, mode, nlink, "
                             "sha256, elf]")
        manifest = str(doc["manifest"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SealProblem(f"{SEAL}: unreadable ({type(exc).__name__}: {exc})") from None
    if manifest_sha256 is not None and manifest != manifest_sha256:
        raise SealProblem(f"{SEAL} seals manifest {manifest}, manifest.json is "
                          f"{manifest_sha256}")
    seal = Seal(root=root, key=key, manifest=manifest, files=files)
    _remember(seal, got)
    return seal


def read_ahead(entries: Iterable[Entry]) -> None:
    """Parse the seals of ``entries`` into this process's memo of parsed seals (``_PARSED``)
    while it would only wait (install, for the forked check of those entries): its verify's
    ``SealIndex.load`` reads and hashes their bytes again, and parses them only if they are
    other bytes (torch's seal: 12,118 rows, 25-30 ms). An entry locked by another process, or
    a seal that cannot be read, is skipped: the check that owns it says what is wrong."""
    for e in entries:
        with contextlib.suppress(OSError, SealProblem), \
                entry_lock(e.root, exclusive=False, timeout=0.0):
            read_seal(e.root, e.key, e.manifest_sha256 or None)


def _remember(seal: Seal, digest: str) -> None:
    if len(_PARSED) >= PARSED_KEPT:
        _PARSED.clear()
    _PARSED[(str(seal.root), digest)] = seal


# Seals parsed in this process, by (entry root, sha256 of the seal's bytes): an install reads
# each seal to check the entry, again to re-seal it and its verify once more; the bytes are
# read and hashed every time, and only parsed when they are other bytes.
_PARSED: dict[tuple[str, str], Seal] = {}
PARSED_KEPT = 512


def entry_lock(root: Path, *, exclusive: bool, timeout: float = LOCK_TIMEOUT
               ) -> contextlib.AbstractContextManager[None]:
    """flock on the entry's seal.lock, waited for at most ``timeout`` seconds (then
    ``CorruptEntry``-free ``TimeoutError`` naming the file)."""
    return _flock(root / SEAL_LOCK, exclusive=exclusive, timeout=timeout)


def key_lock(cache: Path, key: str) -> contextlib.AbstractContextManager[None]:
    """The exclusive lock of unpacking the archive ``key`` (``CACHE/locks/unpacked-<key>``,
    outside the entry, which unpacking replaces), held while one process looks for the entry,
    evicts a torn one and publishes; waited for at most ``UNPACK_LOCK_TIMEOUT`` seconds (the
    unpacking of the largest wheel by another process)."""
    folder = cache / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return _flock(folder / f"unpacked-{key}.lock", exclusive=True, timeout=UNPACK_LOCK_TIMEOUT)


def file_lock(path: Path, *, timeout: float) -> contextlib.AbstractContextManager[None]:
    """An exclusive flock on ``path`` (made if missing), waited for at most ``timeout``
    seconds (then ``TimeoutError`` naming the file)."""
    return _flock(path, exclusive=True, timeout=timeout)


@contextlib.contextmanager
def _flock(path: Path, *, exclusive: bool, timeout: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        how = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(fd, how)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path}: another samebits process has held this lock "
                                       f"for more than {timeout:g} s") from None
                time.sleep(LOCK_POLL)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# --------------------------------------------------------------------------- sealing at unpack

def _look(path: str) -> tuple[os.stat_result, bool]:
    """(fstat, starts with the ELF magic) of a regular file, never following a link."""
    fd = os.open(path, _FLAGS)
    try:
        head = os.read(fd, 4)
        return os.fstat(fd), head == ELF_MAGIC
    finally:
        os.close(fd)


def seal_new(root: Path, key: str, members: Iterable[Member], manifest: bytes) -> None:
    """Seal an entry being built at ``root`` (not yet published): every file's stat now,
    with the sha256 computed while it was unpacked."""
    files = {}
    for m in members:
        if m.type != "file":
            continue
        st, elf = _look(f"{root}/tree/{m.path}")
        files[m.path] = sealed_of(st, m.sha256 or "", elf)
    write_seal(root, key, hashlib.sha256(manifest).hexdigest(), files)


# ------------------------------------------------------------------------- checking at install

def hash_stable(path: str) -> tuple[str, os.stat_result | None, bool]:
    """(sha256, stat, ELF or not) of a regular file; the stat is None when the file changed
    while it was read (its bytes are then not sealed: the next check hashes it again)."""
    h = hashlib.sha256()
    fd = os.open(path, _FLAGS)
    try:
        before = os.fstat(fd)
        buf = bytearray(HASH_BUFFER)
        view = memoryview(buf)
        elf = None
        while n := os.readv(fd, (buf,)):
            if elf is None:
                elf = bytes(view[:4]) == ELF_MAGIC
            h.update(view[:n])
        after = os.fstat(fd)
    finally:
        os.close(fd)
    same = (before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns) == \
        (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns)
    return h.hexdigest(), after if same else None, bool(elf)


def check(entry: Entry, *, full: bool = False, refresh_links: bool = True) -> CheckResult:
    """Prove the entry's files by their seal before anything is placed from them; see the
    module's docstring for what each difference means. ``CorruptEntry`` names the first
    problem; what the seal could not vouch for is hashed and, when it is the manifest's
    bytes, sealed again. ``full``: every file is hashed, whatever its stat says.
    ``refresh_links=False``: a file whose links only came or went is not re-sealed now (the
    install that is about to link it re-seals it after linking, once)."""
    out = CheckResult()
    try:
        with entry_lock(entry.root, exclusive=False):
            try:
                seal = read_seal(entry.root, entry.key, entry.manifest_sha256 or None)
            except SealProblem as exc:
                raise CorruptEntry(entry, SEAL, str(exc)) from None
    except FileNotFoundError:  # its folder renamed away: another process replaced it
        raise EntryGone(entry, SEAL, "the entry was replaced while it was read") from None
    files = seal.files if seal is not None else {}
    if seal is None:
        out.sealed_now = True
    redo: dict[str, Sealed] = {}
    tree = entry.source("")  # the hot loop of every install: 22,000 members, a stat each
    lstat = os.lstat
    for m in entry.members:
        if m.type != "file":
            continue
        path = tree + m.path
        try:
            st = lstat(path)
        except OSError:
            if not entry.root.exists():
                raise EntryGone(entry, m.path, "the entry was replaced while it was read") \
                    from None
            raise CorruptEntry(entry, m.path, "missing from the cache") from None
        if st.st_size != m.size or st.st_mode != expected_mode(m):
            if not stat.S_ISREG(st.st_mode) or st.st_size != m.size:
                raise CorruptEntry(entry, m.path, f"{st.st_size} bytes in the cache, the "
                                   f"archive held {m.size}")
            raise CorruptEntry(entry, m.path, f"mode {stat.filemode(st.st_mode)} in the cache, "
                               f"sealed {stat.filemode(expected_mode(m))}")
        s = files.get(m.path)
        if seal is not None and s is None:
            raise CorruptEntry(entry, SEAL, f"{m.path} is in the manifest, not in the seal")
        if s is not None and s.sha256 != m.sha256:
            raise CorruptEntry(entry, SEAL, f"{m.path}: the seal's sha256 is not the "
                               "manifest's")
        if s is not None and vouches(s, st):
            if st.st_ctime_ns == s.ctime_ns:
                out.vouched += 1
            else:
                out.relinked += 1
                if refresh_links or full:
                    redo[m.path] = sealed_of(st, s.sha256, s.elf)
            if not full:
                continue
        try:
            got, st2, elf = hash_stable(path)
        except OSError as exc:
            raise CorruptEntry(entry, m.path, f"unreadable ({exc.strerror})") from None
        if got != m.sha256:
            raise CorruptEntry(entry, m.path, "differs from the archive")
        out.hashed += 1
        out.bytes_hashed += m.size
        if (st2 is not None and st2.st_mode == expected_mode(m)
                and (s is None or not vouches(s, st2) or m.path in redo)):
            redo[m.path] = sealed_of(st2, got, elf)
    if redo or seal is None:
        _update(entry, redo, whole=seal is None)
    out.changed = len(redo)
    return out


def _update(entry: Entry, changes: Mapping[str, Sealed], *, whole: bool) -> None:
    """Write ``changes`` into the entry's seal under its exclusive lock (``whole``: they are
    every file, the entry had no seal)."""
    with entry_lock(entry.root, exclusive=True):
        try:
            seal = read_seal(entry.root, entry.key, entry.manifest_sha256 or None)
        except SealProblem:
            return  # changed under us: the next check evicts or re-seals it
        if seal is None and not whole:
            return
        files = dict(seal.files) if seal is not None else {}
        files.update(changes)
        write_seal(entry.root, entry.key, entry.manifest_sha256, files)


def reseal(entry: Entry, linked: Iterable[str],
           seen: Mapping[str, os.stat_result] | None = None) -> int:
    """After linking ``linked`` (members of ``entry``, each vouched for by ``check`` just
    before) into a prefix: re-stat each under the entry's exclusive lock and seal its new
    ctime and link count when its inode, size, mtime and mode are the sealed ones
    (``unchanged_but_links``). ``seen``: the stat each was proven by a moment ago, by cache
    path (install's own verify, which stats the very inodes through the prefix's links:
    ``prove_placed``), taken instead of another stat; a member it lacks is left as sealed.
    The number of files re-sealed."""
    linked = sorted(set(linked))
    if not linked:
        return 0
    with entry_lock(entry.root, exclusive=True):
        try:
            seal = read_seal(entry.root, entry.key, entry.manifest_sha256 or None)
        except SealProblem:
            return 0
        if seal is None:
            return 0
        files = dict(seal.files)
        n = 0
        for rel in linked:
            s = files.get(rel)
            if s is None:
                continue
            if seen is not None:
                st = seen.get(entry.source(rel))
                if st is None:
                    continue
            else:
                try:
                    st = os.lstat(entry.source(rel))
                except OSError:
                    continue
            if unchanged_but_links(s, st) and (st.st_ctime_ns, st.st_nlink) != (s.ctime_ns,
                                                                               s.nlink):
                files[rel] = sealed_of(st, s.sha256, s.elf)
                n += 1
        if n:
            write_seal(entry.root, entry.key, seal.manifest, files)
    return n


# ------------------------------------------------------------------------- what verify trusts

@dataclass(frozen=True, slots=True)
class SealIndex:
    """Sealed inodes by (st_dev, st_ino), from the seals of some entries, each read under its
    shared lock and checked against its digest and its manifest; a seal that cannot be
    trusted is left out (its files are hashed). ``paths``: the same by cache path, for the
    files an install has just linked (``prove_placed``)."""

    inodes: Mapping[tuple[int, int], tuple[Sealed, str, int]] = field(default_factory=dict)
    roots: tuple[str, ...] = ()               # the entries' folders, by the index in inodes
    entries: tuple[str, ...] = ()             # the keys whose seals were read
    refused: tuple[tuple[str, str], ...] = ()  # (key, why) of seals that were not used
    paths: Mapping[str, tuple[Sealed, int]] = field(default_factory=dict)

    def lookup(self, st: os.stat_result) -> Sealed | None:
        """The sealed file ``st`` is, when the seal vouches for it and, unless its ctime is
        the sealed one (which no other inode can have), the cache still holds that very
        inode at the sealed path (an inode number freed and used again elsewhere, whose
        link count differs, is never taken for the sealed file)."""
        got = self.lookup_in(st)
        return got[0] if got is not None else None

    def lookup_in(self, st: os.stat_result) -> tuple[Sealed, str] | None:
        """``lookup``, with the folder of the cache entry whose seal vouches (where
        ``verify.env.headmemo`` keeps what the file's head says)."""
        got = self.inodes.get((st.st_dev, st.st_ino))
        if got is None:
            return None
        sealed, path, root = got
        if not vouches(sealed, st):
            return None
        if st.st_ctime_ns != sealed.ctime_ns:  # the sealed ctime: no other inode can have it
            try:
                there = os.lstat(path)
            except OSError:
                return None
            if (there.st_dev, there.st_ino) != (st.st_dev, st.st_ino):
                return None
        return sealed, self.roots[root]

    def at(self, cache_path: str) -> tuple[Sealed, str] | None:
        """The seal of the cache file at ``cache_path`` and its entry's folder, as read
        (nothing is stated: ``prove_placed`` proves the file)."""
        got = self.paths.get(cache_path)
        return (got[0], self.roots[got[1]]) if got is not None else None

    @classmethod
    def load(cls, cache: Path, keys: Iterable[str]) -> SealIndex:
        """The seals of the unpacked entries ``keys`` (archive sha256s) and of the bytecode
        entries compiled from them (``CACHE/pyc/<key>/*``)."""
        inodes: dict[tuple[int, int], tuple[Sealed, str, int]] = {}
        paths: dict[str, tuple[Sealed, int]] = {}
        roots: list[str] = []
        used: list[str] = []
        refused: list[tuple[str, str]] = []
        for key in sorted(set(keys)):
            for root, name in _sealed_roots(cache, key):
                try:
                    manifest = hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest()
                    with entry_lock(root, exclusive=False):
                        seal = read_seal(root, root.name, manifest)
                except (OSError, SealProblem) as exc:
                    refused.append((name, str(exc)))
                    continue
                if seal is None:
                    continue
                used.append(name)
                roots.append(str(root))
                n, tree = len(roots) - 1, f"{root}/tree/"
                for rel, s in seal.files.items():
                    path = tree + rel
                    inodes[(s.dev, s.ino)] = (s, path, n)
                    paths[path] = (s, n)
        return cls(inodes=inodes, roots=tuple(roots), entries=tuple(used),
                   refused=tuple(refused), paths=paths)


def prove_placed(prefix: str, paths: Mapping[str, str], seals: SealIndex
                 ) -> tuple[list[str], dict[str, os.stat_result]]:
    """A stat of each of ``paths`` (prefix-relative -> cache path) under ``prefix`` whose
    cache file ``seals`` holds (the walk takes the others' stat itself): (those that are not
    that sealed file unchanged but for its links, the stat each other one was proven by, by
    cache path)."""
    root = prefix.rstrip("/") + "/"
    lstat, at = os.lstat, seals.paths.get
    failed: list[str] = []
    seen: dict[str, os.stat_result] = {}
    for rel, cache_path in paths.items():
        got = at(cache_path)
        if got is None:  # no seal of it was read: the walk stats it as any other file
            continue
        try:
            st = lstat(root + rel)
        except OSError:
            failed.append(rel)
            continue
        if unchanged_but_links(got[0], st):
            seen[cache_path] = st
        else:
            failed.append(rel)
    return failed, seen


def _sealed_roots(cache: Path, key: str) -> list[tuple[Path, str]]:
    """(root, name) of the entry ``key`` and of its bytecode entries that have a seal."""
    out = []
    root = cache / UNPACKED / key
    if (root / SEAL).exists():
        out.append((root, key))
    try:
        names = sorted(os.listdir(cache / PYC / key))
    except OSError:
        names = []
    for name in names:
        if not name.startswith(".") and (cache / PYC / key / name / SEAL).exists():
            out.append((cache / PYC / key / name, f"{PYC}/{key}/{name}"))
    return out


def keys_of(sources: Mapping[str, str] | Sequence[str]) -> set[str]:
    """The unpacked entries' keys among install's placed-from values (``unpacked/<key>``)."""
    values = sources.values() if isinstance(sources, Mapping) else sources
    return {v.split("/", 1)[1] for v in values if v.startswith(f"{UNPACKED}/")}


def member_of(cache_path: str) -> tuple[str, str] | None:
    """``CACHE/unpacked/<key>/tree/<member>`` or ``CACHE/pyc/<archive>/<key>/tree/<member>``
    -> (entry root, member), else None."""
    head, sep, member = cache_path.partition("/tree/")
    if not sep or (_UNPACKED_IN not in head and _PYC_IN not in head):
        return None
    return head, member


_UNPACKED_IN, _PYC_IN = f"/{UNPACKED}/", f"/{PYC}/"  # member_of: 22,000 calls a warm install


def archive_of(root: str) -> str:
    """The archive key an entry root belongs to: its own name, or (bytecode) its folder's."""
    head, name = root.rsplit("/", 1)
    parent, folder = head.rsplit("/", 1)
    return folder if folder != UNPACKED and parent.rsplit("/", 1)[-1] == PYC else name


def linked_entries(entries: Mapping[str, Entry], linked: Iterable[str]
                   ) -> list[tuple[Entry, tuple[str, ...]]]:
    """(entry, its members among ``linked``) for every entry of ``entries`` some of
    ``linked`` (cache paths) came from, by the entry's folder."""
    by_root: dict[str, list[str]] = {}
    for path in linked:
        got = member_of(path)
        if got is not None:
            by_root.setdefault(got[0], []).append(got[1])
    roots = {str(e.root): e for e in entries.values()}
    return [(roots[r], tuple(members)) for r, members in sorted(by_root.items())
            if r in roots]


@paused_gc()
def reseal_all(linked: Sequence[tuple[Entry, tuple[str, ...]]],
               seen: Mapping[str, os.stat_result] | None = None) -> int:
    """``reseal`` each (entry, members) of ``linked_entries``: the number of files re-sealed."""
    return sum(reseal(entry, members, seen) for entry, members in linked)


# ------------------------------------------------------------------------ samebits cache verify

@dataclass(slots=True)
class CacheReport:
    """What ``verify_cache`` found: every unpacked entry sound, re-sealed or evicted."""

    cache: Path
    full: bool
    entries: int = 0
    files: int = 0
    hashed: int = 0
    bytes_hashed: int = 0
    resealed: list[str] = field(default_factory=list)   # keys whose seal was refreshed
    evicted: list[tuple[str, str, str]] = field(default_factory=list)  # key, filename, why

    @property
    def exit_code(self) -> int:
        return 1 if self.evicted else 0

    def to_json(self) -> dict[str, object]:
        return {"format": 1, "kind": "samebits.cache-verify", "cache": str(self.cache),
                "full": self.full, "entries": self.entries, "files": self.files,
                "hashed": self.hashed, "bytes_hashed": self.bytes_hashed,
                "sound": self.entries - len(self.evicted), "resealed": sorted(self.resealed),
                "evicted": [{"key": k, "filename": f, "why": w}
                            for k, f, w in sorted(self.evicted)]}


def verify_cache(cache: Path, *, full: bool = False, jobs: int | None = None) -> CacheReport:
    """Check every entry of ``CACHE/unpacked`` against its seal (``full``: hash every file
    against its manifest too); evict each broken one. The next install unpacks an evicted
    entry again from its archive, which it proves against the lock first."""
    from concurrent.futures import ThreadPoolExecutor

    from samebits.install.cache import evict, read_entry

    report = CacheReport(cache=cache, full=full)
    folder = cache / UNPACKED
    try:
        keys = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except FileNotFoundError:
        return report
    except OSError as exc:
        raise OSError(exc.errno, f"cannot list the cache: {exc.strerror}", str(folder)) \
            from None

    def one(key: str) -> tuple[str, str, CheckResult | str, int]:
        entry = read_entry(cache, key, None)
        if entry is None:
            return key, "", "manifest.json is missing or unreadable", 0
        files = sum(1 for m in entry.members if m.type == "file")
        try:
            return key, entry.filename, check(entry, full=full), files
        except CorruptEntry as exc:
            return key, entry.filename, str(exc).split(": ", 1)[-1], files

    from samebits.host import cores

    workers = jobs or cores()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, keys))
    for key, filename, got, files in results:
        report.entries += 1
        report.files += files
        if isinstance(got, str):
            report.evicted.append((key, filename, got))
            evict(folder, key)
            continue
        report.hashed += got.hashed
        report.bytes_hashed += got.bytes_hashed
        if got.changed or got.sealed_now:
            report.resealed.append(key)
    return report

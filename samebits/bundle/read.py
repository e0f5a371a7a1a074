"""Reading a bundle back (``samebits.bundle.make`` writes them): check it, or unpack it for install.

``scan`` reads the tar once, front to back, so a 3 GB bundle is read once:

    every member   one root folder, no absolute or '..' paths, no duplicates, nothing but
                   folders and regular files (a link or a device is a problem)
    every file     hashed (sha256; md5 too for an archive the lock hashes with md5)
    bundle.json    first: format 1, kind samebits.bundle.make (else the file is unreadable: exit 2)
    the lockfile   before the archives; its sha256 is the one bundle.json names
    SHA256SUMS     every file listed with its hash, and nothing listed that is absent
    coverage       every archive the lock installs on the bundled platforms is there, with the
                   lock's sha256 (and md5); nothing else is under archives/

``check`` returns every problem found (``samebits bundle check``: exit 1 when any).
``unpack`` runs the same scan and writes the archives one platform needs into an install cache
as they stream past (``CACHE/archives/<key>/<filename>``, each through ``atomic_writer``'s
temporary file, renamed only when its hashes are the lock's), and the lockfile to
``CACHE/bundles/<sha256>/<name>``; any problem refuses the bundle by name (InputError, exit 2)
and the install never starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
import posixpath
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from samebits._io import atomic_write, atomic_writer
from samebits.bundle.make import (
    ARCHIVES,
    BUNDLE_FORMAT,
    BUNDLE_KIND,
    MANIFEST,
    SUMS,
    by_archive,
    locked_packages,
)
from samebits.errors import InputError, SamebitsError, UsageError
from samebits.lock.read import LockedEnv, load_lock

CHUNK = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    sha256: str | None
    md5: str | None
    label: str


@dataclass(slots=True)
class _State:
    """What one pass has seen so far (mutable while scanning; ``Scan`` is what it returns)."""

    source: str
    root: str | None = None
    manifest: dict[str, Any] | None = None
    env: LockedEnv | None = None
    expected: dict[str, Expected] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    md5s: dict[str, str] = field(default_factory=dict)
    small: dict[str, bytes] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scan:
    source: str
    root: str
    manifest: dict[str, Any]
    env: LockedEnv | None
    files: int
    archives: int
    problems: tuple[str, ...]
    lockfile: Path | None = None  # unpack: where the lockfile was written

    @property
    def ok(self) -> bool:
        return not self.problems


# What a damaged (or damaged and compressed) tar raises while it is read.
DAMAGED = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)


def _members(path: Path) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
    try:
        tf = tarfile.open(path, "r:*")  # noqa: SIM115 (closed below, after the last member)
    except FileNotFoundError:
        raise InputError(f"{path}: no such bundle", hint="write one with `samebits bundle ENV "
                         "--platform P --out FILE`") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a bundle") from None
    except DAMAGED as exc:
        raise InputError(f"{path}: not a tar archive ({exc})") from None
    with tf:
        while True:
            try:
                member = tf.next()
            except DAMAGED as exc:
                # members read so far (getmembers() would read on into the damage)
                done = len(tf.members)  # type: ignore[attr-defined]
                raise InputError(f"{path}: the tar is damaged after {done} members "
                                 f"({exc})") from None
            if member is None:
                return
            yield member, tf


def _read(f: IO[bytes], n: int, source: str) -> bytes:
    try:
        return f.read(n)
    except DAMAGED as exc:
        raise InputError(f"{source}: the tar is damaged ({exc})") from None


def _where(st: _State, name: str) -> str | None:
    """The member's path under the bundle root; None (and a problem) when it has no place."""
    parts = name.split("/")
    if name.startswith("/") or ".." in parts:
        st.problems.append(f"{name[:120]}: an absolute or '..' path")
        return None
    if st.root is None:
        st.root = parts[0]
    if parts[0] != st.root:
        st.problems.append(f"{name[:120]}: outside the bundle folder {st.root}/")
        return None
    return posixpath.normpath("/".join(parts[1:])) if len(parts) > 1 else ""


def _read_manifest(st: _State, data: bytes) -> None:
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{st.source}: {MANIFEST} is not JSON: {exc}") from None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if kind != BUNDLE_KIND or doc.get("format") != BUNDLE_FORMAT:
        fmt = doc.get("format") if isinstance(doc, dict) else None
        raise InputError(f"{st.source}: {MANIFEST}: kind = {kind!r}, format = {fmt!r}: not a "
                         f"samebits bundle of format {BUNDLE_FORMAT}")
    lock = doc.get("lockfile")
    if (not isinstance(lock, dict) or not isinstance(lock.get("path"), str)
            or not isinstance(doc.get("platforms"), list) or not doc["platforms"]):
        raise InputError(f"{st.source}: {MANIFEST}: no lockfile.path or platforms")
    st.manifest = doc


def _read_lock(st: _State, data: bytes) -> None:
    assert st.manifest is not None
    want = st.manifest["lockfile"].get("sha256")
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        st.problems.append(f"{st.manifest['lockfile']['path']}: sha256 is {got}, {MANIFEST} "
                           f"says {want}")
    with tempfile.TemporaryDirectory(prefix="samebits-bundle-") as tmp:
        path = Path(tmp) / posixpath.basename(st.manifest["lockfile"]["path"])
        path.write_bytes(data)
        try:
            env = load_lock(path, name=str(st.manifest.get("environment")), root=path.parent)
            for plat in st.manifest["platforms"]:
                env.check_platform(str(plat))
            packages = locked_packages(env, [str(p) for p in st.manifest["platforms"]])
        except SamebitsError as exc:
            st.problems.append(f"{st.manifest['lockfile']['path']}: {exc.message}")
            return
    st.env = env
    for rel, group in by_archive(packages).items():
        p = group[0]
        st.expected[rel] = Expected(sha256=p.sha256, md5=p.md5,
                                    label=f"{p.manager}:{p.name} {p.version}")


def _hash_stream(f: IO[bytes], *, md5: bool, out: BinaryIO | None, source: str,
                 advance: Callable[[int], None]) -> tuple[str, str | None]:
    sha, m = hashlib.sha256(), (hashlib.md5() if md5 else None)
    while chunk := _read(f, CHUNK, source):
        sha.update(chunk)
        if m is not None:
            m.update(chunk)
        if out is not None:
            out.write(chunk)
        advance(len(chunk))
    return sha.hexdigest(), (m.hexdigest() if m is not None else None)


def _archive_problem(rel: str, exp: Expected | None, sha: str, md5: str | None) -> str | None:
    if exp is None:
        return f"{rel}: an archive the lock does not name for the bundled platforms"
    if exp.sha256 and sha != exp.sha256:
        return f"{rel}: sha256 is {sha}, the lock says {exp.sha256} ({exp.label})"
    if exp.md5 and md5 != exp.md5:
        return f"{rel}: md5 is {md5}, the lock says {exp.md5} ({exp.label})"
    return None


class _Discard(Exception):
    """Raised inside ``atomic_writer`` to drop an archive whose hashes are not the lock's."""


def scan(path: Path, *, cache: Path | None = None, platform: str | None = None,
         advance: Callable[[int], None] = lambda n: None) -> Scan:
    """Read the bundle once; with ``cache`` and ``platform``, unpack that platform's archives
    and the lockfile into ``cache`` as they pass (see the module docstring)."""
    st = _State(source=str(path))
    seen: set[str] = set()
    wanted: set[str] | None = None
    lockfile: Path | None = None
    for member, tf in _members(Path(path)):
        rel = _where(st, member.name)
        if rel is None or rel in ("", "."):
            continue
        if rel in seen:
            st.problems.append(f"{rel}: in the bundle twice")
            continue
        seen.add(rel)
        if member.isdir():
            continue
        if not member.isfile():
            st.problems.append(f"{rel}: a link or special file: a bundle holds files only")
            continue
        if st.manifest is None and rel != MANIFEST:
            raise InputError(f"{st.source}: not a samebits bundle: {MANIFEST} is not its first "
                             f"file ({rel} is)")
        f = tf.extractfile(member)
        assert f is not None
        if rel.startswith(f"{ARCHIVES}/"):
            exp = st.expected.get(rel)
            if cache is not None and wanted is None:
                if st.env is None:
                    raise InputError(f"{st.source}: no readable lockfile before the archives",
                                     hint=f"samebits bundle check {st.source}")
                assert platform is not None
                wanted = set(by_archive(locked_packages(st.env, [platform])))
            dest = cache / rel if cache is not None and rel in (wanted or ()) else None
            try:  # into the cache only when its hashes are the lock's
                with (atomic_writer(dest) if dest else contextlib.nullcontext()) as out:
                    sha, md5 = _hash_stream(f, md5=exp is None or exp.md5 is not None,
                                            out=out, source=st.source, advance=advance)
                    problem = _archive_problem(rel, exp, sha, md5)
                    if problem:
                        raise _Discard(problem)
            except _Discard as exc:
                st.problems.append(str(exc))
            st.digests[rel] = sha
            continue
        data = _read(f, -1, st.source)
        advance(len(data))
        st.digests[rel] = hashlib.sha256(data).hexdigest()
        st.small[rel] = data
        if rel == MANIFEST:
            _read_manifest(st, data)
            assert st.manifest is not None
            if platform is not None and platform not in st.manifest["platforms"]:
                raise UsageError(f"{st.source}: no platform '{platform}' in this bundle (it has "
                                 f"{', '.join(map(str, st.manifest['platforms']))})",
                                 hint="pass --platform")
        elif st.manifest is not None and rel == st.manifest["lockfile"]["path"]:
            _read_lock(st, data)
            if cache is not None and st.env is not None:
                lockfile = cache / "bundles" / st.env.digest / posixpath.basename(rel)
                atomic_write(lockfile, data)
    if st.manifest is None or st.root is None:
        raise InputError(f"{st.source}: not a samebits bundle: no {MANIFEST}")
    _finish(st)
    return Scan(source=st.source, root=st.root, manifest=st.manifest, env=st.env,
                files=len(st.digests), archives=sum(1 for r in st.digests
                                                   if r.startswith(f"{ARCHIVES}/")),
                problems=tuple(st.problems), lockfile=lockfile)


def _finish(st: _State) -> None:
    """The checks that need the whole bundle: the lockfile, SHA256SUMS, coverage."""
    assert st.manifest is not None
    lock_path = st.manifest["lockfile"]["path"]
    if lock_path not in st.digests:
        st.problems.append(f"{lock_path}: the lockfile {MANIFEST} names is not in the bundle")
    for rel, exp in st.expected.items():
        if rel not in st.digests:
            st.problems.append(f"{rel}: missing ({exp.label})")
    sums = st.small.get(SUMS)
    if sums is None:
        st.problems.append(f"{SUMS}: not in the bundle")
        return
    listed: dict[str, str] = {}
    for n, line in enumerate(sums.decode("utf-8", "replace").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            st.problems.append(f"{SUMS} line {n}: not '<sha256>  <path>': {line[:80]!r}")
            continue
        listed[name] = digest
    for rel, digest in sorted(st.digests.items()):
        if rel == SUMS:
            continue
        want = st.expected.get(rel)
        told = want is not None and want.sha256 is not None and want.sha256 != digest
        if rel not in listed:
            st.problems.append(f"{rel}: not listed in {SUMS}")
        elif listed[rel] != digest and not told:  # a bad archive is named once, by the lock
            st.problems.append(f"{rel}: sha256 is {digest}, {SUMS} says {listed[rel]}")
    for rel in sorted(set(listed) - set(st.digests) - set(st.expected)):  # those: "missing"
        st.problems.append(f"{rel}: listed in {SUMS} but not in the bundle")


def check(path: Path, *, advance: Callable[[int], None] = lambda n: None) -> Scan:
    """``samebits bundle check``: every hash and the lock's coverage; problems listed."""
    return scan(path, advance=advance)


def unpack(path: Path, cache: Path, platform: str, *,
           advance: Callable[[int], None] = lambda n: None) -> Scan:
    """The archives ``platform`` needs and the lockfile, hash-checked, into ``cache``;
    InputError listing every problem when the bundle does not check."""
    result = scan(path, cache=cache, platform=platform, advance=advance)
    if result.problems or result.lockfile is None:
        problems = list(result.problems) or ["no readable lockfile"]
        head = problems[0] if len(problems) == 1 else (
            f"{len(problems)} problems:\n  " + "\n  ".join(problems))
        raise InputError(f"{path}: refused: {head}",
                         hint=f"nothing was installed; `samebits bundle check {path}` lists "
                         "the problems")
    return result

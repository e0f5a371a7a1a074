"""Unpack: a proved archive becomes a cache entry, every member hashed as it is written.

``unpack(fetched, cache)`` runs once per archive, right after ``fetch.prove`` checked the
archive against the lock:

1. every member is scanned (``samebits.archives.scan_archive``): absolute or ``..``
   paths, links out of the root, device files, absurd sizes and zip bombs are refused;
2. every member is written to the entry's ``tree/`` (read-only) while its sha256 and size are
   computed from the bytes read out of the archive;
3. those hashes are checked against the archive's own record: a conda package's
   ``info/paths.json`` (a member that disagrees never reaches a prefix), and a wheel's RECORD,
   where a disagreement is a note naming the member, not a refusal. The archive itself is the
   one the lock pins by sha256 (``fetch.prove``), so its bytes are exactly what was published;
   a RECORD that lies about them is the publisher's slip, and pip and uv install such a wheel
   without a word (PyPI's torch 1.12.1 and torchvision 0.13.1: their METADATA was edited after
   RECORD was written). samebits writes the installed RECORD from the bytes it placed
   (``wheels.plan_wheel``), so what verify env checks is what is there;
4. the entry is sealed (``seal.seal_new``: every file's inode, as stat sees it now, with its
   sha256) and published (``cache.publish``) with the manifest of those hashes.

Every problem of one archive is collected; ``UnpackError`` carries them all.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

from samebits.archives import record_hash, scan_archive
from samebits.install.cache import (
    UNPACKED,
    Entry,
    Member,
    evict,
    manifest_bytes,
    manifest_doc,
    publish,
    read_entry,
)
from samebits.install.fetch import Fetched, cache_key
from samebits.install.seal import key_lock, seal_new

BUFFER = 1 << 20
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
SPLIT_BYTES = 64 << 20  # a wheel inflating to more is written on MEMBER_THREADS threads
MEMBER_THREADS = 2      # this project's machines' cores; four archives unpack at a time


class UnpackError(Exception):
    """Every problem found while unpacking one archive (each a line without the package)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def archive_kind(filename: str) -> str:
    if filename.endswith(".whl"):
        return "wheel"
    if filename.endswith((".conda", ".tar.bz2")):
        return "conda"
    raise UnpackError([f"{filename}: not a conda package (.tar.bz2, .conda) or a wheel (.whl)"])


def unpack(fetched: Fetched, cache: Path) -> Entry:
    """Scan and unpack a proved archive into the cache; the published entry."""
    p = fetched.package
    key = cache_key(p)
    kind = archive_kind(p.filename)
    bad = scan_archive(fetched.path)
    if bad:
        raise UnpackError([str(b) for b in bad])

    def build(tmp: Path) -> dict[str, Any]:
        tree = tmp / "tree"
        tree.mkdir()
        notes: list[str] = []
        if kind == "wheel":
            members = _unpack_wheel(fetched.path, tree, notes)
        else:
            members = _unpack_conda(fetched.path, tree)
        doc = manifest_doc(key=key, filename=p.filename, kind=kind, sha256=fetched.sha256,
                           md5=fetched.md5, size=fetched.size, members=members, notes=notes)
        seal_new(tmp, key, members, manifest_bytes(doc))
        return doc

    # one process at a time per key, across every process (and node) sharing the cache: one
    # that found no entry and unpacks it must not evict the whole entry another published
    # meanwhile and is linking from; only a torn entry, or one of another format, is replaced
    try:
        with key_lock(cache, key):
            entry = read_entry(cache, key, p.filename)
            if entry is not None:
                return entry
            evict(cache / UNPACKED, key)
            publish(cache / UNPACKED, key, build)
    except TimeoutError as exc:
        raise UnpackError([str(exc)]) from None
    entry = read_entry(cache, key, p.filename)
    if entry is None:  # pragma: no cover - published a moment ago
        raise UnpackError([f"{p.filename}: the cache entry vanished while it was written"])
    return entry


# ------------------------------------------------------------------------------ writing

def _write(tree: Path, name: str, stream: IO[bytes], executable: bool,
           algo: str | None = None) -> tuple[str, int, str | None]:
    """Write ``stream`` to ``tree/name`` (read-only); (sha256, size, digest in ``algo``)."""
    dest = tree / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256()
    other = hashlib.new(algo) if algo and algo != "sha256" else None
    size = 0
    mode = 0o555 if executable else 0o444
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask: a hardlink shows this mode in the prefix
        while chunk := stream.read(BUFFER):
            sha.update(chunk)
            if other is not None:
                other.update(chunk)
            size += len(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    digest = sha.hexdigest()
    return digest, size, (other.hexdigest() if other is not None else digest)


# -------------------------------------------------------------------------------- wheels

# a wheel's RECORD that disagrees with the locked archive's bytes: named, the bytes placed
RECORD_SLIP = ("the wheel's RECORD is wrong about it (the archive is the locked one: its bytes "
               "are placed, and the installed RECORD says what they are)")


def _unpack_wheel(path: Path, tree: Path, notes: list[str]) -> list[Member]:
    from installer.records import parse_record_file
    from installer.sources import WheelFile

    problems: list[str] = []
    members: list[Member] = []
    with zipfile.ZipFile(path) as zf:
        try:
            source = WheelFile(zf)
            info_dir = source.dist_info_dir
            record_text = source.read_dist_info("RECORD")
        except Exception as exc:  # installer raises its own types for a malformed wheel
            raise UnpackError([f"{path.name}: {exc}"]) from None
        try:
            rows = {r[0]: r for r in parse_record_file(record_text.splitlines())}
        except Exception as exc:  # installer.records.InvalidRecordEntry and csv errors
            raise UnpackError([f"{path.name}: unreadable RECORD: {exc}"]) from None
        record_path = f"{info_dir}/RECORD"
        said: list[list[str]] = []     # per member, in the archive's order: its notes
        jobs: list[_Job] = []
        for info in zf.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            said.append([])
            if "__pycache__" in name.split("/")[:-1]:
                said[-1].append(f"{name}: bytecode shipped in the wheel, not installed")
                continue
            mode = info.external_attr >> 16
            executable = bool(mode and stat.S_ISREG(mode) and mode & 0o111)
            row = rows.get(name)
            signature = (posixpath.dirname(name) == info_dir
                         and posixpath.basename(name) in SIGNATURES)
            algo: str | None = None
            want, want_size = b"", -1
            if name != record_path and not signature:
                if row is None:
                    said[-1].append(f"{name}: {RECORD_SLIP}: not mentioned in it")
                elif not row[1] or not row[2]:
                    said[-1].append(f"{name}: {RECORD_SLIP}: no hash or size in it")
                else:
                    try:
                        algo, want = record_hash(row[1]) or ("", b"")  # row[1] is not empty
                    except ValueError as exc:
                        said[-1].append(f"{name}: {RECORD_SLIP}: its hash {exc}")
                        algo = None
                    want_size = int(row[2]) if row[2].isdigit() else -1
                    if algo is not None and (algo not in hashlib.algorithms_guaranteed
                                             or algo in ("md5", "sha1")):
                        said[-1].append(f"{name}: {RECORD_SLIP}: its hash {algo!r} is not an "
                                        "accepted algorithm")
                        algo = None
            jobs.append(_Job(len(said) - 1, info, executable, algo, want, want_size,
                             row[1] if row else ""))
        done = _write_members(zf, tree, jobs)
        for job in jobs:  # in the archive's order, whichever thread wrote the member
            name = job.info.filename
            notes_of = said[job.at]
            got = done[job.at]
            if isinstance(got, str):
                problems.append(f"{path.name}: {name}: {got}")
                continue
            sha, size, digest = got
            if job.algo is not None and (digest is None or bytes.fromhex(digest) != job.want
                                         or size != job.want_size):
                notes_of.append(f"{name}: {RECORD_SLIP}: its hash / size ({job.listed}, "
                                f"{job.want_size:,} bytes) are not the member's ({size:,} "
                                "bytes)")
            members.append(Member(posixpath.normpath(name), "file", sha, size, job.executable))
        notes.extend(n for group in said for n in group)
    if problems:
        raise UnpackError(problems)
    return members


class _Job(NamedTuple):
    """One wheel member to write, and what its RECORD row says of it."""

    at: int                     # among the archive's files, in its order
    info: zipfile.ZipInfo
    executable: bool
    algo: str | None            # the row's hash algorithm, when it is one to check
    want: bytes
    want_size: int
    listed: str                 # the row's hash column, as written


def _write_members(zf: zipfile.ZipFile, tree: Path, jobs: list[_Job]
                   ) -> dict[int, tuple[str, int, str | None] | str]:
    """Each job's (sha256, size, digest in its algorithm), or why it could not be written, by
    its index. A wheel of more than ``SPLIT_BYTES`` (torch's 1.1 GB in 12,911 members) is
    written on ``MEMBER_THREADS`` threads, largest member first: one archive no longer
    inflates alone on one core while the other waits (inflating, hashing and writing release
    the GIL; the ZipFile reads each member through its own position, under its lock)."""
    def one(job: _Job) -> tuple[int, tuple[str, int, str | None] | str]:
        try:
            with zf.open(job.info) as stream:
                return job.at, _write(tree, job.info.filename, stream, job.executable,
                                         job.algo)
        except FileExistsError:
            return job.at, "member appears twice"
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            return job.at, f"unreadable member: {exc}"

    if sum(j.info.file_size for j in jobs) <= SPLIT_BYTES or len(jobs) < 2:
        return dict(one(j) for j in jobs)
    from concurrent.futures import ThreadPoolExecutor

    order = sorted(jobs, key=lambda j: -j.info.file_size)
    with ThreadPoolExecutor(max_workers=MEMBER_THREADS) as pool:
        return dict(pool.map(one, order))


# --------------------------------------------------------------------------------- conda

def _conda_members(path: Path) -> Iterator[tuple[tarfile.TarFile, tarfile.TarInfo]]:
    from conda_package_streaming.package_streaming import stream_conda_component

    components = ("info", "pkg") if path.name.endswith(".conda") else ("pkg",)
    for component in components:
        yield from stream_conda_component(str(path), component=component)


def _unpack_conda(path: Path, tree: Path) -> list[Member]:
    problems: list[str] = []
    found: dict[str, Member] = {}
    try:
        for tar, m in _conda_members(path):
            name = posixpath.normpath(m.name)
            if name in (".", ""):
                continue
            if m.isdir():
                (tree / name).mkdir(parents=True, exist_ok=True)
                found.setdefault(name, Member(name, "dir"))
            elif m.issym():
                found[name] = Member(name, "symlink", target=m.linkname)
            elif m.islnk():
                src = found.get(posixpath.normpath(m.linkname))
                if src is None or src.type != "file":
                    problems.append(f"{path.name}: {name}: hardlink to {m.linkname!r}, "
                                    "which is not an earlier file of the archive")
                    continue
                with open(tree / src.path, "rb") as stream:
                    sha, size, _ = _write(tree, name, stream, bool(m.mode & 0o100))
                found[name] = Member(name, "file", sha, size, bool(m.mode & 0o100))
            elif m.isfile():
                member = tar.extractfile(m)
                assert member is not None
                if name in found:
                    (tree / name).unlink()
                sha, size, _ = _write(tree, name, member, bool(m.mode & 0o100))
                found[name] = Member(name, "file", sha, size, bool(m.mode & 0o100))
    except (OSError, EOFError, tarfile.TarError, ValueError) as exc:
        raise UnpackError([f"{path.name}: unreadable archive: {exc}"]) from None
    problems += _check_paths_json(path.name, tree, found)
    if problems:
        raise UnpackError(problems)
    return list(found.values())


def _check_paths_json(archive: str, tree: Path, found: dict[str, Member]) -> list[str]:
    """Every file ``info/paths.json`` lists is in the archive with the sha256 and size listed."""
    if "info/paths.json" not in found:
        return []
    try:
        doc = json.loads((tree / "info" / "paths.json").read_bytes())
        entries = doc["paths"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{archive}: info/paths.json is unreadable: {exc}"]
    problems = []
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, dict) or not isinstance(e.get("_path"), str):
            problems.append(f"{archive}: info/paths.json: an entry without _path")
            continue
        rel = posixpath.normpath(e["_path"])
        kind = e.get("path_type", "hardlink")
        m = found.get(rel)
        if kind == "directory":
            continue
        if m is None:
            problems.append(f"{archive}: info/paths.json lists {rel}, which the archive "
                            "does not hold")
        elif kind == "hardlink" and m.type == "file":
            if e.get("sha256") and e["sha256"].lower() != m.sha256:
                problems.append(f"{archive}: {rel}: sha256 {m.sha256} differs from "
                                f"info/paths.json ({e['sha256']})")
            if isinstance(e.get("size_in_bytes"), int) and e["size_in_bytes"] != m.size:
                problems.append(f"{archive}: {rel}: {m.size} bytes, info/paths.json says "
                                f"{e['size_in_bytes']}")
    return problems

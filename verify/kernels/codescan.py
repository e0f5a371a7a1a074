"""Finding the device code of an environment: an installed prefix, or the wheels of a lock.

    scan_prefix(prefix)        every ELF file of an installed environment (a venv, a conda
                               prefix), each read with ``verify.kernels.fatbin.read_file``, owners
                               from the installers' records; the CUDA stack from its files
    scan_archive(path, label)  one wheel, read from inside the zip without installing it: each
                               ELF member is inflated into a temporary file (fatbins sit
                               anywhere in a file, and a deflate stream cannot be entered in
                               the middle), read, and removed; nothing else is written

A file is a candidate when its name holds ``.so`` or it is executable, and it starts with the
ELF magic. Symlinks are not followed (their target is read once, under its own name).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import json
import os
import posixpath
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.host import cores
from verify.kernels.coverage import Coverage, LibraryCode, library_code
from verify.kernels.cudastack import CudaStack, candidates, essence, stack_from, stack_member
from verify.kernels.fatbin import read_file

ELF_MAGIC = b"\x7fELF"


def _candidate(name: str, mode: int) -> bool:
    return ".so" in name or bool(mode & 0o111)


_STACK_NAMES = ("cuda_runtime_api.h", "cudnn_version.h", "nccl.h", "version.py", "ptxas",
                "libcudart.so", "libcudnn.so", "libnccl.so")


def walk(prefix: Path) -> tuple[list[str], list[str]]:
    """(files that may be ELF files, files the stack reader may want): prefix-relative,
    sorted; symlinks are not followed, __pycache__ and conda-meta are skipped."""
    root = str(prefix)
    elf, stack = [], []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "conda-meta")]
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if name.startswith(_STACK_NAMES):
                stack.append(rel)
            if ".so" not in name and "." in name:  # scripts, data: not worth an lstat
                continue
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size >= 64 and _candidate(name, st.st_mode):
                elf.append(rel)
    return sorted(elf), sorted(stack)


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def _scan_files(args: tuple[str, list[str]]) -> list[tuple[str, LibraryCode | None, bool]]:
    root, rels = args
    out: list[tuple[str, LibraryCode | None, bool]] = []
    for rel in rels:
        full = os.path.join(root, rel)
        if not _is_elf(full):
            out.append((rel, None, False))
            continue
        try:
            code = read_file(full)
        except OSError as exc:
            from verify.kernels.fatbin import FileCode

            code = FileCode(error=f"unreadable: {exc.strerror or exc}")
        out.append((rel, library_code(rel, None, code), True))
    return out


def owners_of(prefix: Path, wanted: Iterable[str]) -> dict[str, str]:
    """Prefix-relative path -> "name version" of the package that installed it, for the
    ``wanted`` paths: the first column of every dist-info RECORD, the "files" of every
    conda-meta record (what verify.env.records reads in full; here only the names matter)."""
    want = set(wanted)
    out: dict[str, str] = {}
    for meta in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            doc = json.loads(meta.read_text())
            label = f"{doc['name']} {doc['version']}"
            files = doc.get("files", ())
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for f in files:
            if f in want:
                out.setdefault(f, label)
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        site = record.parent.parent.relative_to(prefix).as_posix()
        name, _, version = record.parent.name.removesuffix(".dist-info").rpartition("-")
        try:
            lines = record.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for row in csv.reader(lines):
            if not row:
                continue
            rel = posixpath.normpath(f"{site}/{row[0]}")
            if rel in want:
                out.setdefault(rel, f"{_dist_name(record.parent)} {version}" if name else rel)
    return out


def _dist_name(dist_info: Path) -> str:
    """The project name from METADATA (the folder name is normalised: nvidia_cudnn_cu13)."""
    try:
        with open(dist_info / "METADATA", errors="replace") as f:
            for line in f:
                if line.startswith("Name:"):
                    return line[5:].strip()
                if not line.strip():
                    break
    except OSError:
        pass
    return dist_info.name.removesuffix(".dist-info").rpartition("-")[0]


def _chunks(items: list[str], n: int) -> list[list[str]]:
    """``n`` lists of about equal total size (largest files spread first)."""
    return [items[i::n] for i in range(n)]


def scan_prefix(prefix: Path, *, owners: Mapping[str, str] | None = None,
                jobs: int | None = None, files: list[str] | None = None,
                stack_paths: list[str] | None = None,
                sizes: Mapping[str, int] | None = None,
                known: Mapping[str, str] | None = None, cache: Path | None = None) -> Coverage:
    """The device code of an installed environment. ``files`` (prefix-relative) limits the
    scan to those (``verify env`` passes the ELF files it already found); with
    ``stack_paths`` and ``sizes`` too (what its walk saw) the prefix is not walked again.
    ``known``: the sha256 of files whose bytes were just proven (hashed, or their sealed
    inode); with ``cache``, a file's summary is taken from ``ScanCache`` by that sha256."""
    prefix = Path(os.path.abspath(prefix))
    if files is None or stack_paths is None:
        found, walked_stack = walk(prefix)
        stack_paths = walked_stack if stack_paths is None else stack_paths
    rels = list(files) if files is not None else found
    owners = owners_of(prefix, rels) if owners is None else owners
    sizes = {r: sizes[r] if sizes is not None and r in sizes else _size(prefix / r)
             for r in rels}
    rels.sort(key=lambda r: -sizes[r])
    jobs = max(1, min(jobs or cores(), len(rels) or 1))
    remembered = ScanCache(cache, known) if cache is not None and known else None
    results: list[tuple[str, LibraryCode | None, bool]] = []
    if remembered is not None:
        results = [r for r in (remembered.get(rel) for rel in rels) if r is not None]
        done = {r[0] for r in results}
        rels = [r for r in rels if r not in done]
    work = [(str(prefix), chunk) for chunk in _chunks(rels, jobs) if chunk]
    if jobs == 1 or sum(sizes[r] for r in rels) < (64 << 20):
        scanned = [r for w in work for r in _scan_files(w)]
    else:
        from concurrent.futures import ProcessPoolExecutor  # here: a warm verify scans nothing

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            scanned = [r for part in pool.map(_scan_files, work) for r in part]
    if remembered is not None:
        for r in scanned:
            remembered.put(*r)
    results += scanned
    libs = []
    elf = 0
    for rel, lib, is_elf in sorted(results, key=lambda r: r[0]):
        elf += is_elf
        if lib is not None:
            libs.append(_with_owner(lib, owners.get(rel)))
    def read(rel: str) -> bytes:
        if remembered is None:
            return (prefix / rel).read_bytes()
        return remembered.essence(rel, lambda: (prefix / rel).read_bytes())

    stack = stack_from(stack_paths, read)
    return Coverage(libraries=tuple(libs), stack=stack, elf_files=elf)


class ScanCache:
    """What the scan of some bytes found, under ``CACHE/codescan/<sha256[:2]>/<sha256>.json``,
    keyed by the file's sha256 (proven by the caller) and ``scanner_digest()``, the sha256 of
    the scanning code itself (this module, ``fatbin`` and ``coverage``): a changed scanner
    never reads an older verdict. Written whole (``samebits._io.atomic_write``); an unreadable
    entry is scanned again. The summary is a function of the bytes alone: the path is the
    caller's."""

    def __init__(self, cache: Path, known: Mapping[str, str]) -> None:
        self.root = Path(cache) / "codescan" / scanner_digest()[:16]
        self.known = known

    def _file(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.json"

    def get(self, rel: str) -> tuple[str, LibraryCode | None, bool] | None:
        sha = self.known.get(rel)
        if not sha:
            return None
        try:
            doc = json.loads(self._file(sha).read_bytes())
            code = doc["code"]
            lib = LibraryCode.from_dict({**code, "path": rel}) if code is not None else None
            return rel, lib, bool(doc["elf"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, rel: str, lib: LibraryCode | None, is_elf: bool) -> None:
        sha = self.known.get(rel)
        if not sha:
            return
        code = lib.to_dict() if lib is not None else None
        if code is not None:
            code = {**code, "path": None, "package": None}
        from samebits._io import atomic_write

        with contextlib.suppress(OSError):  # a read-only cache: scanned again next time
            atomic_write(self._file(sha), json.dumps({"elf": is_elf, "code": code},
                                                     sort_keys=True))

    def essence(self, rel: str, read: Callable[[], bytes]) -> bytes:
        """``cudastack.essence`` of a file the stack reader reads (``read()`` gives its
        bytes), kept by its proven sha256: a ptxas is 30 to 40 MB read for its one release
        line. A file whose sha256 the caller did not prove is read, never remembered."""
        sha = self.known.get(rel)
        kept = self.root / sha[:2] / f"{sha}.essence" if sha else None
        if kept is not None:
            with contextlib.suppress(OSError):
                return kept.read_bytes()
        data = essence(rel, read())
        if kept is not None:
            from samebits._io import atomic_write

            with contextlib.suppress(OSError):  # a read-only cache: read again next time
                atomic_write(kept, data)
        return data


_SCANNER: list[str] = []


def scanner_digest() -> str:
    """The sha256 of the scanning code's sources (the cache key's version)."""
    if not _SCANNER:
        from verify.kernels import coverage, cudastack, fatbin

        h = hashlib.sha256()
        for module in (sys.modules[__name__], fatbin, coverage, cudastack):
            h.update(Path(str(module.__file__)).read_bytes())
        _SCANNER.append(h.hexdigest())
    return _SCANNER[0]


def scan_manifest(manifest: Any, *, cache: Path | None = None) -> Coverage:
    """The device code of a prefix ``verify env`` has walked: its ELF files (or, when it read
    no ELF headers, ``--no-linkage``, the files that may be ELF files), owners from the
    manifest's records."""
    labels = {p.id: f"{p.name} {p.version}" for p in manifest.records.packages}
    has_elf = any(e.elf is not None for e in manifest.entries)
    files: list[str] = []
    stack: list[str] = []
    owners: dict[str, str] = {}  # of the files scanned: what scan_prefix asks of them
    sizes: dict[str, int] = {}
    known: dict[str, str] = {}   # ... and of the stack's files
    for e in manifest.entries:  # one pass over 30,000 entries
        path, kind = e.path, e.type
        if kind == "symlink" or kind == "file":
            name = path.rsplit("/", 1)[-1]
            if name.startswith(_STACK_NAMES) and not _skipped(path):
                stack.append(path)
                if e.sha256:  # its essence is kept by it (a ptxas: 40 MB read otherwise)
                    known[path] = e.sha256
            if kind == "file" and ((e.elf is not None and not e.elf.error) if has_elf
                                   else _candidate(name, 0o111 if e.exec else 0)):
                files.append(path)
                sizes[path] = e.size
                if e.owner:
                    owners[path] = labels.get(e.owner, e.owner)
                if e.sha256:
                    known[path] = e.sha256
    stack.sort()  # as ``walk`` finds them
    return scan_prefix(manifest.prefix, owners=owners, files=files, stack_paths=stack,
                       sizes=sizes, known=known, cache=cache)


def _skipped(rel: str) -> bool:
    """Whether ``walk`` skips ``rel``: below a __pycache__ or conda-meta folder."""
    parts = rel.split("/")[:-1]
    return "__pycache__" in parts or "conda-meta" in parts


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _with_owner(lib: LibraryCode, owner: str | None) -> LibraryCode:
    return dataclasses.replace(lib, package=owner)


# ------------------------------------------------------------------ wheels


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveCode:
    """What one archive holds: its libraries (member paths) and the files the stack reader
    wants (their bytes; small: headers, version.py, ptxas's version line)."""

    libraries: tuple[LibraryCode, ...]
    elf_files: int
    members: tuple[str, ...]            # the member paths the stack reader looks at
    stack_files: Mapping[str, bytes]    # their essential lines (cudastack.essence)

    def to_dict(self) -> dict[str, Any]:
        return {"libraries": [lib.to_dict() for lib in self.libraries],
                "elf_files": self.elf_files, "members": list(self.members),
                "stack_files": {k: v.decode("latin-1") for k, v in self.stack_files.items()}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArchiveCode:
        return cls(libraries=tuple(LibraryCode.from_dict(x) for x in d["libraries"]),
                   elf_files=int(d["elf_files"]), members=tuple(d["members"]),
                   stack_files={k: v.encode("latin-1") for k, v in d["stack_files"].items()})


def scan_archive(path: Path, package: str, *, tmp: Path | None = None,
                 progress: Callable[[str], None] | None = None) -> ArchiveCode:
    """The device code inside one archive (a wheel, a .conda or .tar.bz2 conda package), read
    without installing it."""
    if path.name.endswith((".conda", ".tar.bz2")):
        return _scan_conda(path, package, tmp)
    libs: list[LibraryCode] = []
    elf = 0
    with zipfile.ZipFile(path) as z:
        infos = [i for i in z.infolist() if not i.is_dir()]
        members = [i.filename for i in infos]
        for info in infos:
            mode = info.external_attr >> 16
            if info.file_size < 64 or not _candidate(info.filename.rsplit("/", 1)[-1], mode):
                continue
            with z.open(info) as f:
                if f.read(4) != ELF_MAGIC:
                    continue
            elf += 1
            if progress is not None:
                progress(info.filename)
            with z.open(info) as src:
                lib = _scan_stream(src, info.filename, package, tmp)
            if lib is not None:
                libs.append(lib)
        stack_files = {name: essence(name, z.read(name)) for name in candidates(members)}
    return ArchiveCode(libraries=tuple(libs), elf_files=elf,
                       members=tuple(m for m in members if stack_member(m)),
                       stack_files=stack_files)


def _scan_conda(path: Path, package: str, tmp: Path | None) -> ArchiveCode:
    from conda_package_streaming.package_streaming import stream_conda_component

    libs: list[LibraryCode] = []
    elf = 0
    members: list[str] = []
    stack_files: dict[str, bytes] = {}
    with open(path, "rb") as fileobj:
        for tar, member in stream_conda_component(path.name, fileobj, component="pkg"):
            if not member.isfile():
                continue
            members.append(member.name)
            src = tar.extractfile(member)
            if src is None:
                continue
            if stack_member(member.name) and candidates([member.name]):
                stack_files[member.name] = essence(member.name, src.read())
                continue
            if member.size < 64 or not _candidate(member.name.rsplit("/", 1)[-1], member.mode):
                continue
            if src.read(4) != ELF_MAGIC:
                continue
            elf += 1
            src = tar.extractfile(member)
            lib = _scan_stream(src, member.name, package, tmp)
            if lib is not None:
                libs.append(lib)
    return ArchiveCode(libraries=tuple(libs), elf_files=elf,
                       members=tuple(m for m in members if stack_member(m)),
                       stack_files=stack_files)


def _scan_stream(src: Any, name: str, package: str, tmp: Path | None) -> LibraryCode | None:
    """Copy one member into a temporary file, read its fatbins, remove the file."""
    fd, tmpname = tempfile.mkstemp(prefix=".member.", dir=tmp)
    try:
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        return library_code(name, package, read_file(tmpname))
    finally:
        os.unlink(tmpname)


def coverage_of_archives(parts: list[ArchiveCode]) -> Coverage:
    """One platform's coverage from the scans of its archives."""
    libs = sorted((lib for p in parts for lib in p.libraries), key=lambda lib: lib.path)
    files: dict[str, bytes] = {}
    members: list[str] = []
    for p in parts:
        files.update(p.stack_files)
        members.extend(p.members)
    stack: CudaStack = stack_from(members, lambda m: files.get(m, b""))
    return Coverage(libraries=tuple(libs), stack=stack,
                    elf_files=sum(p.elf_files for p in parts))

"""Deterministic tar of a prefix, and deterministic gzip compressed on every core.

tar (``tar_chunks``): entries sorted by path components (so parents come first and a folder's
children follow it), under a fixed root such as ``opt/env``; every entry's mtime is one integer
(SOURCE_DATE_EPOCH or 0), uid/gid 0 with empty user and group names, modes normalised (folders
and executables 0755, other files 0644, symlinks 0777), hardlinks written as regular files, no
xattrs or other PAX records but the ones long or non-ASCII paths need. Only folders, regular files
and symlinks that stay inside the prefix are accepted (``scan_prefix`` lists every other entry).

gzip (``gzip_layer``): the tar stream is cut into 1 MiB blocks; each is deflated on its own, in
a thread pool, primed with the 32 KiB before it (pigz's method) and ended with a sync flush, so
the blocks join into one valid gzip member. The header has mtime 0, no file name, OS 3; the
level is fixed. The bytes depend on the block size, the level and zlib's deflate, so the zlib
version is recorded next to the digests (``GZIP_PARAMS``).
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import tarfile
import zlib
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from samebits.archives import BadMember, link_problem
from samebits.errors import InputError, plural

BLOCK = 1 << 20
WINDOW = 32 * 1024
LEVEL = 6
RECORD = 20 * 512
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"  # no name, mtime 0, OS unix
GZIP_PARAMS = f"zlib {zlib.ZLIB_RUNTIME_VERSION}, level {LEVEL}, {BLOCK >> 20} MiB blocks"

Kind = Literal["dir", "file", "symlink"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One path in a prefix, as it goes into a layer. ``path`` is '/'-separated, relative."""

    path: str
    kind: Kind
    mode: int
    size: int = 0
    linkname: str = ""

    @property
    def sort_key(self) -> tuple[bytes, ...]:
        return tuple(os.fsencode(part) for part in self.path.split("/"))


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerDigests:
    """A compressed layer: ``digest`` of the gzip bytes, ``diff_id`` of the tar, sizes."""

    digest: str
    diff_id: str
    size: int
    tar_size: int


def normalised_mode(st_mode: int) -> int:
    if stat.S_ISDIR(st_mode):
        return 0o755
    if stat.S_ISLNK(st_mode):
        return 0o777
    return 0o755 if st_mode & 0o111 else 0o644


def source_date_epoch(environ: dict[str, str] | os._Environ[str]) -> int:
    """The integer mtime every entry gets: SOURCE_DATE_EPOCH, else 0."""
    raw = environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise InputError(f'SOURCE_DATE_EPOCH = "{raw}": must be a whole number of seconds '
                         "since 1970-01-01 UTC")
    return int(raw)


def scan_prefix(prefix: Path, *, links_out: Collection[str] = ()) -> list[Entry]:
    """Every entry under ``prefix``, sorted; InputError listing every one that cannot go in.

    ``links_out`` are relative paths of symlinks allowed to point at an absolute path outside
    the prefix (a venv's interpreter); any other link must stay inside it.
    """
    prefix = Path(prefix)
    entries: list[Entry] = []
    bad: list[BadMember] = []

    def walk(folder: Path, rel: str) -> None:
        with os.scandir(folder) as it:
            items = sorted(it, key=lambda e: os.fsencode(e.name))
        for item in items:
            path = f"{rel}{item.name}"
            st = item.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                entries.append(Entry(path=path, kind="dir", mode=0o755))
                walk(Path(item.path), path + "/")
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(path=path, kind="file", mode=normalised_mode(st.st_mode),
                                     size=st.st_size))
            elif stat.S_ISLNK(st.st_mode):
                target = os.readlink(item.path)
                problem = None if path in links_out and target.startswith("/") else (
                    link_problem(path, target))
                if problem:
                    bad.append(BadMember(archive=str(prefix), member=path, reason=problem))
                else:
                    entries.append(Entry(path=path, kind="symlink", mode=0o777, linkname=target))
            else:
                bad.append(BadMember(archive=str(prefix), member=path,
                                     reason="device, fifo or socket"))

    walk(prefix, "")
    if bad:
        lines = [str(b) for b in bad]
        raise InputError(f"{plural(len(lines), 'entry', 'entries')} cannot go into an image:\n  "
                         + "\n  ".join(lines),
                         hint="links must stay inside the prefix; nothing was written")
    return sorted(entries, key=lambda e: e.sort_key)


_TYPES = {"dir": b"5", "file": b"0", "symlink": b"2"}
_USTAR_MAX = 8 ** 11  # what a 12-byte octal field holds


def tar_header(name: str, entry: Entry, mtime: int) -> bytes:
    """The tar header of ``entry`` named ``name``: a plain ustar block where one suffices (ASCII
    names and link targets of at most 100 characters), else tarfile's PAX records + ustar."""
    if entry.kind == "dir" and not name.endswith("/"):
        name += "/"  # as tarfile names folders
    size = entry.size if entry.kind == "file" else 0
    if (len(name) <= 100 and len(entry.linkname) <= 100 and name.isascii()
            and entry.linkname.isascii() and size < _USTAR_MAX and 0 <= mtime < _USTAR_MAX):
        return _ustar(name, entry, size, mtime)
    info = tarfile.TarInfo(name)
    info.type = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE,
                 "symlink": tarfile.SYMTYPE}[entry.kind]
    info.mode = entry.mode
    info.size = size
    info.linkname = entry.linkname
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _ustar(name: str, entry: Entry, size: int, mtime: int) -> bytes:
    """The ustar block tarfile writes for such an entry (uid/gid 0, no user or group names,
    empty device fields), built directly: tarfile takes ~40 us a header."""
    head = b"".join((
        name.encode().ljust(100, b"\0"),
        b"%07o\0" % (entry.mode & 0o7777), b"0000000\0", b"0000000\0",
        b"%011o\0" % size, b"%011o\0" % mtime,
        b"        ", _TYPES[entry.kind], entry.linkname.encode().ljust(100, b"\0"),
        b"ustar\x0000", bytes(32 + 32 + 8 + 8 + 155),
    )).ljust(tarfile.BLOCKSIZE, b"\0")
    return head[:148] + b"%06o\0" % sum(head) + head[155:]


def ancestors(root: str) -> list[str]:
    """``opt/env`` -> [``opt``, ``opt/env``]."""
    parts = [p for p in root.strip("/").split("/") if p]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def tar_pieces(prefix: Path, entries: Iterable[Entry], *, root: str, mtime: int,
               read_size: int = BLOCK,
               open_file: Callable[[Entry], BinaryIO] | None = None) -> Iterator[bytes]:
    """The tar stream of ``entries`` (sorted) under ``root``, in pieces of any size: headers,
    file data as read, padding. A file's bytes come from ``prefix / entry.path``, or from
    ``open_file(entry)`` when given."""
    yield from (tar_header(name, Entry(path=name, kind="dir", mode=0o755), mtime)
                for name in ancestors(root))
    prefix = Path(prefix)
    base = root.strip("/")
    total = 0
    for entry in entries:
        header = tar_header(f"{base}/{entry.path}" if base else entry.path, entry, mtime)
        total += len(header)
        yield header
        if entry.kind != "file":
            continue
        remaining = entry.size
        with (open_file(entry) if open_file else open(prefix / entry.path, "rb")) as f:
            while remaining:
                data = f.read(min(remaining, read_size))
                if not data:
                    raise InputError(f"{prefix / entry.path}: shrank while being written "
                                     "into a layer")
                remaining -= len(data)
                yield data
        pad = -entry.size % 512
        total += entry.size + pad
        if pad:
            yield bytes(pad)
    total += len(ancestors(root)) * 512
    end = 1024 + (-(total + 1024) % RECORD)  # the end-of-archive marker, a whole last record
    yield bytes(end)


def tar_chunks(prefix: Path, entries: Iterable[Entry], *, root: str, mtime: int,
               block: int = BLOCK,
               open_file: Callable[[Entry], BinaryIO] | None = None) -> Iterator[bytes]:
    """``tar_pieces`` in blocks of exactly ``block`` bytes (the last one shorter): block
    boundaries depend on the content alone (what parallel gzip needs)."""
    pending: deque[bytes | memoryview] = deque()
    held = 0
    for piece in tar_pieces(prefix, entries, root=root, mtime=mtime, read_size=block,
                             open_file=open_file):
        pending.append(piece)
        held += len(piece)
        while held >= block:
            if len(pending[0]) == block:  # a whole block read from a file: no copy
                out = pending.popleft()
            else:
                parts, need = [], block
                while need:
                    head = pending[0]
                    if len(head) <= need:
                        parts.append(pending.popleft())
                        need -= len(head)
                    else:
                        view = memoryview(head)
                        parts.append(view[:need])
                        pending[0] = view[need:]
                        need = 0
                out = b"".join(parts)
            held -= block
            yield bytes(out)
    if held:
        yield b"".join(pending)


def _deflate(data: bytes, dictionary: bytes, last: bool, level: int) -> bytes:
    comp = zlib.compressobj(level, zlib.DEFLATED, -15, 8, zlib.Z_DEFAULT_STRATEGY,
                            **({"zdict": dictionary} if dictionary else {}))
    return comp.compress(data) + comp.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def gzip_layer(chunks: Iterable[bytes], out: BinaryIO, *, pool: Executor,
               level: int = LEVEL) -> LayerDigests:
    """Compress ``chunks`` into ``out`` on ``pool``; the digests of both streams."""
    raw_sha, gz_sha = hashlib.sha256(), hashlib.sha256()
    crc = 0
    raw_size = 0
    gz_size = 0
    pending: deque[Any] = deque()
    depth = 2 * (getattr(pool, "_max_workers", 2) or 2)

    def drain(keep: int) -> None:
        nonlocal gz_size
        while len(pending) > keep:
            data = pending.popleft().result()
            out.write(data)
            gz_sha.update(data)
            gz_size += len(data)

    out.write(GZIP_HEADER)
    gz_sha.update(GZIP_HEADER)
    gz_size += len(GZIP_HEADER)
    previous = b""
    held: bytes | None = None  # one block of look-ahead, so the last one is known to be last
    for chunk in chunks:
        if held is not None:
            pending.append(pool.submit(_deflate, held, previous[-WINDOW:], False, level))
            previous = held
            drain(depth)
        raw_sha.update(chunk)
        crc = zlib.crc32(chunk, crc)
        raw_size += len(chunk)
        held = chunk
    pending.append(pool.submit(_deflate, held or b"", previous[-WINDOW:], True, level))
    drain(0)
    trailer = struct.pack("<II", crc & 0xFFFFFFFF, raw_size & 0xFFFFFFFF)
    out.write(trailer)
    gz_sha.update(trailer)
    gz_size += len(trailer)
    return LayerDigests(digest=f"sha256:{gz_sha.hexdigest()}",
                        diff_id=f"sha256:{raw_sha.hexdigest()}", size=gz_size, tar_size=raw_size)

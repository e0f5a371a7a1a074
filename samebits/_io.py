"""Small I/O helpers shared by every writer: atomic writes and canonical JSON."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO


@contextlib.contextmanager
def sys_path_kept() -> Iterator[None]:
    """Leave ``sys.path`` as it was: conda-lock's vendored poetry-core puts its own ``_vendor``
    folder (an old ``packaging`` among others) first on ``sys.path`` when it is imported. Left
    there, every later first import of those names in this process, and in every worker process
    that multiprocessing starts with the parent's ``sys.path`` (the forkserver and spawn
    contexts), takes the vendored copy: the hashing pool's workers then failed to import
    ``packaging.tags`` and were respawned forever. Every import of conda-lock goes through
    this."""
    saved = list(sys.path)
    try:
        yield
    finally:
        sys.path[:] = saved


def canonical_json(obj: Any) -> bytes:
    """Serialise ``obj`` the one way samebits hashes and writes it.

    Sorted keys, two-space indent, UTF-8, a final newline: byte-stable for equal input.
    """
    return (json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def compact_json(obj: Any) -> bytes:
    """Canonical JSON without whitespace, for digests."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def stat_key(st: os.stat_result) -> tuple[int, int, int, int, int, int]:
    """(device, inode, size, mtime_ns, ctime_ns, mode): what a stat proves of a file's bytes
    while none of them moves (any write, chmod or link moves ctime, which user space cannot
    set back)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """sha256 hex of the file at ``path``, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class NotRegularFile(OSError):
    """A path that is a device, a FIFO or a socket: reading it could block or never end."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (a link to one is followed). A FIFO, a
    device or a socket raises ``NotRegularFile`` without a byte read: it is opened
    non-blocking and checked by ``fstat``, so a FIFO nobody writes cannot hang the reader
    and ``/dev/zero`` cannot fill memory. Other failures are the ``OSError`` of ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file (a device, FIFO or "
                                 "socket)", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` that refuses an object with a key twice: a
    reader that keeps the first would see another document than one that keeps the last."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def read_json(path: Path, *, what: str = "file", hint: str | None = None,
              unique: bool = False) -> Any:
    """The JSON document at ``path``; any failure is an ``InputError`` naming the path.

    ``what`` names the kind of file in "no such ...", ``hint`` says how to make one;
    ``unique``: an object with a key twice is refused (``unique_keys``). A FIFO or a device
    is refused unread (``read_regular``).
    """
    from samebits.errors import InputError

    path = Path(path)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}", hint=hint) from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(data.decode(), object_pairs_hook=unique_keys if unique else None)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    except ValueError as exc:  # unique_keys
        raise InputError(f"{path}: not JSON that reads one way: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: not JSON samebits reads: nested too deeply") from None


def atomic_write(path: Path, data: bytes | str, *, mode: int = 0o644, sync: bool = True) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never a torn one.

    The bytes go to a temporary file in the same folder, are flushed to disk, then renamed over
    ``path``; a crash or a kill at any point leaves the previous file intact. ``sync=False``:
    not flushed to disk first (8 ms a file on some disks), for a memo whose reader checks what
    it reads: after a crash it may find the new name with the bytes not all written.
    """
    with atomic_writer(path, mode=mode, sync=sync) as f:
        f.write(data.encode() if isinstance(data, str) else data)


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: int = 0o644, sync: bool = True) -> Iterator[BinaryIO]:
    """``atomic_write`` for a stream: write to the yielded file; on a clean exit it is flushed
    to disk (unless ``sync`` is False) and renamed over ``path``, on an exception it is removed
    and ``path`` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise

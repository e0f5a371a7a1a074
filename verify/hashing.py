"""Hash many files fast: sha256 in worker processes, streaming, constant memory.

``FileHasher`` takes files as the prefix walk finds them (``submit``) and hands back one
``Hashed`` per file (``results``). Inside, files go to ``jobs`` worker processes in batches:
large files alone and first (the longest job starts early, so one 400 MB library does not
finish last on its own), small files in batches of a few hundred. Each worker reads through one
1 MiB buffer, so memory stays flat whatever the file sizes; hashlib releases the GIL while it
hashes, and processes rather than threads keep the per-file Python work parallel too.

A worker that meets an ELF file (``\\x7fELF``) also reads its dynamic section with pyelftools
while the file is hot in the page cache (``verify.elfinfo``), so the linkage check costs no
second pass. ``jobs=1`` hashes in this process: no workers, same results.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import heapq
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from verify.elfinfo import ElfInfo, read_elf_info

BUFFER = 1 << 20            # bytes read at a time, per worker
BIG = 8 << 20               # a file this large is a batch of its own
BATCH_FILES = 256           # at most this many small files per batch
BATCH_BYTES = 8 << 20       # ... or this many bytes
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True, slots=True)
class Hashed:
    """What reading one file gave: its sha256 (hex), or why it could not be read."""

    sha256: str | None
    elf: ElfInfo | None = None
    error: str | None = None


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_buffer: bytearray | None = None


def hash_file(path: str, *, elf: bool = True) -> Hashed:
    """sha256 of one file through this process's one buffer; ELF facts when ``elf``."""
    global _buffer
    if _buffer is None:
        _buffer = bytearray(BUFFER)
    buf = _buffer
    view = memoryview(buf)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        return Hashed(None, error=exc.strerror or str(exc))
    try:
        h = hashlib.sha256()
        n = os.readv(fd, [buf])
        is_elf = n >= 4 and buf[:4] == ELF_MAGIC
        while n:
            h.update(view[:n])
            n = os.readv(fd, [buf])
        info = None
        if is_elf and elf:
            with os.fdopen(os.dup(fd), "rb") as stream:
                info = read_elf_info(stream)
        return Hashed(h.hexdigest(), info)
    except OSError as exc:
        return Hashed(None, error=exc.strerror or str(exc))
    finally:
        os.close(fd)


def _hash_batch(paths: Sequence[str], elf: bool) -> list[Hashed]:
    return [hash_file(p, elf=elf) for p in paths]


def _context() -> multiprocessing.context.BaseContext:
    # fork starts a worker in a millisecond; Python 3.12+ warns when a process that has
    # threads forks, so there the fork server starts them (once, then forks from itself).
    if sys.platform == "linux" and sys.version_info < (3, 12):
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")
    if sys.platform == "linux":
        ctx.set_forkserver_preload(["verify.hashing"])
    return ctx


class FileHasher:
    """``submit(key, path, size)`` as files are found; ``results()`` once all are in.

    ``advance(nbytes)`` is called as batches finish (a progress bar; it may be replaced while
    hashing runs, ``done_bytes`` says how far it got). Use as a context manager so the workers
    stop even when the caller fails.
    """

    def __init__(self, *, jobs: int | None = None, elf: bool = True,
                 advance: Callable[[int], None] | None = None) -> None:
        self.jobs = jobs or default_jobs()
        self.elf = elf
        self.advance = advance or (lambda n: None)
        self.done_bytes = 0
        self._results: dict[object, Hashed] = {}
        self._pending: list[tuple[int, int, list[object], list[str]]] = []  # a heap
        self._small: tuple[list[object], list[str]] = ([], [])
        self._small_bytes = 0
        self._seq = 0
        self._running: dict[cf.Future, tuple[list[object], int]] = {}
        self._pool: cf.ProcessPoolExecutor | None = None
        if self.jobs > 1:
            self._pool = cf.ProcessPoolExecutor(self.jobs, mp_context=_context())

    def __enter__(self) -> FileHasher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def submit(self, key: object, path: str, size: int) -> None:
        if size >= BIG:
            self._push([key], [path], size)
        else:
            keys, paths = self._small
            keys.append(key)
            paths.append(path)
            self._small_bytes += size
            if len(keys) >= BATCH_FILES or self._small_bytes >= BATCH_BYTES:
                self._flush_small()
        self._dispatch()

    def submit_all(self, files: Iterable[tuple[object, str, int]]) -> None:
        for key, path, size in files:
            self.submit(key, path, size)

    def drain(self) -> None:
        """No more files will come: queue every batch, largest first, so the workers stay busy
        while the caller does other work."""
        self._flush_small()
        if self._pool is None:
            return
        while self._pending:
            neg, _, keys, paths = heapq.heappop(self._pending)
            fut = self._pool.submit(_hash_batch, paths, self.elf)
            self._running[fut] = (keys, -neg)

    def results(self) -> dict[object, Hashed]:
        """Every submitted key -> Hashed, once all batches are done."""
        self._flush_small()
        self._dispatch()
        while self._running or self._pending:
            done, _ = cf.wait(list(self._running), return_when=cf.FIRST_COMPLETED)
            for fut in done:
                self._collect(fut)
            self._dispatch()
        return self._results

    # -- internals

    def _flush_small(self) -> None:
        keys, paths = self._small
        if keys:
            self._push(keys, paths, self._small_bytes)
            self._small = ([], [])
            self._small_bytes = 0

    def _push(self, keys: list[object], paths: list[str], nbytes: int) -> None:
        self._seq += 1
        heapq.heappush(self._pending, (-nbytes, self._seq, keys, paths))

    def _dispatch(self) -> None:
        """Keep every worker busy, the largest pending batch first; reap finished ones."""
        if self._pool is None:
            while self._pending:
                neg, _, keys, paths = heapq.heappop(self._pending)
                self._store(keys, _hash_batch(paths, self.elf), -neg)
            return
        for fut in [f for f in self._running if f.done()]:
            self._collect(fut)
        while self._pending and len(self._running) < 2 * self.jobs:
            neg, _, keys, paths = heapq.heappop(self._pending)
            fut = self._pool.submit(_hash_batch, paths, self.elf)
            self._running[fut] = (keys, -neg)

    def _collect(self, fut: cf.Future) -> None:
        keys, nbytes = self._running.pop(fut)
        self._store(keys, fut.result(), nbytes)

    def _store(self, keys: list[object], hashed: list[Hashed], nbytes: int) -> None:
        for key, h in zip(keys, hashed, strict=True):
            self._results[key] = h
        self.done_bytes += nbytes
        self.advance(nbytes)

"""Hash many files fast: sha256 in worker processes, streaming, constant memory.

``FileHasher`` starts ``jobs`` worker processes when it is created (before the caller builds
anything large, so each worker is small), ``start(paths, sizes)`` hands them every file at once
and returns at once, and ``wait()`` gives one ``Hashed`` per path, in order. Between the two
the caller does its own work (reading the installers' records) while the workers hash.

Files go out longest first (the largest-processing-time rule: one 400 MB library must not
start last and finish alone), small files in batches of a few hundred so the per-file cost is
paid in the workers, not in pickling. Each worker reads through one 1 MiB buffer, so memory
stays flat whatever the file sizes. Processes rather than threads: hashlib releases the GIL
while it hashes, but opening, reading and closing 20,000 small files is Python work too.

A worker that meets an ELF file (``\\x7fELF``) also reads its dynamic section with pyelftools
while the file is hot in the page cache (``verify.elfinfo``), so the linkage check costs no
second pass. ``jobs=1`` hashes in this process: no workers, the same results.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import NamedTuple

from verify.elfinfo import ElfInfo, read_elf_info

BUFFER = 1 << 20            # bytes read at a time, per worker
BIG = 8 << 20               # a file this large is a batch of its own
BATCH_FILES = 256           # at most this many small files per batch
BATCH_BYTES = 8 << 20       # ... or this many bytes
ELF_MAGIC = b"\x7fELF"


class Hashed(NamedTuple):
    """What reading one file gave: its sha256 (hex), or why it could not be read.

    A NamedTuple, not a dataclass: workers send tens of thousands back as plain tuples, which
    pickle fifty times faster than objects."""

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


def _hash_batch(batch: tuple[int, list[str]], elf: bool) -> tuple[int, list[tuple]]:
    first, paths = batch
    return first, [tuple(hash_file(p, elf=elf)) for p in paths]


def _context() -> multiprocessing.context.BaseContext:
    # fork starts a worker in a millisecond; Python 3.12+ warns when a process that has
    # threads forks, so there the fork server starts them (once, then forks from itself).
    if sys.platform == "linux" and sys.version_info < (3, 12):
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")
    if sys.platform == "linux":
        ctx.set_forkserver_preload(["verify.hashing"])
    return ctx


def batches(sizes: Sequence[int]) -> list[tuple[int, list[int]]]:
    """Indices into ``sizes`` grouped into batches, largest batch first: (bytes, indices)."""
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    out: list[tuple[int, list[int]]] = []
    small: list[int] = []
    small_bytes = 0
    for i in order:
        if sizes[i] >= BIG:
            out.append((sizes[i], [i]))
            continue
        small.append(i)
        small_bytes += sizes[i]
        if len(small) >= BATCH_FILES or small_bytes >= BATCH_BYTES:
            out.append((small_bytes, small))
            small, small_bytes = [], 0
    if small:
        out.append((small_bytes, small))
    return out


class FileHasher:
    """``start(paths, sizes)`` then ``wait()``; a context manager so the workers always stop."""

    def __init__(self, *, jobs: int | None = None, elf: bool = True) -> None:
        self.jobs = jobs or default_jobs()
        self.elf = elf
        self._pool = _context().Pool(self.jobs) if self.jobs > 1 else None
        self._paths: list[str] = []
        self._batches: list[tuple[int, list[int]]] = []
        self._results: Iterator[tuple[int, list[Hashed]]] | None = None

    def __enter__(self) -> FileHasher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def start(self, paths: Sequence[str], sizes: Sequence[int]) -> None:
        """Hand every file to the workers, largest batch first; returns at once."""
        self._paths = list(paths)
        self._batches = batches(sizes)
        if self._pool is not None:
            work = [(first, [self._paths[i] for i in idx])
                    for first, idx in _positions(self._batches)]
            self._results = self._pool.imap_unordered(partial(_hash_batch, elf=self.elf), work)

    def wait(self, advance: Callable[[int], None] = lambda n: None) -> list[Hashed]:
        """One Hashed per path given to ``start``, in the same order."""
        order = [i for _, idx in self._batches for i in idx]
        nbytes = {first: self._batches[k][0]
                  for k, (first, _) in enumerate(_positions(self._batches))}
        results = self._results
        if results is None:  # no workers: hash here, now
            results = (_hash_batch((first, [self._paths[i] for i in idx]), self.elf)
                       for first, idx in _positions(self._batches))
        out: list[Hashed | None] = [None] * len(self._paths)
        make = Hashed._make
        for first, hashed in results:
            for j, h in enumerate(hashed):
                out[order[first + j]] = make(h)
            advance(nbytes[first])
        return out  # type: ignore[return-value]


def _positions(batches: Sequence[tuple[int, list[int]]]) -> Iterator[tuple[int, list[int]]]:
    pos = 0
    for _, idx in batches:
        yield pos, idx
        pos += len(idx)

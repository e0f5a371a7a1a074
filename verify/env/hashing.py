"""Hash many files fast: sha256 in worker processes, streaming, constant memory.

The walk calls ``FileHasher.add(path, size)`` for each file; once ``START_BYTES`` of work
waits, ``jobs`` worker processes start and hash while the walk goes on (a walk with less to
read, as a verify whose files are proven by their seal, reads it in this process after the
walk: starting workers costs more). ``no_more()`` ends the input, the caller does its own work
(reading the installers' records, making entries in ``wait``'s ``each`` callback) while the
workers finish, and ``wait()`` gives one ``Hashed`` per path, in order. The caller starts no
thread before the walk ends: the workers are forked (see ``_context``).

Large files go out first (the largest-processing-time rule: one 400 MB library must not start
last and finish alone; while the walk runs only two batches per worker are queued, so one found
late still jumps ahead), small files in batches of a few hundred so the per-file cost is paid in
the workers, not in pickling. Each worker reads through one 1 MiB buffer, so memory stays flat
whatever the file sizes. Processes rather than threads: hashlib releases the GIL while it
hashes, but opening, reading and closing 20,000 small files is Python work too.

A worker that meets an ELF file (``\\x7fELF``) also reads its dynamic section with pyelftools
while the file is hot in the page cache (``verify.env.elfinfo``), so the linkage check costs no
second pass. ``jobs=1`` hashes in this process: no workers, the same results.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from samebits.errors import ToolError
from samebits.host import cores, thread_count
from verify.env.elfinfo import ElfInfo, read_elf_info

BUFFER = 1 << 20            # bytes read at a time, per worker
BIG = 8 << 20               # a file this large is a batch of its own
BATCH_FILES = 256           # at most this many small files per batch
BATCH_BYTES = 8 << 20       # ... or this many bytes
ELF_MAGIC = b"\x7fELF"
STARTUP_LIMIT = 60.0        # seconds for the first worker to answer before the pool is refused
# The workers start once this much work waits (bytes to hash, and HEAD_COST for each head to
# read): less is read here, after the walk. Starting two workers by fork cost a warm install's
# verify 0.09 s (the fork of a process holding a whole install's heap, then a fault for each
# page it wrote that the workers still shared), when all it had to read were 105 files, 2 MB.
START_BYTES = 32 << 20
HEAD_COST = 256 << 10       # an ELF file's facts (pyelftools) cost about what 256 KB hashed does
_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


class HashWorkersFailed(ToolError):
    """The worker processes never answered (each one failed as it started)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="run again with --jobs 1 (hashing in this process), "
                         "and report the workers' error printed above")


class Hashed(NamedTuple):
    """What reading one file gave: its sha256 (hex), or why it could not be read.

    A NamedTuple, not a dataclass: workers send tens of thousands back as plain tuples, which
    pickle fifty times faster than objects."""

    sha256: str | None
    elf: ElfInfo | None = None
    error: str | None = None
    head: bytes | None = None      # a .pyc file's 16-byte header (verify.env.bytecode reads it)


def default_jobs() -> int:
    """One hashing worker per core this process may run on."""
    return cores()


_local = threading.local()


def hash_file(path: str, *, elf: bool = True, size: int = -1) -> Hashed:
    """sha256 of one file through this thread's one buffer; ELF facts when ``elf``.
    ``size``, when known, spares the read that would only find the end of a small file."""
    return Hashed._make(_hash(path, elf, size))


def _hash(path: str, elf: bool, size: int, known: str | None = None
          ) -> tuple[str | None, ElfInfo | None, str | None, bytes | None]:
    if known is not None:
        return _look(path, elf, known)
    buf = getattr(_local, "buffer", None)
    if buf is None:
        buf = _local.buffer = bytearray(BUFFER)
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        return None, None, exc.strerror or str(exc), None
    try:
        h = hashlib.sha256()
        n = os.readv(fd, (buf,))
        is_elf = n >= 4 and buf[:4] == ELF_MAGIC
        head = bytes(buf[:16]) if path.endswith(".pyc") else None
        if n == size and n < BUFFER:  # all of it, as the walk saw it: no read to find the end
            h.update(memoryview(buf)[:n])
        else:
            view = memoryview(buf)
            while n:
                h.update(view[:n])
                n = os.readv(fd, (buf,))
        info = None
        if is_elf and elf:
            with os.fdopen(os.dup(fd), "rb") as stream:
                info = read_elf_info(stream)
        return h.hexdigest(), info, None, head
    except OSError as exc:
        return None, None, exc.strerror or str(exc), None
    finally:
        os.close(fd)


def _look(path: str, elf: bool, known: str
          ) -> tuple[str | None, ElfInfo | None, str | None, bytes | None]:
    """A file whose sha256 is ``known`` (proven by its seal): only its head is read, for
    the ELF facts and a pyc's header."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        return None, None, exc.strerror or str(exc), None
    try:
        head = os.read(fd, 16)
        info = None
        if elf and head[:4] == ELF_MAGIC:
            with os.fdopen(os.dup(fd), "rb") as stream:
                info = read_elf_info(stream)
        return known, info, None, head if path.endswith(".pyc") else None
    except OSError as exc:
        return None, None, exc.strerror or str(exc), None
    finally:
        os.close(fd)


def _hash_batch(batch: tuple[int, str, list[str], list[int], list[str | None]], elf: bool
                ) -> tuple[int, list[tuple]]:
    b, root, paths, sizes, known = batch
    return b, [_hash(p if p[0] == "/" else root + p, elf, n, k)
               for p, n, k in zip(paths, sizes, known, strict=True)]


def _ready() -> int:
    return os.getpid()


def _worker_init() -> None:
    # Ctrl-C goes to the whole process group: the parent says "interrupted" and stops the
    # workers; each worker printing its own KeyboardInterrupt traceback would only be noise.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _context() -> multiprocessing.context.BaseContext:
    # fork starts a worker in a millisecond. Python 3.12+ warns when a process that has
    # threads forks (a thread holding a lock would leave it held in the child), so there,
    # unless this process has only its main thread, the fork server starts them: it costs
    # half a second on Python 3.12 (a new interpreter importing this module) before the
    # first file is hashed, which is why a single-threaded process still forks.
    if sys.platform == "linux" and (sys.version_info < (3, 12) or thread_count() == 1):
        return multiprocessing.get_context("fork")
    ctx = multiprocessing.get_context("forkserver" if sys.platform == "linux" else "spawn")
    if sys.platform == "linux":
        ctx.set_forkserver_preload(["verify.env.hashing"])
    return ctx


class FileHasher:
    """``add(path, size)`` as the walk finds files, ``no_more()`` when it is done, then
    ``wait()`` for the results (do other work in between: the workers keep hashing).

    While files come in, at most two batches per worker wait in the pool, the largest first,
    so a big file found late still goes ahead of the small ones; ``no_more`` queues the rest,
    largest first. A context manager, so the workers always stop.
    """

    def __init__(self, *, jobs: int | None = None, elf: bool = True, root: str = "") -> None:
        self.jobs = jobs or default_jobs()
        self.elf = elf
        self.root = root  # every path added is relative to it (sent once per batch)
        self._pool: Any = None   # started by ``_start`` once START_BYTES of work waits
        self._ready: Any = None
        self._waiting = 0        # the cost of what was added before the workers started
        self._paths: list[str] = []
        self._sizes: list[int] = []
        self._known: list[str | None] = []
        self._heap: list[tuple[int, int]] = []      # (-bytes, batch id) not yet submitted
        self._batches: list[tuple[int, list[int]]] = []  # batch id -> (bytes, path indices)
        self._small: list[int] = []
        self._small_bytes = 0
        self._cond = threading.Condition()
        self._running = 0                           # submitted, not finished (under _cond)
        self._done: list[tuple[int, object]] = []   # (batch id, results or exception)

    def __enter__(self) -> FileHasher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        """Start the workers (more than one job asked, enough work waiting)."""
        self._pool = _context().Pool(self.jobs, initializer=_worker_init)
        # the first task: a worker that cannot start (an import failing in the worker, as on
        # Python 3.12 when a vendored path led sys.path) is respawned by the pool forever and
        # would make ``wait`` wait forever; this answer, due before any result, bounds that
        self._ready = self._pool.apply_async(_ready)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None

    def add(self, path: str, size: int, known: str | None = None) -> int:
        """Queue ``root + path`` (``path`` itself when absolute: the files of a venv's base
        interpreter); returns its index in what ``wait`` returns. ``known``: its sha256 is
        proven already (a sealed inode): only its head is read (ELF facts, a pyc header)."""
        i = len(self._paths)
        self._paths.append(path)
        self._sizes.append(size)
        self._known.append(known)
        if known is not None:
            size = min(size, 1 << 16)  # what reading its head costs
        if self._pool is None and self.jobs > 1:
            self._waiting += HEAD_COST if known is not None else size + BUFFER // 64
            if self._waiting >= START_BYTES:
                self._start()
        if size >= BIG:
            self._push(size, [i])
        else:
            self._small.append(i)
            self._small_bytes += size
            if len(self._small) >= BATCH_FILES or self._small_bytes >= BATCH_BYTES:
                self._flush()
        return i

    def no_more(self) -> None:
        """The walk is done: queue every remaining batch, largest first."""
        self._flush()
        if self._pool is not None:
            self._submit(len(self._heap))

    def wait(self, advance: Callable[[int], None] = lambda n: None,
             each: Callable[[int, Hashed], None] | None = None) -> list[Hashed]:
        """One Hashed per added path, in the order they were added. ``each(index, hashed)``
        is called as each file's result comes in, so the caller can use the time the
        workers still need for the rest (then the list is not filled, and ``hashed`` is the
        plain tuple of a Hashed's four fields); ``advance(nbytes)`` as each batch does."""
        self.no_more()
        out: list[Hashed | None] = [None] * len(self._paths)
        make = Hashed._make
        while self._heap:  # no workers: hash here, now, largest first
            _, b = heapq.heappop(self._heap)
            self._done.append(_hash_batch(self._work(b), self.elf))
        for _ in range(len(self._batches)):
            b, hashed = self._next()
            if isinstance(hashed, BaseException):
                raise hashed
            nbytes, idx = self._batches[b]
            if each is None:
                for i, h in zip(idx, hashed, strict=True):  # type: ignore[call-overload]
                    out[i] = make(h)
            else:  # the tuples as the workers sent them, in Hashed's order: no object each
                for i, h in zip(idx, hashed, strict=True):  # type: ignore[call-overload]
                    each(i, h)
            advance(nbytes)
        return out  # type: ignore[return-value]

    # -- internals

    def _flush(self) -> None:
        if self._small:
            self._push(self._small_bytes, self._small)
            self._small, self._small_bytes = [], 0

    def _push(self, nbytes: int, idx: list[int]) -> None:
        self._batches.append((nbytes, idx))
        heapq.heappush(self._heap, (-nbytes, len(self._batches) - 1))
        if self._pool is not None:
            with self._cond:
                room = 2 * self.jobs - self._running
            self._submit(room)

    def _work(self, b: int) -> tuple[int, str, list[str], list[int], list[str | None]]:
        idx = self._batches[b][1]
        return (b, self.root, [self._paths[i] for i in idx], [self._sizes[i] for i in idx],
                [self._known[i] for i in idx])

    def _submit(self, n: int) -> None:
        assert self._pool is not None
        for _ in range(min(n, len(self._heap))):
            _, b = heapq.heappop(self._heap)
            with self._cond:
                self._running += 1
            self._pool.apply_async(_hash_batch, (self._work(b), self.elf),
                                   callback=self._finished,
                                   error_callback=functools.partial(self._failed, b))

    def _failed(self, batch: int, exc: BaseException) -> None:  # in the pool's result thread
        self._finished((batch, exc))

    def _finished(self, result: tuple[int, object]) -> None:  # in the pool's result thread
        with self._cond:
            self._running -= 1
            self._done.append(result)
            self._cond.notify()

    def _next(self) -> tuple[int, object]:
        if self._ready is not None:
            try:
                self._ready.get(timeout=STARTUP_LIMIT)
            except multiprocessing.TimeoutError:
                raise HashWorkersFailed(
                    f"the hashing workers did not start within {STARTUP_LIMIT:g} s "
                    f"({_context().get_start_method()} start method, {self.jobs} workers)"
                ) from None
            self._ready = None
        with self._cond:
            while not self._done:
                self._cond.wait()
            return self._done.pop(0)

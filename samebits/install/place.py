"""Place: files from cache entries into a prefix, by reflink, hardlink or copy.

    auto      the default. Reflink (``FICLONE``) where the cache and the prefix share a
              filesystem that clones (btrfs, XFS, bcachefs, ZFS 2.2+): the prefix gets its own
              copy-on-write extents, so writing into it can never change the cache. Else a
              hardlink where they share a filesystem: the prefix shares the cache's sealed,
              read-only inode (``samebits.install.seal``), and the verify that follows proves
              it by a stat instead of re-hashing it. Else (another filesystem) a copy
              (``os.copy_file_range``, in the kernel, then ``sendfile``, then read/write)
    reflink   reflink, and a filesystem without reflinks is an error
    hardlink  hardlink where the filesystem allows, else copy (no reflink tried)
    copy      always a copy: the prefix owns every byte (a prefix to edit in place, or one
              that must outlive a cleaned cache)

A hardlinked file keeps the cache's mode (0444 / 0555): a tool that honours permissions
refuses to write into it, and a write that happens anyway (root, or a chmod first) changes the
inode's ctime, which the seal, every later install and ``samebits cache verify`` see. A conda
file marked ``no_link`` is copied. Files the environment rewrites (prefix placeholders,
scripts, entry points, RECORD, direct_url.json) are generated writes, never links.

A copied or cloned file gets mode 0755 or 0644 from the archive's owner-execute bit, set
explicitly (the umask does not change what is installed). Nothing here hashes: the verify that
follows hashes every copied or cloned file, and proves every link by its seal.
"""

from __future__ import annotations

import errno
import fcntl
import filecmp
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal, NamedTuple

from samebits.errors import InputError, UsageError, plural
from samebits.host import cores

LinkMode = Literal["auto", "reflink", "copy", "hardlink"]
LINK_MODES: tuple[LinkMode, ...] = ("auto", "reflink", "copy", "hardlink")
FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h
NO_REFLINK = {errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS,
              errno.EPERM}
NO_COPY_RANGE = {errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM}
THREADS = 8
DIR_BATCH = 32  # folders or files made by one thread at most; more go to THREADS
# Threads where the work waits, and one per core where it is the kernel's. On a network
# filesystem each link or folder waits on the server, and THREADS threads overlap the waits. On
# a local disk it is CPU work in the kernel (ext4 here: 10-20 us a link, 20-150 us a folder),
# which eight threads each taking files from everywhere only slowed (the cpu lock's 22,481
# links: 0.157 s on one thread, 0.279 s on eight), but which one thread per core each making
# its own run of folders does in parallel: the GIL is let go for every system call, and the
# folders of one run are locked by no other (the same links and their 2,102 folders: 0.58-0.65
# s on one thread, 0.29-0.37 s on two, on 2 cores). So the first PROBE are made in the calling
# thread and timed: SLOW or more each, and the rest go to THREADS threads; quicker, and the
# rest are cut into runs by path, one per core (at most PARTS, each of PART_MIN files or more),
# the calling thread making the first.
PROBE = 64
SLOW = 100e-6  # seconds per item
PARTS = 4         # at most; only two have been measured (this project's machines have 2 cores)
PART_MIN = 512    # files in a run at least: fewer are not worth a thread
DIR_COST = 4      # a folder costs about as much as four links to make (ext4, above)
CHUNK = 1 << 30
PROGRESS_BYTES = 64 << 20


class Copy(NamedTuple):
    """One file to place: ``src`` (a path in a cache entry) to ``rel`` (prefix-relative).
    Plain strings: an install places tens of thousands, and pathlib costs more than a link."""

    src: str
    rel: str
    executable: bool
    size: int = 0
    linkable: bool = True   # False: never hardlinked (a conda file marked no_link)
    package: str = ""       # the package whose file it is (wheels)


class Placer:
    """Places files by one link mode; the first reflink attempt decides for the rest."""

    def __init__(self, mode: LinkMode = "auto") -> None:
        if mode not in LINK_MODES:
            raise UsageError(f"--link-mode {mode}: one of {', '.join(LINK_MODES)}")
        self.mode = mode
        self._reflink: bool | None = None if mode in ("auto", "reflink") else False
        self._link: bool | None = None if mode in ("auto", "hardlink") else False
        self._lock = threading.Lock()
        self.used: Counter[str] = Counter()
        self.linked: list[str] = []   # the cache paths hardlinked (their seals are refreshed)
        self.linked_at: list[str] = []  # where each of them was linked, in the same order
        self.dirs: set[str] = set()   # the folders made (or found) under the prefix so far

    @property
    def linking(self) -> bool:
        """Whether files are placed without copying their bytes (a reflink, else a hardlink),
        as the first file placed settled it."""
        return self._reflink is True or (self._reflink is False and self._link is True)

    @property
    def methods(self) -> dict[str, int]:
        """How many files each method placed: {"reflink": n, "copy": n, "hardlink": n}."""
        return dict(sorted(self.used.items()))

    def place(self, job: Copy, dest: str) -> None:
        if self._reflink is not False and self._clone(job, dest):
            return
        if self._link is not False and job.linkable:
            try:
                os.link(job.src, dest)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                if exc.errno == errno.EXDEV and self._link is None:
                    self._link = False  # another filesystem: every later file is copied
            else:
                self._link = True
                with self._lock:
                    self.used["hardlink"] += 1
                    self.linked.append(job.src)
                    self.linked_at.append(dest)
                return
        self._copy(job, dest, clone=False)

    def _clone(self, job: Copy, dest: str) -> bool:
        """Place ``job`` by FICLONE; False (nothing left at ``dest``) where it cannot."""
        try:
            self._copy(job, dest, clone=True)
            return True
        except _NoClone:
            os.unlink(dest)
            return False

    def _copy(self, job: Copy, dest: str, *, clone: bool) -> None:
        src = os.open(job.src, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                if clone:
                    self._reflink_fd(src, fd, job, dest)
                else:
                    copy_fd(src, fd)
                    self._count("copy")
                os.fchmod(fd, 0o755 if job.executable else 0o644)
            finally:
                os.close(fd)
        finally:
            os.close(src)

    def _reflink_fd(self, src: int, dest: int, job: Copy, where: str) -> None:
        try:
            fcntl.ioctl(dest, FICLONE, src)
        except OSError as exc:
            if exc.errno not in NO_REFLINK:
                raise
            if self.mode == "reflink":
                raise UsageError(f"--link-mode reflink: cannot clone {job.src} to "
                                 f"{where} ({os.strerror(exc.errno or 0)})",
                                 hint="use --link-mode auto (reflink where possible, "
                                 "else a hardlink or a copy)") from None
            if self._reflink is None:
                self._reflink = False
            raise _NoClone from None
        self._reflink = True
        self._count("reflink")

    def _count(self, method: str) -> None:
        with self._lock:
            self.used[method] += 1


class _NoClone(Exception):
    """This filesystem pair does not clone: the caller links or copies instead."""


def copy_fd(src: int, dest: int) -> None:
    """Copy all of ``src`` to ``dest`` in the kernel where it can: copy_file_range, sendfile,
    then plain reads and writes."""
    size = os.fstat(src).st_size
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src, dest, min(CHUNK, size - done))
            if n == 0:
                break
            done += n
        return
    except OSError as exc:
        if exc.errno not in NO_COPY_RANGE or done:
            raise
    try:
        while done < size:
            n = os.sendfile(dest, src, done, min(CHUNK, size - done))
            if n == 0:
                break
            done += n
        return
    except OSError as exc:
        if exc.errno not in NO_COPY_RANGE or done:
            raise
    os.lseek(src, 0, os.SEEK_SET)
    while chunk := os.read(src, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dest, view):]


def write_file(dest: str | Path, data: bytes, executable: bool) -> None:
    """A file samebits generates (a script, a record): written, mode set explicitly."""
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, 0o755 if executable else 0o644)
    finally:
        os.close(fd)


def write_all(writes: Sequence[tuple[Path, bytes, bool]]) -> list[str]:
    """``write_file`` each (path, data, executable), on threads where the first show that
    each waits (``_each``); what could not be written because something is there already,
    named."""
    def one(job: tuple[Path, bytes, bool]) -> str | None:
        try:
            write_file(*job)
        except FileExistsError:
            return f"{job[0]}: already exists (two packages write it)"
        return None

    return [s for s in _each(one, writes, chunksize=4) if s is not None]


def _each(fn: Callable[[Any], Any], items: Sequence[Any], *, chunksize: int) -> list[Any]:
    """``fn`` of each item, in order: in this thread while each is quick, on ``THREADS``
    threads once the first ``PROBE`` show that they wait (``SLOW``, above); a failure is
    raised here, in the calling thread."""
    if len(items) < DIR_BATCH or THREADS == 1:
        return [fn(x) for x in items]
    t0 = time.perf_counter()
    out = [fn(x) for x in items[:PROBE]]
    if _quick(t0, len(out)):
        return out + [fn(x) for x in items[PROBE:]]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        return out + list(pool.map(fn, items[PROBE:], chunksize=chunksize))


def _quick(since: float, n: int) -> bool:
    """Whether the ``n`` items made since ``since`` took under ``SLOW`` each: the rest are
    made in this thread too."""
    return time.perf_counter() - since < SLOW * n


def make_dirs(paths: Iterable[str], made: set[str] | None = None) -> None:
    """Every folder the files go into, made once, before the links are: each missing folder
    and its missing parents, one ``mkdir`` each, in waves: a folder whose parent is not to be
    made (it is there) goes in the first, its children in the next. A wave of many folders is
    made in this thread, or on ``THREADS`` threads where its first folders show that each
    waits (``SLOW``: a network filesystem; this project's ext4, which has no journal, right
    after a large tree was deleted: 0.4 ms a folder, 2,100 folders 0.9 to 1.4 s one after
    another and 0.5 to 0.65 s on four threads); folders of one wave do not wait on each other.
    ``made``: folders known to be there (an install's earlier calls), not
    made or climbed again; those made now are added to it."""
    made = set() if made is None else made
    wanted: set[str] = set()
    for d in set(paths):
        while d and d not in wanted and d not in made:
            wanted.add(d)
            d = os.path.dirname(d)
    while wanted:
        wave = sorted(d for d in wanted
                      if os.path.dirname(d) not in wanted or os.path.dirname(d) == d)
        _each(_mkdir, wave, chunksize=DIR_BATCH // 2)
        wanted.difference_update(wave)
        made.update(wave)


def _mkdir(d: str) -> None:
    try:
        os.mkdir(d)
    except FileExistsError:
        if not os.path.isdir(d):
            raise


def place_all(jobs: Sequence[Copy], root: str, placer: Placer, *,
              advance: Callable[..., None] | None = None) -> None:
    """Place every job under ``root``. The smallest goes first, in this thread: it settles
    how ``placer`` places (``auto``). Files copied go to a few threads, each with its share
    of the bytes, biggest files first (the kernel does the copying, and the threads overlap
    its waits); files linked or cloned, where the next ``PROBE`` placed in this thread show
    that each is quick, in runs by path, one thread per core (``runs``), else on threads too
    (``SLOW``, above). Each share's folders are made by the thread that fills them. Every
    failure is collected and named."""
    root = root.rstrip("/") + "/"

    def make_folders(share: Sequence[Copy]) -> None:
        folders = {j.rel.rpartition("/")[0] for j in share}  # 2,100 of 17,000: joined once
        make_dirs((root + f if f else root[:-1] for f in folders), made=placer.dirs)

    problems: list[str] = []
    lock = threading.Lock()
    failures: list[BaseException] = []

    def run(share: Sequence[Copy]) -> None:
        done = 0
        for n, job in enumerate(share, 1):
            if failures:
                return
            try:
                placer.place(job, root + job.rel)
            except FileExistsError:
                with lock:
                    problems.append(f"{root + job.rel}: already exists (two packages write it)")
            except FileNotFoundError:
                with lock:
                    problems.append(f"{job.src}: missing from the cache")
            except BaseException as exc:  # handed to the calling thread, which raises it
                failures.append(exc)
                return
            done += job.size
            if advance is not None and (done > PROGRESS_BYTES or n % 256 == 0):
                advance(done)
                done = 0
        if advance is not None and done:
            advance(done)

    ordered = sorted(jobs, key=lambda j: -j.size)
    if ordered:
        make_folders(ordered[-PROBE - 1:])
        run([ordered.pop()])
    if ordered and placer.linking and THREADS > 1:
        probe = ordered[-PROBE:]
        del ordered[-PROBE:]
        t0 = time.perf_counter()
        run(probe)
        if _quick(t0, len(probe)):
            _in_runs(run, make_folders, ordered, failures)
            ordered = []
    if ordered and not failures:
        make_folders(ordered)
        _on_threads(run, ordered)
    if failures:
        raise failures[0]
    if problems:
        raise PlaceError(sorted(problems))


def _in_runs(run: Callable[[list[Copy]], None], make_folders: Callable[[list[Copy]], None],
            jobs: list[Copy], failures: list[BaseException]) -> None:
    """Quick placings (a local disk's links): ``jobs`` cut into runs by path (``runs``), each
    run's folders made and its files placed by one thread, the calling thread making the
    first. A failure is added to ``failures`` for the caller to raise."""
    parts = runs(jobs, min(PARTS, cores(), len(jobs) // PART_MIN))

    def one(share: list[Copy]) -> None:
        try:
            make_folders(share)
            run(share)
        except BaseException as exc:  # handed to the calling thread, which raises it
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(share,)) for share in parts[1:]]
    for t in threads:
        t.start()
    one(parts[0])
    for t in threads:
        t.join()


def runs(jobs: Sequence[Copy], n: int) -> list[list[Copy]]:
    """``jobs`` sorted by path and cut into ``n`` runs (at least one) of about equal cost: a
    file costs 1, each folder it is the first to need ``DIR_COST`` more. Runs of paths share
    few folders (only those above a cut), so each thread makes its own and links into them
    without waiting on another's folder lock."""
    by_path = sorted(jobs, key=_rel)
    if n < 2:
        return [by_path]
    seen: set[str] = set()
    costs: list[int] = []
    for job in by_path:
        cost = 1
        folder = job.rel.rpartition("/")[0]
        while folder and folder not in seen:
            seen.add(folder)
            cost += DIR_COST
            folder = folder.rpartition("/")[0]
        costs.append(cost)
    share, start, done = sum(costs) / n, 0, 0
    out: list[list[Copy]] = []
    for i, cost in enumerate(costs):
        done += cost
        if done >= share * (len(out) + 1) and len(out) < n - 1:
            out.append(by_path[start:i + 1])
            start = i + 1
    out.append(by_path[start:])
    return [r for r in out if r]


_rel = attrgetter("rel")


def _on_threads(run: Callable[[list[Copy]], None], jobs: list[Copy]) -> None:
    """``run`` of shares of ``jobs`` (biggest first) on up to ``THREADS`` threads, each with
    about as many bytes."""
    shares: list[list[Copy]] = [[] for _ in range(min(THREADS, max(1, len(jobs) // 64)))]
    loads = [0] * len(shares)
    for job in jobs:
        i = loads.index(min(loads))
        shares[i].append(job)
        loads[i] += job.size + 4096
    threads = [threading.Thread(target=run, args=(s,)) for s in shares if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class PlaceError(InputError):
    """Files that could not be placed, each named (a cache file gone, two packages' files)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{plural(len(problems), 'file')} could not be placed:\n  "
                         + "\n  ".join(problems[:20]))
        self.problems = problems


def one_copy_per_path(copies: list[Copy]) -> list[Copy]:
    """A path several packages write is placed once when every copy has the same bytes and
    mode, as pip and installer leave it (each later wheel overwrites it): every CUDA 12
    ``nvidia-*`` wheel ships the same empty ``nvidia/__init__.py`` (and so the same pyc).

    Wheels that write one path with different bytes are settled before this, as pip's install
    order leaves them (``samebits.install.overwrite``); what is left with different bytes here
    (a conda package's file and another package's) has no order to follow: an error naming
    every such path."""
    by_rel: dict[str, list[Copy]] = {}
    for c in copies:
        by_rel.setdefault(c.rel, []).append(c)
    if len(by_rel) == len(copies):
        return copies
    chosen: dict[str, Copy] = {}
    differ = []
    for rel, group in by_rel.items():
        if all(c.executable == group[0].executable
               and filecmp.cmp(c.src, group[0].src, shallow=False) for c in group[1:]):
            chosen[rel] = group[0]
        else:
            differ.append(rel)
    differ.sort()
    if differ:
        raise InputError(f"{plural(len(differ), 'file')} written by two packages with "
                         "different contents: " + ", ".join(differ[:10]),
                         hint="the lock holds packages that overwrite each other's files; "
                         "re-lock without one of them")
    return list(chosen.values())

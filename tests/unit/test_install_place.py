"""samebits.install.place: files from cache entries into a prefix by link mode, every failure
named, and one copy per path where packages overlap. Real files in temp folders, real
syscalls (reflink is attempted where the filesystem refuses it: the copy fallback)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from samebits.errors import InputError, UsageError
from samebits.install import place
from samebits.install.place import (
    Copy,
    PlaceError,
    Placer,
    copy_fd,
    make_dirs,
    one_copy_per_path,
    place_all,
    write_file,
)


def _src(folder: Path, name: str, data: bytes) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    path.chmod(0o444)  # the cache stores files read-only
    return str(path)


def _reflinks(folder: Path) -> bool:
    """Whether ``folder``'s filesystem clones files (FICLONE)."""
    import fcntl

    a, b = folder / ".probe-a", folder / ".probe-b"
    a.write_bytes(b"x")
    with open(a, "rb") as src, open(b, "wb") as dest:
        try:
            fcntl.ioctl(dest.fileno(), place.FICLONE, src.fileno())
            return True
        except OSError:
            return False
        finally:
            a.unlink()
            b.unlink()


def test_unknown_mode_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as err:
        Placer("symlink")  # type: ignore[arg-type]
    assert err.value.message == "--link-mode symlink: one of auto, reflink, copy, hardlink"


@pytest.mark.parametrize("executable", [False, True])
def test_copy_is_a_file_of_its_own_with_its_mode(tmp_path: Path, executable: bool) -> None:
    """copy: new bytes (another inode), mode 0755/0644 from the archive's execute bit, not
    from the cache file's read-only mode nor the umask."""
    src = _src(tmp_path / "cache", "f", b"hello" * 1000)
    placer = Placer("copy")
    dest = tmp_path / "prefix-f"
    old = os.umask(0o077)
    try:
        placer.place(Copy(src, "f", executable), str(dest))
    finally:
        os.umask(old)
    assert dest.read_bytes() == b"hello" * 1000
    assert os.stat(dest).st_ino != os.stat(src).st_ino
    assert stat.S_IMODE(os.stat(dest).st_mode) == (0o755 if executable else 0o644)
    assert placer.methods == {"copy": 1}


def test_auto_clones_or_links_and_remembers(tmp_path: Path) -> None:
    """auto: reflink where the filesystem has it, else a hardlink (one filesystem: the cache's
    sealed inode, listed for the re-seal); the first attempt decides for the rest (one
    failed clone, not one per file)."""
    cache = tmp_path / "cache"
    jobs = [Copy(_src(cache, f"f{i}", bytes([i]) * 100), f"f{i}", False) for i in range(3)]
    placer = Placer("auto")
    for job in jobs:
        placer.place(job, str(tmp_path / job.rel))
    method = "reflink" if _reflinks(tmp_path) else "hardlink"
    assert placer.methods == {method: 3}
    assert placer._reflink is (method == "reflink")
    assert placer.linked == ([j.src for j in jobs] if method == "hardlink" else [])
    assert [(tmp_path / j.rel).read_bytes() for j in jobs] == [bytes([i]) * 100 for i in range(3)]


def test_auto_copies_what_cannot_be_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """auto across filesystems (EXDEV) copies, and stops trying to link after the first; a
    file marked not linkable (conda's no_link) is copied even on one filesystem."""
    cache = tmp_path / "cache"
    jobs = [Copy(_src(cache, f"f{i}", bytes([i]) * 100), f"f{i}", False) for i in range(3)]
    tries = []

    def cross_device(src: str, dest: str) -> None:
        tries.append(src)
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    placer = Placer("auto")
    placer._reflink = False
    monkeypatch.setattr(place.os, "link", cross_device)
    for job in jobs:
        placer.place(job, str(tmp_path / job.rel))
    assert placer.methods == {"copy": 3} and len(tries) == 1 and placer.linked == []
    monkeypatch.undo()
    other = Placer("auto")
    other._reflink = False
    other.place(Copy(_src(cache, "n", b"n"), "n", False, linkable=False), str(tmp_path / "n"))
    assert other.methods == {"copy": 1}


def test_reflink_mode_without_reflinks_says_so(tmp_path: Path) -> None:
    """reflink on a filesystem that cannot clone: an error naming both files and the way
    out, and nothing counted."""
    if _reflinks(tmp_path):
        pytest.skip(f"{tmp_path}'s filesystem clones files")
    src = _src(tmp_path / "cache", "f", b"data")
    placer = Placer("reflink")
    with pytest.raises(UsageError) as err:
        placer.place(Copy(src, "f", False), str(tmp_path / "f"))
    assert err.value.message.startswith(f"--link-mode reflink: cannot clone {src} to "
                                        f"{tmp_path / 'f'} (")
    assert err.value.hint == ("use --link-mode auto (reflink where possible, else a hardlink "
                              "or a copy)")
    assert placer.methods == {}


def test_hardlink_shares_the_inode_unless_not_linkable(tmp_path: Path) -> None:
    """hardlink: the prefix's file is the cache's inode; a file marked not linkable (conda's
    no_link) is copied all the same."""
    cache = tmp_path / "cache"
    linked, copied = _src(cache, "a", b"a"), _src(cache, "b", b"b")
    placer = Placer("hardlink")
    placer.place(Copy(linked, "a", False), str(tmp_path / "a"))
    placer.place(Copy(copied, "b", False, linkable=False), str(tmp_path / "b"))
    assert os.stat(tmp_path / "a").st_ino == os.stat(linked).st_ino
    assert os.stat(tmp_path / "b").st_ino != os.stat(copied).st_ino
    assert placer.methods["hardlink"] == 1 and sum(placer.methods.values()) == 2


def test_copy_fd_copies_every_byte_of_a_large_file(tmp_path: Path) -> None:
    """More than one copy_file_range chunk (CHUNK made small): every byte, in order."""
    data = os.urandom(3 * 4096 + 17)
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.write_bytes(data)
    chunk = place.CHUNK
    place.CHUNK = 4096
    try:
        with open(src, "rb") as s, open(dest, "wb") as d:
            copy_fd(s.fileno(), d.fileno())
    finally:
        place.CHUNK = chunk
    assert dest.read_bytes() == data


def test_copy_fd_falls_back_to_sendfile_then_reads(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel refuses copy_file_range (EXDEV: another filesystem on old kernels),
    sendfile copies; where it refuses that too, plain reads and writes do."""
    data = os.urandom(200_000)
    src = tmp_path / "src"
    src.write_bytes(data)

    def refused(*args: object) -> int:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(os, "copy_file_range", refused)
    with open(src, "rb") as s, open(tmp_path / "by-sendfile", "wb") as d:
        copy_fd(s.fileno(), d.fileno())
    assert (tmp_path / "by-sendfile").read_bytes() == data
    monkeypatch.setattr(os, "sendfile", refused)
    with open(src, "rb") as s, open(tmp_path / "by-read", "wb") as d:
        copy_fd(s.fileno(), d.fileno())
    assert (tmp_path / "by-read").read_bytes() == data


def test_copy_fd_raises_what_is_not_a_refusal(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A real I/O error (a full disk) is raised, not papered over by the next method."""
    src = tmp_path / "src"
    src.write_bytes(b"x" * 100)

    def full(*args: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "copy_file_range", full)
    with open(src, "rb") as s, open(tmp_path / "dest", "wb") as d, \
            pytest.raises(OSError) as err:
        copy_fd(s.fileno(), d.fileno())
    assert err.value.errno == errno.ENOSPC


def test_write_file_and_make_dirs(tmp_path: Path) -> None:
    """A generated file gets exactly its bytes and mode; make_dirs makes every folder once,
    nested ones included; an existing file is never overwritten."""
    make_dirs([str(tmp_path / "a" / "b" / "c"), str(tmp_path / "a" / "b"), str(tmp_path / "d")])
    assert (tmp_path / "a" / "b" / "c").is_dir() and (tmp_path / "d").is_dir()
    write_file(tmp_path / "a" / "run", b"#!/bin/sh\n", True)
    assert (tmp_path / "a" / "run").read_bytes() == b"#!/bin/sh\n"
    assert stat.S_IMODE((tmp_path / "a" / "run").stat().st_mode) == 0o755
    with pytest.raises(FileExistsError):
        write_file(tmp_path / "a" / "run", b"other", False)


def test_make_dirs_makes_wide_levels_on_threads(tmp_path: Path) -> None:
    """Waves wider than DIR_BATCH are made on threads, parents before children, folders
    already there left as they are; a file where a folder must go is an error, not skipped;
    folders in ``made`` are taken as there (not made, not climbed) and those made join it."""
    from samebits.install.place import DIR_BATCH

    wide = [str(tmp_path / f"p{i}" / "__pycache__") for i in range(DIR_BATCH * 3)]
    (tmp_path / "p0").mkdir()
    make_dirs([*wide, str(tmp_path / "p1" / "deep" / "er")])
    assert all(Path(d).is_dir() for d in wide) and (tmp_path / "p1" / "deep" / "er").is_dir()
    make_dirs(wide)  # all there: nothing to do, nothing raised
    (tmp_path / "q").mkdir()
    for i in range(DIR_BATCH * 2):
        (tmp_path / "q" / f"d{i}").mkdir()
    (tmp_path / "q" / "d7" / "x").write_text("a file")
    with pytest.raises(FileExistsError):
        make_dirs([str(tmp_path / "q" / f"d{i}" / "x") for i in range(DIR_BATCH * 2)])
    made = {str(tmp_path / "said-there")}  # it is not: trusting made, its child cannot be
    with pytest.raises(FileNotFoundError):
        make_dirs([str(tmp_path / "said-there" / "child")], made=made)
    make_dirs([str(tmp_path / "r" / "s")], made=made)
    assert {str(tmp_path / "r"), str(tmp_path / "r" / "s")} <= made


def test_write_all_writes_many_files_on_threads(tmp_path: Path) -> None:
    """Many generated files are written on threads, each with its bytes and mode; a path
    already there is named, never overwritten, whichever thread meets it."""
    from samebits.install.place import DIR_BATCH, write_all

    writes = [(tmp_path / f"f{i}", f"file {i}\n".encode(), i % 3 == 0)
              for i in range(DIR_BATCH * 4)]
    (tmp_path / "f5").write_bytes(b"there before")
    said = write_all(writes)
    assert said == [f"{tmp_path / 'f5'}: already exists (two packages write it)"]
    assert (tmp_path / "f5").read_bytes() == b"there before"
    for path, data, executable in writes:
        if path.name != "f5":
            assert path.read_bytes() == data
            assert stat.S_IMODE(path.stat().st_mode) == (0o755 if executable else 0o644)


def test_place_all_places_many_files_on_threads(tmp_path: Path) -> None:
    """Hundreds of files over several threads (biggest first), in nested folders, progress
    reported up to every byte."""
    cache = tmp_path / "cache"
    jobs = [Copy(_src(cache, f"f{i}", os.urandom(i * 7)), f"pkg/{i % 5}/f{i}", i % 2 == 0,
                 size=i * 7) for i in range(300)]
    seen: list[int] = []
    place_all(jobs, str(tmp_path / "prefix"), Placer("copy"), advance=seen.append)
    for job in jobs:
        placed = tmp_path / "prefix" / job.rel
        assert placed.read_bytes() == Path(job.src).read_bytes()
        assert stat.S_IMODE(placed.stat().st_mode) == (0o755 if job.executable else 0o644)
    assert sum(seen) == sum(j.size for j in jobs)


class _Where(Placer):
    """A real Placer that notes which thread placed each file, and waits ``wait`` seconds
    first (a network filesystem's round trip)."""

    def __init__(self, mode: place.LinkMode, wait: float = 0.0) -> None:
        super().__init__(mode)
        self.wait = wait
        self.threads: set[int] = set()

    def place(self, job: Copy, dest: str) -> None:
        import threading
        import time

        self.threads.add(threading.get_ident())
        if self.wait:
            time.sleep(self.wait)
        super().place(job, dest)


def test_quick_links_stay_in_the_calling_thread_and_waits_go_to_threads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hardlinks made quickly (a local disk: CPU work in the kernel, which more threads only
    slow) are all made in the calling thread; links that each wait (a network filesystem,
    here a 10 ms wait per file) go to threads once the first PROBE show it; copies go to
    threads whatever their pace. Every file is placed either way. (Quick here is under 5 ms a
    file, so that a busy machine cannot make the quick links look slow.)"""
    import threading

    monkeypatch.setattr(place, "SLOW", 0.005)

    cache = tmp_path / "cache"
    jobs = [Copy(_src(cache, f"f{i}", b"x" * i), f"pkg/{i % 7}/f{i}", False, size=i)
            for i in range(place.PROBE * 3)]
    here = threading.get_ident()
    for mode, wait, on_threads in (("hardlink", 0.0, False), ("hardlink", 0.01, True),
                                   ("copy", 0.0, True)):
        placer = _Where(mode, wait)  # type: ignore[arg-type]
        root = tmp_path / f"{mode}-{wait}"
        place_all(jobs, str(root), placer)
        assert all((root / j.rel).read_bytes() == Path(j.src).read_bytes() for j in jobs)
        assert (placer.threads != {here}) is on_threads, (mode, wait)
        assert placer.methods == {mode: len(jobs)}


def test_quick_links_of_many_files_are_made_in_runs_by_path_one_thread_per_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of quick hardlinks on two cores: cut into two runs by path, the calling
    thread making the first, another the second, each making its own folders; every file is
    the cache's inode, counted once and named in ``linked``. On one core, one thread."""
    import threading

    monkeypatch.setattr(place, "SLOW", 0.005)  # quick, even on a busy machine
    cache = tmp_path / "cache"
    n = place.PART_MIN * 3
    jobs = [Copy(_src(cache / f"d{i % 9}", f"f{i}", b"x" * (i % 50)), f"pkg/{i % 9}/s/f{i}",
                 False, size=i % 50) for i in range(n)]
    for cores, threads in ((2, 2), (1, 1)):
        monkeypatch.setattr(place, "cores", lambda cores=cores: cores)
        placer = _Where("hardlink")
        root = tmp_path / f"prefix{cores}"
        place_all(jobs, str(root), placer)
        assert len(placer.threads) == threads and threading.get_ident() in placer.threads
        assert placer.methods == {"hardlink": n} and sorted(placer.linked) == sorted(
            j.src for j in jobs)
        for job in jobs:
            assert os.path.samefile(root / job.rel, job.src)


def test_runs_are_cut_by_path_and_cost() -> None:
    """``runs``: every job once, sorted by path, in contiguous runs of about equal cost,
    where a folder first needed costs DIR_COST more than a file; one run when asked for
    fewer than two."""
    from samebits.install.place import DIR_COST, runs

    flat = [Copy(f"/c/{i}", f"a/f{i:03}", False) for i in range(100)]
    deep = [Copy(f"/c/d{i}", f"b/{i:03}/f", False) for i in range(100)]  # a folder each
    jobs = [*deep, *flat]
    assert runs(jobs, 1) == [sorted(jobs, key=lambda j: j.rel)]
    two = runs(jobs, 2)
    assert [j for r in two for j in r] == sorted(jobs, key=lambda j: j.rel)
    # a/ is 1 folder and 100 files, b/ 101 folders and 100 files: the cut falls inside b/
    total = 1 + DIR_COST + 100 + 100 * (1 + DIR_COST) + DIR_COST
    first = 1 + DIR_COST + 100 + DIR_COST
    k = next(i for i in range(100) if first + (i + 1) * (1 + DIR_COST) >= total / 2)
    assert len(two[0]) == 100 + k + 1 and two[1][0].rel == f"b/{k + 1:03}/f"
    assert runs(jobs[:3], 4) == [[j] for j in sorted(jobs[:3], key=lambda j: j.rel)]


def test_a_failure_in_another_run_is_raised_or_named_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What goes wrong in the second run's thread is the caller's: a missing cache file and a
    path written twice are named in the one PlaceError; a file where that run's folder must go
    is raised as it is."""
    monkeypatch.setattr(place, "SLOW", 0.005)
    monkeypatch.setattr(place, "cores", lambda: 2)
    cache = tmp_path / "cache"
    n = place.PART_MIN * 2
    # a0's files are the smallest: the first placed and the probe are a0's, a1 is the
    # second run (sizes are only what the cache's manifest says: the files hold one byte)
    jobs = [Copy(_src(cache, f"f{i}", b"x"), f"a{i // (n // 2)}/f{i:05}", False,
                 size=1 + i // (n // 2)) for i in range(n)]
    gone = Copy(str(cache / "gone"), "a1/zz-gone", False, size=2)
    twice = Copy(jobs[-1].src, jobs[-1].rel, False, size=2)
    root = tmp_path / "prefix"
    with pytest.raises(PlaceError) as err:
        place_all([*jobs, gone, twice], str(root), Placer("hardlink"))
    assert err.value.problems == [f"{cache / 'gone'}: missing from the cache",
                                  f"{root}/{twice.rel}: already exists (two packages write it)"]
    blocked = tmp_path / "blocked"
    (blocked / "a1").mkdir(parents=True)
    (blocked / "a1" / "x").write_text("a file where a folder goes")
    deep = [j._replace(rel=j.rel.replace("a1/", "a1/x/")) for j in jobs]
    with pytest.raises(FileExistsError):
        place_all(deep, str(blocked), Placer("hardlink"))
    assert (blocked / "a1" / "x").is_file()


def test_each_judges_its_pace_on_the_first_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_each`` keeps quick items in the calling thread and hands the rest of slow ones to
    threads, the results in order either way."""
    import threading
    import time

    monkeypatch.setattr(place, "SLOW", 0.005)

    here = threading.get_ident()
    seen: list[int] = []

    def quick(x: int) -> int:
        seen.append(threading.get_ident())
        return x * 2

    def slow(x: int) -> int:
        time.sleep(0.01)
        return quick(x)

    items = list(range(place.PROBE * 2))
    assert place._each(quick, items, chunksize=4) == [x * 2 for x in items]
    assert set(seen) == {here}
    seen.clear()
    assert place._each(slow, items, chunksize=4) == [x * 2 for x in items]
    assert set(seen[:place.PROBE]) == {here} and set(seen[place.PROBE:]) - {here}


def test_place_all_names_every_problem(tmp_path: Path) -> None:
    """A path two packages write and a cache file that is gone: one PlaceError naming both,
    sorted; the rest is placed."""
    cache = tmp_path / "cache"
    a, b = _src(cache, "a", b"a"), _src(cache, "b", b"b")
    gone = str(cache / "gone")
    root = tmp_path / "prefix"
    jobs = [Copy(a, "same", False), Copy(b, "same", False), Copy(gone, "x", False),
            Copy(b, "ok", False)]
    with pytest.raises(PlaceError) as err:
        place_all(jobs, str(root), Placer("copy"))
    assert err.value.problems == [f"{gone}: missing from the cache",
                                  f"{root}/same: already exists (two packages write it)"]
    assert err.value.message.startswith("2 files could not be placed:\n  ")
    assert (root / "ok").read_bytes() == b"b"


def test_place_all_raises_the_first_unexpected_failure(tmp_path: Path) -> None:
    """A failure that is not a named problem (here: the prefix is a file) is raised as it is."""
    src = _src(tmp_path / "cache", "a", b"a")
    (tmp_path / "prefix").write_text("not a folder")
    with pytest.raises(OSError):
        place_all([Copy(src, "a", False)], str(tmp_path / "prefix"), Placer("copy"))


def test_one_copy_per_path(tmp_path: Path) -> None:
    """Same bytes and mode from several packages: placed once. Different bytes (what is left
    once the wheels are settled: samebits.install.overwrite): an error naming the path."""
    cache = tmp_path / "cache"
    empty1, empty2 = _src(cache, "e1", b""), _src(cache, "e2", b"")
    low, high = _src(cache, "low", b"base"), _src(cache, "high", b"sktime")
    plain = [Copy(empty1, "nvidia/__init__.py", False, package="nvidia-a"),
             Copy(empty2, "nvidia/__init__.py", False, package="nvidia-b"),
             Copy(low, "only.py", False, package="x")]
    assert one_copy_per_path(plain[2:]) == plain[2:]  # nothing shared: as given
    assert [c.src for c in one_copy_per_path(plain)] == [empty1, low]
    clash = [Copy(low, "docs/conf.py", False, package="scikit-base"),
             Copy(high, "docs/conf.py", False, package="sktime")]
    with pytest.raises(InputError) as err:
        one_copy_per_path(clash)
    assert err.value.message == ("1 file written by two packages with different contents: "
                                 "docs/conf.py")
    assert err.value.hint.startswith("the lock holds packages that overwrite")
    mode = [Copy(empty1, "bin/x", False, package="a"), Copy(empty2, "bin/x", True, package="b")]
    with pytest.raises(InputError):
        one_copy_per_path(mode)  # same bytes, another mode: not the same file

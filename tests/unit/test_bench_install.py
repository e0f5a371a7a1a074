"""``python -m tests.bench install``'s own parts: the floor it prints and the older samebits it
runs beside ours (unpacked from git history, imported from there, its archives shared)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.bench import install as bench


def _tree(root: Path) -> list[str]:
    files = ["a.txt", "lib/b.so", "lib/python3.12/site-packages/x/__init__.py",
             "lib/python3.12/site-packages/x/__pycache__/__init__.cpython-312.pyc", "bin/tool"]
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(f)
    (root / "bin" / "link").symlink_to("tool")
    return files


def test_floor_links_every_file_walks_them_and_leaves_nothing(tmp_path: Path) -> None:
    prefix, work = tmp_path / "prefix", tmp_path / "work"
    files = _tree(prefix)
    work.mkdir()
    got = bench.floor(prefix, work, sys.executable)
    assert got["files"] == len(files) and got["walked"] == len(files)
    assert got["dirs"] == 6  # lib, lib/python3.12, .../site-packages, x, __pycache__, bin
    assert all(float(got[k]) > 0 for k in ("check", "place", "walk", "cp -al", "start"))
    assert got["total"] >= got["place"]
    assert not (work / "floor").exists()  # the links are gone again
    assert all(os.lstat(prefix / f).st_nlink == 1 for f in files)


def test_the_linked_rounds_set_targets_aside_and_empty_them_after(tmp_path: Path) -> None:
    """No tree is deleted before a linked round (on ext4 without a journal the next run's
    every new inode would skip the freed ones for a minute): each target is renamed into the
    trash, the floor's folders too, and ``empty`` deletes them all, with what an interrupted
    bench left in its trash."""
    prefix, work = tmp_path / "prefix", tmp_path / "work"
    files = _tree(prefix)
    work.mkdir()
    (work / "trash" / "left").mkdir(parents=True)  # an interrupted run's
    trash = bench.Trash(work / "trash")
    inode = os.lstat(prefix / "a.txt").st_ino
    bench._clear(prefix, trash)
    assert not prefix.exists()
    kept = work / "trash" / "1-prefix"
    assert os.lstat(kept / "a.txt").st_ino == inode  # moved, not deleted
    got = bench.floor(kept, work, sys.executable, trash)
    assert got["files"] == len(files) and not (work / "floor").exists()
    assert sorted(p.name for p in (work / "trash").iterdir()) == ["1-prefix", "2-floor",
                                                                 "3-floor"]
    trash.empty()
    assert sorted(p.name for p in work.iterdir()) == []


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                          "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                                          "PATH": os.environ["PATH"], "HOME": str(repo)}
                          ).stdout.strip()


def test_before_source_is_the_commit_as_it_was(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "samebits.py").write_text("old\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "old")
    old = _git(repo, "rev-parse", "HEAD")
    (repo / "samebits.py").write_text("new\n")
    _git(repo, "commit", "-q", "-am", "new")
    work = tmp_path / "work"
    src, why = bench.before_source(work, repo, old)
    assert why == "" and src == work / "before-src"
    assert (src / "samebits.py").read_text() == "old\n"
    (src / "samebits.py").write_text("kept\n")  # a second call reuses what is there
    assert bench.before_source(work, repo, old)[0] == src
    assert (src / "samebits.py").read_text() == "kept\n"
    missing, why = bench.before_source(tmp_path / "other", repo, "0" * 40)
    assert missing is None and "git archive 0000000" in why


def test_imports_from_names_what_comes_from_elsewhere(tmp_path: Path) -> None:
    for name in ("samebits", "samebits_app", "verify"):
        (tmp_path / "here" / name).mkdir(parents=True)
        (tmp_path / "here" / name / "__init__.py").write_text("")
    assert bench.imports_from(tmp_path / "here") == ""
    (tmp_path / "empty").mkdir()
    assert bench.imports_from(tmp_path / "empty") != ""  # this checkout's, or none at all


def test_share_archives_links_each_archive_once(tmp_path: Path) -> None:
    a = tmp_path / "cache" / "archives" / ("1" * 64) / "x-1.0-py3-none-any.whl"
    a.parent.mkdir(parents=True)
    a.write_bytes(b"wheel")
    other = tmp_path / "other"
    assert bench.share_archives(tmp_path / "cache", other) == 1
    b = other / "archives" / ("1" * 64) / "x-1.0-py3-none-any.whl"
    assert os.path.samefile(a, b)
    assert bench.share_archives(tmp_path / "cache", other) == 0


def test_timed_counts_the_cpu_and_page_faults_of_the_command_and_its_children() -> None:
    """``timed`` reads what ``os.wait4`` says of the command, its waited-for children
    included: a command that runs a second interpreter, which touches 32 MiB of fresh
    memory, has the faults of both (at least that interpreter's start, whatever huge pages
    make of the 32 MiB)."""
    touch = ("import mmap; m = mmap.mmap(-1, 32 << 20)\n"
             "for at in range(0, 32 << 20, mmap.PAGESIZE): m[at] = 1")
    inner = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {touch!r}])"
    _, alone, _ = bench.timed([sys.executable, "-c", "pass"])
    seconds, both, _ = bench.timed([sys.executable, "-c", inner])
    assert seconds > 0 and both.cpu > alone.cpu > 0
    assert both.faults > 1.5 * alone.faults > 0
    assert (alone + both) == bench.Used(alone.cpu + both.cpu, alone.faults + both.faults)


def test_fault_cost_is_a_time_per_page() -> None:
    cost = bench.fault_cost(mib=4)
    assert 0 < cost < 1000  # microseconds; a few here, well under one on bare metal

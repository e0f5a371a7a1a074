"""Reading a paper command's outputs without following a link: a declared output is a plain
file inside the scratch copy, or it is refused, named.

A paper folder is the authors' (and so, to a reviewer, anyone's): a declared output that is a
symbolic link, or lies under a folder that is one, would let a file outside the scratch copy
(a stale result, /etc/passwd, /dev/zero) pass for what the command wrote. So:

    check_outputs(work, manifest)   before any command runs: no declared output, nor any
                                    folder on its path, is a link in the scratch copy
                                    (``UnsafeOutput``, a ``SamebitsError``: attest refuses,
                                    the audit's paper step fails, naming it)
    read_output(work, rel)          after the command: the bytes of WORK/REL, opened one
                                    component at a time relative to the folder above it with
                                    O_NOFOLLOW, so no link is followed, whoever made it and
                                    whenever; a FIFO or a device is refused unread; None when
                                    there is no such file
    plain_output(work, rel)         the same walk, for a path another process will read (the
                                    tensors worker): the path when it is a plain file

Each refusal says where the link points and whether that is outside the scratch copy.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from samebits.errors import SamebitsError


class UnsafeOutput(SamebitsError):
    """A declared output that is a link (or under one), or not a regular file."""

    kind = "paper"


def _parts(rel: str) -> list[str]:
    return [p for p in PurePosixPath(rel).parts if p not in ("", ".")]


def _link_text(work: Path, at: Path) -> str:
    try:
        target = os.readlink(at)
    except OSError:
        return "a symbolic link"
    resolved = (at.parent / target).resolve()
    inside = resolved == work.resolve() or work.resolve() in resolved.parents
    return (f"a symbolic link to {target}" + ("" if inside else
            ", outside the paper's scratch copy"))


def _refusal(work: Path, rel: str, upto: list[str]) -> UnsafeOutput:
    rel, where = "/".join(_parts(rel)) or ".", "/".join(upto)
    what = _link_text(work, work.joinpath(*upto))
    head = (f"{rel}: is {what}" if where == "/".join(_parts(rel)) else
            f"{rel}: the folder {where} on its path is {what}")
    return UnsafeOutput(f"{head}: samebits reads a command's outputs only as plain files "
                        "inside the scratch copy, never through a link",
                        hint="remove the link from the paper folder (declared outputs are "
                        "written by the commands, not shipped)")


@contextmanager
def _opened(work: Path, rel: str) -> Iterator[int | None]:
    """A read-only fd of WORK/REL reached without following any link; None when a part of
    the path does not exist."""
    parts = _parts(rel)
    fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (
                os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                nxt = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                yield None
                return
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                        work.joinpath(*parts[:i + 1])):
                    raise _refusal(work, rel, parts[:i + 1]) from None
                if exc.errno == errno.ENOTDIR:  # a plain file where a folder should be
                    yield None
                    return
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def read_output(work: Path, rel: str) -> bytes | None:
    """The bytes of the plain file WORK/REL, or None when it is missing."""
    with _opened(work, rel) as fd:
        rel = "/".join(_parts(rel))
        if fd is None:
            return None
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UnsafeOutput(f"{rel}: is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeOutput(f"{rel}: not a regular file (a device, FIFO or socket): "
                               "samebits does not read it")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)


def plain_output(work: Path, rel: str) -> Path | None:
    """WORK/REL when it is a plain file reached without a link; None when missing."""
    with _opened(work, rel) as fd:
        if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
    return work.joinpath(*_parts(rel))


def check_outputs(work: Path, rels: list[str]) -> None:
    """Every link among the declared outputs' paths in the scratch copy, refused (the first
    is raised, every one named)."""
    problems = []
    for rel in rels:
        parts = _parts(rel)
        for i in range(len(parts)):
            if os.path.islink(work.joinpath(*parts[:i + 1])):
                problems.append(_refusal(work, rel, parts[:i + 1]))
                break
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise UnsafeOutput(f"{len(problems)} declared outputs are links: "
                           + "; ".join(p.message.split(": samebits reads")[0]
                                       for p in problems)
                           + ": samebits reads a command's outputs only as plain files inside "
                           "the scratch copy, never through a link", hint=problems[0].hint)

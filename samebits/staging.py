"""Folders that appear whole or not at all: build next to the target, then rename into place."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from samebits.errors import UsageError


@contextlib.contextmanager
def staged_dir(target: Path, *, replace: bool) -> Iterator[Path]:
    """Yield an empty folder beside ``target``; on success it becomes ``target``.

    On any exception the staging folder is removed and ``target`` is as it was. With
    ``replace``, an existing ``target`` is moved aside, the new one renamed in, the old removed;
    without it, an existing non-empty ``target`` is refused before anything is written.
    """
    target = Path(target)
    if target.exists() and not replace and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target}: already exists", hint="pass --replace to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial",
                                  dir=target.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(stage, 0o777 & ~mask)  # mkdtemp makes 0700; the result is an ordinary folder
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    old = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
        os.replace(target, old / "x")
    os.replace(stage, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

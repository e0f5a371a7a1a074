"""Load any lockfile samebits reads: what every command that takes a lockfile calls.

    load_lock(path, options) -> LoadedLock(path, format, lock, conversion)

A conda-lock file is read by ``samebits.lock.model.parse_lock`` (conda-lock's own parser) and
needs no conversion; pixi.lock, uv.lock, pylock.toml, a hashed requirements.txt and a conda
explicit file are converted on read by ``samebits.foreign`` and carry a ``Conversion``: the
choices made (environment, Python, glibc floor) and every package that could not be carried
over. Commands show it (``conversion_lines``) and put it in their ``--json`` output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits._io import sha256_hex
from samebits.errors import LockfileError
from samebits.foreign import read_foreign, sniff
from samebits.foreign.model import Conversion, ReadOptions
from samebits.lock.model import Lock, parse_lock, read_lock_text
from samebits.lock.validate import locked_problems

__all__ = ["LoadedLock", "ReadOptions", "load_lock", "read_lock"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedLock:
    path: Path
    format: str
    lock: Lock
    conversion: Conversion | None = None

    def conversion_lines(self) -> list[str]:
        return self.conversion.lines() if self.conversion else []

    def conversion_json(self) -> dict[str, Any] | None:
        return self.conversion.to_json() if self.conversion else None


def lock_format(path: Path) -> str:
    """The format of the lockfile at ``path`` (``samebits.foreign.FORMATS``), without reading
    it further."""
    return sniff(Path(path), read_lock_text(Path(path)))


def load_lock(path: Path, options: ReadOptions | None = None) -> LoadedLock:
    """``path`` in any format samebits reads, as a ``Lock`` (converted when foreign)."""
    path = Path(path)
    text = read_lock_text(path)
    fmt = sniff(path, text)
    if fmt == "conda-lock":
        return LoadedLock(path=path, format=fmt, lock=parse_lock(path))
    got = read_foreign(path, text, fmt=fmt, options=options or ReadOptions())
    problems = locked_problems(got.lock.packages, str(path), required=False)
    if problems:  # before anything is downloaded, installed or rendered
        raise LockfileError(problems, hint=f"fix the {got.conversion.format} file's hashes or "
                            "re-create it with the tool that wrote it")
    # the input a converted lock was made from is the file: its sha256 is what renderings
    # name as conda-lock's per-platform input hash
    digest = sha256_hex(text.encode())
    lock = replace(got.lock, content_hash={p: digest for p in got.lock.platforms})
    return LoadedLock(path=path, format=got.conversion.format, lock=lock,
                      conversion=got.conversion)


def read_lock(path: Path, options: ReadOptions | None = None) -> Lock:
    return load_lock(path, options).lock


# ------------------------------------------------------------------ names

NAME_SUFFIXES = (".conda-lock.yml", ".pixi.lock", ".lock", ".toml", ".txt", ".yml", ".yaml")
GENERIC_NAMES = ("", "pixi", "uv", "pylock", "requirements", "conda-lock")


def lock_name(loaded: LoadedLock) -> str:
    """An environment name for a lockfile given by path: its file name without the format's
    suffix (``esmvalcore.pixi.lock`` -> ``esmvalcore``; a bare ``pixi.lock`` or ``uv.lock``
    takes its folder's name), plus the pixi environment when it is not ``default``."""
    path = loaded.path
    name = path.name
    for suffix in NAME_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name in GENERIC_NAMES or name.startswith("pylock."):
        name = name[len("pylock."):] if name.startswith("pylock.") else ""
        name = name or path.absolute().parent.name or "lock"
    env = loaded.lock.meta("lock-environment")
    return f"{name}-{env}" if env and env != "default" else name

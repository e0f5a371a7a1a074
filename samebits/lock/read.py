"""Load any lockfile samebits reads: what every command that takes a lockfile calls.

    load_lock(path, options, name=, root=) -> LockedEnv(name, path, origin, digest, format,
                                                        lock, conversion)

``LockedEnv`` is the one loaded lock of the core: the parsed ``Lock`` (``samebits.lock.model``)
with the file it came from, its name, its digest and how it was read.

A conda-lock file is read by ``samebits.lock.model.parse_lock`` (conda-lock's own parser) and
needs no conversion; pixi.lock, uv.lock, pylock.toml, a hashed requirements.txt and a conda
explicit file are converted on read by ``samebits.foreign`` and carry a ``Conversion``: the
choices made (environment, Python, glibc floor) and every package that could not be carried
over. Commands show it (``conversion_lines``) and put it in their ``--json`` output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits._io import sha256_hex
from samebits.errors import LockfileError, UsageError
from samebits.foreign import read_foreign, sniff
from samebits.foreign.model import Conversion, ReadOptions
from samebits.lock.model import Lock, LockedPackage, lock_digest, parse_lock, read_lock_text
from samebits.lock.validate import locked_problems

__all__ = ["LockedEnv", "ReadOptions", "load_lock", "read_lock"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedEnv:
    """One lockfile, loaded: ``name`` (environment id), ``origin`` (its path as rendered files
    name it, relative to the project root when it is inside it), ``digest`` (sha256 of its
    bytes), ``format`` (``samebits.foreign.FORMATS``) and ``conversion`` (how a lock of
    another format, pixi.lock, uv.lock, ..., was read)."""

    name: str
    path: Path
    origin: str
    digest: str
    lock: Lock
    format: str = "conda-lock"
    conversion: Conversion | None = None

    @property
    def platforms(self) -> tuple[str, ...]:
        return self.lock.platforms

    @property
    def python(self) -> str | None:
        """The Python line the lock was solved for ("3.12"), from ``samebits.python``."""
        value = self.lock.meta("python")
        return ".".join(value.split(".")[:2]) if value else None

    @property
    def cuda(self) -> str | None:
        return self.lock.meta("__cuda") or None

    @property
    def slug(self) -> str:
        """The name as a file name / image tag: ``conda-forge/hopper`` -> ``conda-forge-hopper``."""
        return self.name.replace("/", "-")

    def check_platform(self, platform: str) -> str:
        if platform not in self.platforms:
            raise UsageError(f"{self.origin}: no platform '{platform}' in this lock "
                             f"(it has {', '.join(self.platforms)})")
        return platform

    def conda(self, platform: str) -> list[LockedPackage]:
        return [p for p in self.lock.packages_for(platform, "conda")
                if not p.name.startswith("__")]

    def pip(self, platform: str) -> list[LockedPackage]:
        return self.lock.packages_for(platform, "pip")

    def conversion_lines(self) -> list[str]:
        return self.conversion.lines() if self.conversion else []

    def conversion_json(self) -> dict[str, Any] | None:
        return self.conversion.to_json() if self.conversion else None


def lock_format(path: Path) -> str:
    """The format of the lockfile at ``path`` (``samebits.foreign.FORMATS``), without reading
    it further."""
    return sniff(Path(path), read_lock_text(Path(path)))


def load_lock(path: Path, options: ReadOptions | None = None, *, name: str | None = None,
              root: Path | None = None) -> LockedEnv:
    """``path`` in any format samebits reads (converted when foreign). ``name``: the
    environment id (default ``lock_name``'s); ``origin`` is relative to ``root`` when the file
    lies under it, else the file's name."""
    path = Path(path)
    text = read_lock_text(path)
    fmt = sniff(path, text)
    origin = path.name
    if root is not None:  # as given first: a lockfiles/ that is a link still lies under root
        for a, b in ((Path(os.path.abspath(path)), Path(os.path.abspath(root))),
                     (path.resolve(), Path(root).resolve())):
            if a.is_relative_to(b):
                origin = a.relative_to(b).as_posix()
                break
    if fmt == "conda-lock":
        lock = parse_lock(path)
        return LockedEnv(name=name or _name_of(path, lock), path=path, origin=origin,
                         digest=lock_digest(path), format=fmt, lock=lock)
    got = read_foreign(path, text, fmt=fmt, options=options or ReadOptions())
    problems = locked_problems(got.lock.packages, str(path), required=False)
    if problems:  # before anything is downloaded, installed or rendered
        raise LockfileError(problems, hint=f"fix the {got.conversion.format} file's URLs and "
                            "hashes or re-create it with the tool that wrote it")
    # the input a converted lock was made from is the file: its sha256 is what renderings
    # name as conda-lock's per-platform input hash
    digest = sha256_hex(text.encode())
    lock = replace(got.lock, content_hash={p: digest for p in got.lock.platforms})
    return LockedEnv(name=name or _name_of(path, lock), path=path, origin=origin,
                     digest=lock_digest(path), format=got.conversion.format, lock=lock,
                     conversion=got.conversion)


def read_lock(path: Path, options: ReadOptions | None = None) -> Lock:
    return load_lock(path, options).lock


# ------------------------------------------------------------------ names

NAME_SUFFIXES = (".conda-lock.yml", ".pixi.lock", ".lock", ".toml", ".txt", ".yml", ".yaml")
GENERIC_NAMES = ("", "pixi", "uv", "pylock", "requirements", "conda-lock")


def lock_name(loaded: LockedEnv) -> str:
    """An environment name for a lockfile given by path: its file name without the format's
    suffix (``esmvalcore.pixi.lock`` -> ``esmvalcore``; a bare ``pixi.lock`` or ``uv.lock``
    takes its folder's name), plus the pixi environment when it is not ``default``."""
    return _name_of(loaded.path, loaded.lock)


def _name_of(path: Path, lock: Lock) -> str:
    name = path.name
    for suffix in NAME_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name in GENERIC_NAMES or name.startswith("pylock."):
        name = name[len("pylock."):] if name.startswith("pylock.") else ""
        name = name or path.absolute().parent.name or "lock"
    env = lock.meta("lock-environment")
    return f"{name}-{env}" if env and env != "default" else name

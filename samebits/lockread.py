"""Load any lockfile samebits reads: what every command that takes a lockfile calls.

    load_lock(path, options) -> LoadedLock(path, format, lock, conversion)

A conda-lock file is read by ``samebits.lockfile.parse_lock`` (conda-lock's own parser) and
needs no conversion; pixi.lock, uv.lock, pylock.toml, a hashed requirements.txt and a conda
explicit file are converted on read by ``samebits.foreign`` and carry a ``Conversion``: the
choices made (environment, Python, glibc floor) and every package that could not be carried
over. Commands show it (``conversion_lines``) and put it in their ``--json`` output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.errors import LockfileError
from samebits.foreign import read_foreign, sniff
from samebits.foreign.model import Conversion, ReadOptions
from samebits.lockfile import Lock, parse_lock

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


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockfileError(f"{path}: no such lockfile",
                            hint="run `samebits lock` to create it") from None
    except IsADirectoryError:
        raise LockfileError(f"{path}: is a folder, not a lockfile") from None
    except OSError as exc:
        raise LockfileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def load_lock(path: Path, options: ReadOptions | None = None) -> LoadedLock:
    """``path`` in any format samebits reads, as a ``Lock`` (converted when foreign)."""
    path = Path(path)
    text = _read_text(path)
    fmt = sniff(path, text)
    if fmt == "conda-lock":
        return LoadedLock(path=path, format=fmt, lock=parse_lock(path))
    got = read_foreign(path, text, fmt=fmt, options=options or ReadOptions())
    return LoadedLock(path=path, format=got.conversion.format, lock=got.lock,
                      conversion=got.conversion)


def read_lock(path: Path, options: ReadOptions | None = None) -> Lock:
    return load_lock(path, options).lock

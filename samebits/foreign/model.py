"""What a conversion from another lock format reads with, and what it reports.

``ReadOptions`` are the choices a foreign lock leaves open (which pixi environment, which
platforms, which Python and glibc floor the wheels are chosen for); ``Conversion`` records the
choices made and every package that could not be carried into samebits' ``Lock`` (``Dropped``:
a local source, an editable install, a VCS checkout, an sdist that would have to be built, a
platform the lock has no wheel for). Every consumer shows it: nothing is left out silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from samebits.errors import LockfileError, Problem
from samebits.lock.model import Lock
from samebits.lock.validate import url_problem

# samebits installs and verifies Linux environments; these are the platforms a universal
# Python lock (uv.lock, pylock.toml, requirements.txt) is converted for when none is named.
DEFAULT_PLATFORMS = ("linux-64", "linux-aarch64")
# The manylinux floor wheels are chosen for when a lock does not say (the floor of the
# committed specs in environments/base.toml); recorded in every conversion.
DEFAULT_GLIBC = "2.28"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadOptions:
    """The choices a foreign lock leaves open; None means "the format's or samebits' default".

    environment  a pixi.lock environment (default ``default``)
    platforms    the platforms to convert for (default: every platform of a pixi.lock or
                 explicit file; DEFAULT_PLATFORMS for the Python-only formats)
    python       ``X.Y`` or ``X.Y.Z``: the Python the wheels are chosen for (uv.lock,
                 pylock.toml, requirements.txt; default: the running interpreter's)
    glibc        the manylinux floor wheels are chosen for (default DEFAULT_GLIBC)
    """

    environment: str | None = None
    platforms: tuple[str, ...] = ()
    python: str | None = None
    glibc: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Dropped:
    """One locked package that could not become a locked, hashed artifact."""

    platform: str
    name: str
    version: str | None
    source: str  # where the foreign lock says it comes from (a URL, a path, "git ...")
    reason: str

    def __str__(self) -> str:
        version = f" {self.version}" if self.version else ""
        return f"{self.platform}: {self.name}{version} ({_quote(self.source)}): {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "name": self.name, "version": self.version,
                "source": self.source, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversion:
    """How a foreign lock became a ``Lock``: its format, the choices, what was left out."""

    format: str  # "pixi.lock v7", "uv.lock", "pylock.toml", "requirements.txt", "conda explicit"
    source: str  # the file, as given
    choices: tuple[tuple[str, str], ...] = ()
    dropped: tuple[Dropped, ...] = ()
    notes: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """Human lines: what was read, with which choices, and every package left out."""
        chosen = ", ".join(f"{k} {v}" for k, v in self.choices)
        out = [f"{self.source}: read as {self.format}" + (f" ({chosen})" if chosen else "")]
        out += [f"  note: {n}" for n in self.notes]
        if self.dropped:
            out.append(f"  {len(self.dropped)} package(s) could not be carried over:")
            out += [f"    {d}" for d in self.dropped]
        return out

    def one_line_notes(self) -> list[str]:
        """The same, one self-contained line each (for a report's notes)."""
        chosen = ", ".join(f"{k} {v}" for k, v in self.choices)
        out = [f"lockfile read as {self.format}" + (f" ({chosen})" if chosen else "")]
        out += [f"{self.format}: {n}" for n in self.notes]
        out += [f"not carried over from the {self.format}: {d}" for d in self.dropped]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "source": self.source, "choices": dict(self.choices),
                "dropped": [d.to_json() for d in self.dropped], "notes": list(self.notes)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Converted:
    lock: Lock
    conversion: Conversion


def _quote(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def declared_size(value: object) -> int | None:
    """A lock's ``size`` of an archive: a whole number of bytes > 0, else None (the fetch is
    then bounded by the cap alone)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def refuse_bad_urls(source: str, urls: Iterable[tuple[str, object]], *, fmt: str) -> None:
    """A LockfileError naming every (key, URL) whose file name is not a plain one once
    percent-decoded (``samebits.lock.validate.url_problem``), read before any artifact is
    chosen: the rule every reader applies, whether or not this platform would take the file."""
    problems = [Problem(file=source, key=key, value=url, message=why) for key, url in urls
                if isinstance(url, str) and (why := url_problem(url)) is not None]
    if problems:
        raise LockfileError(problems, hint=f"fix the {fmt} file's URLs or re-create it with "
                            "the tool that wrote it")

"""Where a locked archive may come from besides its URL: local folders and mirrors.

A lock names every archive by URL *and* hash, and the hash is what is trusted. So a file is
the locked one wherever it lies, once its sha256 is the lock's:

    --find-links DIR    a folder holding archives, looked up by the locked file's name
                        (``DIR/torch-2.13.0+cpu-cp311-...whl``, the name as the URL spells it
                        or %-decoded) or by its hash (``DIR/<sha256>/<name>``: the layout of
                        a samebits cache's ``archives/``); repeatable, searched in order
    --mirror FROM=TO    a URL that starts with FROM is fetched from TO + the rest instead
                        (the longest FROM wins); TO may be a ``file://`` folder

Every file from either is hash-checked as a download is (``samebits.install.fetch.prove``).
A lock's own file:// URLs are read only from folders the user named: these, the cache, the
lock's own folder and a project spec's file:// channels and indexes (``local_roots``).
A local file of the locked name whose hash is another is refused, naming it: it is some other
build of that name, and installing from the network instead would hide that the folder the
user pointed at is not what they think. ``Sources`` is read once at the edge (the command's
flags, the spec's ``[install]`` table, ``SAMEBITS_FIND_LINKS``) and passed in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from samebits.errors import UsageError

FIND_LINKS_ENV = "SAMEBITS_FIND_LINKS"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sources:
    find_links: tuple[Path, ...] = ()
    mirrors: tuple[tuple[str, str], ...] = ()   # (FROM, TO) URL prefixes
    # more folders a lock's file:// URLs may be read from: the lock's own folder, a project
    # spec's file:// channels and indexes (``file_roots``); never searched by name
    file_roots: tuple[Path, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.find_links or self.mirrors)

    @property
    def local_roots(self) -> tuple[Path, ...]:
        """Every folder the user named that a file:// URL may be read from: --find-links,
        the file:// targets of --mirror, ``file_roots`` (``fetch.fetch_url``)."""
        mirrored = file_roots(to for _, to in self.mirrors)
        return tuple(dict.fromkeys((*self.find_links, *mirrored, *self.file_roots)))

    def with_roots(self, *folders: Path) -> Sources:
        return Sources(find_links=self.find_links, mirrors=self.mirrors,
                       file_roots=tuple(dict.fromkeys((*self.file_roots, *folders))))

    def rewrite(self, url: str) -> str:
        """``url`` with the longest matching mirror prefix replaced."""
        for prefix, to in sorted(self.mirrors, key=lambda m: -len(m[0])):
            if url.startswith(prefix):
                return to + url[len(prefix):]
        return url

    def candidates(self, filename: str, sha256: str | None) -> list[Path]:
        """Existing files in the find-links folders that may be the archive, in search
        order: by name (as written and %-decoded), then by hash."""
        names = list(dict.fromkeys((filename, unquote(filename), quote(unquote(filename)))))
        out: list[Path] = []
        for folder in self.find_links:
            for name in names:
                out.append(folder / name)
                if sha256:
                    out.append(folder / sha256.lower() / name)
        return [p for p in dict.fromkeys(out) if p.is_file()]

    def merged(self, other: Sources) -> Sources:
        """These first, then ``other``'s (a flag before the spec's before the user's)."""
        return Sources(find_links=tuple(dict.fromkeys((*self.find_links, *other.find_links))),
                       mirrors=(*self.mirrors, *[m for m in other.mirrors
                                                 if m[0] not in dict(self.mirrors)]),
                       file_roots=tuple(dict.fromkeys((*self.file_roots,
                                                       *other.file_roots))))

    def describe(self) -> list[str]:
        return ([f"--find-links {p}" for p in self.find_links]
                + [f"--mirror {a}={b}" for a, b in self.mirrors])


NO_SOURCES = Sources()


def file_roots(urls: Iterable[str]) -> tuple[Path, ...]:
    """The local folders of the file:// URLs among ``urls`` (channels, indexes, mirrors)."""
    out = []
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme == "file" and unquote(parts.path).strip("/"):
            out.append(Path(unquote(parts.path)))
    return tuple(dict.fromkeys(out))


def parse_mirror(text: str, *, where: str = "--mirror") -> tuple[str, str]:
    """``FROM=TO`` -> (FROM, TO); both must be URLs (http, https or file)."""
    source, sep, target = text.partition("=")
    if not sep or not source or not target:
        raise UsageError(f'{where} "{text}": expected FROM=TO, e.g. '
                         "https://download.pytorch.org/whl/=https://mirror.example/whl/")
    for url in (source, target):
        if urlsplit(url).scheme not in ("http", "https", "file"):
            raise UsageError(f'{where} "{text}": "{url}" is not an http(s):// or file:// URL')
    return source, target


def sources_from(find_links: Iterable[str | Path] = (), mirrors: Iterable[str] = (), *,
                 base: Path | None = None, where: str = "") -> Sources:
    """Sources from flag-like values; relative folders are relative to ``base``. A folder
    that does not exist is a usage error naming it (a typo would otherwise install from the
    network silently)."""
    folders = []
    for value in find_links:
        folder = Path(value).expanduser()
        if base is not None and not folder.is_absolute():
            folder = base / folder
        if not folder.is_dir():
            raise UsageError(f'{where or "--find-links"} "{value}": no such folder')
        folders.append(folder.absolute())
    pairs = [parse_mirror(m, where=where or "--mirror") for m in mirrors]
    return Sources(find_links=tuple(dict.fromkeys(folders)), mirrors=tuple(pairs))


def user_sources(environ: Mapping[str, str] | None = None) -> Sources:
    """``SAMEBITS_FIND_LINKS`` (folders separated by ``os.pathsep``), the user's own."""
    value = (os.environ if environ is None else environ).get(FIND_LINKS_ENV, "")
    parts: Sequence[str] = [p for p in value.split(os.pathsep) if p]
    return sources_from(parts, where=FIND_LINKS_ENV)

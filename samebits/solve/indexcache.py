"""A package index as it stood at an instant in the past: the answers, cached and final.

With ``exclude-newer`` at least ``FINAL_AFTER`` in the past, what an index says about a project,
cut at that instant (every file uploaded later removed), no longer changes: a later fetch gives
the same files, except files yanked or deleted since. So the first answer is kept and treated
as final; ``samebits lock --refresh`` fetches every answer again (the way to see later yanks).

On disk, under the cache root (``$XDG_CACHE_HOME/samebits`` by default)::

    pypi-v1/<index key>/index.txt                   the index URL (credentials removed)
    pypi-v1/<index key>/<instant>/<project>.json    the project's page as it stood at <instant>
    pypi-v1/<index key>/<instant>/solves/<key>.json one uv resolution: its inputs' digest (the
                                                    key), the pages it read, what uv wrote
    pypi-v1/<index key>/metadata/<sha256>.metadata  a wheel's core metadata, by the wheel's sha256

``<index key>`` is the sha256 of the index URL, ``<instant>`` the exclude-newer instant
(``20261129T000000Z``): another index or another instant never reads these pages. A page is the
index's PEP 691 JSON (with PEP 700 upload times) with the later files removed and every file URL
made absolute; an index that does not answer in that format is not cached (see
``samebits.solve.indexproxy``). Wheel metadata is immutable (the wheel's bytes fix it), is
checked against the page's ``core-metadata`` hash, and is shared by every instant. A recorded
solve is used only while every page it read still has the digest it had (``--refresh`` can
change a page); uv given the same inputs and the same pages gives the same answer.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from samebits import net
from samebits._io import atomic_write, compact_json
from samebits.host import cache_dir

FINAL_AFTER = dt.timedelta(days=1)  # how far in the past an instant must be to count as final
PAGE_MEDIA = "application/vnd.pypi.simple.v1+json"
CACHE_FORMAT = "pypi-v1"
_PROJECT = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")


class BadPage(ValueError):
    """An index answer that is not a PEP 691 project page."""


default_cache_root = cache_dir  # samebits.host's: the one cache folder


def is_final(exclude_newer: dt.datetime | None, now: dt.datetime) -> bool:
    """Whether an index's view at ``exclude_newer`` can no longer change (but for yanks)."""
    return exclude_newer is not None and exclude_newer + FINAL_AFTER <= now


def public_url(url: str) -> str:
    """``url`` without user:password (``samebits.net.public_url``)."""
    return net.public_url(url)


def instant_text(when: dt.datetime) -> str:
    return when.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _upload_time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def cut_page(doc: Any, *, page_url: str, exclude_newer: dt.datetime) -> dict[str, Any]:
    """An index's PEP 691 page -> the page as it stood at ``exclude_newer`` (pure).

    Files uploaded after ``exclude_newer`` are removed (a file without an upload time is kept;
    uv, given the same exclude-newer, decides about it as it would online); file URLs are made
    absolute against ``page_url``. Everything else is kept as the index wrote it.
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("files"), list):
        raise BadPage("not a PEP 691 project page (no 'files' list)")
    version = str((doc.get("meta") or {}).get("api-version", ""))
    if not version.startswith("1."):
        raise BadPage(f"api-version {version or '(none)'!r}; samebits reads 1.x")
    files = []
    for f in doc["files"]:
        if not isinstance(f, Mapping) or not isinstance(f.get("url"), str):
            raise BadPage("a file without a url")
        when = _upload_time(f.get("upload-time"))
        if when is not None and when > exclude_newer:
            continue
        files.append({**f, "url": urljoin(page_url, f["url"])})
    return {**doc, "files": files}


def metadata_hash(file: Mapping[str, Any]) -> str | None:
    """The sha256 a file's PEP 658 metadata must have, when the page gives one."""
    for key in ("core-metadata", "data-dist-info-metadata", "dist-info-metadata"):
        value = file.get(key)
        if isinstance(value, Mapping) and isinstance(value.get("sha256"), str):
            return str(value["sha256"])
    return None


def has_metadata(file: Mapping[str, Any]) -> bool:
    return any(file.get(k) for k in ("core-metadata", "data-dist-info-metadata",
                                     "dist-info-metadata"))


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexView:
    """Where one index's answers as they stood at one instant are kept."""

    index: str
    exclude_newer: dt.datetime
    root: Path

    @property
    def key(self) -> str:
        return hashlib.sha256(self.index.rstrip("/").encode()).hexdigest()[:32]

    @property
    def folder(self) -> Path:
        return self.root / CACHE_FORMAT / self.key

    def page_path(self, project: str) -> Path:
        if not _PROJECT.match(project):
            raise ValueError(f"not a normalised project name: {project!r}")
        return self.folder / instant_text(self.exclude_newer) / f"{project}.json"

    def metadata_path(self, wheel_sha256: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", wheel_sha256):
            raise ValueError(f"not a sha256: {wheel_sha256!r}")
        return self.folder / "metadata" / f"{wheel_sha256}.metadata"

    def solve_path(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise ValueError(f"not a sha256: {key!r}")
        return self.folder / instant_text(self.exclude_newer) / "solves" / f"{key}.json"

    def read_page(self, project: str) -> tuple[dict[str, Any], str] | None:
        """(the cached page, the sha256 of its cache file), or None when nothing readable is
        cached. A project the index did not know reads as ``{"absent": true}``."""
        try:
            data = self.page_path(project).read_bytes()
            doc = json.loads(data)
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
            return None
        page = doc.get("page", {"absent": True})
        if not isinstance(page, dict):  # not what write_page writes: as if nothing were cached
            return None
        return page, hashlib.sha256(data).hexdigest()

    def page_digest(self, project: str) -> str | None:
        """The sha256 of the project's cache file (what a recorded solve read), or None."""
        try:
            return hashlib.sha256(self.page_path(project).read_bytes()).hexdigest()
        except OSError:
            return None

    def write_page(self, project: str, page: Mapping[str, Any] | None) -> str:
        """Keep ``page`` (None: the index had no such project) as the final answer; the sha256
        of what was written."""
        doc: dict[str, Any] = {"format": CACHE_FORMAT, "index": public_url(self.index),
                               "exclude-newer": instant_text(self.exclude_newer),
                               "project": project}
        if page is not None:
            doc["page"] = page
        label = self.folder / "index.txt"
        if not label.exists():
            atomic_write(label, public_url(self.index) + "\n")
        data = compact_json(doc)
        atomic_write(self.page_path(project), data)
        return hashlib.sha256(data).hexdigest()

    def read_solve(self, key: str) -> dict[str, Any] | None:
        """A recorded solve, if one is cached and every page it read is still the one cached."""
        try:
            doc = json.loads(self.solve_path(key).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
            return None
        pages = doc.get("pages")
        if not isinstance(pages, dict) or not all(isinstance(v, str) for v in pages.values()):
            return None
        return doc

    def write_solve(self, key: str, doc: Mapping[str, Any]) -> None:
        atomic_write(self.solve_path(key), compact_json({**doc, "format": CACHE_FORMAT}))

    def read_metadata(self, wheel_sha256: str, expected: str | None) -> bytes | None:
        try:
            data = self.metadata_path(wheel_sha256).read_bytes()
        except OSError:
            return None
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            return None  # damaged: fetched again and rewritten
        return data

    def write_metadata(self, wheel_sha256: str, data: bytes) -> None:
        atomic_write(self.metadata_path(wheel_sha256), data)

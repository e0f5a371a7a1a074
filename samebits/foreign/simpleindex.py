"""The files a package index offers for a project: the simple repository API, or a folder.

``project_files(index, name)`` asks ``{index}/{normalized name}/`` for PEP 691 JSON (and reads
PEP 503 HTML when that is what comes back), resolving each file's URL against the page and
keeping its ``sha256`` (the JSON ``hashes`` or the URL's ``#sha256=`` fragment). A ``file://``
index, or a plain path, that is a folder of archives (pip's ``--find-links``) is listed
instead, each file hashed from disk. The one place freeze and the requirements reader touch an
index; ``UnreachableError`` when it does not answer.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import canonicalize_name

from samebits import net
from samebits._io import sha256_file
from samebits.errors import InputError, UnreachableError

TIMEOUT = net.TIMEOUT
ACCEPT = ("application/vnd.pypi.simple.v1+json, "
          "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1")
PYPI = "https://pypi.org/simple"


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexFile:
    filename: str
    url: str
    sha256: str | None
    upload_time: str | None = None      # PEP 700 ``upload-time`` (JSON; HTML data-upload-time)
    requires_python: str | None = None  # PEP 503 data-requires-python / JSON requires-python
    yanked: bool = False                # PEP 592: a resolver takes it only when pinned by ==


def is_folder(index: str) -> bool:
    """A find-links folder (a path, or a file:// URL of a folder without a simple index)."""
    folder = _folder(index)
    return folder is not None and folder.is_dir() and not (folder / "index.html").exists() \
        and not any(folder.glob("*/index.html"))


def _folder(index: str) -> Path | None:
    parts = urlsplit(index)
    if parts.scheme == "file":
        return Path(unquote(parts.path))
    if not parts.scheme:
        return Path(index)
    return None


def project_files(index: str, name: str) -> list[IndexFile]:
    """Every file ``index`` offers for project ``name`` (an empty list when it has none)."""
    if is_folder(index):
        return _folder_files(_folder(index), name)  # type: ignore[arg-type]
    base = index.rstrip("/") + "/" + str(canonicalize_name(name)) + "/"
    if urlsplit(base).scheme == "file":
        return _page_files(base, _read_file_page(base))
    try:
        reply = net.get(base, accept=ACCEPT, timeout=TIMEOUT)
    except OSError as exc:
        raise net.reach(base, exc, hint="check the network, or the index URL") from None
    if reply.status == 404:
        return []
    if reply.status != 200:
        raise UnreachableError(f"{net.public_url(base)}: HTTP {reply.status}")
    if "json" in reply.content_type:
        return _json_files(reply.url, reply.body)
    return _page_files(reply.url, reply.body.decode("utf-8", "replace"))


def _read_file_page(base: str) -> str:
    path = Path(unquote(urlsplit(base).path)) / "index.html"
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None


def _json_files(url: str, body: bytes) -> list[IndexFile]:
    try:
        doc = json.loads(body)
        files = doc["files"]
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{url}: not a PEP 691 project page") from None
    out = []
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("filename"), str):
            continue
        hashes = f.get("hashes")
        if not isinstance(hashes, dict):
            hashes = {}
        out.append(IndexFile(filename=f["filename"], url=urljoin(url, str(f.get("url", ""))),
                             sha256=hashes.get("sha256"),
                             upload_time=_text(f.get("upload-time")),
                             requires_python=_text(f.get("requires-python")),
                             yanked=f.get("yanked") not in (None, False)))
    return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.links.append(found)


def _page_files(url: str, html: str) -> list[IndexFile]:
    parser = _Links()
    parser.feed(html)
    out = []
    for link in parser.links:
        full = urljoin(url, link["href"] or "")
        bare, _, frag = full.partition("#")
        sha = frag[7:] if frag.startswith("sha256=") else None
        out.append(IndexFile(filename=unquote(bare.rsplit("/", 1)[-1]), url=bare, sha256=sha,
                             upload_time=_text(link.get("data-upload-time")),
                             requires_python=_text(link.get("data-requires-python")),
                             yanked="data-yanked" in link))
    return out


def _folder_files(folder: Path, name: str) -> list[IndexFile]:
    want = str(canonicalize_name(name))
    out = []
    for entry in sorted(os.listdir(folder)):
        stem = entry.split("-", 1)[0]
        if str(canonicalize_name(stem)) != want or not (folder / entry).is_file():
            continue
        out.append(IndexFile(filename=entry, url=(folder / entry).resolve().as_uri(),
                             sha256=sha256_file(folder / entry)))
    return out


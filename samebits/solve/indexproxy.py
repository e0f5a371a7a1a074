"""A loopback index for uv that answers from the final cache and fetches only what is missing.

uv has no mode that reads its cache first and the network only for what it lacks: online it
revalidates every page it holds, and ``--offline`` silently resolves to older versions when the
metadata of a newer one is not cached. So samebits puts itself between uv and the index: uv is
pointed at ``http://127.0.0.1:PORT/<route>/simple/``, a server in the samebits process, which
answers each project page and each wheel's metadata from ``samebits.solve.indexcache`` and goes
to the real index only for an answer the cache lacks (then keeps it). uv resolves exactly as it
would online, against the same pages cut at the same instant.

    GET /<route>/simple/<run>/<project>/     the page as it stood at exclude-newer, with every
                                             file URL pointing back here and every wheel
                                             offering PEP 658 metadata; <run> names the uv run
                                             that read it (``Route.runs``)
    GET /<route>/files/<scheme>/<host>/<path>.metadata
                                             the wheel's core metadata, cached by the wheel's
                                             sha256: the index's PEP 658 file where it has one,
                                             else read from the wheel by range requests, as uv
                                             itself would (``samebits.solve.wheelmeta``)
    GET|HEAD /<route>/files/<scheme>/<host>/<path>
                                             a redirect to the real file (an sdist uv builds)

``original_urls`` maps the file URLs uv wrote back to the index's. What the server could not do
is recorded per route, not raised: offline misses (``missing``), an index that did not answer
(``problems``), and an index that does not speak PEP 691 JSON or refuses us (``unsupported``:
the caller then resolves against it directly, as without the cache). It answers uv with 503 in
those cases, never 404, so uv fails instead of resolving around the gap. Everything is served
from memory once read: each page and each wheel's metadata is read or fetched once per process.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from samebits import __version__, net
from samebits._io import compact_json
from samebits.net import auth_header
from samebits.solve.indexcache import (
    PAGE_MEDIA,
    BadPage,
    IndexView,
    cut_page,
    has_metadata,
    is_final,
    metadata_hash,
    public_url,
)
from samebits.solve.indexhttp import Handler, Server
from samebits.solve.wheelmeta import BadWheel, wheel_metadata


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelFile:
    """What the page says about one wheel: its sha256 and its PEP 658 metadata, if any."""

    filename: str
    sha256: str | None
    advertised: bool
    metadata_sha256: str | None


@dataclass(slots=True, kw_only=True)
class Route:
    """One (index, instant) pair served under ``/<name>/``; what happened to it so far."""

    name: str
    view: IndexView
    pages: dict[str, bytes | None] = field(default_factory=dict)  # served; None: no project
    digests: dict[str, str] = field(default_factory=dict)  # project -> its cache file's sha256
    files: dict[str, WheelFile] = field(default_factory=dict)  # by the index's URL
    metadata: dict[str, bytes] = field(default_factory=dict)  # served, by the wheel's URL
    runs: dict[str, dict[str, str]] = field(default_factory=dict)  # run -> pages it read
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unsupported: str | None = None
    fetched: int = 0


class IndexProxy:
    """The loopback server; ``with IndexProxy(...) as proxy`` runs it on a thread.

    ``now`` decides which instants are final (``indexcache.is_final``); ``offline`` never goes
    to the network; ``refresh`` fetches every answer again once, ignoring what is cached.
    """

    def __init__(self, *, root: Path, timeout: float, now: dt.datetime,
                 offline: bool = False, refresh: bool = False) -> None:
        self.root = Path(root)
        self.timeout = timeout
        self.now = now
        self.offline = offline
        self.refresh = refresh
        self._routes: dict[str, Route] = {}
        self._guard = threading.Lock()
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> IndexProxy:
        proxy = self

        class OwnHandler(Handler):
            owner = proxy

        self._server = Server(("127.0.0.1", 0), OwnHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="samebits-index-proxy", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    @property
    def base(self) -> str:
        assert self._server is not None, "the proxy is not running"
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"http://{host}:{port}"

    # ------------------------------------------------------------------ routes and runs
    def route(self, index: str, exclude_newer: dt.datetime | None) -> Route | None:
        """The route for ``index`` seen at ``exclude_newer``; None when that view is not final
        (no instant, a recent one, or an index that is not http(s))."""
        if not index.startswith(("http://", "https://")) or not is_final(exclude_newer,
                                                                          self.now):
            return None
        assert exclude_newer is not None
        view = IndexView(index=index, exclude_newer=exclude_newer, root=self.root)
        with self._guard:
            for r in self._routes.values():
                if r.view == view:
                    return None if r.unsupported else r
            r = Route(name=f"r{len(self._routes)}", view=view)
            self._routes[r.name] = r
            return r

    def start_run(self, route: Route) -> str:
        """A name for one uv run on ``route``: the pages it reads are recorded under it."""
        with self._guard:
            run = f"u{sum(len(r.runs) for r in self._routes.values())}"
            route.runs[run] = {}
            return run

    def index_url(self, route: Route, run: str) -> str:
        return f"{self.base}/{route.name}/simple/{run}/"

    def files_prefix(self, route: Route) -> str:
        return f"{self.base}/{route.name}/files/"

    def original_urls(self, route: Route, text: str) -> str:
        """``text`` (what uv wrote) with every file URL pointing here put back as the index's."""
        return re.sub(re.escape(self.files_prefix(route)) + r"([a-z][a-z0-9+.-]*)/", r"\1://",
                      text)

    def page_digest(self, route: Route, project: str) -> str | None:
        """The sha256 of the project's cache file, read once per process."""
        with self._lock(route, project):
            if project not in route.digests:
                digest = route.view.page_digest(project)
                if digest is None:
                    return None
                route.digests[project] = digest
            return route.digests[project]

    def _lock(self, route: Route, key: str) -> threading.Lock:
        """The one lock for ``key`` on ``route``: a page or a metadata file is fetched once."""
        with self._guard:
            return self._locks.setdefault((route.name, key), threading.Lock())

    def route_named(self, name: str) -> Route | None:
        with self._guard:
            return self._routes.get(name)

    def routes(self) -> list[Route]:
        with self._guard:
            return list(self._routes.values())

    # ------------------------------------------------------------------ answers
    def page(self, route: Route, project: str, run: str) -> tuple[int, bytes]:
        """(HTTP status, body) for a project page; fills the cache when it must."""
        with self._lock(route, project):
            if project not in route.pages:
                cached = None if self.refresh else route.view.read_page(project)
                if cached is None:
                    if self.offline:
                        route.missing.append(f"the page of {project}")
                        return 503, b"not cached and --offline"
                    cached = self._fetch_page(route, project)
                    if cached is None:
                        return 503, b"the index did not answer"
                page, digest = cached
                route.digests[project] = digest
                route.pages[project] = None if page.get("absent") else self._served(route, page)
            if run in route.runs:
                route.runs[run][project] = route.digests[project]
            body = route.pages[project]
            return (404, b"") if body is None else (200, body)

    def _fetch_page(self, route: Route, project: str) -> tuple[dict[str, Any], str] | None:
        view = route.view
        url = f"{view.index.rstrip('/')}/{project}/"
        try:
            r = net.get(url, accept=PAGE_MEDIA, timeout=self.timeout)
            status, ctype, data, final_url = r.status, r.content_type, r.body, r.url
        except OSError as exc:
            reason = getattr(exc, "reason", exc)
            route.problems.append(f"{public_url(url)}: {reason}")
            return None
        route.fetched += 1
        if status == 404:
            return {"absent": True}, view.write_page(project, None)
        if status in (401, 403):
            route.unsupported = f"{public_url(url)} answered HTTP {status}"
            return None
        if status != 200:
            route.problems.append(f"{public_url(url)}: HTTP {status}")
            return None
        if "vnd.pypi.simple.v1+json" not in ctype:
            route.unsupported = (f"{public_url(view.index)} does not answer in PEP 691 JSON "
                                 f"(Content-Type: {ctype or 'none'})")
            return None
        try:
            page = cut_page(json.loads(data), page_url=final_url,
                            exclude_newer=view.exclude_newer)
        except (ValueError, BadPage) as exc:
            route.unsupported = f"{public_url(url)}: {exc}"
            return None
        return page, view.write_page(project, page)

    def _served(self, route: Route, page: Mapping[str, Any]) -> bytes:
        """The page as uv gets it: file URLs through this server, and every wheel offering
        its metadata (read from the wheel by range requests where the index has no PEP 658
        file, as uv itself would)."""
        prefix = self.files_prefix(route)
        files = []
        for f in page.get("files", []):
            url = f["url"]
            served = {**f, "url": f"{prefix}{urlsplit(url).scheme}/{url.split('://', 1)[1]}"}
            if str(f.get("filename", "")).endswith(".whl"):
                sha = (f.get("hashes") or {}).get("sha256")
                route.files[url] = WheelFile(filename=f["filename"],
                                             sha256=sha if isinstance(sha, str) else None,
                                             advertised=has_metadata(f),
                                             metadata_sha256=metadata_hash(f))
                if not has_metadata(f):
                    served["core-metadata"] = True
            files.append(served)
        return compact_json({**page, "files": files})

    def metadata(self, route: Route, url: str) -> tuple[int, bytes]:
        """(HTTP status, body) for ``url``.metadata, the wheel at ``url`` being the index's."""
        wheel = route.files[url]
        view = route.view
        with self._lock(route, f"metadata:{url}"):
            if url in route.metadata:
                return 200, route.metadata[url]
            if wheel.sha256 and not self.refresh:
                data = view.read_metadata(wheel.sha256, wheel.metadata_sha256)
                if data is not None:
                    route.metadata[url] = data
                    return 200, data
            if self.offline:
                route.missing.append(f"the metadata of {wheel.filename}")
                return 503, b"not cached and --offline"
            try:
                data = self._fetch_metadata(url, wheel)
            except (OSError, BadWheel) as exc:
                route.problems.append(f"{public_url(url)}: {getattr(exc, 'reason', exc)}")
                return 503, b"the metadata could not be read"
            route.fetched += 1
            if wheel.metadata_sha256 is not None:
                got = hashlib.sha256(data).hexdigest()
                if got != wheel.metadata_sha256:
                    route.problems.append(f"{public_url(url)}.metadata: sha256 {got}, the page "
                                          f"says {wheel.metadata_sha256}")
                    return 503, b"metadata hash mismatch"
            if wheel.sha256:
                view.write_metadata(wheel.sha256, data)
            route.metadata[url] = data
            return 200, data

    def _fetch_metadata(self, url: str, wheel: WheelFile) -> bytes:
        headers = {"User-Agent": f"samebits/{__version__}", **auth_header(url)}
        if not wheel.advertised:
            return wheel_metadata(public_url(url), wheel.filename, timeout=self.timeout,
                                  headers=headers)
        r = net.get(url + ".metadata", accept="*/*", timeout=self.timeout)
        status, data = r.status, r.body
        if status != 200:
            raise BadWheel(f"{public_url(url)}.metadata: HTTP {status}")
        return data

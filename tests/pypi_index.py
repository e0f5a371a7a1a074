"""A real HTTP package index on loopback, for the PyPI part: PEP 691 JSON with PEP 700 upload
times (or PEP 503 HTML only), files with Range support, PEP 658 ``.metadata`` on request.

It serves a folder of wheels (tests/fakewheels.py); each wheel's upload time and yank state is
set by the test. Every request is logged, so a test can prove what was (not) asked of it.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import sys
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

JSON_MEDIA = "application/vnd.pypi.simple.v1+json"


@dataclass
class LocalIndex:
    folder: Path
    upload_times: Mapping[str, str]            # wheel filename -> ISO upload time
    mode: str = "json"                         # "json" (PEP 691/700) or "html" (PEP 503 only)
    pep658: bool = False                       # publish <file>.metadata and say so
    yanked: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)
    url: str = ""

    def projects(self) -> dict[str, list[Path]]:
        out: dict[str, list[Path]] = {}
        for whl in sorted(self.folder.glob("*.whl")):
            out.setdefault(parse_wheel_filename(whl.name)[0], []).append(whl)
        return out

    def page(self, project: str) -> tuple[str, bytes] | None:
        wheels = self.projects().get(project)
        if wheels is None:
            return None
        if self.mode == "html":
            links = "".join(f'<a href="../../files/{w.name}#sha256={_sha(w)}">{w.name}</a>\n'
                            for w in wheels)
            return "text/html", f"<html><body>\n{links}</body></html>\n".encode()
        files = []
        for w in wheels:
            f = {"filename": w.name, "url": f"../../files/{w.name}",
                 "hashes": {"sha256": _sha(w)}, "size": w.stat().st_size,
                 "upload-time": self.upload_times[w.name], "yanked": w.name in self.yanked}
            if self.pep658:
                f["core-metadata"] = {"sha256": hashlib.sha256(_metadata(w)).hexdigest()}
            files.append(f)
        doc = {"meta": {"api-version": "1.1"}, "name": project, "files": files,
               "versions": sorted({str(parse_wheel_filename(w.name)[1]) for w in wheels})}
        return JSON_MEDIA, json.dumps(doc).encode()

    def requests_for(self, kind: str) -> list[str]:
        return [p for p in self.log if p.startswith(f"/{kind}/")]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _metadata(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(name)


class _Handler(http.server.BaseHTTPRequestHandler):
    index: LocalIndex
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        idx = self.index
        idx.log.append(self.path)
        m = re.fullmatch(r"/simple/([^/]+)/", self.path)
        if m:
            found = idx.page(canonicalize_name(m[1]))
            if found is None:
                return self._send(404, "text/plain", b"", head=head)
            return self._send(200, found[0], found[1], head=head)
        m = re.fullmatch(r"/files/([^/]+)", self.path)
        if not m:
            return self._send(404, "text/plain", b"", head=head)
        name = m[1]
        if name.endswith(".metadata") and idx.pep658:
            wheel = idx.folder / name.removesuffix(".metadata")
            if wheel.is_file():
                return self._send(200, "application/octet-stream", _metadata(wheel), head=head)
        path = idx.folder / name
        if not path.is_file():
            return self._send(404, "text/plain", b"", head=head)
        data = path.read_bytes()
        rng = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
        if rng and (rng[1] or rng[2]):
            size = len(data)
            start, end = ((size - int(rng[2]), size - 1) if not rng[1]
                          else (int(rng[1]), min(size - 1, int(rng[2] or size - 1))))
            start = max(start, 0)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Content-Type", "application/zip")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            if not head:
                self.wfile.write(data[start:end + 1])
            return None
        self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)
        return None

    def _send(self, status: int, ctype: str, body: bytes, *, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is fine
            super().handle_error(request, client_address)


class Serving:
    """``with Serving(index) as url``: the index on a loopback port until the block ends."""

    def __init__(self, index: LocalIndex) -> None:
        self.index = index

    def __enter__(self) -> str:
        handler = type("Handler", (_Handler,), {"index": self.index})
        self.server = _Server(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.index.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        return self.index.url

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

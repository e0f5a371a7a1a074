"""HTTP for the loopback index: the server uv talks to.

``Handler`` maps uv's requests onto ``IndexProxy`` (samebits.solve.indexproxy); the proxy asks
the real index through ``samebits.net`` (user:password in the index URL becomes basic auth
and never leaves in a URL).
"""

from __future__ import annotations

import http.server
import sys
from typing import TYPE_CHECKING, Any

from samebits.solve.indexcache import PAGE_MEDIA

if TYPE_CHECKING:
    from samebits.solve.indexproxy import IndexProxy


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # uv closed a connection it no longer needed
        super().handle_error(request, client_address)


class Handler(http.server.BaseHTTPRequestHandler):
    owner: IndexProxy  # set on a subclass per server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # header and body leave as written: no 40 ms ACK stalls

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        name, _, rest = self.path.lstrip("/").partition("/")
        route = self.owner.route_named(name)
        if route is None:
            return self._send(404, b"")
        kind, _, rest = rest.partition("/")
        if kind == "simple":
            run, _, project = rest.partition("/")
            project = project.strip("/")
            if not project or "/" in project:
                return self._send(404, b"")
            status, body = self.owner.page(route, project, run)
            return self._send(status, body, ctype=PAGE_MEDIA, head=head)
        if kind == "files":
            scheme, _, tail = rest.partition("/")
            url = f"{scheme}://{tail}"
            if tail.endswith(".metadata") and url[:-len(".metadata")] in route.files:
                status, body = self.owner.metadata(route, url[:-len(".metadata")])
                return self._send(status, body, ctype="application/octet-stream", head=head)
            self.send_response(307)
            self.send_header("Location", url)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return self._send(404, b"")

    def _send(self, status: int, body: bytes, *, ctype: str = "text/plain",
              head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)



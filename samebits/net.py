"""Every HTTP request samebits makes: one timeout rule, one User-Agent, one credentials rule.

    get(url, accept=, timeout=, headers=)   -> Reply(status, content_type, body, url); an HTTP
                                               error is a status, not an exception
    open_url(url, timeout=, headers=)       -> the response, to stream (fetches of archives)
    head(url, timeout=)                     -> the status of a HEAD
    reach(url, exc)                         -> the UnreachableError for an OSError of these

Callers: the install's fetches (``samebits.install.fetch``), the loopback index's upstream
pages and wheel metadata (``samebits.solve.indexproxy``, ``samebits.solve.wheelmeta``), the
simple-API reader of freeze and init (``samebits.foreign.simpleindex``), the conda channel
probe (``samebits.solve.conda``) and init's torch metadata. Each passes its own ``timeout``
(the seconds a socket may wait for a byte), by default ``TIMEOUT``.

Credentials: ``user:password@`` in a URL becomes HTTP basic auth for that URL's host and is
never sent on: a redirect to another host drops the ``Authorization`` header (as pip does),
and no URL with its password reaches a message, a cache key or a record (``public_url``).
Environment proxies (``https_proxy``...) apply, as urllib applies them.

Retries: a request that fails the way a busy network or index fails for a moment (DNS's
"temporary failure in name resolution", a connection reset or closed before the answer, HTTP
429/500/502/503/504) is sent again ``RETRIES`` times, after 0.5, 1 and 2 seconds, as pip
(``--retries``) and uv (``UV_HTTP_RETRIES``) do; a timeout is not (``timeout`` is the caller's
limit, and a retry would multiply it), nor any other error. The answer after the last try is the
answer.

Names: each host is looked up once per process (kept ``DNS_TTL`` seconds), not once per
connection, and a lookup that has not answered in ``HEDGE`` seconds is asked again beside
itself. glibc asks for a host's IPv4 and IPv6 addresses at once from one socket, and where a
NAT drops one of the two replies (conntrack in Docker and Kubernetes, and this project's own
machines: 2 of 40 lookups of files.pythonhosted.org) it waits its 5 s timeout; a cold install
opens a connection per HEAD and per GET, 64 for the cpu lock, and sat idle 5 s at its start.
A second lookup sent a moment later is answered in a millisecond.
"""

from __future__ import annotations

import base64
import functools
import http.client
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from samebits import __version__
from samebits.errors import UnreachableError

TIMEOUT = 60.0
USER_AGENT = f"samebits/{__version__}"
RETRIES = 3
BACKOFF = 0.5  # seconds before the first retry, doubled before each next
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
DNS_TTL = 300.0   # seconds a host's addresses are used for before it is looked up again
HEDGE = 0.25      # seconds a lookup may take before it is asked again beside itself
LOOKUPS = 3       # lookups of one name in flight at most

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    url: str         # the final URL, after redirects (without credentials)
    headers: Message  # case-insensitive, as HTTP's are: headers.get("Content-Range")


def public_url(url: str) -> str:
    """``url`` without user:password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))


def auth_header(url: str) -> dict[str, str]:
    """Basic auth from ``url``'s user:password ({} when it has none)."""
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(token).decode()}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, minus the credentials when the host changes."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(newurl) != _origin(req.full_url):
            new.remove_header("Authorization")
        return new


@functools.lru_cache(maxsize=1)
def _opener() -> urllib.request.OpenerDirector:
    """urllib's opener, with one TLS context for every HTTPS connection of this process. Given
    none, urllib's HTTPS handler made a default context per connection, and each loads the
    system's CA certificates again: 25 ms of CPU on this project's machine, 1.6 CPU-seconds
    of the cpu lock's cold install (a HEAD and a GET of each of its 32 archives, eight at a
    time). The context is ``ssl.create_default_context()``, as
    urllib's own: certificates verified, host names checked, SSL_CERT_FILE and SSL_CERT_DIR
    honoured (read once, when the first HTTPS request is made)."""
    import ssl

    return urllib.request.build_opener(
        _Redirects, _HTTPHandler, _HTTPSHandler(context=ssl.create_default_context()))


_names: dict[tuple[str, int], tuple[float, list[Any]]] = {}
_name_locks: dict[tuple[str, int], threading.Lock] = {}
_names_lock = threading.Lock()


def _addresses(host: str, port: int, timeout: float) -> list[Any]:
    """``socket.getaddrinfo(host, port)`` for TCP, from one lookup per ``DNS_TTL`` (threads
    that ask meanwhile wait for it); see Names above."""
    key = (host, port)
    with _names_lock:
        one = _name_locks.setdefault(key, threading.Lock())
    with one:
        known = _names.get(key)
        if known is not None and time.monotonic() - known[0] < DNS_TTL:
            return known[1]
        found = _hedged_lookup(host, port, timeout)
        _names[key] = (time.monotonic(), found)
        return found


def _hedged_lookup(host: str, port: int, timeout: float) -> list[Any]:
    """The first answer of up to ``LOOKUPS`` lookups, each sent ``HEDGE`` seconds after the one
    before while none has answered; an error is an answer too (EAI_AGAIN is then retried by
    ``_retrying``). Waits at most ``timeout`` seconds after the last one is sent."""
    answers: queue.SimpleQueue[list[Any] | OSError] = queue.SimpleQueue()

    def ask() -> None:
        try:
            answers.put(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except OSError as exc:
            answers.put(exc)

    for n in range(LOOKUPS):
        threading.Thread(target=ask, name="samebits-lookup", daemon=True).start()
        try:
            got = answers.get(timeout=HEDGE if n < LOOKUPS - 1 else timeout)
        except queue.Empty:
            continue
        if isinstance(got, OSError):
            raise got
        return got
    raise TimeoutError(f"{host}: no address after {timeout:.0f} s")


def _connect(address: tuple[str, int], timeout: object = None,
             source_address: tuple[str, int] | None = None) -> socket.socket:
    """``socket.create_connection`` with the addresses of ``_addresses``: each tried in the
    resolver's order until one connects; else the last error."""
    host, port = address
    limit = float(timeout) if isinstance(timeout, (int, float)) else None
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in _addresses(host, port, limit or TIMEOUT):
        sock = socket.socket(family, kind, proto)
        try:
            if limit is not None:
                sock.settimeout(limit)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
    raise error or OSError(f"{host}: no address to connect to")


class _Connection(http.client.HTTPConnection):
    """http.client's connection, its socket made by ``_connect``; ``_TLSConnection``'s too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._create_connection = _connect  # http.client's seam for socket.create_connection


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    pass


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_Connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_TLSConnection, req, context=self._context)  # type: ignore[attr-defined]


def _request(url: str, headers: Mapping[str, str] | None, method: str) -> urllib.request.Request:
    merged = {"User-Agent": USER_AGENT, **auth_header(url), **(headers or {})}
    return urllib.request.Request(public_url(url), headers=merged, method=method)


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure that a moment later may not be (see Retries above)."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in RETRY_STATUS
    why = getattr(exc, "reason", exc)
    if isinstance(why, socket.gaierror):
        return why.errno == socket.EAI_AGAIN
    return isinstance(why, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
                            http.client.RemoteDisconnected, http.client.IncompleteRead))


def _retrying(attempt: Callable[[], _T]) -> _T:
    for n in range(RETRIES):
        try:
            return attempt()
        except (OSError, http.client.HTTPException) as exc:
            if not transient(exc):
                raise
        time.sleep(BACKOFF * 2 ** n)
    return attempt()


def open_url(url: str, *, timeout: float = TIMEOUT, headers: Mapping[str, str] | None = None,
             method: str = "GET") -> Any:
    """The response to ``url`` (a context manager; ``.read``, ``.status``, ``.headers``);
    urllib.error.HTTPError for an HTTP error, OSError when nothing answered. A transient
    failure to open it is retried; a failure while the caller reads the body is the caller's."""
    return _retrying(lambda: _opener().open(_request(url, headers, method), timeout=timeout))


def _whole(url: str, *, timeout: float, headers: Mapping[str, str], method: str) -> Reply:
    try:
        with _opener().open(_request(url, headers, method), timeout=timeout) as r:
            return Reply(r.status, r.headers.get("Content-Type", ""), r.read(),
                         public_url(r.geturl()), r.headers)
    except urllib.error.HTTPError as exc:
        if exc.code in RETRY_STATUS:
            raise
        hdrs = exc.headers if exc.headers is not None else Message()
        return Reply(exc.code, hdrs.get("Content-Type", ""), b"", public_url(url), hdrs)


def _answer(url: str, *, timeout: float, headers: Mapping[str, str], method: str) -> Reply:
    """The whole answer, transient failures retried (the body's read included); after the last
    try an HTTP error is still a status."""
    try:
        return _retrying(lambda: _whole(url, timeout=timeout, headers=headers, method=method))
    except urllib.error.HTTPError as exc:
        hdrs = exc.headers if exc.headers is not None else Message()
        return Reply(exc.code, hdrs.get("Content-Type", ""), b"", public_url(url), hdrs)


def get(url: str, *, accept: str = "*/*", timeout: float = TIMEOUT,
        headers: Mapping[str, str] | None = None) -> Reply:
    """The whole answer to a GET of ``url``; OSError when nothing answered."""
    return _answer(url, timeout=timeout, headers={"Accept": accept, **(headers or {})},
                   method="GET")


def head(url: str, *, timeout: float = TIMEOUT) -> int:
    """The status of a HEAD of ``url``; OSError when nothing answered."""
    return _answer(url, timeout=timeout, headers={}, method="HEAD").status


def reason(exc: BaseException) -> str:
    """What went wrong, in words: urllib's reason, or the error itself."""
    return str(getattr(exc, "reason", exc))


def timed_out(exc: BaseException) -> bool:
    why = getattr(exc, "reason", exc)
    return isinstance(why, TimeoutError) or isinstance(exc, TimeoutError) \
        or "timed out" in str(why)


def reach(url: str, exc: BaseException, *, hint: str | None = None) -> UnreachableError:
    """The error for a request to ``url`` that nothing answered (exit 4)."""
    return UnreachableError(f"{public_url(url)}: {reason(exc)}",
                            hint=hint or "check the network, or the URL")

"""samebits.net, the one HTTP module: credentials go to their own host only, errors never show
a password, a silent server stops within the caller's timeout. Real sockets, real urllib."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from samebits import net
from samebits.errors import UnreachableError


@contextmanager
def server(answer, tls: tuple[Path, Path] | None = None
           ) -> Iterator[tuple[int, list[dict[str, str]]]]:
    """A loopback HTTP server (HTTPS with ``tls``: a certificate and its key, as PEM files);
    ``answer(handler)`` replies; the headers of every request."""
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            seen.append({"path": self.path, **dict(self.headers.items())})
            answer(self)

        do_HEAD = do_GET  # noqa: N815

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        srv.socket = context.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1], seen
    finally:
        srv.shutdown()
        srv.server_close()


@contextmanager
def _opener_cleared() -> Iterator[None]:
    """``samebits.net``'s opener made afresh inside (it reads SSL_CERT_FILE and the
    environment's proxies when it is made) and after."""
    net._opener.cache_clear()
    try:
        yield
    finally:
        net._opener.cache_clear()


def reply(h: http.server.BaseHTTPRequestHandler, body: bytes = b"ok", status: int = 200,
          **headers: str) -> None:
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k.replace("_", "-"), v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(body)


def test_credentials_are_basic_auth_for_their_host_only() -> None:
    """user:password in a URL is sent as basic auth (never in the request line), kept on a
    redirect to the same host and dropped on a redirect to another (127.0.0.1 -> localhost:
    another origin), as pip does; the reply's URL carries no password."""
    with server(lambda h: reply(h, b"other")) as (other, seen_other):
        def first(h: http.server.BaseHTTPRequestHandler) -> None:
            if h.path == "/start":
                reply(h, b"", 302, Location="/same")
            elif h.path == "/same":
                reply(h, b"", 302, Location=f"http://localhost:{other}/away")
            else:
                reply(h, b"no", 404)

        with server(first) as (port, seen):
            got = net.get(f"http://alice:s%40cret@127.0.0.1:{port}/start", timeout=10)
    assert (got.status, got.body) == (200, b"other")
    assert got.url == f"http://localhost:{other}/away"
    token = "Basic YWxpY2U6c0BjcmV0"  # alice:s@cret
    assert [(s["path"], s.get("Authorization")) for s in seen] == [
        ("/start", token), ("/same", token)]
    assert [(s["path"], s.get("Authorization")) for s in seen_other] == [("/away", None)]
    assert all(s["User-Agent"] == net.USER_AGENT for s in seen + seen_other)


def test_reply_headers_are_case_insensitive() -> None:
    """A server that writes its headers in lower case (as HTTP/2 front ends pass them on):
    the range reader still finds Content-Range (a fresh clone's lock read wheel metadata by
    ranges and failed on it once)."""
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(206)
        h.send_header("content-range", "bytes 0-1/10")
        h.send_header("content-length", "2")
        h.end_headers()
        h.wfile.write(b"ab")

    with server(answer) as (port, _):
        got = net.get(f"http://127.0.0.1:{port}/w.whl", headers={"Range": "bytes=0-1"})
    assert (got.status, got.body, got.headers.get("Content-Range")) == (206, b"ab",
                                                                       "bytes 0-1/10")


def test_http_errors_are_statuses_and_silence_is_an_oserror_within_the_timeout() -> None:
    with server(lambda h: reply(h, b"gone", 404)) as (port, _):
        assert net.get(f"http://127.0.0.1:{port}/x", timeout=10).status == 404
        assert net.head(f"http://127.0.0.1:{port}/x", timeout=10) == 404
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        start = time.monotonic()
        with pytest.raises(OSError) as err:
            net.get(f"http://bob:pw@127.0.0.1:{silent.getsockname()[1]}/", timeout=0.5)
        assert time.monotonic() - start < 30
        assert net.timed_out(err.value)
        unreachable = net.reach(f"http://bob:pw@127.0.0.1:{silent.getsockname()[1]}/",
                                err.value)
        assert isinstance(unreachable, UnreachableError) and "pw" not in unreachable.message
    finally:
        silent.close()


def test_a_transient_failure_is_sent_again_and_a_lasting_one_is_the_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CI run that failed on 'Temporary failure in name resolution' in the middle of a lock:
    a 503, a connection closed before the answer and DNS's EAI_AGAIN are tried again (pip and
    uv retry); a 404 is answered at once; a 503 that lasts is the status after RETRIES more
    tries."""
    monkeypatch.setattr(net, "BACKOFF", 0.01)
    answers = iter([503, "close", 200])

    def flaky(h: http.server.BaseHTTPRequestHandler) -> None:
        got = next(answers)
        if got == "close":
            h.close_connection = True
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        reply(h, b"at last" if got == 200 else b"busy", int(got))

    with server(flaky) as (port, seen):
        got = net.get(f"http://127.0.0.1:{port}/x", timeout=10)
        assert (got.status, got.body, len(seen)) == (200, b"at last", 3)
    with server(lambda h: reply(h, b"gone", 404)) as (port, seen):
        assert net.head(f"http://127.0.0.1:{port}/x", timeout=10) == 404 and len(seen) == 1
    with server(lambda h: reply(h, b"busy", 503)) as (port, seen):
        assert net.get(f"http://127.0.0.1:{port}/x", timeout=10).status == 503
        assert len(seen) == net.RETRIES + 1
    calls = []

    def no_dns(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) < 3:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(*args, **kwargs)

    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with server(lambda h: reply(h, b"found")) as (port, _):
        assert net.get(f"http://localhost:{port}/x", timeout=10).body == b"found"
    assert len(calls) == 3
    unknown = []

    def no_name(*args: object, **kwargs: object) -> object:
        unknown.append(args)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_name)
    with pytest.raises(OSError):  # an unknown name is no moment's failure: one try
        net.get("http://no-such-host.invalid/x", timeout=10)
    assert len(unknown) == 1


def test_a_name_is_looked_up_once_and_a_lost_answer_is_asked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold install that sat 5 s before its first byte: glibc's lookup whose reply a NAT
    dropped waits its 5 s timeout. Here the first lookup never answers until the test ends;
    the requests are answered from the lookup sent beside it, and the name is looked up once
    for every request after (each connection looked it up again before)."""
    monkeypatch.setattr(net, "_names", {})
    monkeypatch.setattr(net, "_name_locks", {})
    lost = threading.Event()
    calls: list[tuple] = []
    real = socket.getaddrinfo

    def resolver(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 1:
            lost.wait(30)  # the dropped reply: answered only once the test is over
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    try:
        with server(lambda h: reply(h, b"found")) as (port, seen):
            bodies = {net.get(f"http://localhost:{port}/{n}", timeout=10).body
                      for n in range(4)}
            assert bodies == {b"found"} and len(seen) == 4
            assert not lost.is_set()  # answered while the first lookup still waited
            assert 2 <= len(calls) <= net.LOOKUPS
            assert {c[:2] for c in calls} == {("localhost", port)}
    finally:
        lost.set()


def test_every_fetch_goes_through_net() -> None:
    """No module but samebits.net opens URLs itself (the issue's four urllib callers)."""
    root = Path(__file__).resolve().parents[2]
    callers = sorted(str(p.relative_to(root)) for pkg in ("samebits", "samebits_app", "verify")
                     for p in (root / pkg).rglob("*.py")
                     if "urlopen(" in p.read_text() and p.name != "net.py")
    assert callers == []


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, signed by its own key (cryptography, as the DSSE tests
    use it), and that key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "samebits test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_https_requests_share_one_verifying_tls_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTPS request of a process goes through one TLS context, made once (a context per
    connection loaded the CA certificates each time), and it verifies as urllib's own does:
    a server whose certificate SSL_CERT_FILE names is answered, requests after the first make
    no context, and a certificate nothing trusts is refused."""
    import ssl

    cert, key = _self_signed(tmp_path)
    made: list[int] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    monkeypatch.setattr(ssl, "_create_default_https_context", counted)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with server(lambda h: reply(h, h.path.encode()), tls=(cert, key)) as (port, _), \
            _opener_cleared():
        url = f"https://127.0.0.1:{port}"
        assert [net.get(f"{url}/{i}").body for i in range(3)] == [b"/0", b"/1", b"/2"]
        with net.open_url(f"{url}/stream") as r:
            assert r.read() == b"/stream"
        assert len(made) == 1
        monkeypatch.delenv("SSL_CERT_FILE")
        net._opener.cache_clear()  # a process that trusts only the system's authorities
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
            net.get(f"{url}/untrusted")


def test_environment_proxies_carry_https_and_http(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """urllib's environment proxies still apply through samebits' own connections (its
    lookups and its TLS context): an HTTPS request goes through the proxy's CONNECT tunnel,
    the server's certificate verified end to end; an HTTP request is sent to the proxy with
    its absolute URL. A real proxy, relaying real sockets."""
    import socketserver

    cert, key = _self_signed(tmp_path)
    asked: list[tuple[str, str]] = []

    def relay(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    class Proxy(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            f = self.request.makefile("rb")
            method, target, _ = f.readline().decode().split()
            while f.readline() not in (b"\r\n", b"\n", b""):
                pass
            asked.append((method, target))
            if method != "CONNECT":  # a plain HTTP request: answered by the proxy itself
                body = b"via proxy " + target.encode()
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                                     b"Connection: close\r\n\r\n%s" % (len(body), body))
                return
            host, port = target.rsplit(":", 1)
            up = socket.create_connection((host, int(port)), timeout=10)
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            back = threading.Thread(target=relay, args=(up, self.request), daemon=True)
            back.start()
            relay(self.request, up)
            back.join(10)
            up.close()

    proxy = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Proxy)
    proxy.daemon_threads = True
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    here = f"http://127.0.0.1:{proxy.server_address[1]}"
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", here)
    monkeypatch.setenv("http_proxy", here)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    try:
        with server(lambda h: reply(h, b"tls " + h.path.encode()), tls=(cert, key)) \
                as (port, _), _opener_cleared():
            assert net.get(f"https://127.0.0.1:{port}/a", timeout=10).body == b"tls /a"
            assert net.get("http://example.invalid/b", timeout=10).body == \
                b"via proxy http://example.invalid/b"
            assert asked == [("CONNECT", f"127.0.0.1:{port}"),
                             ("GET", "http://example.invalid/b")]
    finally:
        proxy.shutdown()
        proxy.server_close()

"""Hostile locks against the fetcher: no filled disk, no hang, no read of a path the user did
not name. Every fetch is bounded (the lock's size, the server's Content-Length, the cap), a
stalled one is given up, file:// reads only regular files below the folders the user named,
and nothing partial stays in the cache."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samebits.errors import InputError, UnreachableError
from samebits.install.fetch import Limits, fetch_url, prove
from samebits.install.sources import Sources
from samebits.lock.model import LockedPackage

ROOT = Path(__file__).resolve().parents[2]
STREAM_LIMIT = 32 << 20   # the endless server stops by itself after this many bytes


def pkg(url: str, *, size: int | None = None, sha256: str = "0" * 64) -> LockedPackage:
    return LockedPackage(name="evil", version="1.0", manager="pip", platform="linux-64",
                         url=url, sha256=sha256, size=size)


def leftovers(cache: Path) -> list[str]:
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else []


class _Endless(http.server.BaseHTTPRequestHandler):
    """/zeros: zeros with no Content-Length; /liar: claims 10 GB; /slow: a byte, then waits;
    /small: 100 bytes with an honest Content-Length."""

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        if self.path.endswith("/liar.whl"):
            self.send_response(200)
            self.send_header("Content-Length", str(10 << 30))
            self.end_headers()
            return
        if self.path.endswith("/small.whl"):
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"\0" * 100)
            return
        self.send_response(200)
        self.end_headers()
        try:
            if self.path.endswith("/slow.whl"):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(3)
                return
            sent = 0
            while sent < STREAM_LIMIT:   # bounded: it stops by itself
                self.wfile.write(b"\0" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_server_that_streams_forever_is_cut_at_the_cap(
        tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No size in the lock, no Content-Length: the fetch stops at SAMEBITS_MAX_FETCH_BYTES
    and the cache keeps nothing."""
    monkeypatch.setenv("SAMEBITS_MAX_FETCH_BYTES", str(1 << 20))
    url = f"{server}/zeros/evil-1.0-py3-none-any.whl"
    with pytest.raises(InputError) as info:
        prove(pkg(url), tmp_path / "cache")
    assert info.value.message == (f"{url}: more than 1,048,576 bytes, the fetch cap "
                                  "(SAMEBITS_MAX_FETCH_BYTES): stopped, and nothing was kept")
    assert leftovers(tmp_path / "cache") == ["archives"]


def test_the_locks_size_bounds_the_download(tmp_path: Path, server: str) -> None:
    """A pylock/uv.lock/pixi size of 4096 bytes: a longer stream is stopped there; a server
    that announces more than it is refused before a byte is written."""
    url = f"{server}/zeros/evil-1.0-py3-none-any.whl"
    with pytest.raises(InputError) as info:
        prove(pkg(url, size=4096), tmp_path / "cache")
    assert info.value.message == (f"{url}: more than 4,096 bytes, the lock's size for "
                                  "evil-1.0-py3-none-any.whl: stopped, and nothing was kept")
    liar = f"{server}/x/liar.whl"
    with pytest.raises(InputError) as info:
        prove(pkg(liar, size=4096), tmp_path / "cache")
    assert info.value.message == (f"{liar}: the server says 10,737,418,240 bytes, more than "
                                  "the lock's size for liar.whl allows (4,096 bytes); nothing "
                                  "was downloaded")
    assert leftovers(tmp_path / "cache") == ["archives"]


def test_a_stalled_download_is_given_up(tmp_path: Path, server: str) -> None:
    """A server that sends a byte and then nothing: the fetch ends at the stall timeout."""
    url = f"{server}/x/slow.whl"
    start = time.monotonic()
    with pytest.raises(UnreachableError) as info:
        fetch_url(url, tmp_path / "out", Limits(stall=0.5))
    assert time.monotonic() - start < 30  # the stall limit ends it; the rest: a busy machine
    assert info.value.message == f"{url}: timed out"


def test_an_honest_download_within_its_size_still_works(tmp_path: Path, server: str) -> None:
    """The limits stop nothing that keeps to them: 100 bytes, Content-Length 100, size 100."""
    data = b"\0" * 100
    url = f"{server}/x/small.whl"
    got = prove(pkg(url, size=100, sha256=hashlib.sha256(data).hexdigest()),
                tmp_path / "cache")
    assert got.path.read_bytes() == data


@pytest.mark.parametrize(("target", "roots", "message"), [
    ("/dev/zero", (), "a file:// URL outside the folders samebits reads locked files from "
     "({cache})"),
    ("/dev/zero", (Path("/dev"),), "not a regular file (a device, FIFO, socket or folder): "
     "samebits does not read it"),
    ("fifo", ("tmp",), "not a regular file (a device, FIFO, socket or folder): samebits does "
     "not read it"),
    ("/etc/hostname", (), "a file:// URL outside the folders samebits reads locked files from "
     "({cache})"),
])
def test_file_urls_read_only_regular_files_the_user_named(
        tmp_path: Path, target: str, roots: tuple, message: str) -> None:
    """file:///dev/zero (464 MB in a second on main), a FIFO (a hang), any local path: a
    device or a FIFO is never read, and a file only below --find-links, the cache, the
    lock's folder or a spec's file:// channel."""
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
        target = str(tmp_path / "fifo")
    folders = tuple(tmp_path if r == "tmp" else r for r in roots)
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as info:
        prove(pkg(Path(target).as_uri()), cache, sources=Sources(find_links=folders))
    assert info.value.message == (f"{Path(target).as_uri()}: "
                                  + message.format(cache=os.path.realpath(cache)))
    assert leftovers(cache) == ["archives"]


def test_a_pylock_wheel_named_well_but_pointing_at_dev_zero_fills_nothing(
        tmp_path: Path) -> None:
    """pylock.toml beside a link named like a wheel that points at /dev/zero, installed:
    refused at once (a child process with a 64 MB file size limit, so that a fetch that does
    read /dev/zero fails fast instead of filling the disk), and no prefix is made."""
    link = tmp_path / "wheels" / "evil-1.0-py3-none-any.whl"
    link.parent.mkdir()
    link.symlink_to("/dev/zero")
    (tmp_path / "pylock.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "hostile"\nrequires-python = ">=3.8"\n'
        '[[packages]]\nname = "evil"\nversion = "1.0"\n'
        f'[[packages.wheels]]\nname = "{link.name}"\nurl = "{link.as_uri()}"\n'
        f'hashes = {{ sha256 = "{"0" * 64}" }}\n')
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))\n"
            "from samebits_app.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run(
        [sys.executable, "-c", code, "install", str(tmp_path / "pylock.toml"), "--target",
         str(tmp_path / "env"), "--platform", "linux-64", "--python", sys.executable,
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert (f"error: linux-64: evil 1.0: {link.as_uri()} (a link to /dev/zero): a file:// "
            "URL outside the folders samebits reads locked files from") in proc.stderr
    assert not (tmp_path / "env").exists()
    assert sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file()) == 0


# ------------------------------------------------------------ foreign locks, nothing placed

def _pixi(path: Path, location: str, sha256: str) -> Path:
    path.write_text(f"""version: 6
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    indexes:
    - https://pypi.org/simple
    packages:
      linux-64:
      - pypi: {location}
packages:
- pypi: {location}
  name: tiny
  version: '1.0'
  sha256: {sha256}
  requires_dist: []
""")
    return path


def _install(tmp_path: Path, lock: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", "install", str(lock), "--target",
                           str(tmp_path / "env"), "--platform", "linux-64", "--python",
                           sys.executable, "--cache-dir", str(tmp_path / "cache"), *extra],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_foreign_lock_with_nothing_to_place_makes_no_prefix(tmp_path: Path) -> None:
    """A pixi.lock whose only package cannot be carried over (a local path): exit 2 naming
    it, and no (empty) prefix left behind to fail verify with 'not an environment'."""
    from tests.fixtures.install import wheel

    whl = wheel(tmp_path / "w", "tiny", "1.0", {"tiny/__init__.py": b""})
    lock = _pixi(tmp_path / "pixi.lock", whl.as_uri(), hashlib.sha256(whl.read_bytes())
                 .hexdigest())
    proc = _install(tmp_path, lock)
    assert proc.returncode == 2, proc.stderr
    assert ("error: pixi.lock: linux-64: no package that install can place; every package of "
            "it was left out when it was read: linux-64: tiny 1.0 (") in proc.stderr
    assert "): a local path: built from source, no artifact is locked\nhint: nothing was " \
        "installed and no prefix was made" in proc.stderr
    assert "not an environment" not in proc.stderr
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_pypi_only_pixi_lock_installs_with_python(tmp_path: Path) -> None:
    """A pixi.lock with PyPI wheels and no conda Python installs into a venv of --python,
    as uv.lock and pylock.toml do (the wheel served by --mirror from a local folder)."""
    from tests.fixtures.install import wheel

    whl = wheel(tmp_path / "w", "tiny", "1.0", {"tiny/__init__.py": b""})
    host = "https://files.example.invalid/w/"
    lock = _pixi(tmp_path / "pixi.lock", host + whl.name,
                 hashlib.sha256(whl.read_bytes()).hexdigest())
    proc = _install(tmp_path, lock, "--mirror", f"{host}={whl.parent.as_uri()}/")
    assert proc.returncode == 0, proc.stderr
    assert "result: identical (exit 0)" in proc.stdout
    line = f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert (tmp_path / "env" / "lib" / line / "site-packages" / "tiny").is_dir()


@pytest.mark.parametrize("dependencies", ["1", "[{}]", '["six"]'])
def test_a_uv_lock_of_the_wrong_shape_is_a_lockfile_error(tmp_path: Path,
                                                          dependencies: str) -> None:
    """uv.lock whose dependencies are a number, a table without a name or a bare string
    (found by `nox -s fuzz`): a LockfileError naming the file, not a traceback."""
    from samebits.errors import LockfileError
    from samebits.foreign.model import ReadOptions
    from samebits.lock.read import load_lock

    text = (ROOT / "tests" / "data" / "foreign" / "pypi" / "uv.lock").read_text()
    head, sep, rest = text.partition('[[package]]\nname = "python-dateutil"')
    body = rest.replace('dependencies = [\n    { name = "six" },\n]',
                        f"dependencies = {dependencies}", 1)
    path = tmp_path / "uv.lock"
    path.write_text(head + sep + body)
    with pytest.raises(LockfileError) as info:
        load_lock(path, ReadOptions(platforms=("linux-64",), python="3.11"))
    assert info.value.message.startswith(f"{path}: ")

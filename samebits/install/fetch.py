"""Fetch: every locked archive into ``CACHE/archives/<sha256>/<filename>``, proved by its hash.

The archive layout is shared: other code fills it from a bundle or the Nix store and reads it
(``verify`` reads conda archives from it for modes and link targets), so it stays exactly
``archives/<sha256 or md5>/<filename>``. A file is written to a temporary name beside its
target and renamed only after its sha256 (and md5, for conda) matched the lock, so a reader sees
no file or the proved one, never a torn one, whatever is killed when.

Before the network, ``prove`` looks in the ``Sources`` it is given (``--find-links`` folders,
``--mirror`` prefixes: ``samebits.install.sources``): a local file is used whatever the URL's
host, once its sha256 is the lock's; one of the locked name and another hash is refused, named.
A host that does not answer is an ``UnreachableError`` whose hint names those two flags.

``fetch_all`` proves and scans (``samebits.archives``) every archive and lists every
problem of every archive in one error; the installer calls ``prove`` per package and scans when
it unpacks (``samebits.install.unpack``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from samebits.archives import BadMember, scan_archive
from samebits.errors import InputError, SamebitsError, UnreachableError, UsageError, plural
from samebits.host import cache_dir
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.model import LockedPackage

FETCH_TIMEOUT = 60.0    # seconds without a byte (the socket's timeout), and see STALL_BYTES
FETCH_THREADS = 8
BUFFER = 1 << 20
# Every fetch is bounded: by the lock's declared size where it has one (pixi.lock, pylock,
# uv.lock), by the server's Content-Length, and always by this cap (bytes), which
# SAMEBITS_MAX_FETCH_BYTES sets; a download that passes it is stopped and nothing is kept.
MAX_FETCH_ENV = "SAMEBITS_MAX_FETCH_BYTES"
DEFAULT_MAX_FETCH = 16 << 30
# A download that brings fewer than STALL_BYTES in FETCH_TIMEOUT seconds has stalled (a server
# that trickles a byte at a time would otherwise keep a fetch open for ever).
STALL_BYTES = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How much one fetch may write, how slow it may be, and where file:// may read."""

    max_bytes: int = DEFAULT_MAX_FETCH
    why: str = f"the fetch cap ({MAX_FETCH_ENV})"  # says where max_bytes came from
    stall: float = FETCH_TIMEOUT
    roots: tuple[Path, ...] = ()   # file:// URLs are read only from below these folders


Fetcher = Callable[[str, Path, Limits], None]


class StreamDigests:
    """sha256 (and md5 when asked) of the bytes as a fetch writes them: the archive is hashed
    while it downloads, as uv does, not read back afterwards."""

    def __init__(self, *, md5: bool) -> None:
        self.sha = hashlib.sha256()
        self.md5 = hashlib.md5() if md5 else None

    def update(self, chunk: bytes) -> None:
        self.sha.update(chunk)
        if self.md5 is not None:
            self.md5.update(chunk)

    def hexdigests(self) -> tuple[str, str]:
        return self.sha.hexdigest(), self.md5.hexdigest() if self.md5 is not None else ""


def max_fetch_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The cap on any one fetch: SAMEBITS_MAX_FETCH_BYTES (a number of bytes) or 16 GiB."""
    value = (os.environ if environ is None else environ).get(MAX_FETCH_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_FETCH
    if not value.isdigit() or int(value) <= 0:
        raise UsageError(f'{MAX_FETCH_ENV}="{value}": expected a number of bytes > 0')
    return int(value)


def limits_for(p: LockedPackage, *, roots: Sequence[Path] = (),
               environ: Mapping[str, str] | None = None) -> Limits:
    """A package's fetch limits: its declared size when the lock has one (never more than
    the cap), else the cap."""
    cap = max_fetch_bytes(environ)
    resolved = tuple(dict.fromkeys(Path(os.path.realpath(r)) for r in roots))
    if p.size is not None and p.size <= cap:
        return Limits(max_bytes=p.size, why=f"the lock's size for {p.filename}",
                      roots=resolved)
    return Limits(max_bytes=cap, why=f"the fetch cap ({MAX_FETCH_ENV})", roots=resolved)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    """A locked package and its archive in the cache, proved against the lock's hashes."""

    package: LockedPackage
    path: Path
    sha256: str = ""      # of the archive, computed when it was proved
    md5: str = ""
    size: int = 0
    downloaded: bool = False   # fetched now (not found in the cache's archives/)


default_cache_dir = cache_dir  # samebits.host's: the one cache folder


def cache_key(p: LockedPackage) -> str:
    """The name of a package's folders in the cache: the lock's sha256 (md5 without one)."""
    return (p.sha256 or p.md5 or "unhashed").lower()


def archive_path(cache: Path, p: LockedPackage) -> Path:
    return cache / "archives" / cache_key(p) / p.filename


class TooLarge(InputError):
    """A fetch that would write more than its limit: the lock's size, or the cap."""


class NotAllowedFile(InputError):
    """A file:// URL outside the folders the user named, or one that is not a regular file."""


def fetch_url(url: str, dest: Path, limits: Limits | None = None, *,
              digest: StreamDigests | None = None) -> None:
    """Copy ``url`` (file://, http(s)://) to ``dest`` within ``limits``; the one place that
    touches the network. A file:// URL is read only from below ``limits.roots`` (the folders
    the user named: --find-links, a mirror's file:// target, the cache, the lock's own
    folder, a project spec's file:// channels and indexes) and only when it is a regular
    file: never a device, a FIFO or a socket."""
    from samebits import net  # urllib.request and http.client: not for a warm install

    limits = limits or Limits()
    parts = urlsplit(url)
    try:
        if parts.scheme == "file":
            _copy_local(url, Path(unquote(parts.path)), dest, limits, digest)
            return
        if parts.scheme not in ("http", "https"):
            raise InputError(f"{url}: unsupported URL scheme '{parts.scheme}'")
        with net.open_url(url, timeout=limits.stall) as resp, open(dest, "wb") as f:
            length = resp.headers.get("Content-Length")
            if length is not None and length.strip().isdigit() \
                    and int(length) > limits.max_bytes:
                raise TooLarge(f"{url}: the server says {int(length):,} bytes, more than "
                               f"{limits.why} allows ({limits.max_bytes:,} bytes); nothing "
                               "was downloaded")
            _copy_stream(url, resp, f, limits, digest)
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise HostUnreachable(url, f"{net.public_url(url)}: {net.reason(exc)}") from None


def _copy_stream(url: str, src: Any, out: Any, limits: Limits,
                 digest: StreamDigests | None = None) -> None:
    """At most ``limits.max_bytes`` bytes from ``src`` to ``out``; a stream that goes on past
    them is ``TooLarge``, one that brings fewer than STALL_BYTES in ``limits.stall`` seconds
    has stalled."""
    written, window, window_bytes = 0, time.monotonic(), 0
    while chunk := src.read(min(BUFFER, limits.max_bytes - written + 1)):
        written += len(chunk)
        if written > limits.max_bytes:
            raise TooLarge(f"{url}: more than {limits.max_bytes:,} bytes, {limits.why}: "
                           "stopped, and nothing was kept")
        out.write(chunk)
        if digest is not None:
            digest.update(chunk)
        window_bytes += len(chunk)
        now = time.monotonic()
        if now - window >= limits.stall:
            if window_bytes < STALL_BYTES:
                raise HostUnreachable(url, f"{url}: stalled: {window_bytes} bytes in "
                                      f"{now - window:.0f} s")
            window, window_bytes = now, 0


def _copy_local(url: str, path: Path, dest: Path, limits: Limits,
                digest: StreamDigests | None = None) -> None:
    real = Path(os.path.realpath(path))
    if not any(real == r or r in real.parents for r in limits.roots):
        named = ", ".join(map(str, limits.roots)) or "none"
        link = f" (a link to {real})" if real != Path(os.path.abspath(path)) else ""
        raise NotAllowedFile(f"{url}{link}: a file:// URL outside the folders samebits "
                             f"reads locked files from ({named})",
                             hint=f"if you trust it, pass --find-links {path.parent}")
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as src:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAllowedFile(f"{url}: not a regular file (a device, FIFO, socket or "
                                 "folder): samebits does not read it")
        os.set_blocking(fd, True)
        with open(dest, "wb") as out:
            _copy_stream(url, src, out, limits, digest)


class HostUnreachable(UnreachableError):
    """A URL whose host did not answer (exit 4); ``url`` is the one asked."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(message, hint=unreachable_hint([url]))
        self.url = url


def labelled(exc: SamebitsError, label_: str) -> SamebitsError:
    """``exc`` with ``label_: `` before its message, of the same kind (and URL)."""
    if isinstance(exc, HostUnreachable):
        return HostUnreachable(exc.url, f"{label_}: {exc.message}")
    try:
        return type(exc)(f"{label_}: {exc.message}", hint=exc.hint)
    except TypeError:  # a kind built from something else (SpecError's problems)
        out = SamebitsError(f"{label_}: {exc.message}", hint=exc.hint)
        out.exit_code = exc.exit_code
        return out


def unreachable_hint(urls: Sequence[str]) -> str:
    """What to try when these URLs did not answer: the same files by content."""
    hosts = sorted({f"{u.scheme}://{u.netloc}/" for u in map(urlsplit, urls) if u.netloc})
    name = unquote(urls[0].rsplit("/", 1)[-1]) if urls else "the file"
    where = hosts[0] if hosts else "URL"
    return (f"check the network; or, where the files are at hand, --find-links DIR (a folder "
            f"holding {name}: any file with the locked sha256 is used) or --mirror "
            f"{where}=URL; or fill --cache-dir where the host is reachable")


def digests(path: Path) -> tuple[str, str]:
    """(sha256, md5) of the file at ``path``, in one read."""
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(BUFFER):
            sha.update(chunk)
            md5.update(chunk)
    return sha.hexdigest(), md5.hexdigest()


def hash_problem(p: LockedPackage, path: Path) -> str | None:
    """Why the archive at ``path`` is not the one the lock names, or None."""
    return _problem(p, *digests(path))


def _problem(p: LockedPackage, sha: str, md5: str) -> str | None:
    if p.sha256 and sha != p.sha256.lower():
        return f"sha256 of {p.filename} is {sha}, the lock says {p.sha256}"
    if p.md5 and md5 != p.md5.lower():
        return f"md5 of {p.filename} is {md5}, the lock says {p.md5}"
    if not p.sha256 and not p.md5:
        return f"the lock has no hash for {p.filename}"
    return None


def prove(p: LockedPackage, cache: Path, fetch: Fetcher = fetch_url,
          sources: Sources = NO_SOURCES) -> Fetched:
    """The package's archive in the cache, hash-checked now: the cached one when it still
    hashes to the lock's values, else a local file from ``sources`` with the lock's hash,
    else a fresh download from the URL (or its mirror); renamed into place once it hashes
    to the lock's values."""
    dest = archive_path(cache, p)
    if dest.exists():
        sha, md5 = digests(dest)
        if _problem(p, sha, md5) is None:
            return Fetched(package=p, path=dest, sha256=sha, md5=md5,
                           size=dest.stat().st_size)
    local = _local_file(p, sources)
    limits = limits_for(p, roots=(*sources.local_roots, cache))
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.filename}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        url = local.as_uri() if local is not None else sources.rewrite(p.url)
        if fetch is fetch_url:  # hashed as it streams in
            stream = StreamDigests(md5=bool(p.md5) or p.manager == "conda")
            fetch_url(url, Path(tmp), limits, digest=stream)
            sha, md5 = stream.hexdigests()
        else:  # another fetcher (a test's, a bundle's): read back
            fetch(url, Path(tmp), limits)
            sha, md5 = digests(Path(tmp))
        problem = _problem(p, sha, md5)
        if problem:
            raise InputError(f"{problem} ({url if url == p.url else f'{url}, for {p.url}'})")
        os.chmod(tmp, 0o644)
        size = os.stat(tmp).st_size
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):  # no empty archives/<key>/ left by a refusal
            os.unlink(tmp)
            dest.parent.rmdir()
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return Fetched(package=p, path=dest, sha256=sha, md5=md5, size=size,
                   downloaded=local is None)


def _local_file(p: LockedPackage, sources: Sources) -> Path | None:
    """The first file of ``sources`` that hashes to the lock's values; None when there is
    none. A file of the locked name with other hashes is an error naming it."""
    wrong = []
    for path in sources.candidates(p.filename, p.sha256):
        problem = _problem(p, *digests(path))
        if problem is None:
            return path
        wrong.append(f"{path}: {problem}")
    if wrong:
        raise InputError("; ".join(wrong) + " (not used: remove it or pass another "
                         "--find-links folder)")
    return None


def label(p: LockedPackage) -> str:
    """How problems name a package: ``linux-64: torch 2.13.0``."""
    return f"{p.platform}: {p.name} {p.version}"


def raise_problems(problems: Sequence[str | SamebitsError], *,
                   outcome: str = "nothing was installed") -> None:
    """One error listing every problem (sorted), or nothing when there is none. When every
    problem is a host that did not answer, the error is an ``UnreachableError`` (exit 4) whose
    hint names --find-links and --mirror; one error of a kind of its own (a build that
    differs, a tool that failed) is raised as it is, with its hint and exit code; otherwise
    an ``InputError``."""
    if not problems:
        return
    if len(problems) == 1 and isinstance(problems[0], SamebitsError) \
            and type(problems[0]) not in (InputError, HostUnreachable):
        raise problems[0]
    texts = sorted(p if isinstance(p, str) else p.message for p in problems)
    unreachable = [p for p in problems if isinstance(p, HostUnreachable)]
    if len(unreachable) == len(problems):
        head = texts[0] if len(texts) == 1 else (
            f"{plural(len(texts), 'locked archive')} could not be fetched:\n  "
            + "\n  ".join(texts))
        raise UnreachableError(head, hint=f"{outcome}; "
                               + unreachable_hint([p.url for p in unreachable]))
    head = texts[0] if len(texts) == 1 else (
        f"{len(texts)} problems with the locked archives:\n  " + "\n  ".join(texts))
    hint = f"{outcome}; if the archives changed on purpose, re-lock (samebits lock ENV)"
    if unreachable:
        hint += "; for the hosts that did not answer: --find-links DIR or --mirror FROM=TO"
    raise InputError(head, hint=hint)


LARGE_DOWNLOAD = 500 * 1000**2  # bytes: above this a command says how much before it starts
SIZE_TIMEOUT = 10.0  # seconds for one HEAD asking a server for a file's size


def size_text(n: float) -> str:
    """``4.82 GB``, ``3.1 kB``: how progress lines give a size."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def download_size(packages: Sequence[LockedPackage], cache: Path,
                  sources: Sources = NO_SOURCES, *, ask: bool = True) -> tuple[int, int, int]:
    """(files, bytes, files of unknown size) that fetching ``packages`` would download: those
    neither in the cache nor at hand in ``sources``; each by the lock's size, else (with
    ``ask``) the server's Content-Length: one HEAD each, in parallel, ``SIZE_TIMEOUT``."""
    todo = [p for p in packages if not archive_path(cache, p).exists()
            and not any(True for _ in sources.candidates(p.filename, p.sha256))]

    def size(p: LockedPackage) -> int | None:
        if p.size is not None:
            return p.size
        url = sources.rewrite(p.url)
        if urlsplit(url).scheme == "file":
            try:
                return os.stat(unquote(urlsplit(url).path)).st_size
            except OSError:
                return None
        if not ask:
            return None
        from samebits import net

        try:
            with net.open_url(url, timeout=SIZE_TIMEOUT, method="HEAD") as r:
                length = r.headers.get("Content-Length", "")
        except OSError:
            return None
        return int(length) if length.strip().isdigit() else None

    with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
        sizes = list(pool.map(size, todo))
    return (len(todo), sum(s for s in sizes if s is not None),
            sum(1 for s in sizes if s is None))


def download_text(files: int, size: int, unknown: int) -> str:
    """"32 archives, 4.7 GB" (", 2 of unknown size")."""
    return (f"{plural(files, 'archive')}, {size_text(size)}"
            + (f" ({unknown} of unknown size)" if unknown else ""))


def fetch_all(packages: Sequence[LockedPackage], cache: Path, *,
              fetch: Fetcher = fetch_url, sources: Sources = NO_SOURCES,
              say: Callable[[str], None] | None = None,
              outcome: str = "nothing was installed") -> list[Fetched]:
    """Every archive in the cache, hash-checked, then every member scanned; all problems
    listed (``outcome``: what the caller did not do, for their hint). ``say`` hears the
    download's size first when it is over ``LARGE_DOWNLOAD``."""
    if say is not None:
        files, size, unknown = download_size(packages, cache, sources, ask=fetch is fetch_url)
        if size > LARGE_DOWNLOAD:
            say(f"downloading {download_text(files, size, unknown)} into {cache}")
    problems: list[str | SamebitsError] = []
    fetched: list[Fetched] = []

    def one(p: LockedPackage) -> None:
        try:
            got = prove(p, cache, fetch, sources)
        except SamebitsError as exc:
            problems.append(labelled(exc, label(p)))
            return
        bad: list[BadMember] = scan_archive(got.path)
        problems.extend(f"{label(p)}: {b}" for b in bad)
        fetched.append(got)

    with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
        list(pool.map(one, packages))
    raise_problems(problems, outcome=outcome)
    order = {p.key: i for i, p in enumerate(packages)}
    return sorted(fetched, key=lambda f: order[f.package.key])


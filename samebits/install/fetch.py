"""Fetch: every locked archive into ``CACHE/archives/<sha256>/<filename>``, proved by its hash.

The archive layout is shared: other code fills it from a bundle or the Nix store and reads it
(``verify`` reads conda archives from it for modes and link targets), so it stays exactly
``archives/<sha256 or md5>/<filename>``. A file is written to a temporary name beside its
target and renamed only after its sha256 (and md5, for conda) matched the lock, so a reader sees
no file or the proved one, never a torn one, whatever is killed when.

``fetch_all`` proves and scans (``samebits.render.archives``) every archive and lists every
problem of every archive in one error; the installer calls ``prove`` per package and scans when
it unpacks (``samebits.install.unpack``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from samebits.errors import InputError, UnreachableError
from samebits.lockfile import LockedPackage
from samebits.render.archives import BadMember, scan_archive

FETCH_TIMEOUT = 60.0
FETCH_THREADS = 8
BUFFER = 1 << 20

Fetcher = Callable[[str, Path], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    """A locked package and its archive in the cache, proved against the lock's hashes."""

    package: LockedPackage
    path: Path
    sha256: str = ""      # of the archive, computed when it was proved
    md5: str = ""
    size: int = 0


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "samebits"


def cache_key(p: LockedPackage) -> str:
    """The name of a package's folders in the cache: the lock's sha256 (md5 without one)."""
    return (p.sha256 or p.md5 or "unhashed").lower()


def archive_path(cache: Path, p: LockedPackage) -> Path:
    return cache / "archives" / cache_key(p) / p.filename


def fetch_url(url: str, dest: Path) -> None:
    """Copy ``url`` (file://, http(s)://) to ``dest``; the one place that touches the network."""
    parts = urlsplit(url)
    try:
        if parts.scheme == "file":
            shutil.copyfile(unquote(parts.path), dest)
            return
        if parts.scheme not in ("http", "https"):
            raise InputError(f"{url}: unsupported URL scheme '{parts.scheme}'")
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as resp, open(dest, "wb") as f:
            shutil.copyfileobj(resp, f, BUFFER)
    except FileNotFoundError:
        raise InputError(f"{url}: no such file") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise UnreachableError(f"{url}: {getattr(exc, 'reason', exc)}",
                               hint="check the network, or fill --cache-dir where it is "
                               "reachable and install offline") from None


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


def prove(p: LockedPackage, cache: Path, fetch: Fetcher = fetch_url) -> Fetched:
    """The package's archive in the cache, hash-checked now: the cached one when it still
    hashes to the lock's values, else a fresh download (renamed into place once it does)."""
    dest = archive_path(cache, p)
    if dest.exists():
        sha, md5 = digests(dest)
        if _problem(p, sha, md5) is None:
            return Fetched(package=p, path=dest, sha256=sha, md5=md5,
                           size=dest.stat().st_size)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.filename}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        fetch(p.url, Path(tmp))
        sha, md5 = digests(Path(tmp))
        problem = _problem(p, sha, md5)
        if problem:
            raise InputError(f"{problem} ({p.url})")
        os.chmod(tmp, 0o644)
        size = os.stat(tmp).st_size
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return Fetched(package=p, path=dest, sha256=sha, md5=md5, size=size)


def label(p: LockedPackage) -> str:
    """How problems name a package: ``linux-64: torch 2.13.0``."""
    return f"{p.platform}: {p.name} {p.version}"


def raise_problems(problems: list[str]) -> None:
    """One ``InputError`` listing every problem (sorted), or nothing when there is none."""
    if not problems:
        return
    problems = sorted(problems)
    head = problems[0] if len(problems) == 1 else (
        f"{len(problems)} problems with the locked archives:\n  " + "\n  ".join(problems))
    raise InputError(head, hint="nothing was installed; if the archives changed on "
                     "purpose, re-lock (nox -s lock -- ENV)")


def fetch_all(packages: Sequence[LockedPackage], cache: Path, *,
              fetch: Fetcher = fetch_url) -> list[Fetched]:
    """Every archive in the cache, hash-checked, then every member scanned; all problems listed."""
    problems: list[str] = []
    fetched: list[Fetched] = []

    def one(p: LockedPackage) -> None:
        try:
            got = prove(p, cache, fetch)
        except InputError as exc:
            problems.append(f"{label(p)}: {exc.message}")
            return
        bad: list[BadMember] = scan_archive(got.path)
        problems.extend(f"{label(p)}: {b}" for b in bad)
        fetched.append(got)

    with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
        list(pool.map(one, packages))
    raise_problems(problems)
    order = {p.key: i for i, p in enumerate(packages)}
    return sorted(fetched, key=lambda f: order[f.package.key])


def refuse_vcs(packages: Sequence[LockedPackage]) -> None:
    """A lock's VCS packages (a repository at a commit, conda-lock's ``git+https://...@id``)
    cannot be installed yet: refused by name before anything is downloaded."""
    vcs = [p for p in packages if p.vcs]
    if not vcs:
        return
    names = sorted({f"{p.name} {p.version} ({p.url})" for p in vcs})
    head = (f"{len(names)} packages of the lock are VCS checkouts, which samebits install "
            "cannot build yet:\n  " + "\n  ".join(names)) if len(names) > 1 else (
            f"{names[0]} is a VCS checkout, which samebits install cannot build yet")
    raise InputError(head, hint="nothing was downloaded; lock a released wheel of it instead, "
                     "or render the conda part (samebits render conda) and install it by hand")

"""A paper deposited as an archive (``samebits audit URL --sha256 H``): fetched, proved, unpacked.

    download   through ``samebits.net`` (its timeout, retries, credentials rule), its size said
               before the first byte; bounded by the server's Content-Length and by the fetch
               cap (``SAMEBITS_MAX_FETCH_BYTES``, ``samebits.install.fetch.max_fetch_bytes``);
               hashed as it streams into ``CACHE/sources/archives/<sha256>/<name>`` and
               renamed into place only when its sha256 is H: nothing unproved is kept
    unpack     a zip, or a tar (gzip, bzip2, xz or none), read member by member with the
               package archives' rules (``samebits.archives.tar_member_problem``,
               ``zip_member_problem``: no absolute or '..' path, no link out of the folder,
               no device or fifo, no absurd size, no zip bomb), no member twice, at most
               ``MAX_MEMBERS`` members and ``MAX_UNPACKED`` bytes in all; every problem is
               listed and nothing is kept. Folders and files are written first (never through
               a link), then the links, each checked again where it really points.
    the root   an archive whose members all lie in one folder (GitHub's, Zenodo's) is that
               folder; ``--path`` is read below it

The unpacked tree is ``CACHE/sources/unpacked/<sha256>/``, built beside its final name and
renamed into place under the entry's lock (``source.entry_locked``).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tarfile
import urllib.error
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import unquote, urlsplit

from samebits import net
from samebits.archives import (
    MAX_MEMBER_BYTES,
    link_problem,
    path_problem,
    tar_member_problem,
    zip_is_link,
    zip_member_problem,
)
from samebits.bundle.read import DAMAGED
from samebits.errors import InputError, plural
from samebits_app.audit.source import LOCK_SLACK, SOURCES, Say, entry_locked, sweep_partials

MAX_MEMBERS = 1_000_000
MAX_UNPACKED = MAX_MEMBER_BYTES    # bytes, all members together
CHUNK = 1 << 20
MAX_NAMED = 20


class _Refused(Exception):
    """Raised inside ``atomic_writer`` so that an unproved download is not kept."""


def open_deposit(url: str, sha256: str, cache: Path, *, say: Say = lambda s: None,
                 timeout: float = net.TIMEOUT * 15) -> tuple[Path, str]:
    """(the unpacked tree's root, "fetched" or "in the cache") of the archive at ``url``."""
    from samebits.staging import staged_dir

    base = Path(cache) / SOURCES
    unpacked = base / "unpacked" / sha256
    with entry_locked(cache, f"archive-{sha256}", timeout=timeout + LOCK_SLACK):
        sweep_partials(unpacked)
        if (unpacked / "tree").is_dir():
            say(f"sha256 {sha256[:12]} ({net.public_url(url)}): in the cache ({unpacked})")
            return archive_root(unpacked / "tree"), "in the cache"
        archive = download(url, sha256, base / "archives" / sha256, say=say, timeout=timeout)
        with staged_dir(unpacked, replace=True) as stage:
            unpack(archive, stage / "tree")
    return archive_root(unpacked / "tree"), "fetched"


def _name(url: str) -> str:
    name = posixpath.basename(unquote(urlsplit(url).path)) or "archive"
    return name if path_problem(name) is None and name not in (".", "..") else "archive"


def _size_text(n: int | None) -> str:
    if n is None:
        return "size not given by the server"
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else plural(n, "byte")


def download(url: str, sha256: str, folder: Path, *, say: Say, timeout: float) -> Path:
    """The archive at ``url`` in ``folder``, its sha256 ``sha256``; kept only when it is."""
    from samebits._io import atomic_writer, sha256_file
    from samebits.install.fetch import MAX_FETCH_ENV, max_fetch_bytes

    dest = Path(folder) / _name(url)
    if dest.is_file() and sha256_file(dest) == sha256:
        return dest
    cap = max_fetch_bytes()
    where = net.public_url(url)
    try:
        with net.open_url(url, timeout=timeout) as r:
            length = r.headers.get("Content-Length")
            size = int(length) if length and length.isdigit() else None
            say(f"downloading {where} ({_size_text(size)})")
            if size is not None and size > cap:
                raise InputError(f"{where}: {_size_text(size)}, over the fetch cap of "
                                 f"{_size_text(cap)} ({MAX_FETCH_ENV}): not downloaded")
            digest, got = hashlib.sha256(), 0
            try:
                with atomic_writer(dest) as out:
                    while chunk := r.read(CHUNK):
                        got += len(chunk)
                        if got > cap or (size is not None and got > size):
                            raise _Refused(f"{where}: more than "
                                           f"{_size_text(min(cap, size or cap))} (the "
                                           f"{'Content-Length' if size else MAX_FETCH_ENV} "
                                           "cap): stopped, nothing kept")
                        digest.update(chunk)
                        out.write(chunk)
                    if digest.hexdigest() != sha256:
                        raise _Refused(f"{where}: sha256 is {digest.hexdigest()}, --sha256 "
                                       f"says {sha256}: refused, nothing kept")
            except _Refused as exc:
                raise InputError(str(exc), hint="check the URL and the checksum the paper "
                                 "gives (sha256sum FILE)") from None
    except urllib.error.HTTPError as exc:
        raise InputError(f"{where}: HTTP {exc.code} {exc.reason}",
                         hint="check the URL") from None
    except OSError as exc:
        raise net.reach(url, exc) from None
    return dest


def archive_root(tree: Path) -> Path:
    """The tree, or its one folder when everything lies in one (GitHub's ``repo-<sha>/``)."""
    entries = list(tree.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return tree


# ------------------------------------------------------------------------------ unpack

@dataclass(slots=True)
class _Plan:
    """What one pass over the members found: files are written as they pass, links after."""

    dest: Path
    problems: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    links: list[tuple[str, str, bool]] = field(default_factory=list)  # (name, target, hard)
    total: int = 0

    def place(self, raw: str, reason: str | None, size: int = 0) -> str | None:
        """The member's normalised name, or None (and a problem) when it has no place."""
        if reason is not None:
            self.problems.append(f"{raw[:120]}: {reason}")
            return None
        name = posixpath.normpath(raw)
        if name in ("", "."):
            return None
        if name in self.seen:
            self.problems.append(f"{name[:120]}: in the archive twice")
            return None
        self.seen.add(name)
        self.total += size
        if len(self.seen) > MAX_MEMBERS or self.total > MAX_UNPACKED:
            raise InputError(f"more than {plural(MAX_MEMBERS, 'member')} or "
                             f"{_size_text(MAX_UNPACKED)}: refused as absurd")
        return name

    def write(self, name: str, stream: IO[bytes], executable: bool) -> None:
        if self.problems:  # already refused: read on to list every problem, write nothing
            return
        path = self.dest / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o755 if executable else 0o644)
        except (FileExistsError, NotADirectoryError, IsADirectoryError):
            self.problems.append(f"{name[:120]}: a file where the archive has a folder, or "
                                 "the other way round")
            return
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(stream, out, CHUNK)
        self.files.add(name)

    def folder(self, name: str) -> None:
        if self.problems:
            return
        try:
            (self.dest / name).mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            self.problems.append(f"{name[:120]}: a folder where the archive has a file")


def unpack(archive: Path, dest: Path) -> None:
    """Every member of ``archive`` under ``dest`` by the rules above, or InputError listing
    every problem (``dest`` then holds whatever was written: the caller's staged folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    plan = _Plan(dest=dest)
    try:
        if zipfile.is_zipfile(archive):
            _unzip(archive, plan)
        else:
            _untar(archive, plan)
    except (*DAMAGED, zipfile.BadZipFile, ValueError) as exc:
        raise InputError(f"{archive.name}: not a zip or tar archive that reads to its end "
                         f"({exc})", hint="nothing was unpacked or audited") from None
    if not plan.problems:
        _links(plan)
    if plan.problems:
        shown = plan.problems[:MAX_NAMED]
        more = len(plan.problems) - len(shown)
        raise InputError(f"{archive.name}: refused, {plural(len(plan.problems), 'problem')}:\n  "
                         + "\n  ".join(shown) + (f"\n  and {more} more" if more else ""),
                         hint="nothing was unpacked or audited")


def _untar(archive: Path, plan: _Plan) -> None:
    with tarfile.open(archive, "r:*") as tf:
        for m in _tar_members(tf):
            name = plan.place(m.name, tar_member_problem(m), m.size if m.isfile() else 0)
            if name is None:
                continue
            if m.isdir():
                plan.folder(name)
            elif m.issym() or m.islnk():
                plan.links.append((name, m.linkname, m.islnk()))
            else:
                f = tf.extractfile(m)
                assert f is not None
                plan.write(name, f, bool(m.mode & 0o111))


def _tar_members(tf: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (m := tf.next()) is not None:
        yield m


def _unzip(archive: Path, plan: _Plan) -> None:
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = plan.place(info.filename, zip_member_problem(info), info.file_size)
            if name is None:
                continue
            if info.is_dir():
                plan.folder(name)
            elif zip_is_link(info):
                target = zf.read(info)[:4096].decode("utf-8", "replace")
                bad = link_problem(name, target)
                if bad:
                    plan.problems.append(f"{name[:120]}: {bad}")
                else:
                    plan.links.append((name, target, False))
            else:
                with zf.open(info) as f:
                    plan.write(name, f, bool((info.external_attr >> 16) & 0o111))


def _links(plan: _Plan) -> None:
    """The links, last: a hard link as a copy of a file of the archive, a symlink only where
    it really points inside the folder."""
    root = plan.dest.resolve()
    for name, target, hard in sorted(plan.links):
        path = plan.dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if hard:
            source = posixpath.normpath(target)
            if source not in plan.files:
                plan.problems.append(f"{name[:120]}: hardlink to {target!r}, not a file of the "
                                     "archive")
                continue
            shutil.copyfile(plan.dest / source, path, follow_symlinks=False)
            plan.files.add(name)
            continue
        try:
            os.symlink(target, path)
        except OSError as exc:
            plan.problems.append(f"{name[:120]}: a link that cannot be made ({exc.strerror})")
            continue
        real = path.resolve()
        if real != root and root not in real.parents:
            path.unlink()
            plan.problems.append(f"{name[:120]}: a link that leads out of the folder "
                                 f"({target!r})")

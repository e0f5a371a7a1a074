"""What a conda package's own archive says about modes and links, once its cache is gone.

conda-meta's ``paths_data`` keeps each file's type and hashes, but not its executable bit nor a
softlink's target. The extracted package cache has both, and ``samebits install`` removes it.
The archive itself survives in samebits' download cache (``<cache>/archives/<sha256>/<fn>``,
hash-checked when it was fetched): ``archive_facts`` reads every member's owner-execute bit and
link target from it, after checking that the file still hashes to the package's sha256.

Reading a ``.conda`` archive means decompressing it whole, so the facts are kept beside it in
``<cache>/archive-facts/<sha256>.json`` (keyed by the archive's verified sha256, written
atomically); a second ``verify env`` reads a few kilobytes instead of gigabytes.
"""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samebits._io import sha256_file, sha256_hex
from samebits.lock.model import LockedPackage

FACTS_VERSION = 1


@dataclass(frozen=True, slots=True)
class MemberFacts:
    exec: bool | None            # owner-execute bit of a regular file
    target: str | None           # softlink target


def archive_path(cache: Path, sha256: str, filename: str) -> Path:
    return cache / "archives" / sha256 / filename


def archive_facts(cache: Path | None, sha256: str | None, filename: str | None
                  ) -> dict[str, MemberFacts] | None:
    """Member path -> facts for the archive with this sha256, or None when it is not cached."""
    if cache is None or not sha256 or not filename or "/" in filename:
        return None
    sha256 = sha256.lower()
    stored = cache / "archive-facts" / f"{sha256}.json"
    try:
        doc = json.loads(stored.read_bytes())
        if doc.get("version") == FACTS_VERSION and doc.get("sha256") == sha256:
            return {k: MemberFacts(v[0], v[1]) for k, v in doc["members"].items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    path = archive_path(cache, sha256, filename)
    try:
        if sha256_file(path) != sha256:
            return None  # not the archive the record names: say nothing rather than guess
        facts = _read_members(path)
    except (OSError, tarfile.TarError, ValueError, EOFError):
        return None
    _store(stored, sha256, facts)
    return facts



def _read_members(path: Path) -> dict[str, MemberFacts]:
    out: dict[str, MemberFacts] = {}

    def add(m: tarfile.TarInfo) -> None:
        name = m.name[2:] if m.name.startswith("./") else m.name
        if name.startswith("info/"):
            return
        if m.issym():
            out[name] = MemberFacts(None, m.linkname)
        elif m.isfile() or m.islnk():
            out[name] = MemberFacts(bool(m.mode & 0o100), None)

    if path.name.endswith(".conda"):
        from conda_package_streaming.package_streaming import stream_conda_component

        with open(path, "rb") as f:
            for _, member in stream_conda_component(path.name, f, "pkg"):
                add(member)
    else:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                add(member)
    return out


def _store(stored: Path, sha256: str, facts: dict[str, MemberFacts]) -> None:
    doc = {"version": FACTS_VERSION, "sha256": sha256,
           "members": {k: [v.exec, v.target] for k, v in sorted(facts.items())}}
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{stored.name}.", dir=stored.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        os.replace(tmp, stored)
    except OSError:
        pass  # a read-only cache: the facts are simply read from the archive again next time


def cached_wheel_tags(cache: Path | None) -> Callable[[LockedPackage], frozenset[str] | None]:
    """``lp -> tags`` of the locked wheel's own ``WHEEL``, read from the install cache's unpacked
    entry (``samebits.install.cache``) when it holds the archive and the file still hashes to
    what was recorded while the archive was proved against the lock; None otherwise."""
    from samebits.install.cache import read_entry
    from samebits.install.fetch import cache_key
    from verify.env.lockcheck import read_wheel_tags

    def tags(lp: LockedPackage) -> frozenset[str] | None:
        if cache is None or not lp.filename.endswith(".whl"):
            return None
        entry = read_entry(cache, cache_key(lp), lp.filename)
        if entry is None:
            return None
        for m in entry.members:
            parts = m.path.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "WHEEL":
                try:
                    data = Path(entry.source(m.path)).read_bytes()
                except OSError:
                    return None
                if m.sha256 != sha256_hex(data):
                    return None
                return read_wheel_tags(data.decode("utf-8", "replace"))
        return None

    return tags

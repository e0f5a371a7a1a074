"""The coverage of one platform of a lock, from its archives, without installing anything.

Every archive that can hold native code (not a ``none-any`` wheel) is fetched into the cache
(``CACHE/archives/<sha256>/<file>``, hash-checked against the lock: ``samebits.install``) and
read from inside (``verify.kernels.codescan.scan_archive``). What one archive holds is kept in
``CACHE/coverage/<sha256>.json`` (with the reader's format: a newer reader rescans), so a
refresh only reads archives it has not seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from samebits._io import atomic_write, canonical_json
from samebits.errors import plural
from samebits.install import fetch_all
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from verify.kernels.codescan import ArchiveCode, coverage_of_archives, scan_archive
from verify.kernels.coverage import Coverage

# Bump when the reader would report other things for the same archive.
SCAN_FORMAT = 2


def may_hold_code(p: LockedPackage) -> bool:
    """Pure-Python wheels (``-none-any``) hold no native code; everything else is read."""
    return not (p.manager == "pip" and p.filename.endswith("-none-any.whl"))


def _cache_file(cache: Path, p: LockedPackage) -> Path:
    return cache / "coverage" / f"{p.sha256 or p.md5}.json"


def _label(p: LockedPackage) -> str:
    return f"{p.name} {p.version}"


def _scan(job: tuple[str, str, str]) -> dict:
    path, label, tmp = job
    return scan_archive(Path(path), label, tmp=Path(tmp)).to_dict()


def cached_scan(p: LockedPackage, cache: Path) -> ArchiveCode | None:
    f = _cache_file(cache, p)
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("format") != SCAN_FORMAT or doc.get("archive") != p.filename:
        return None
    return ArchiveCode.from_dict(doc["code"])


def lock_coverage(env: LockedEnv, platform: str, cache: Path, *,
                  packages: Sequence[str] | None = None, jobs: int = 2,
                  progress: Callable[[str], None] | None = None,
                  sources: Sources = NO_SOURCES) -> tuple[Coverage, list[str]]:
    """(coverage, the archives read) of ``platform`` of ``env``; ``packages`` limits the scan
    to those names."""
    env.check_platform(platform)
    chosen = [p for p in [*env.conda(platform), *env.pip(platform)] if may_hold_code(p)
              and (packages is None or p.name in packages)]
    parts: dict[str, ArchiveCode] = {}
    todo = []
    for p in chosen:
        hit = cached_scan(p, cache)
        if hit is not None:
            parts[p.name] = hit
        else:
            todo.append(p)
    if todo:
        if progress:
            progress(f"fetching {plural(len(todo), 'archive')} of {env.name} ({platform})")
        fetched = {f.package.name: f.path
                   for f in fetch_all(todo, cache, sources=sources, say=progress,
                                      outcome="nothing was checked")}
        tmp = cache / "coverage" / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        jobs_ = [(str(fetched[p.name]), _label(p), str(tmp)) for p in todo]
        if progress:
            progress(f"reading the device code of {plural(len(todo), 'archive')}")
        with ProcessPoolExecutor(max_workers=max(1, min(jobs, len(todo)))) as pool:
            for p, doc in zip(todo, pool.map(_scan, jobs_), strict=True):
                atomic_write(_cache_file(cache, p), canonical_json(
                    {"format": SCAN_FORMAT, "archive": p.filename, "code": doc}))
                parts[p.name] = ArchiveCode.from_dict(doc)
    return coverage_of_archives([parts[p.name] for p in chosen]), [p.filename for p in chosen]

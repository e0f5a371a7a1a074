"""Gathering a bundle's inputs (``samebits.bundle.make``): the archives from the install cache
(fetching what it lacks), the project's containers/<env>/ files, checked against the lock.

The I/O edge of the bundle writer; ``samebits.bundle.make`` plans and writes, ``bundleread`` reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from samebits.bundle.make import (
    Archive,
    BundlePlan,
    by_archive,
    locked_packages,
    plan,
    stale_containers,
)
from samebits.errors import InputError
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from samebits.render.oci import file_digest


def prepare(env: LockedEnv, platforms: Sequence[str], *, cache: Path, containers: Path,
            note: Callable[[str], None] = lambda s: None,
            sources: Sources = NO_SOURCES) -> BundlePlan:
    """The plan of ``env``'s bundle: archives the cache lacks fetched, containers/<env>/
    (``containers``) read and checked against the lock (InputError naming every stale file)."""
    from samebits.render.conda import conda_files

    packages = locked_packages(env, platforms)
    fetch_missing(packages, cache, note=note, sources=sources)
    archives = locate(packages, cache)
    found = read_containers(containers)
    fresh = {n: t for plat in platforms for n, t in conda_files(env, plat).items()}
    stale = stale_containers(env, platforms, found, fresh)
    if stale:
        raise InputError(f"{containers} was not rendered from {env.origin}:\n  "
                         + "\n  ".join(stale),
                         hint=f"re-render it (samebits render conda|containerfile|nix "
                         f"{env.name}) and bundle again")
    lock_bytes = env.path.read_bytes()
    if hashlib.sha256(lock_bytes).hexdigest() != env.digest:
        raise InputError(f"{env.path}: changed while it was being bundled")
    return plan(env, platforms, lock_bytes=lock_bytes, archives=archives,
                containers={**found, **{n: t.encode() for n, t in fresh.items()}})


def locate(packages: Sequence[LockedPackage], cache: Path) -> tuple[Archive, ...]:
    """Every archive in ``cache`` (present: ``fetch_missing`` first), its size, and its sha256
    (the lock's, or, locked by md5 alone, hashed here)."""
    out = []
    for path, group in by_archive(packages).items():
        source = cache / path
        sha = group[0].sha256 or file_digest(source).removeprefix("sha256:")
        out.append(Archive(path=path, source=source, size=source.stat().st_size, sha256=sha,
                           md5=group[0].md5, packages=tuple(group)))
    return tuple(out)


def fetch_missing(packages: Sequence[LockedPackage], cache: Path,
                  note: Callable[[str], None] = lambda s: None,
                  sources: Sources = NO_SOURCES) -> int:
    """Fetch the archives ``cache`` lacks (hash-checked and scanned by ``samebits.install``);
    how many were fetched."""
    from samebits.install import fetch_all

    missing = [group[0] for path, group in by_archive(packages).items()
               if not (cache / path).is_file()]
    if missing:
        note(f"fetching {len(missing)} archive(s) the cache {cache} lacks")
        fetch_all(missing, cache, sources=sources, say=note, outcome="no bundle was written")
    return len(missing)


def read_containers(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` (containers/<env>/), by '/'-path; none if absent."""
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and not p.name.startswith(".")}

"""``pylock.toml`` (PEP 751), read and validated by ``packaging.pylock``.

``Pylock.from_dict`` is the judge of the format (it refuses an unknown ``lock-version`` and
conflicting sources). Selection follows the PEP's installer steps, as ``Pylock.select`` does,
once per target platform: a package whose ``marker`` is false is skipped; of its ``wheels``
the best fit for the target's tags is taken (packaging's tag selector). Unlike ``select``,
which stops at the first package it cannot place, every such package is listed as dropped: a
VCS checkout, a directory, an archive, or an sdist (each would be built on install, so no
artifact is locked).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from samebits.errors import LockfileError
from samebits.foreign.model import (
    DEFAULT_PLATFORMS,
    Conversion,
    Converted,
    Dropped,
    ReadOptions,
    declared_size,
    refuse_bad_urls,
)
from samebits.foreign.target import Target, targets
from samebits.lock.model import Lock, LockedPackage, sort_packages

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FORMAT = "pylock.toml"


def is_pylock(data: dict[str, Any]) -> bool:
    return "lock-version" in data


def read_pylock(path: Path, data: dict[str, Any], *, source: str,
                options: ReadOptions) -> Converted:
    from packaging.pylock import Pylock, PylockUnsupportedVersionError, PylockValidationError

    try:
        lock = Pylock.from_dict(data)
    except PylockUnsupportedVersionError as exc:
        raise LockfileError(f"{source}: {exc}", hint="samebits reads pylock.toml "
                            "lock-version 1.x (PEP 751)") from None
    except PylockValidationError as exc:
        raise LockfileError(f"{source}: not a valid pylock.toml: {exc}") from None
    refuse_bad_urls(source, ((f"{p.name} {p.version}: {where}", a.url) for p in lock.packages
                             for where, a in [*(("wheels", w) for w in p.wheels or ()),
                                              ("sdist", p.sdist), ("archive", p.archive)]
                             if a is not None), fmt="pylock.toml")
    base = Path(path).parent
    packages: list[LockedPackage] = []
    dropped: list[Dropped] = []
    notes: list[str] = []
    ts = targets(options, default_platforms=DEFAULT_PLATFORMS)
    for target in ts:
        if lock.requires_python and not lock.requires_python.contains(target.full_version):
            notes.append(f"requires-python {lock.requires_python} excludes Python "
                         f"{target.full_version}")
        got, lost = _select(lock, target, base)
        packages += got
        dropped += lost
    t0 = ts[0]
    custom = {"samebits.converted-from": FORMAT, "samebits.python": t0.line,
              **{f"samebits.__glibc.{t.platform}": t.glibc for t in ts}}
    if lock.created_by:
        notes.append(f"written by {lock.created_by}")
    return Converted(
        lock=Lock(platforms=tuple(t.platform for t in ts), channels=(), sources=(source,),
                  content_hash={}, custom=custom, packages=sort_packages(packages)),
        conversion=Conversion(format=FORMAT, source=source,
                              choices=(("python", t0.python), ("glibc", t0.glibc)),
                              dropped=tuple(dropped), notes=tuple(notes)))


def _select(lock: Any, target: Target, base: Path) -> tuple[list[LockedPackage], list[Dropped]]:
    env: dict[str, Any] = {**target.environment(), "extras": frozenset(),
                           "dependency_groups": frozenset(lock.default_groups or ())}
    out: list[LockedPackage] = []
    dropped: list[Dropped] = []
    for p in lock.packages:
        if p.marker is not None and not p.marker.evaluate(env, context="lock_file"):
            continue
        name = str(canonicalize_name(p.name))
        version = str(p.version) if p.version else None

        def drop(where: str, why: str, name: str = name, version: str | None = version) -> None:
            dropped.append(Dropped(platform=target.platform, name=name, version=version,
                                   source=where, reason=why))

        if p.vcs is not None:
            drop(f"{p.vcs.type} {p.vcs.url or p.vcs.path}",
                 "a VCS checkout: built from source, no artifact is locked")
        elif p.directory is not None:
            drop(p.directory.path, "a local directory" + (" (editable)" if p.directory.editable
                                                          else "")
                 + ": built from source, no artifact is locked")
        elif p.archive is not None:
            drop(p.archive.url or p.archive.path or "", "an archive: built from source, no "
                 "wheel is locked")
        elif p.wheels:
            best = target.best((w, w.filename) for w in p.wheels)
            if best is None:
                why = (f"no wheel for {target.describe()}"
                       + ("; only an sdist, which would have to be built" if p.sdist else ""))
                drop(p.wheels[0].url or p.wheels[0].path or "", why)
                continue
            url = best.url or (base / best.path).resolve().as_uri()
            out.append(LockedPackage(name=name, version=version or "", manager="pip",
                                     platform=target.platform, url=url,
                                     sha256=best.hashes.get("sha256"),
                                     size=declared_size(best.size)))
        elif p.sdist is not None:
            drop(p.sdist.url or p.sdist.path or "", "only an sdist: it would be built on "
                 "install, so no artifact is locked")
    return out, dropped


def load_toml_text(text: str, *, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockfileError(f"{source}: not TOML: {exc}") from None

"""``pixi.lock``, versions 6 and 7 (what pixi writes today), read with py-rattler.

pixi writes its lock with rattler's ``rattler_lock`` crate; py-rattler's ``LockFile`` is that
same reader, so the file is read by the reference implementation, not by a second parser here.
The version is checked first, from the file's ``version:`` line: 6 and 7 are read, anything
older or newer is refused by name (pixi >= 0.68 writes 7, and rewrites older files on
``pixi lock``).

One environment (``--lock-env``, default ``default``) becomes a ``Lock`` with every platform
the environment has:

- a conda binary package keeps its URL, md5, sha256, build and ``depends``;
- a PyPI package that is a wheel URL keeps its URL and sha256 (its dependencies: the names of
  its ``requires_dist`` that the same platform locks);
- a conda source package (pixi build) or a PyPI package given by a path, a directory or an
  sdist has no locked artifact: it is listed as dropped, with its location.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from samebits.errors import LockfileError, Problem, UsageError, clip
from samebits.foreign.model import Conversion, Converted, Dropped, ReadOptions, declared_size
from samebits.foreign.target import host_python
from samebits.lock.model import Lock, LockedPackage, conda_dependencies, sort_packages
from samebits.lock.validate import HASH_LENGTHS, HEX

VERSIONS = (6, 7)
DEFAULT_ENV = "default"
VERSION_RE = re.compile(r"^version:\s*['\"]?(\d+)['\"]?\s*$", re.M)


def pixi_version(text: str) -> int | None:
    m = VERSION_RE.search(text[:4096])
    return int(m.group(1)) if m else None


def is_pixi(text: str) -> bool:
    return pixi_version(text) is not None and re.search(r"^environments:", text, re.M) is not None


def read_pixi(path: Path, text: str, *, source: str, options: ReadOptions) -> Converted:
    import rattler

    version = pixi_version(text)
    if version not in VERSIONS:
        raise LockfileError(f"{source}: pixi.lock version {version}: samebits reads versions "
                            f"{' and '.join(map(str, VERSIONS))}",
                            hint="rewrite it with a current pixi (`pixi lock`; pixi 0.68 and "
                            "later write version 7)")
    problems = raw_hash_problems(text, source)
    if problems:  # before py-rattler, which reads a malformed PyPI hash as no hash at all
        raise LockfileError(problems, hint="fix the pixi.lock file's hashes or re-create it "
                            "with `pixi lock`")
    try:
        lock_file = rattler.LockFile.from_path(Path(path))
    except Exception as exc:  # py-rattler raises its own ParseCondaLockError
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LockfileError(f"{source}: not a readable pixi.lock v{version}: {msg[:300]}"
                            ) from None
    names = sorted(name for name, _ in lock_file.environments())
    env_name = options.environment or DEFAULT_ENV
    env = lock_file.environment(env_name)
    if env is None:
        raise UsageError(f"{source}: no environment '{env_name}' (it has {', '.join(names)})",
                         hint="pick one with --lock-env NAME")
    platforms = sorted((p for p in env.platforms()), key=lambda p: p.name)
    wanted = set(options.platforms)
    packages: list[LockedPackage] = []
    dropped: list[Dropped] = []
    for plat in platforms:
        if wanted and plat.name not in wanted:
            continue
        got, lost = _platform_packages(env.packages(plat) or [], plat.name)
        packages += got
        dropped += lost
    conda_python = next((p.version for p in packages
                         if p.manager == "conda" and p.name == "python"), None)
    custom = {"samebits.converted-from": f"pixi.lock v{version}",
              "samebits.lock-environment": env_name}
    if conda_python:
        custom["samebits.python"] = ".".join(conda_python.split(".")[:2])
    elif any(p.manager == "pip" for p in packages):
        # a PyPI-only environment: its venv's Python is --python's (or --lock-python's), as
        # for the other PyPI-only locks (uv.lock, pylock.toml), else this machine's line
        line = options.python or host_python()
        custom["samebits.python"] = ".".join(line.split(".")[:2])
    kept = [p.name for p in platforms if not wanted or p.name in wanted]
    lock = Lock(platforms=tuple(kept), channels=tuple(str(c).rstrip("/") for c in env.channels()),
                sources=(source,), content_hash={}, custom=custom,
                packages=sort_packages(packages))
    notes = []
    if len(names) > 1:
        notes.append(f"environments in the file: {', '.join(names)} (--lock-env picks one)")
    return Converted(lock=lock, conversion=Conversion(
        format=f"pixi.lock v{version}", source=source, choices=(("environment", env_name),),
        dropped=tuple(sorted(dropped, key=lambda d: (d.platform, d.name))), notes=tuple(notes)))


_ENTRY = re.compile(r"^- (conda|pypi): (.*)$")
_DIGEST = re.compile(r"^ +(md5|sha256): *['\"]?([^'\"\s]*)['\"]? *$")


def raw_hash_problems(text: str, source: str) -> list[Problem]:
    """Every ``md5:`` and ``sha256:`` of the file's ``packages:`` entries that is not hex of
    its length, read from the text: py-rattler reads a PyPI entry's malformed sha256 (40 hex
    digits, say) as no hash at all, where the other readers refuse it (one rule,
    ``samebits.lock.validate``)."""
    out: list[Problem] = []
    entry = None
    for line in text.splitlines():
        if m := _ENTRY.match(line):
            entry = f"packages: {m.group(1)}: {clip(m.group(2).rsplit('/', 1)[-1], 80)}"
        elif entry and (m := _DIGEST.match(line)):
            algo, digest = m.groups()
            if len(digest) != HASH_LENGTHS[algo] or not HEX.fullmatch(digest):
                out.append(Problem(file=source, key=f"{entry}: {algo}", value=digest,
                                   message=f"not a {algo} ({HASH_LENGTHS[algo]} hex digits)"))
    return out


def _platform_packages(locked: list[Any], platform: str
                       ) -> tuple[list[LockedPackage], list[Dropped]]:
    from rattler.lock.package import CondaLockedBinaryPackage, PypiLockedPackage

    out: list[LockedPackage] = []
    dropped: list[Dropped] = []
    pypi = []
    for p in locked:
        if isinstance(p, CondaLockedBinaryPackage):
            r = p.repo_data_record()
            out.append(LockedPackage(
                name=r.name.normalized, version=str(r.version), manager="conda",
                platform=platform, url=r.url, md5=r.md5.hex() if r.md5 else None,
                sha256=r.sha256.hex() if r.sha256 else None, build=str(r.build),
                dependencies=conda_dependencies(r.depends), size=declared_size(r.size)))
        elif isinstance(p, PypiLockedPackage):
            pypi.append(p)
        else:  # a conda source package: built by pixi from its location
            dropped.append(Dropped(platform=platform, name=p.name, version=_version(p),
                                   source=str(p.location),
                                   reason="a conda source package (built by pixi): no "
                                   "archive to lock"))
    wheels = [p for p in pypi if _is_wheel_url(p.location)]
    names = {str(canonicalize_name(p.name)) for p in wheels}
    for p in pypi:
        if p not in wheels:
            dropped.append(Dropped(platform=platform, name=p.name, version=_version(p),
                                   source=str(p.location), reason=_why_not(p.location)))
            continue
        sha = _pypi_sha256(p)
        out.append(LockedPackage(
            name=str(canonicalize_name(p.name)), version=str(p.version), manager="pip",
            platform=platform, url=p.location, sha256=sha,
            dependencies=_pypi_deps(p.requires_dist, names)))
    return out, dropped


def _pypi_sha256(p: Any) -> str | None:
    """The wheel's sha256; py-rattler raises AttributeError for an entry with an md5 only."""
    try:
        hashes = p.hashes
        digest = hashes.sha256 if hashes is not None else None
    except AttributeError:
        return None
    return digest.hex() if digest else None


def _version(p: Any) -> str | None:
    try:
        v = p.version
    except Exception:  # a source package without evaluated metadata
        return None
    return None if v is None or str(v) == "<dynamic>" else str(v)


def _is_wheel_url(location: str) -> bool:
    parts = urlsplit(location)
    return parts.scheme in ("http", "https", "file") and parts.path.endswith(".whl")


def _why_not(location: str) -> str:
    parts = urlsplit(location)
    if parts.scheme in ("http", "https", "file"):
        if PurePosixPath(parts.path).suffix in (".gz", ".zip", ".bz2", ".tgz"):
            return "an sdist: it would be built on install, so no artifact is locked"
        return "not a wheel URL"
    if location.startswith("git+") or parts.scheme.startswith("git"):
        return "a VCS checkout: built from source, no artifact is locked"
    return "a local path: built from source, no artifact is locked"


def _pypi_deps(requires: list[str], locked: set[str]) -> tuple[tuple[str, str], ...]:
    deps = set()
    for r in requires or ():
        try:
            name = str(canonicalize_name(Requirement(r).name))
        except InvalidRequirement:
            continue
        if name in locked:
            deps.add(name)
    return tuple((d, "*") for d in sorted(deps))

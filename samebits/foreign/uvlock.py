"""``uv.lock`` (version 1), a universal lock: resolved here for one platform and Python at a time.

uv documents the file's fields (docs "uv.lock"); what an installer does with them is what
``uv sync`` does, followed here for a target machine (``Target``):

- start from the workspace members (``[manifest] members``, else every package whose source
  is ``virtual``, ``editable`` or ``directory``) with their ``dependencies`` and the default
  group (``dev-dependencies.dev``), no extras;
- follow each dependency whose ``marker`` holds for the target, to the package of that name
  (narrowed by the dependency's ``version``/``source`` and the package's
  ``resolution-markers`` when the lock forks), adding the optional dependencies of each
  ``extra`` the dependency asks for;
- of a reached package's ``wheels``, take the best fit for the target's tags (packaging's
  selector, pip's rule); the wheel's ``url`` (or ``path``, relative to a local registry or the
  lock's folder) and ``hash`` become the locked artifact.

Dropped, with the reason: the members themselves (built from source), git and directory
sources, and packages with no wheel for the target (only an sdist). A wheel without a hash (uv
records none for a local ``find-links`` folder) is carried without one: install refuses it.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker, Marker
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

FORMAT = "uv.lock"
VERSIONS = (1,)
DEFAULT_GROUPS = ("dev",)
ROOT_SOURCES = ("virtual", "editable", "directory")


def is_uvlock(data: dict[str, Any]) -> bool:
    return isinstance(data.get("package"), list) and "version" in data and "lock-version" \
        not in data and "metadata" not in data


def read_uvlock(path: Path, data: dict[str, Any], *, source: str,
                options: ReadOptions) -> Converted:
    if data.get("version") not in VERSIONS:
        raise LockfileError(f"{source}: uv.lock version {data.get('version')!r}: samebits "
                            "reads version 1", hint="rewrite it with a current uv (`uv lock`)")
    packages = _packages(data["package"], source)
    refuse_bad_urls(source, ((f"{_name(p)} {p.get('version')}: {where}", a.get("url"))
                             for p in packages
                             for where, a in [*(("wheels", w) for w in p.get("wheels") or ()),
                                              ("sdist", p.get("sdist"))]
                             if isinstance(a, dict)), fmt="uv.lock")
    base = Path(path).parent
    members = {str(canonicalize_name(m)) for m in
               (data.get("manifest") or {}).get("members") or ()}
    roots = [p for p in packages if _kind(p) in ROOT_SOURCES
             and (not members or _name(p) in members)]
    locked: list[LockedPackage] = []
    dropped: list[Dropped] = []
    notes: list[str] = []
    ts = targets(options, default_platforms=DEFAULT_PLATFORMS)
    for target in ts:
        reached = _walk(packages, roots, target, source)
        for p in reached:
            got = _artifact(p, target, base)
            if isinstance(got, LockedPackage):
                locked.append(got)
            elif got is not None:
                dropped.append(got)
    for r in roots:
        if _kind(r) == "virtual":
            notes.append(f"{_name(r)} is a virtual project: nothing of its own to install")
    unhashed = sorted({p.name for p in locked if not p.sha256})
    if unhashed:
        notes.append(f"uv recorded no hash for {', '.join(unhashed)} (a local folder): "
                     "install refuses them")
    t0 = ts[0]
    custom = {"samebits.converted-from": FORMAT, "samebits.python": t0.line,
              **{f"samebits.__glibc.{t.platform}": t.glibc for t in ts}}
    return Converted(
        lock=Lock(platforms=tuple(t.platform for t in ts), channels=(), sources=(source,),
                  content_hash={}, custom=custom, packages=sort_packages(locked)),
        conversion=Conversion(format=FORMAT, source=source,
                              choices=(("python", t0.python), ("glibc", t0.glibc),
                                       ("groups", ",".join(DEFAULT_GROUPS))),
                              dropped=tuple(dropped), notes=tuple(notes)))


def _packages(raw: Any, source: str) -> list[dict[str, Any]]:
    out = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise LockfileError(f"{source}: package[{i}]: a table with a name is required")
        if not isinstance(p.get("source", {}), dict):
            raise LockfileError(f"{source}: package[{i}] ({p['name']}): source must be a table")
        out.append(p)
    return out


def _name(p: dict[str, Any]) -> str:
    return str(canonicalize_name(p["name"]))


def _kind(p: dict[str, Any]) -> str:
    src = p.get("source") or {}
    return next(iter(src), "registry")


def _holds(marker: str | None, env: dict[str, str], source: str) -> bool:
    if not marker:
        return True
    try:
        return Marker(marker).evaluate({**env, "extra": ""})
    except InvalidMarker as exc:
        raise LockfileError(f"{source}: marker {marker!r}: {exc}") from None


def _walk(packages: list[dict[str, Any]], roots: list[dict[str, Any]], target: Target,
          source: str) -> list[dict[str, Any]]:
    env = target.environment()
    by_name: dict[str, list[dict[str, Any]]] = {}
    for p in packages:
        by_name.setdefault(_name(p), []).append(p)
    seen: dict[int, set[str]] = {}
    order: list[dict[str, Any]] = []
    queue: deque[tuple[dict[str, Any], frozenset[str], bool]] = deque(
        (r, frozenset(), True) for r in roots)
    while queue:
        pkg, extras, is_root = queue.popleft()
        had = seen.get(id(pkg))
        if had is not None and extras <= had:
            continue
        if had is None:
            order.append(pkg)
        seen[id(pkg)] = (had or set()) | extras
        deps = list(pkg.get("dependencies") or ())
        for extra in extras:
            deps += (pkg.get("optional-dependencies") or {}).get(extra) or ()
        if is_root:
            for group in DEFAULT_GROUPS:
                deps += (pkg.get("dev-dependencies") or {}).get(group) or ()
        for dep in deps:
            if not _holds(dep.get("marker"), env, source):
                continue
            found = _resolve(dep, by_name, env, source)
            queue.append((found, frozenset(dep.get("extra") or ()), False))
    return order


def _resolve(dep: dict[str, Any], by_name: dict[str, list[dict[str, Any]]],
             env: dict[str, str], source: str) -> dict[str, Any]:
    name = str(canonicalize_name(dep["name"]))
    cands = by_name.get(name, [])
    if "version" in dep:
        cands = [c for c in cands if str(c.get("version")) == str(dep["version"])]
    if "source" in dep:
        cands = [c for c in cands if c.get("source") == dep["source"]]
    if len(cands) > 1:
        cands = [c for c in cands if any(_holds(m, env, source)
                                         for m in c.get("resolution-markers") or [""])]
    if len(cands) != 1:
        what = "no package" if not cands else f"{len(cands)} packages"
        raise LockfileError(f"{source}: dependency {dep!r}: {what} of that name in the lock "
                            "fits", hint="re-lock with `uv lock`")
    return cands[0]


def _artifact(p: dict[str, Any], target: Target, base: Path) -> LockedPackage | Dropped | None:
    src = p.get("source") or {}
    kind = _kind(p)
    name, version = _name(p), p.get("version")

    def drop(where: str, why: str) -> Dropped:
        return Dropped(platform=target.platform, name=name, version=version, source=where,
                       reason=why)

    if kind == "virtual":
        return None
    if kind in ("editable", "directory"):
        return drop(str(src[kind]), f"a local {kind} project: built from source, no "
                    "artifact is locked")
    if kind == "git":
        return drop(f"git {src['git']}", "a VCS checkout: built from source, no artifact is "
                    "locked")
    wheels = [w for w in p.get("wheels") or () if isinstance(w, dict)]
    best = target.best((w, _filename(w)) for w in wheels)
    if best is None:
        where = (p.get("sdist") or {}).get("url") or str(src.get(kind, ""))
        extra = "; only an sdist, which would have to be built" if p.get("sdist") else ""
        return drop(where, f"no wheel for {target.describe()}{extra}")
    url = best.get("url") or _local(best, src, kind, base)
    algo, _, digest = str(best.get("hash", "")).partition(":")
    return LockedPackage(name=name, version=str(version), manager="pip",
                         platform=target.platform, url=url,
                         sha256=digest if algo == "sha256" and digest else None,
                         size=declared_size(best.get("size")),
                         dependencies=tuple(sorted({(str(canonicalize_name(d["name"])), "*")
                                                    for d in p.get("dependencies") or ()})))


def _filename(w: dict[str, Any]) -> str:
    return str(w.get("filename") or str(w.get("url") or w.get("path") or "").rsplit("/", 1)[-1])


def _local(w: dict[str, Any], src: dict[str, Any], kind: str, base: Path) -> str:
    """A wheel uv names by path: relative to a local registry (find-links folder), or the
    package's own ``path`` source (the wheel file itself)."""
    if kind == "path" and "path" not in w:
        return (base / str(src["path"])).resolve().as_uri()
    root = base / src["registry"] if kind == "registry" and "://" not in src["registry"] else base
    return (root / str(w["path"])).resolve().as_uri()

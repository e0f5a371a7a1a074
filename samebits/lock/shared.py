"""Shared paths: the files two wheels of one platform write with different bytes, and whose stay.

``pip install`` of a resolution where two wheels ship one path (``opencv-python`` and
``opencv-python-headless`` both ship ``cv2/``) installs both, one after the other in its
installation order (``samebits.lock.pipordering``), and the file of the one installed last
stays. ``samebits lock`` finds these paths for each platform's PyPI part and records them, so
every install of the lock places the same bytes whoever installs it, and ``verify env`` knows
whose file each one is.

**Finding them** (``record_shared``, at lock time): every wheel's file list is read
(``samebits.solve.wheelfiles``: its RECORD, and its entry points' ``bin/`` scripts) and mapped
to where install places it (``samebits.install.wheels.installed_path``: a wheel's ``.data/``
schemes to prefix paths). A path two or more wheels write is shared when their RECORD hashes
are not all the same (the same hash is the same file: every CUDA 12 ``nvidia-*`` wheel ships
one empty ``nvidia/__init__.py``); a hash RECORD does not give counts as different, and so do
two scripts generated from different entry points. Then pip's order is computed from the
wheels' metadata and the spec's PyPI requirements (the resolution's root requirements), markers
read for the platform and the spec's Python.

**The record**, one key per platform whose PyPI part has shared paths (none: no key, the lock
as before), in ``metadata.custom_metadata`` (conda-lock v1's one free field; a string map, so
the value is canonical JSON, as ``samebits.lock.builds`` records builds):

    samebits.shared.linux-64: '{"format":1,"order":"pip 26.3","shared":[{"paths":[
      "lib/python3.11/site-packages/cv2/cv2.abi3.so", ...],
      "writers":["opencv-python-headless","opencv-python"]}]}'

Each group is the paths one sequence of writers shares; ``writers`` are canonical project
names in pip's installation order, the last one the winner, whose file stays. Paths are
prefix-relative (the lock's Python line is in them), sorted; groups sorted by writers.
``samebits install`` places the winner's file and says so (``samebits.install.overwrite``);
``verify env LOCK`` holds the file to the winner's RECORD and lists the others' lines for it as
overwritten (``verify.env.drift``).

    LockfileError (samebits.errors)   a record this samebits did not write, named by key
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samebits.errors import InputError, UnreachableError, plural
from samebits.lock.model import META, LockedPackage

if TYPE_CHECKING:
    from samebits.lock.builds import BuildRecord
    from samebits.spec.model import EnvironmentSpec, PlatformTarget

SHARED_PREFIX = META + "shared."
SHARED_FORMAT = 1
READ_THREADS = 8
RELOCK = "re-lock it with `samebits lock`, which records the paths two wheels write"


def pip_order_name() -> str:
    """The order a new record is made in: ``pip <version>`` of the pip whose resolver
    ``samebits.lock.pipordering`` transcribes (imported here only: its requirement parser is
    not needed by an install that reads the record)."""
    from samebits.lock.pipordering import PIP_VERSION

    return f"pip {PIP_VERSION}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedGroup:
    """Paths one sequence of wheels writes, in pip's order: the last one's files stay."""

    writers: tuple[str, ...]
    paths: tuple[str, ...]

    @property
    def winner(self) -> str:
        return self.writers[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedPaths:
    """One platform's shared paths, as the lock records them."""

    platform: str
    groups: tuple[SharedGroup, ...]
    order: str = field(default_factory=pip_order_name)

    @property
    def key(self) -> str:
        return f"{SHARED_PREFIX}{self.platform}"

    def writers(self) -> dict[str, tuple[str, ...]]:
        """Path -> its writers, in pip's order (the last one's file stays)."""
        return {p: g.writers for g in self.groups for p in g.paths}

    def to_text(self) -> str:
        doc = {"format": SHARED_FORMAT, "order": self.order,
               "shared": [{"writers": list(g.writers), "paths": list(g.paths)}
                          for g in self.groups]}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, key: str, text: str, *, file: str) -> SharedPaths:
        """The record at ``key``; a LockfileError naming the file, key and value if it is not
        one this samebits wrote."""
        from samebits.lock.builds import record_doc

        doc, bad = record_doc(key, text, file=file, what="shared-paths record",
                              fmt=SHARED_FORMAT, hint=RELOCK)
        try:
            groups = tuple(SharedGroup(writers=_strings(g["writers"]),
                                       paths=_strings(g["paths"])) for g in doc["shared"])
            order = str(doc["order"])
        except (KeyError, TypeError, ValueError) as exc:
            raise bad(f"incomplete shared-paths record ({type(exc).__name__}: {exc})") \
                from None
        seen: set[str] = set()
        for g in groups:
            if len(g.writers) < 2 or len(set(g.writers)) != len(g.writers):
                raise bad(f"writers {list(g.writers)}: two or more packages, each once")
            again = seen.intersection(g.paths)
            if again:
                raise bad(f"{sorted(again)[0]} is in two groups")
            seen.update(g.paths)
        return cls(platform=key.removeprefix(SHARED_PREFIX), groups=groups, order=order)


def _strings(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"not a list of names: {value!r}")
    return tuple(value)


def shared_metadata(records: Iterable[SharedPaths]) -> dict[str, str]:
    """The custom_metadata entries of these records."""
    return {r.key: r.to_text() for r in sorted(records, key=lambda r: r.key)}


def shared_of(custom: Mapping[str, str], platform: str, *, file: str) -> SharedPaths | None:
    """The record a lock's metadata holds for ``platform``, or None."""
    key = SHARED_PREFIX + platform
    text = custom.get(key)
    return None if text is None else SharedPaths.from_text(key, text, file=file)


# ------------------------------------------------------------------------- pure detection

def shared_paths(writes: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, ...]]:
    """``writes``: package -> {prefix-relative path -> what it writes there (a sha256, a
    script's entry point; "" unknown)}. The paths two or more packages write with contents
    not all the same (an unknown one is never the same), each with its writers, sorted."""
    by_path: dict[str, list[tuple[str, str]]] = {}
    for package, paths in writes.items():
        for path, content in paths.items():
            by_path.setdefault(path, []).append((package, content))
    out = {}
    for path, group in by_path.items():
        contents = {c for _, c in group}
        if len(group) > 1 and (len(contents) > 1 or "" in contents):
            out[path] = tuple(sorted(p for p, _ in group))
    return dict(sorted(out.items()))


def in_order(platform: str, shared: Mapping[str, Sequence[str]],
             order: Sequence[str]) -> SharedPaths:
    """The record of ``shared`` (path -> its writers) with each path's writers in ``order``
    (pip's installation order), grouped by writers."""
    rank = {name: i for i, name in enumerate(order)}
    groups: dict[tuple[str, ...], list[str]] = {}
    for path, writers in shared.items():
        ranked = tuple(sorted(writers, key=lambda n: (rank[n], n)))
        groups.setdefault(ranked, []).append(path)
    return SharedPaths(platform=platform, groups=tuple(
        SharedGroup(writers=w, paths=tuple(sorted(p))) for w, p in sorted(groups.items())))


# -------------------------------------------------------------------------- at lock time

async def record_shared(spec: EnvironmentSpec, target: PlatformTarget,
                        packages: Sequence[LockedPackage],
                        builds: Mapping[tuple[str, str], BuildRecord], *, cache: Path,
                        timeout: float, offline: bool) -> SharedPaths | None:
    """The shared paths of ``target``'s PyPI part (``packages``: every package the platform
    locks, its built sdists in ``builds``), or None when no two wheels write one path with
    different bytes."""
    import asyncio  # the lock's event loop has it already; install reads this module too

    return await asyncio.to_thread(_record, spec, target, packages, builds, cache=cache,
                                   timeout=timeout, offline=offline)


def _record(spec: EnvironmentSpec, target: PlatformTarget, packages: Sequence[LockedPackage],
            builds: Mapping[tuple[str, str], BuildRecord], *, cache: Path, timeout: float,
            offline: bool) -> SharedPaths | None:
    from samebits.foreign.target import Target
    from samebits.install.wheels import installed_path, layout_for
    from samebits.lock.pipordering import Dist, pip_order

    pip = [p for p in packages if p.manager == "pip" and not p.vcs]
    if not pip:
        return None
    files = _read_all(spec, target, pip, builds, cache=cache, timeout=timeout,
                      offline=offline)
    line = ".".join(spec.python.split(".")[:2])
    # a lock without a conda python installs into a venv (samebits.install.prefix)
    venv = not any(p.manager == "conda" and p.name == "python" for p in packages)
    layout = layout_for(line, "", venv=venv)
    writes: dict[str, dict[str, str]] = {}
    for name, wf in files.items():
        mine = writes[name] = {}
        for member, sha in wf.files:
            try:
                mine[installed_path(member, wf.data_dir, layout)] = sha
            except ValueError:
                continue  # not a .data scheme: install refuses the wheel, naming it
        for script, entry in wf.scripts:
            mine[installed_path(f"{wf.data_dir}/scripts/{script}", wf.data_dir, layout)] = \
                f"entry point {entry}"
    shared = shared_paths(writes)
    if not shared:
        return None
    environment = Target(platform=target.platform, python=spec.python,
                         glibc=target.glibc).environment()
    dists = [files[p.name].dist if p.name in files else Dist(name=p.name) for p in pip]
    order = pip_order(dists, spec.pypi_requirements, environment)
    return in_order(target.platform, shared, order)


def _read_all(spec: EnvironmentSpec, target: PlatformTarget, pip: Sequence[LockedPackage],
              builds: Mapping[tuple[str, str], BuildRecord], *, cache: Path, timeout: float,
              offline: bool) -> dict[str, Any]:
    """Every wheel's ``WheelFiles`` by package name, read eight at a time; every wheel that
    could not be read named in one error."""
    from samebits.install.fetch import archive_path
    from samebits.net import public_url
    from samebits.solve.wheelfiles import wheel_files
    from samebits.solve.wheelmeta import BadWheel

    def one(p: LockedPackage) -> Any:
        record = builds.get((p.platform, p.name))
        if record is not None and not p.filename.endswith(".whl"):
            url, filename, sha = "", record.wheel, record.sha256
        else:
            url, filename, sha = p.url, p.filename, (p.sha256 or "").lower()
        view = LockedPackage(name=p.name, version=p.version, manager="pip",
                             platform=p.platform, url=url or filename, sha256=sha)
        held = archive_path(cache, view) if sha else None  # fetched or built already
        try:
            return wheel_files(name=p.name, url=url, filename=filename, sha256=sha,
                               cache=cache, local=held, timeout=timeout, offline=offline)
        except (OSError, BadWheel) as exc:
            return exc

    with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
        got = dict(zip((p.name for p in pip), pool.map(one, pip), strict=True))
    where = f"{spec.file}: [pypi] on {target.platform}"
    unread = [(p, got[p.name]) for p in pip if isinstance(got[p.name], OSError)]
    bad = [(p, got[p.name]) for p in pip if isinstance(got[p.name], BadWheel)]
    if bad:
        raise InputError(f"{where}: {plural(len(bad), 'wheel')} whose file list cannot be "
                         "read:\n  " + "\n  ".join(f"{p.name} {p.version}: {e}"
                                                   for p, e in bad),
                         hint="the lockfile was not written")
    if unread:
        raise UnreachableError(
            f"{where}: the file list of {plural(len(unread), 'wheel')} could not be read:\n  "
            + "\n  ".join(f"{p.name} {p.version} ({public_url(p.url)}): "
                          f"{getattr(e, 'reason', None) or e.strerror or e}"
                          for p, e in unread),
            hint="lock once without --offline where the index is reachable" if offline
            else "check the network, or raise --timeout")
    return got


def install_stages(packages: Sequence[LockedPackage], record: SharedPaths | None
                   ) -> list[list[LockedPackage]]:
    """``packages`` (one platform's PyPI part, in the caller's order) in the stages an installer
    that ignores dependencies (``pip --no-deps``, which orders by name alone) must place them
    in, so that every shared path ends with the bytes ``record`` names: one stage without a
    record; else each wheel in the stage of the longest run of writers before it (each
    group's writers are in pip's order). The Containerfile and the bundle's offline
    requirements write one file per stage."""
    if record is None:
        return [list(packages)] if packages else []
    before: dict[str, set[str]] = {}
    for group in record.groups:
        for i, later in enumerate(group.writers):
            before.setdefault(later, set()).update(group.writers[:i])
    rank: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str]) -> int:
        if name not in rank:
            rank[name] = 1 + max((depth(b, seen | {name}) for b in before.get(name, ())
                                  if b not in seen), default=-1)
        return rank[name]

    stages: dict[int, list[LockedPackage]] = {}
    for p in packages:
        stages.setdefault(depth(p.name, frozenset()), []).append(p)
    return [stages[k] for k in sorted(stages)]


def stage_name(first: str, stage: int) -> str:
    """The file of ``stage``: ``first`` (``x.requirements.txt``), then
    ``x.requirements-2.txt`` and on."""
    stem, dot, suffix = first.rpartition(".")
    return first if stage == 0 else f"{stem}-{stage + 1}{dot}{suffix}"
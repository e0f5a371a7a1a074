"""Lock time for sdists: each one built into a wheel, twice, and the build recorded.

A PyPI package uv finds no fitting wheel for is locked as its sdist. For each, per platform:

    fetch      the sdist, proved against the sha256 uv reported, into the archive cache
    resolve    its ``[build-system] requires`` (PEP 517's setuptools default without one) from
               the spec's index, for the target's Python and platform, under its exclude-newer,
               wheels only: the static environment, every wheel by URL and sha256
    ask        the backend's ``get_requires_for_build_wheel`` in a venv of exactly that
               environment, offline (``samebits.install.buildhooks``); setuptools before 70.1
               answers ``["wheel"]``. When it asks for anything, the static requirements, what
               it asked for and the static environment's own pins are resolved again the same
               way: the build environment, recorded whole (what was asked, as ``dynamic``)
    build      with uv, in exactly that environment (``samebits.install.build``), with
               ``SOURCE_DATE_EPOCH`` = the spec's exclude-newer instant (1980-01-01 without
               one), twice, in two different folders
    check      both builds gave the same bytes (else install could never check its own build),
               and the wheel's tags fit the target (else install could not place it)
    record     ``samebits.lock.builds.BuildRecord``; the wheel is filed in the archive cache, so an
               install on this machine takes it without building

A build whose inputs were recorded before (``CACHE/builds/records/<sha256 of the inputs>.json``,
with the wheel still in the archive cache and of its hash; the inputs hold the whole build
environment and what the backend asked for) is not run again, and a backend asked before with
the same inputs (``CACHE/builds/requires/<sha256 of buildhooks.hook_key>.json``: the sdist, the
Python line, the epoch, the backend and the static environment) is not asked again. Anything
install could not place is an ``UnplaceableError`` naming the package; nothing is written.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, compact_json, sha256_hex
from samebits.errors import SamebitsError, UnreachableError
from samebits.foreign.target import Target
from samebits.install.build import (
    BuildSystem,
    build_folder,
    build_interpreter,
    build_sdist,
    build_system,
    file_wheel,
    prove_requirements,
    unpack_sdist,
)
from samebits.install.buildhooks import checked, dynamic_requires, hook_key
from samebits.install.fetch import (
    Fetcher,
    Limits,
    archive_path,
    digests,
    fetch_url,
    labelled,
    prove,
)
from samebits.install.sources import Sources, file_roots
from samebits.lock.builds import (
    DEFAULT_EPOCH,
    BuildDiffersError,
    BuildRecord,
    BuildRequirement,
    UnplaceableError,
    is_sdist,
)
from samebits.lock.model import LockedPackage
from samebits.spec.model import EnvironmentSpec, PlatformTarget, exclude_newer_datetime

RECORDS = Path("builds") / "records"
REQUIRES = Path("builds") / "requires"


def source_date_epoch(spec: EnvironmentSpec) -> int:
    """The spec's exclude-newer instant as a Unix time; 1980-01-01 without one."""
    when = exclude_newer_datetime(spec)
    return max(int(when.timestamp()), DEFAULT_EPOCH) if when else DEFAULT_EPOCH


def _offline_fetch(url: str, dest: Path, limits: Limits | None = None) -> None:
    raise UnreachableError(f"{url}: --offline, and it is not in the cache",
                           hint="lock once without --offline where the index is reachable")


async def record_builds(spec: EnvironmentSpec, target: PlatformTarget,
                        packages: Sequence[LockedPackage], *, cache: Path, timeout: float,
                        offline: bool = False) -> list[BuildRecord]:
    """A build record for every sdist among ``packages`` (one platform's PyPI part)."""
    sdists = [p for p in packages if p.manager == "pip" and is_sdist(p.filename)]
    fetch: Fetcher = _offline_fetch if offline else fetch_url
    return [await _record(spec, target, p, cache=cache, timeout=timeout, offline=offline,
                          fetch=fetch) for p in sdists]


def spec_sources(spec: EnvironmentSpec) -> Sources:
    """The spec's own file:// channels and indexes: folders its author named, so its
    locked file:// URLs may be read from them."""
    return Sources(file_roots=file_roots((*spec.conda_channels, spec.pypi_index,
                                          *spec.pypi_extra_indexes)))


def _where(spec: EnvironmentSpec, target: PlatformTarget, p: LockedPackage) -> str:
    why = "[pypi] no-binary" if p.name in spec.pypi_no_binary else "an sdist only"
    return f"{spec.file}: [pypi] {p.name} {p.version} on {target.platform} ({why})"


async def _record(spec: EnvironmentSpec, target: PlatformTarget, p: LockedPackage, *,
                  cache: Path, timeout: float, offline: bool, fetch: Fetcher) -> BuildRecord:
    from samebits.solve.pypi import uv_version, wheel_target

    where = _where(spec, target, p)
    tags = wheel_target(spec, target)
    inputs = BuildRecord(platform=target.platform, name=p.name, sdist=(p.sha256 or "").lower(),
                         wheel="", sha256="", python=".".join(spec.python.split(".")[:2]),
                         source_date_epoch=source_date_epoch(spec), backend="",
                         frontend=uv_version())
    with tempfile.TemporaryDirectory(prefix="samebits-sdist-") as tmp:
        try:
            sdist = await asyncio.to_thread(prove, p, cache, fetch, spec_sources(spec))
            (Path(tmp) / "src").mkdir()
            tree = await asyncio.to_thread(unpack_sdist, sdist.path, Path(tmp) / "src")
            system = build_system(tree)
        except SamebitsError as exc:
            raise labelled(exc, where) from None
        static = await _environment(spec, target, system.requires, tags=tags, where=where,
                                    timeout=timeout, offline=offline,
                                    what=f"its [build-system] requires "
                                    f"({', '.join(system.requires)})")
        asked = await asyncio.to_thread(_asked, inputs, tree, system, static, cache=cache,
                                        fetch=fetch, sources=spec_sources(spec), where=where,
                                        work=Path(tmp) / "hook")
    env = static
    if asked:  # resolved again with the static ones held where the backend saw them
        env = await _environment(
            spec, target, (*system.requires, *asked, *(f"{r.name}=={r.version}" for r in static)),
            tags=tags, where=where, timeout=timeout, offline=offline,
            what=f"its [build-system] requires ({', '.join(system.requires)}) with what "
            f"{system.backend} asked for ({', '.join(asked)})")
    inputs = replace(inputs, backend=system.backend, requires=env, dynamic=asked)
    wheel, sha = await asyncio.to_thread(_built, inputs, sdist.path, p, cache, fetch, where,
                                         spec_sources(spec))
    if tags.best([(wheel, wheel)]) is None:
        raise UnplaceableError(f"{where}: it builds into {wheel}, which does not fit "
                               f"{tags.describe()}: install could not place it",
                               hint="pin a version with a wheel for this platform, or drop "
                               "the platform from the spec")
    return replace(inputs, wheel=wheel, sha256=sha)


async def _environment(spec: EnvironmentSpec, target: PlatformTarget, requires: Sequence[str],
                       *, tags: Target, where: str, timeout: float, offline: bool,
                       what: str) -> tuple[BuildRequirement, ...]:
    """``requires`` resolved for the target, wheels only, every one by URL and sha256."""
    from samebits.solve.pypi import compile_wheels_only

    if not requires:
        return ()
    packages = await compile_wheels_only(spec, target, requires, timeout=timeout,
                                         offline=offline, what=f"{where}: {what}, wheels only,")
    return tuple(_requirement(pkg, tags, where) for pkg in packages)


def _asked(inputs: BuildRecord, tree: Path, system: BuildSystem,
           static: Sequence[BuildRequirement], *, cache: Path, fetch: Fetcher,
           sources: Sources, where: str, work: Path) -> tuple[str, ...]:
    """What the backend's get_requires_for_build_wheel asks for in a venv of exactly the
    static environment: answered before (``CACHE/builds/requires/<sha256 of the inputs>``),
    or asked now."""
    key = hook_key(system, sdist=inputs.sdist, python=inputs.python,
                   epoch=inputs.source_date_epoch, requires=static)
    known = cache / REQUIRES / f"{sha256_hex(compact_json(key))}.json"
    try:
        return checked(json.loads(known.read_bytes())["dynamic"], str(known))
    except (OSError, ValueError, KeyError, TypeError, SamebitsError):
        pass
    try:
        python = build_interpreter(inputs.python)
        held = prove_requirements(static, inputs.platform, cache, fetch=fetch, sources=sources)
        asked = dynamic_requires(tree, system, python=python, requires=held,
                                 epoch=inputs.source_date_epoch, work=work)
    except SamebitsError as exc:
        raise labelled(exc, where) from None
    atomic_write(known, compact_json({"dynamic": list(asked)}))
    return asked


def _requirement(pkg: dict[str, Any], tags: Target, where: str) -> BuildRequirement:
    from samebits.solve.pypi import artifact_name, choose_artifact

    art = choose_artifact(pkg, tags)
    name = str(pkg.get("name"))
    if art is None or not artifact_name(art).endswith(".whl"):
        raise UnplaceableError(f"{where}: its build needs {name} {pkg.get('version')}, which "
                               f"has no wheel for {tags.describe()}")
    return BuildRequirement(name=name, version=str(pkg["version"]), url=str(art["url"]),
                            sha256=str(art["hashes"]["sha256"]).lower())


def _built(inputs: BuildRecord, sdist: Path, p: LockedPackage, cache: Path, fetch: Fetcher,
           where: str, sources: Sources) -> tuple[str, str]:
    """(wheel file name, sha256) of the sdist's build: recorded before, or built twice now."""
    key = sha256_hex(compact_json(inputs.inputs()))
    known = cache / RECORDS / f"{key}.json"
    try:
        doc = json.loads(known.read_bytes())
        wheel, sha = str(doc["wheel"]), str(doc["sha256"])
        held = archive_path(cache, LockedPackage(name=p.name, version=p.version, manager="pip",
                                                 platform=p.platform, url=wheel, sha256=sha))
        if held.exists() and digests(held)[0] == sha:
            return wheel, sha
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        python = build_interpreter(inputs.python)
        requires = prove_requirements(inputs.requires, p.platform, cache, fetch=fetch,
                                      sources=sources)
        built: list[tuple[str, str]] = []
        for _ in range(2):  # twice: what a build takes from the clock or chance differs
            with build_folder(inputs.sdist) as tmp:  # the folder install builds it in too
                out = build_sdist(sdist, python=python, requires=requires,
                                  epoch=inputs.source_date_epoch, work=tmp)
                sha = digests(out)[0]
                if not built:
                    file_wheel(out, archive_path(cache, LockedPackage(
                        name=p.name, version=p.version, manager="pip", platform=p.platform,
                        url=out.name, sha256=sha)))
                built.append((out.name, sha))
    except SamebitsError as exc:
        raise labelled(exc, where) from None
    if built[0] != built[1]:
        raise BuildDiffersError(f"{where}: two builds of {p.filename} gave different wheels "
                                f"({built[0][0]} {built[0][1]}, then {built[1][0]} "
                                f"{built[1][1]}): install could never check its own build",
                                hint="pin a version with a wheel, or make the build "
                                "reproducible (SOURCE_DATE_EPOCH is set)")
    atomic_write(known, compact_json({"wheel": built[0][0], "sha256": built[0][1]}))
    return built[0]

"""Spec -> Lock: solve every platform, check the result against the spec, build the lockfile.

    plan -> (per platform, concurrently) conda solve + PyPI solve -> sdist builds
         -> shared paths (``samebits.lock.shared``) -> post-solve checks -> Lock

Nothing is written here; ``samebits_app.cli`` writes the text atomically once every platform has
solved, so a failure leaves the previous lockfile as it was.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samebits import __version__
from samebits._io import atomic_write, compact_json, sha256_hex, sys_path_kept
from samebits.errors import Problem, SpecError
from samebits.lock.builds import BuildRecord, build_metadata, check_placeable, is_sdist
from samebits.lock.model import LOCK_FORMAT, META, Lock, LockedPackage, lock_text, validate_lock
from samebits.lock.shared import SharedPaths, record_shared, shared_metadata
from samebits.solve.virtual import virtual_packages
from samebits.spec.model import EnvironmentSpec, PlatformTarget, exclude_newer_datetime

if TYPE_CHECKING:
    from samebits.solve.indexproxy import IndexProxy

DEFAULT_TIMEOUT = 20.0  # seconds a channel or index may take to answer at all

# Packages whose version is the CUDA runtime line a PyPI torch build runs on.
CUDA_RUNTIME_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13",
                       "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")


@dataclass(frozen=True, slots=True, kw_only=True)
class LockResult:
    spec: EnvironmentSpec
    lock: Lock
    text: str
    path: Path


def custom_metadata(spec: EnvironmentSpec) -> dict[str, str]:
    """What samebits records in ``metadata.custom_metadata`` (a string map)."""
    out = {
        "lock-format": LOCK_FORMAT,
        "version": __version__,
        "environment": spec.name,
        "spec-digest": spec.digest,
        "generation": spec.generation.name,
        "compute-capabilities": ",".join(spec.compute_capabilities),
        "python": spec.python,
        "__cuda": spec.cuda or "",
    }
    if spec.exclude_newer:
        out["exclude-newer"] = spec.exclude_newer
    for t in spec.platforms:
        out[f"__glibc.{t.platform}"] = t.glibc
    return {META + k: v for k, v in out.items()}


def content_hashes(spec: EnvironmentSpec, *, cache: Path | None = None) -> dict[str, str]:
    """conda-lock's own per-platform content hash of this spec and its virtual packages.

    With ``cache``, kept there under the sha256 of everything it is computed from (the spec's
    dependencies, channels, sources and virtual packages, and the versions of conda-lock and of
    the libraries that parse them): importing conda-lock costs more than a warm lock's solves.
    """
    key = sha256_hex(compact_json(_content_hash_inputs(spec)))
    path = cache / "content-hash-v1" / f"{key}.json" if cache else None
    if path is not None:
        try:
            known = json.loads(path.read_bytes())
        except (OSError, ValueError):
            known = None
        if (isinstance(known, dict) and known
                and all(isinstance(k, str) and isinstance(v, str) for k, v in known.items())):
            return known
    hashes = _compute_content_hashes(spec)
    if path is not None:
        atomic_write(path, compact_json(hashes))
    return hashes


def _content_hash_inputs(spec: EnvironmentSpec) -> dict[str, object]:
    from importlib.metadata import version

    return {
        "format": 1,
        "versions": {d: version(d) for d in ("conda-lock", "py-rattler", "packaging", "pyyaml")},
        "conda": list(spec.conda_dependencies),
        "pypi": list(spec.pypi_requirements),
        "channels": list(spec.conda_channels),
        "sources": list(spec.sources),
        "virtual": {t.platform: virtual_packages(spec, t) for t in spec.platforms},
    }


def _compute_content_hashes(spec: EnvironmentSpec) -> dict[str, str]:
    with sys_path_kept():  # conda-lock's imports and calls, its vendored path undone after
        return _conda_lock_content_hashes(spec)


def _conda_lock_content_hashes(spec: EnvironmentSpec) -> dict[str, str]:
    import tempfile

    import yaml
    from conda_lock.content_hash import compute_content_hashes
    from conda_lock.models.lock_spec import LockSpecification, VersionedDependency
    from conda_lock.virtual_package import virtual_package_repo_from_specification
    from packaging.requirements import Requirement
    from rattler import MatchSpec

    deps = []
    for d in spec.conda_dependencies:
        m = MatchSpec(d)
        deps.append(VersionedDependency(name=m.name.normalized, manager="conda",
                                        version=str(m.version or ""), build=m.build or None))
    for r in spec.pypi_requirements:
        req = Requirement(r)
        deps.append(VersionedDependency(name=req.name, manager="pip", version=str(req.specifier),
                                        extras=sorted(req.extras),
                                        markers=str(req.marker) if req.marker else None))
    lock_spec = LockSpecification(
        dependencies={t.platform: list(deps) for t in spec.platforms},
        channels=list(spec.conda_channels),
        sources=[Path(s) for s in spec.sources],
    )
    vp = {"subdirs": {t.platform: {"packages": virtual_packages(spec, t)}
                      for t in spec.platforms}}
    with tempfile.TemporaryDirectory(prefix="samebits-vp-") as tmp:
        vp_file = Path(tmp) / "virtual-packages.yaml"
        vp_file.write_text(yaml.safe_dump(vp))
        repo = virtual_package_repo_from_specification(vp_file)
    return dict(sorted(compute_content_hashes(lock_spec, repo).items()))


def header(spec: EnvironmentSpec) -> str:
    return (
        f"# samebits {__version__} lock of {spec.file} (conda-lock v1 format). Do not edit.\n"
        f"# Re-solve: samebits lock {spec.name}   Check: samebits lock --check {spec.name}\n"
        f"# Render: conda-lock render --kind explicit -p PLATFORM THIS_FILE\n"
    )


def check_solution(spec: EnvironmentSpec, target: PlatformTarget,
                   packages: Sequence[LockedPackage]) -> list[Problem]:
    """Problems a solve can reveal that the spec alone cannot: the CUDA line torch really got."""
    if not spec.generation.needs_cuda:
        return []
    pip = {p.name: p for p in packages if p.manager == "pip"}
    conda = {p.name: p for p in packages if p.manager == "conda"}
    runtime = next((pip[n] for n in CUDA_RUNTIME_WHEELS if n in pip), None)
    if runtime is None and "cuda-cudart" in conda:
        runtime = conda["cuda-cudart"]
    torch = pip.get("torch") or conda.get("pytorch")
    where = f"platforms.{target.platform}"
    if runtime is None:
        if torch is not None:
            return [Problem(file=spec.file, key=where, value={"glibc": target.glibc},
                            message=f"torch {torch.version} resolved for {target.platform} ships "
                            "no CUDA runtime (a CPU-only build); this generation needs CUDA")]
        return []
    line = ".".join(runtime.version.split(".")[:2])
    if spec.cuda and line != spec.cuda:
        return [Problem(file=spec.file, key="cuda.version", value=spec.cuda,
                        message=f"on {target.platform} the solve chose {runtime.name} "
                        f"{runtime.version} (CUDA {line}); pin torch to a release built for "
                        f"CUDA {spec.cuda} or set [cuda] version = \"{line}\"")]
    return []


async def _solve_platform(spec: EnvironmentSpec, target: PlatformTarget, *,
                          timeout: float, offline: bool, proxy: IndexProxy | None,
                          cache: Path | None) -> tuple[list[LockedPackage], list[BuildRecord],
                                                       SharedPaths | None]:
    """One platform's packages, a build record for each sdist among them, and the paths two
    of its wheels write with different bytes (``samebits.lock.shared``)."""
    from samebits.host import cache_dir
    from samebits.solve.conda import solve_conda
    from samebits.solve.pypi import solve_pypi

    jobs = []
    if spec.conda_dependencies:
        jobs.append(solve_conda(spec, target, exclude_newer=exclude_newer_datetime(spec),
                                timeout=timeout, offline=offline))
    if spec.pypi_requirements:
        jobs.append(solve_pypi(spec, target, timeout=timeout, offline=offline, proxy=proxy))
    parts = await asyncio.gather(*jobs)
    packages = [p for part in parts for p in part]
    builds: list[BuildRecord] = []
    if any(p.manager == "pip" and is_sdist(p.filename) for p in packages):
        from samebits.install.fetch import default_cache_dir
        from samebits.solve.sdist import record_builds

        builds = await record_builds(spec, target, packages, cache=cache or default_cache_dir(),
                                     timeout=timeout, offline=offline)
    check_placeable(packages, {(b.platform, b.name): b for b in builds},
                    origin=f"{spec.file} ({target.platform})",
                    hint="the lockfile was not written: require a version with a wheel or "
                    "an sdist, by name from an index or by URL")
    shared = await record_shared(spec, target, packages,
                                 {(b.platform, b.name): b for b in builds},
                                 cache=cache or cache_dir(), timeout=timeout,
                                 offline=offline)
    return packages, builds, shared


async def solve_spec(spec: EnvironmentSpec, *, sources: Sequence[str],
                     timeout: float = DEFAULT_TIMEOUT, offline: bool = False,
                     proxy: IndexProxy | None = None, cache: Path | None = None) -> Lock:
    """Solve every platform of ``spec`` concurrently and check the result.

    ``sources`` are the spec files relative to the lockfile's folder, as conda-lock records them.
    ``proxy`` (running) lets the PyPI part read a final exclude-newer view from its cache;
    ``cache`` keeps the content hashes (``content_hashes``), the sdists built into wheels
    (``samebits.solve.sdist``) and the wheels' file lists (``samebits.solve.wheelfiles``;
    default: the install cache).
    """
    done = await asyncio.gather(*(_solve_platform(spec, t, timeout=timeout, offline=offline,
                                                  proxy=proxy, cache=cache)
                                  for t in spec.platforms), return_exceptions=True)
    for outcome in done:  # every platform has finished; the first failure in spec order
        if isinstance(outcome, BaseException):
            raise outcome
    results = [r for r in done if not isinstance(r, BaseException)]
    problems = [p for t, (pkgs, _, _) in zip(spec.platforms, results, strict=True)
                for p in check_solution(spec, t, pkgs)]
    if problems:
        raise SpecError(problems, hint="the lockfile was not written")
    return Lock(
        platforms=tuple(t.platform for t in spec.platforms),
        channels=spec.conda_channels,
        sources=tuple(sources),
        content_hash=content_hashes(spec, cache=cache),
        custom={**custom_metadata(spec),
                **build_metadata(b for _, builds, _ in results for b in builds),
                **shared_metadata(s for _, _, s in results if s is not None)},
        packages=tuple(p for pkgs, _, _ in results for p in pkgs),
        header=header(spec),
    )


async def lock_one(spec: EnvironmentSpec, *, root: Path, path: Path,
                   timeout: float = DEFAULT_TIMEOUT, offline: bool = False,
                   proxy: IndexProxy | None = None, cache: Path | None = None) -> LockResult:
    """Solve ``spec`` (whose sources are relative to ``root``) into the text of ``path``.

    conda-lock's model validates the text (``render_lock``); with ``cache``, a text it has
    accepted before (same bytes, same conda-lock) is not validated again.
    """
    sources = [os.path.relpath(root / s, path.parent) for s in spec.sources]
    lock = await solve_spec(spec, sources=sources, timeout=timeout, offline=offline, proxy=proxy,
                            cache=cache)
    text = lock_text(lock)
    if cache is None:
        validate_lock(lock)
    else:
        from importlib.metadata import version

        mark = cache / "validated-v1" / sha256_hex(f"conda-lock {version('conda-lock')}\n"
                                                   f"{text}".encode())
        if not mark.exists():
            validate_lock(lock)
            atomic_write(mark, b"")
    return LockResult(spec=spec, lock=lock, text=text, path=path)

"""The PyPI part: ``uv pip compile`` for the target platform and Python, metadata only.

uv writes a PEP 751 ``pylock.toml`` naming, for each package, the one wheel that fits the
target (url, size, sha256); a second run in requirements format, concurrently, gives the
``# via`` annotations from which the dependency edges are read. Nothing is downloaded but
metadata. A ``file://`` index that is a plain folder of wheels is read with ``--find-links``.
A direct-URL requirement (``name @ URL``) is locked to that URL, with the sha256 uv computed.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from samebits._io import compact_json
from samebits.errors import SamebitsError, ToolError, UnreachableError, UnsatisfiableError
from samebits.foreign.target import Target
from samebits.lock.builds import UnplaceableError
from samebits.lock.model import LockedPackage
from samebits.solve.indexcache import public_url
from samebits.solve.indexproxy import IndexProxy, Route
from samebits.spec.model import EnvironmentSpec, PlatformTarget, exclude_newer_datetime

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_NETWORK_WORDS = ("Failed to fetch", "error sending request", "dns error", "timed out",
                  "Could not connect", "Connection refused", "operation timed out")


@functools.cache
def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise ToolError("uv not found", hint="pip install uv (samebits depends on it)")


def index_args(index: str) -> list[str]:
    if index.startswith("file://"):
        folder = Path(url2pathname(urlparse(index).path))
        if not (folder / "index.html").exists() and not any(folder.glob("*/index.html")):
            return ["--no-index", "--find-links", str(folder)]
    return ["--index-url", index]


def extra_index_args(indexes: tuple[str, ...]) -> list[str]:
    """``[pypi] extra-indexes``: a file:// folder of wheels is read with --find-links, anything
    else is an --extra-index-url (which uv prefers to --index-url, in the order given)."""
    out: list[str] = []
    for index in indexes:
        args = index_args(index)
        out += args[1:] if args[0] == "--no-index" else ["--extra-index-url", index]
    return out


def uv_command(spec: EnvironmentSpec, target: PlatformTarget, *, fmt: str, out: Path,
               offline: bool = False, index: list[str] | None = None,
               wheels_only: bool = False) -> list[str]:
    """``uv pip compile`` of the spec's requirements for ``target``; ``wheels_only``: no sdist
    at all (a build environment), else the spec's ``[pypi] no-binary`` packages as sdists."""
    cmd = [
        uv_binary(), "pip", "compile", "-",
        "--python", spec_interpreter(spec.python),  # skips uv's discovery (see there)
        "--python-version", spec.python,
        "--python-platform", target.uv_platform,
        "--no-config", "--no-header", "--quiet", "--color", "never",
        "--output-file", str(out),
        *(index if index is not None else index_args(spec.pypi_index)),
        *extra_index_args(spec.pypi_extra_indexes),
    ]
    if fmt == "pylock":
        cmd += ["--format", "pylock.toml"]
    else:
        cmd += ["--annotation-style", "split"]
    if spec.exclude_newer:
        cmd += ["--exclude-newer", spec.exclude_newer]
    if not wheels_only:
        for name in spec.pypi_no_binary:
            cmd += ["--no-binary", name]
    if offline:
        cmd.append("--offline")
    if wheels_only:
        cmd += ["--only-binary", ":all:"]
    return cmd


@functools.cache
def spec_interpreter(python: str) -> str:
    """The interpreter uv is given: one of the spec's Python line where one runs here, else
    this one. uv resolves for ``--python-version`` whatever it runs, but it builds an sdist to
    read metadata the index does not publish, on that interpreter: basicsr 1.4.2's build needs
    torch, which had no wheel for the running 3.11, so a 3.10 spec failed to lock
    (``No solution found when resolving: ... torch``) where pip on 3.10 installs it."""
    from samebits.install.build import build_interpreter

    try:
        return build_interpreter(".".join(python.split(".")[:2]))
    except SamebitsError:
        return sys.executable


SOLVE_WORK = 900.0  # seconds a uv resolution may work beyond its network timeouts


async def _run(cmd: list[str], stdin: str, *, timeout: float, work: float = SOLVE_WORK
               ) -> None:
    env = dict(os.environ)
    env.setdefault("UV_HTTP_TIMEOUT", str(int(max(timeout, 1))))
    env.setdefault("UV_HTTP_RETRIES", "1")
    env["NO_COLOR"] = "1"
    # a safety net for a uv that hangs: longer than its own timeout, retry and back-off, so a
    # silent index is reported in uv's words, plus the work itself (a resolution that builds
    # sdists for their metadata takes minutes on a busy machine: the sweep's QLoRA and
    # TinyLlama were stopped at 130 s at a load of 7)
    limit = timeout * 3 + 10 + work
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    try:
        _, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=limit)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise UnreachableError(f"uv did not finish within {limit:g} s",
                               hint="check the network, or raise --timeout") from None
    except asyncio.CancelledError:  # another solve failed: no uv outlives the lock
        proc.kill()
        await asyncio.shield(proc.wait())
        raise
    if proc.returncode != 0:
        raise _CompileFailed(err.decode(errors="replace").strip())


class _CompileFailed(Exception):
    pass


async def compile_wheels_only(spec: EnvironmentSpec, target: PlatformTarget,
                              requirements: Sequence[str], *, timeout: float,
                              offline: bool = False, what: str) -> list[dict[str, Any]]:
    """``requirements`` resolved for ``target`` from the spec's index (and exclude-newer)
    with wheels only: the pylock packages uv wrote. A build environment, say; ``what`` names
    it in errors."""
    with tempfile.TemporaryDirectory(prefix="samebits-uv-") as tmp:
        out = Path(tmp) / "pylock.toml"
        cmd = uv_command(spec, target, fmt="pylock", out=out, offline=offline,
                         wheels_only=True)
        try:
            await _run(cmd, "\n".join(requirements) + "\n", timeout=timeout)
        except _CompileFailed as exc:
            raise _translate(str(exc), spec, target, where=what) from None
        return list(tomllib.loads(out.read_text()).get("packages", []))


async def solve_pypi(spec: EnvironmentSpec, target: PlatformTarget, *,
                     timeout: float, offline: bool = False,
                     proxy: IndexProxy | None = None,
                     work: float = SOLVE_WORK) -> list[LockedPackage]:
    """Resolve ``spec``'s PyPI requirements for ``target``; one wheel per package.

    With ``proxy`` and an exclude-newer instant that is final, uv reads the index through the
    final cache (``samebits.solve.indexproxy``) and a solve recorded there with the same inputs
    and pages is answered without uv. Otherwise uv reads the index itself; ``offline`` then
    answers from uv's cache alone (uv --offline).
    """
    stdin = "\n".join(spec.pypi_requirements) + "\n"
    # the final cache serves one index; a spec with extra indexes lets uv read them all
    route = proxy.route(spec.pypi_index, exclude_newer_datetime(spec)) \
        if proxy and not spec.pypi_extra_indexes else None
    if proxy is not None and route is not None:
        texts = await _solve_final(spec, target, stdin, proxy, route, timeout=timeout,
                                   work=work)
        if texts is not None:
            return _packages(*texts, spec, target)
    try:
        texts = await _compile(spec, target, stdin, timeout=timeout, offline=offline,
                               work=work)
    except _CompileFailed as exc:
        raise _translate(str(exc), spec, target) from None
    return _packages(*texts, spec, target)


async def _compile(spec: EnvironmentSpec, target: PlatformTarget, stdin: str, *,
                   timeout: float, offline: bool = False,
                   index: list[str] | None = None,
                   work: float = SOLVE_WORK) -> tuple[str, str]:
    """(pylock.toml, requirements.txt) as two concurrent uv runs write them; both have ended
    when this returns or raises."""
    with tempfile.TemporaryDirectory(prefix="samebits-uv-") as tmp:
        outs = (Path(tmp) / "pylock.toml", Path(tmp) / "requirements.txt")
        runs = [_run(uv_command(spec, target, fmt=fmt, out=out, offline=offline, index=index),
                     stdin, timeout=timeout, work=work)
                for fmt, out in zip(("pylock", "req"), outs, strict=True)]
        done = await asyncio.gather(*runs, return_exceptions=True)
        failed = [d for d in done if isinstance(d, BaseException)]
        if failed:  # uv's own explanation, when one run gave it, before our wall clock's
            raise next((f for f in failed if isinstance(f, _CompileFailed)), failed[0])
        return outs[0].read_text(), outs[1].read_text()


def _packages(pylock: str, requirements: str, spec: EnvironmentSpec,
              target: PlatformTarget) -> list[LockedPackage]:
    data = tomllib.loads(pylock)
    edges = parse_via(requirements)
    tags = wheel_target(spec, target)
    return sorted((_locked(p, tags, edges, spec) for p in data.get("packages", [])),
                  key=lambda p: p.name)


def wheel_target(spec: EnvironmentSpec, target: PlatformTarget) -> Target:
    """The CPython, platform and glibc floor whose wheel tags (packaging's order) rank the
    wheels uv lists."""
    return Target(platform=target.platform, python=spec.python, glibc=target.glibc)


async def _solve_final(spec: EnvironmentSpec, target: PlatformTarget, stdin: str,
                       proxy: IndexProxy, route: Route, *,
                       timeout: float, work: float = SOLVE_WORK) -> tuple[str, str] | None:
    """(pylock, requirements) as uv writes them, through the final cache; None when the index
    turned out not to speak PEP 691 JSON (the caller then resolves against it directly)."""
    key = solve_key(spec, target, stdin)
    if not proxy.refresh:
        recorded = route.view.read_solve(key)
        if recorded is not None and all(proxy.page_digest(route, project) == digest
                                        for project, digest in recorded["pages"].items()):
            return recorded["pylock"], recorded["requirements"]
    run = proxy.start_run(route)
    index = ["--index-url", proxy.index_url(route, run), "--no-cache"]
    try:  # uv waits on this process while it fetches what is missing: a longer leash
        pylock, reqs = await _compile(spec, target, stdin, timeout=timeout * 2, index=index,
                                      work=work)
    except _CompileFailed as exc:
        if route.unsupported is not None:
            return None
        raise _proxy_error(str(exc), spec, target, route) from None
    texts = (proxy.original_urls(route, pylock), reqs)
    route.view.write_solve(key, {"pages": dict(sorted(route.runs[run].items())),
                                 "pylock": texts[0], "requirements": texts[1]})
    return texts


def solve_key(spec: EnvironmentSpec, target: PlatformTarget, stdin: str) -> str:
    """The sha256 of everything but the pages that a uv resolution depends on: uv's version,
    its arguments, the requirements, the UV_* environment and the interpreter uv is given."""
    argv = uv_command(spec, target, fmt="pylock", out=Path("pylock.toml"), index=["INDEX"])
    inputs = {"uv": uv_version(), "argv": argv[1:], "stdin": stdin,
              "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("UV_")},
              "python": sys.version}
    return hashlib.sha256(compact_json(inputs)).hexdigest()


@functools.cache
def uv_version() -> str:
    import subprocess

    res = subprocess.run([uv_binary(), "--version"], capture_output=True, text=True, check=False)
    return res.stdout.strip() or f"unknown ({res.returncode})"


def _proxy_error(text: str, spec: EnvironmentSpec, target: PlatformTarget,
                 route: Route) -> Exception:
    where = (f"{spec.file}: [pypi] requirements on {target.platform} "
             f"(Python {spec.python}, {target.uv_platform})")
    if route.missing:
        lacking = ", ".join(sorted(set(route.missing))[:5])
        return UnreachableError(
            f"{where}: --offline, and the cache of {public_url(spec.pypi_index)} at "
            f"{spec.exclude_newer} lacks {lacking}",
            hint="lock once without --offline where the index is reachable")
    if route.problems:
        return UnreachableError(
            f"{where}: the index {public_url(spec.pypi_index)} did not answer:\n  "
            + "\n  ".join(sorted(set(route.problems))[:5]),
            hint="check the network or [pypi] index")
    return _translate(text, spec, target)


def _translate(text: str, spec: EnvironmentSpec, target: PlatformTarget, *,
               where: str | None = None) -> Exception:
    where = where or (f"{spec.file}: [pypi] requirements on {target.platform} "
                      f"(Python {spec.python}, {target.uv_platform})")
    text = re.sub(r"^\s*(×|error:)\s*", "", text)
    if ("No solution found" in text or "unsatisfiable" in text) and (
            "Failed to build" in text or "build-system.requires" in text):
        # an sdist uv built to read its metadata, whose own build requirements did not resolve
        return UnsatisfiableError(f"{where} cannot be satisfied:\n{text}",
                                  hint="an sdist's build environment did not resolve while uv "
                                  "read its metadata: pin a version of it that has a wheel, or "
                                  "pass the Python its build needs (--python-version at init)")
    if "No solution found" in text or "unsatisfiable" in text:
        return UnsatisfiableError(f"{where} cannot be satisfied:\n{text}",
                                  hint="relax a pin in [pypi] requirements")
    if any(w in text for w in _NETWORK_WORDS):
        return UnreachableError(f"{where}: the index {_index_asked(text, spec)} did not "
                                f"answer:\n{text}",
                                hint="check the network, [pypi] index and extra-indexes")
    return ToolError(f"{where}: uv failed:\n{text}")


def _index_asked(text: str, spec: EnvironmentSpec) -> str:
    """The index of the spec (its main one or an extra) whose URL uv's error names, as a
    failed fetch of ``https://download.pytorch.org/whl/cu117/submitit/`` names the extra
    index ``https://download.pytorch.org/whl/cu117``; the main index when it names none."""
    urls = re.findall(r"https?://[^\s)'\"]+", text)
    for index in (*spec.pypi_extra_indexes, spec.pypi_index):
        if any(u.startswith(index.rstrip("/")) for u in urls):
            return public_url(index)
    return public_url(spec.pypi_index)


def parse_via(text: str) -> dict[str, set[str]]:
    """requirements.txt ``# via`` annotations -> {package: {its dependencies}}."""
    deps: dict[str, set[str]] = defaultdict(set)
    current: str | None = None
    for line in text.splitlines():
        if line and not line.startswith((" ", "#", "-")):
            current = canonicalize_name(re.split(r"[=<>@ ;\[]", line, maxsplit=1)[0])
            continue
        via = line.strip()
        if current is None or not via.startswith("#"):
            continue
        via = via.lstrip("#").strip()
        if via.startswith("via "):
            via = via[4:]
        if not via or via.startswith("-r") or via == "via":
            continue
        parent = canonicalize_name(via.split()[0])
        deps[parent].add(current)
    return deps


def _locked(pkg: dict[str, Any], tags: Target, edges: dict[str, set[str]],
            spec: EnvironmentSpec) -> LockedPackage:
    name = canonicalize_name(pkg["name"])
    sdist_only = name in spec.pypi_no_binary
    art = choose_artifact(pkg, tags, sdist_only=sdist_only)
    if art is None and sdist_only:
        raise UnplaceableError(
            f"{spec.file}: [pypi] {name} {pkg.get('version', '')} on {tags.platform}: "
            "[pypi] no-binary names it, and uv locked it without an sdist "
            f"({_kind_of(pkg, tags)})", hint=f"take {name} out of [pypi] no-binary, or "
            "pin a version that has an sdist")
    if art is None:
        raise UnplaceableError(
            f"{spec.file}: [pypi] {name} {pkg.get('version', '')} on {tags.platform}: uv "
            f"locked it as {_kind_of(pkg, tags)}, which samebits cannot install (it installs "
            "wheels, and sdists it builds into wheels)",
            hint="require it from an index or by the URL of a wheel or sdist")
    url = art.get("url") or Path(art["path"]).resolve().as_uri()
    return LockedPackage(
        name=name,
        version=pkg["version"],
        manager="pip",
        platform=tags.platform,
        url=url,
        sha256=art["hashes"]["sha256"],
        dependencies=tuple((d, "*") for d in sorted(edges.get(name, ()))),
    )


def artifact_name(art: dict[str, Any]) -> str:
    """The file name of a pylock wheel, sdist or archive entry."""
    where = art.get("name") or art.get("url") or art.get("path") or ""
    return unquote(str(where).rsplit("/", 1)[-1].split("#", 1)[0])


def choose_artifact(pkg: dict[str, Any], tags: Target, *, sdist_only: bool = False
                    ) -> dict[str, Any] | None:
    """The file of a pylock package that install places: a direct-URL ``archive``; else, of
    the wheels uv lists, the one the target's tags rank first (pip's choice, whatever order
    uv wrote them in); else the sdist (built into a wheel). ``sdist_only`` (``[pypi]
    no-binary``): the sdist, or None. None: nothing install can place (a VCS checkout, a
    local directory)."""
    if pkg.get("archive"):
        return dict(pkg["archive"])
    if sdist_only:
        return dict(pkg["sdist"]) if pkg.get("sdist") else None
    wheels = sorted(pkg.get("wheels") or (), key=artifact_name)
    best = tags.best((w, artifact_name(w)) for w in wheels)
    if best is not None:
        return dict(best)
    return dict(pkg["sdist"]) if pkg.get("sdist") else None


def _kind_of(pkg: dict[str, Any], tags: Target) -> str:
    if pkg.get("vcs"):
        return f"a VCS checkout ({pkg['vcs'].get('url', '?')})"
    if pkg.get("directory"):
        return f"a local directory ({pkg['directory'].get('path', '?')})"
    if pkg.get("wheels"):
        names = ", ".join(artifact_name(w) for w in pkg["wheels"])
        return f"wheels none of which fits {tags.describe()} and no sdist ({names})"
    return "no file at all"

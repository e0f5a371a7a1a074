"""The PyPI part: ``uv pip compile`` for the target platform and Python, metadata only.

uv writes a PEP 751 ``pylock.toml`` naming, for each package, the one wheel that fits the
target (url, size, sha256); a second run in requirements format, concurrently, gives the
``# via`` annotations from which the dependency edges are read. Nothing is downloaded but
metadata. A ``file://`` index that is a plain folder of wheels is read with ``--find-links``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import url2pathname

from packaging.utils import canonicalize_name

from samebits.errors import ToolError, UnreachableError, UnsatisfiableError
from samebits.lockfile import LockedPackage
from samebits.spec import EnvironmentSpec, PlatformTarget

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


def uv_command(spec: EnvironmentSpec, target: PlatformTarget, *, fmt: str, out: Path,
               offline: bool = False) -> list[str]:
    cmd = [
        uv_binary(), "pip", "compile", "-",
        "--python", sys.executable,  # skips uv's interpreter discovery; only the version counts
        "--python-version", spec.python,
        "--python-platform", target.uv_platform,
        "--no-config", "--no-header", "--quiet", "--color", "never",
        "--output-file", str(out),
        *index_args(spec.pypi_index),
    ]
    if fmt == "pylock":
        cmd += ["--format", "pylock.toml"]
    else:
        cmd += ["--annotation-style", "split"]
    if spec.exclude_newer:
        cmd += ["--exclude-newer", spec.exclude_newer]
    if offline:
        cmd.append("--offline")
    return cmd


async def _run(cmd: list[str], stdin: str, *, timeout: float) -> None:
    env = dict(os.environ)
    env.setdefault("UV_HTTP_TIMEOUT", str(int(max(timeout, 1))))
    env.setdefault("UV_HTTP_RETRIES", "1")
    env["NO_COLOR"] = "1"
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=env)
    try:
        _, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=timeout * 3)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise UnreachableError(f"uv did not finish within {timeout * 3:g} s",
                               hint="check the network, or raise --timeout") from None
    if proc.returncode != 0:
        raise _CompileFailed(err.decode(errors="replace").strip())


class _CompileFailed(Exception):
    pass


async def solve_pypi(spec: EnvironmentSpec, target: PlatformTarget, *,
                     timeout: float, offline: bool = False) -> list[LockedPackage]:
    """Resolve ``spec``'s PyPI requirements for ``target``; one wheel per package.

    ``offline`` answers from uv's cache alone (uv --offline).
    """
    stdin = "\n".join(spec.pypi_requirements) + "\n"
    with tempfile.TemporaryDirectory(prefix="samebits-uv-") as tmp:
        pylock = Path(tmp) / "pylock.toml"
        reqs = Path(tmp) / "requirements.txt"
        try:
            await asyncio.gather(
                _run(uv_command(spec, target, fmt="pylock", out=pylock, offline=offline), stdin,
                     timeout=timeout),
                _run(uv_command(spec, target, fmt="req", out=reqs, offline=offline), stdin,
                     timeout=timeout),
            )
        except _CompileFailed as exc:
            raise _translate(str(exc), spec, target) from None
        data = tomllib.loads(pylock.read_text())
        edges = parse_via(reqs.read_text())
    return sorted((_locked(p, target.platform, edges) for p in data.get("packages", [])),
                  key=lambda p: p.name)


def _translate(text: str, spec: EnvironmentSpec, target: PlatformTarget) -> Exception:
    where = (f"{spec.file}: [pypi] requirements on {target.platform} "
             f"(Python {spec.python}, {target.uv_platform})")
    text = re.sub(r"^\s*(×|error:)\s*", "", text)
    if "No solution found" in text or "unsatisfiable" in text:
        return UnsatisfiableError(f"{where} cannot be satisfied:\n{text}",
                                  hint="relax a pin in [pypi] requirements")
    if any(w in text for w in _NETWORK_WORDS):
        return UnreachableError(f"{where}: the index {spec.pypi_index} did not answer:\n{text}",
                                hint="check the network or [pypi] index")
    return ToolError(f"{where}: uv failed:\n{text}")


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


def _locked(pkg: dict[str, Any], platform: str, edges: dict[str, set[str]]) -> LockedPackage:
    name = canonicalize_name(pkg["name"])
    wheels = pkg.get("wheels") or []
    art = wheels[0] if len(wheels) == 1 else pkg.get("sdist") or (wheels[0] if wheels else None)
    if art is None:
        raise ToolError(f"uv named no wheel or sdist for {name}; cannot lock it")
    url = art.get("url") or Path(art["path"]).resolve().as_uri()
    return LockedPackage(
        name=name,
        version=pkg["version"],
        manager="pip",
        platform=platform,
        url=url,
        sha256=art["hashes"]["sha256"],
        dependencies=tuple((d, "*") for d in sorted(edges.get(name, ()))),
    )

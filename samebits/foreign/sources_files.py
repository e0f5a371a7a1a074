"""environment.yml, pyproject.toml and the locks samebits reads, as a ``Declared``.

    read_environment_yml(text, source)   conda's environment file: ``channels``,
                                         ``dependencies`` (conda match specs in conda's
                                         ``name=version=build`` syntax, ``channel::name``)
                                         and its ``pip:`` part (requirements-file lines)
    read_pyproject(text, source, extras) PEP 621 ``[project] dependencies``, the
                                         ``optional-dependencies`` groups named (a group may
                                         name the project's own extras: ``flux[torch]``)
                                         and ``requires-python``
    declared_from_lock(lock, ...)        every package of one platform, pinned exactly

Pure: text in, model out; every problem at once as a ``SourceError``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from samebits.errors import Problem, SourceError, UsageError, clip
from samebits.foreign.sources import (
    CondaWanted,
    Declared,
    Include,
    Left,
    Requested,
    _Reading,
    _unique,
    read_lines,
)
from samebits.lock.model import Lock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# conda's "defaults" is Anaconda's own channel, not one on conda.anaconda.org
CHANNEL_URLS = {"defaults": "https://repo.anaconda.com/pkgs/main"}
PYPI_HOSTS = ("https://files.pythonhosted.org/",)
PYTORCH_WHL = re.compile(r"^(https://download\.pytorch\.org/whl/[a-z0-9.]+)/")


# ------------------------------------------------------------------ environment.yml

def read_environment_yml(text: str, *, source: str, include: Include | None = None) -> Declared:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SourceError(f"{source}: not YAML: {clip(str(exc), 200)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("dependencies"), list):
        raise SourceError(f"{source}: no dependencies list (not a conda environment file)")
    problems: list[Problem] = []
    notes: list[str] = []
    channels = []
    for i, ch in enumerate(doc.get("channels") or ()):
        if not isinstance(ch, str):
            problems.append(Problem(file=source, key=f"channels[{i}]", value=ch,
                                    message="must be a channel name or URL"))
        elif ch == "nodefaults":
            continue
        elif ch in CHANNEL_URLS:
            notes.append(f"{source}: channel {ch!r} is {CHANNEL_URLS[ch]}")
            channels.append(CHANNEL_URLS[ch])
        else:
            channels.append(ch)
    conda: list[CondaWanted] = []
    pip = _Reading(files=[source])
    python = requires = None
    for i, dep in enumerate(doc["dependencies"]):
        key = f"dependencies[{i}]"
        if isinstance(dep, dict) and set(dep) == {"pip"} and isinstance(dep["pip"], list):
            lines = [(f"{source}: {key}.pip[{j}]", str(x).strip())
                     for j, x in enumerate(dep["pip"]) if str(x).strip()]
            read_lines(lines, source=source, include=include, into=pip, depth=0)
            continue
        if not isinstance(dep, str):
            problems.append(Problem(file=source, key=key, value=dep,
                                    message="must be a conda match spec or a pip: list"))
            continue
        got = conda_spec(dep)
        if isinstance(got, str):
            problems.append(Problem(file=source, key=key, value=dep, message=got))
            continue
        spec, name, version = got
        if name == "python" and version:
            m = re.fullmatch(r"(?:==)?(3\.\d+)(\.[0-9*]+)*", version)
            if m:
                python = m.group(1)
            else:
                requires = version
        conda.append(CondaWanted(spec=spec, name=name, where=f"{source}: {key}"))
    problems += pip.problems
    if problems:
        raise SourceError(problems, hint="fix the file, or write the spec by hand")
    return Declared(format="environment.yml", source=source, pypi=_unique(pip.pypi, pip.notes),
                    conda=tuple(conda), channels=tuple(dict.fromkeys(channels)),
                    index=pip.index, extra_indexes=tuple(dict.fromkeys(pip.extra)),
                    python=python, requires_python=requires, left=tuple(pip.left),
                    notes=(*notes, *pip.notes), files=tuple(pip.files))


def conda_spec(text: str) -> tuple[str, str, str | None] | str:
    """conda's environment-file spec -> (the strict match spec, name, version) or why not.

    ``numpy=1.21`` means ``numpy 1.21.*``; ``name=1.2=build`` an exact version and build; a
    build string with dots (``py3.9_cuda11.3_0``) is written in brackets, the one form strict
    parsing takes."""
    from rattler import MatchSpec

    words = text.strip()
    try:
        lenient = MatchSpec(words, strict=False)
    except Exception as exc:  # rattler raises its own InvalidMatchSpecError
        return f"not a conda match spec: {clip(str(exc), 160)}"
    name = lenient.name.normalized
    channel = words.split("::", 1)[0] + "::" if "::" in words else ""
    version = str(lenient.version) if lenient.version is not None else None
    build = lenient.build
    candidates = [words]
    if version and build:
        candidates = [f"{channel}{name} {version} {build}",
                      f'{channel}{name} {version}[build="{build}"]']
    elif version:
        candidates = [f"{channel}{name} {version}"]
    for cand in candidates:
        try:
            strict = MatchSpec(cand, strict=True)
        except Exception:
            continue
        return str(strict) if "[" not in cand else cand, name, version
    return f"no strict form of it parses ({', '.join(candidates)})"


# ------------------------------------------------------------------ pyproject.toml

def read_pyproject(text: str, *, source: str, extras: Sequence[str] = ()) -> Declared:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SourceError(f"{source}: not valid TOML: {exc}") from None
    project = doc.get("project")
    if not isinstance(project, dict):
        raise SourceError(f"{source}: no [project] table (PEP 621): nothing declares the "
                          "dependencies", hint="pass a requirements.txt or environment.yml")
    name = str(canonicalize_name(str(project.get("name") or "")))
    problems: list[Problem] = []
    if "dependencies" in (project.get("dynamic") or ()):
        problems.append(Problem(file=source, key="project.dynamic", value="dependencies",
                                message="the dependencies are computed by the build backend "
                                "(setup.py): nothing here to read"))
    groups = project.get("optional-dependencies") or {}
    if not isinstance(groups, dict):
        groups = {}
    wanted: list[tuple[str, str]] = []
    for i, dep in enumerate(project.get("dependencies") or ()):
        wanted.append((f"{source}: project.dependencies[{i}]", str(dep)))
    notes: list[str] = []
    done: set[str] = set()
    queue = [(e, "--extra") for e in extras]
    while queue:
        extra, why = queue.pop(0)
        key = str(canonicalize_name(extra))
        group = next((v for k, v in groups.items() if str(canonicalize_name(k)) == key), None)
        if group is None:
            known = ", ".join(sorted(groups)) or "none"
            if why == "--extra":
                raise UsageError(f"--extra {extra}: {source} has no such optional-dependencies "
                                 f"group (it has: {known})")
            problems.append(Problem(file=source, key="project.optional-dependencies",
                                    value=extra, message=f"no such group ({why}); the file "
                                    f"has: {known}"))
            continue
        if key in done:
            continue
        done.add(key)
        for i, dep in enumerate(group):
            own = _own_extras(str(dep), name)
            if own is not None:  # "flux[torch]" inside flux's own groups
                queue += [(e, f"named by {extra}") for e in own]
                continue
            wanted.append((f"{source}: project.optional-dependencies.{extra}[{i}]", str(dep)))
    if groups and not extras:
        notes.append(f"{source}: optional groups not included: {', '.join(sorted(groups))} "
                     "(pass --extra NAME)")
    reading = _Reading(files=[source])
    read_lines(wanted, source=source, include=None, into=reading, depth=0)
    problems += reading.problems
    if problems:
        raise SourceError(problems, hint="fix the file, or write the spec by hand")
    requires = project.get("requires-python")
    return Declared(format="pyproject.toml", source=source,
                    pypi=_unique(reading.pypi, notes), left=tuple(reading.left),
                    requires_python=requires if isinstance(requires, str) else None,
                    notes=(*notes, *reading.notes,
                           *([f"{source}: the project itself ({name}) is not part of the spec: "
                              "install it from its checkout"] if name else [])),
                    files=(source,))


def _own_extras(dep: str, name: str) -> list[str] | None:
    try:
        req = Requirement(dep)
    except InvalidRequirement:
        return None
    if name and str(canonicalize_name(req.name)) == name:
        return sorted(req.extras)
    return None


# ------------------------------------------------------------------ locks

def declared_from_lock(lock: Lock, *, platform: str, source: str, fmt: str,
                       dropped: Sequence[Any] = ()) -> Declared:
    """Every package a lock has for ``platform``, pinned: conda as ``name ==version build``,
    PyPI as ``name==version`` (from PyPI or a PyTorch index, which then becomes an extra
    index) or ``name @ URL`` (any other artifact)."""
    packages = lock.packages_for(platform)
    conda, pypi, extra = [], [], []
    python = None
    for p in packages:
        where = f"{source}: {p.name} {p.version}"
        if p.manager == "conda":
            conda.append(CondaWanted(spec=pin_conda(p.name, p.version, p.build), name=p.name,
                                     where=where))
            if p.name == "python":
                python = ".".join(p.version.split(".")[:2])
            continue
        m = PYTORCH_WHL.match(p.url)
        if p.url.startswith(PYPI_HOSTS) or m:
            if m:
                extra.append(m.group(1))
            pypi.append(Requested(text=f"{p.name}=={p.version}", name=p.name,
                                  pinned=p.version, where=where))
        else:
            pypi.append(Requested(text=f"{p.name} @ {p.url}", name=p.name, pinned=p.version,
                                  where=where, url=p.url))
    python = python or lock.meta("python") or None
    left = tuple(Left(where=source, text=str(d), reason="not carried over from the lock")
                 for d in dropped)
    return Declared(format=fmt, source=source, pypi=tuple(pypi), conda=tuple(conda),
                    channels=lock.channels, extra_indexes=tuple(dict.fromkeys(extra)),
                    python=python, left=left, files=(source,))


def pin_conda(name: str, version: str, build: str | None) -> str:
    """``name ==version build``, or the bracket form when the build string has characters the
    strict parser refuses in the plain form (dots: ``py3.9_cuda11.3_0``)."""
    if not build:
        return f"{name} =={version}"
    if re.fullmatch(r"[A-Za-z0-9_]+", build):
        return f"{name} =={version} {build}"
    return f'{name} =={version}[build="{build}"]'

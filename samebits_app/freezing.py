"""An installed environment -> the exact packages, pinned to archives with hashes, no solving.

    read_installed(prefix)       what the installers recorded (verify.env.records) plus the rest of
                                 each record freeze needs: conda-meta ``url``/``depends``, a
                                 dist-info's ``direct_url.json``, ``Requires-Dist``
    pin(installed, index)        each package -> a ``LockedPackage`` or a ``Finding``:
        conda                    conda-meta's url, md5, sha256, depends, as installed
        PyPI, direct_url.json    its wheel URL and recorded sha256 (PEP 610)
        PyPI, from an index      the index's file of that name and version whose tags are
                                 exactly the installed WHEEL tags; its sha256 from the index
        cannot be pinned         an editable install, a VCS checkout, a local directory, a
                                 wheel built here from an sdist, a wheel the index does not
                                 have: a finding each, never a guess
    trace (a wheel from elsewhere)
        a file:// wheel          the index (--index, --extra-index, a PyTorch local version's
                                 download.pytorch.org index) that has the same sha256: the lock
                                 names that URL; none: the lock names the file and says, in one
                                 line, that it is not reproducible elsewhere and why
        a local version          (``2.13.0+cpu``) the index is not serving: looked for on the
                                 others the same way, by the installed tags
      A package not listed by the spec's index is pinned in the spec by its URL (``name @
      URL``), so the spec re-locks to the same artifact.

The facts a spec needs come from the same records: the Python (conda's python package, a
venv's pyvenv.cfg), the platform (conda subdirs, wheel tags, else this machine), the glibc
floor (the newest glibc any wheel or conda package requires, rounded up to a floor uv
targets) and the CUDA line (nvidia-cuda-runtime wheels, conda's cuda-version/cuda-cudart, a
``+cuXYZ`` torch).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from samebits.foreign.simpleindex import IndexFile, project_files
from samebits.foreign.target import min_glibc
from samebits.host import host_platform, platform_of_machine
from samebits.lock.model import LockedPackage, conda_dependencies
from samebits.spec.model import GLIBC_FLOORS
from samebits_app.freezetrace import Finding, Lister, trace
from verify.env.records import Package, read_records

CUDA_RUNTIME_WHEELS = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13",
                       "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")


@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    """One installed package with what freeze reads beside ``verify.env.records.Package``."""

    package: Package
    url: str | None = None          # conda-meta url
    depends: tuple[str, ...] = ()   # conda depends, or Requires-Dist
    direct_url: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    kind: str                      # conda | venv | python
    python: str                    # X.Y.Z
    platform: str
    glibc: str
    cuda: str | None               # the CUDA line of the runtime found, or None
    torch: str | None              # "torch 2.4.0" / "pytorch 2.4.0 cuda124_..." when present


@dataclass(frozen=True, slots=True, kw_only=True)
class Frozen:
    facts: Facts
    packages: tuple[LockedPackage, ...]
    findings: tuple[Finding, ...]
    channels: tuple[str, ...]
    # pinned, but to a file on this machine that no index was found to serve: the lock is not
    # reproducible elsewhere (each reason says why)
    local: tuple[Finding, ...] = ()
    # where a local file or a local version was traced to: one line each
    traced: tuple[str, ...] = ()
    # PyPI packages the spec pins by their URL (name @ URL): the index does not list them
    by_url: tuple[str, ...] = ()


# ------------------------------------------------------------------ reading the records

def read_installed(prefix: Path) -> tuple[list[Installed], list[str]]:
    """Every installed package, and every record that could not be read (as text)."""
    records = read_records(prefix)
    problems = [f"{p.record}: {p.message}" for p in records.problems]
    out = []
    for p in records.packages:
        if p.manager == "conda":
            doc = _json(prefix / p.record)
            depends = tuple(d for d in doc.get("depends") or () if isinstance(d, str))
            url = doc.get("url") if isinstance(doc.get("url"), str) else None
            out.append(Installed(package=p, url=url, depends=depends))
        else:
            dist = prefix / p.record.rsplit("/", 1)[0]
            direct = _json(dist / "direct_url.json") if (dist / "direct_url.json").exists() \
                else None
            out.append(Installed(package=p, depends=_requires_dist(dist / "METADATA"),
                                 direct_url=direct))
    return out, problems


def _json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _requires_dist(path: Path) -> tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    head = text.split("\n\n", 1)[0]
    return tuple(line.split(":", 1)[1].strip() for line in head.splitlines()
                 if line.lower().startswith("requires-dist:"))


# ------------------------------------------------------------------ facts

def python_version(prefix: Path, kind: str, installed: Sequence[Installed]) -> str | None:
    conda_py = next((i.package.version for i in installed
                     if i.package.manager == "conda" and i.package.name == "python"), None)
    if conda_py:
        return conda_py
    cfg = prefix / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(errors="replace").splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info") and re.match(r"3\.\d+\.\d+",
                                                                       value.strip()):
                return ".".join(value.strip().split(".")[:3])
    lines = sorted(p.name[len("python"):] for p in (prefix / "lib").glob("python3.*")
                   if (p / "site-packages").is_dir())
    return lines[-1] if lines else None


def prefix_platform(installed: Sequence[Installed]) -> str:
    subdirs = Counter(i.package.subdir for i in installed if i.package.manager == "conda"
                      and i.package.subdir and i.package.subdir != "noarch")
    if subdirs:
        return subdirs.most_common(1)[0][0]
    arches = Counter(arch for i in installed for t in i.package.tags
                     for arch in ("x86_64", "aarch64") if t.endswith("_" + arch))
    if arches:
        return platform_of_machine(arches.most_common(1)[0][0])
    return host_platform()


def glibc_floor(installed: Sequence[Installed]) -> str:
    """The newest glibc any installed wheel or conda package requires, as a floor uv targets."""
    from packaging.tags import parse_tag

    need = (2, 17)
    for i in installed:
        if i.package.manager == "pip":
            tags = {t for tag in i.package.tags for t in parse_tag(tag)}
            got = min_glibc(tags)
            if got:
                need = max(need, got)
        for dep in i.depends if i.package.manager == "conda" else ():
            m = re.match(r"__glibc\s*>=\s*(\d+)\.(\d+)", dep)
            if m:
                need = max(need, (int(m.group(1)), int(m.group(2))))
    for floor in GLIBC_FLOORS:
        major, minor = (int(x) for x in floor.split("."))
        if (major, minor) >= need:
            return floor
    return GLIBC_FLOORS[-1]


def cuda_line(installed: Sequence[Installed]) -> tuple[str | None, str | None]:
    """(the CUDA line the environment's runtime is, a torch description)."""
    by_name = {(i.package.manager, str(canonicalize_name(i.package.name))): i.package
               for i in installed}
    torch = by_name.get(("pip", "torch")) or by_name.get(("conda", "pytorch"))
    desc = None
    if torch is not None:
        desc = f"{torch.name} {torch.version}" + (f" {torch.build}" if torch.build else "")
    for name in CUDA_RUNTIME_WHEELS:
        p = by_name.get(("pip", name))
        if p is not None:
            return ".".join(p.version.split(".")[:2]), desc
    for name in ("cuda-version", "cuda-cudart"):
        p = by_name.get(("conda", name))
        if p is not None:
            return ".".join(p.version.split(".")[:2]), desc
    if torch is not None:
        m = re.search(r"\+cu(\d+)(\d)$", torch.version) or re.search(r"cuda(\d+)(\d)_",
                                                                       torch.build or "")
        if m:
            return f"{m.group(1)}.{m.group(2)}", desc
    return None, desc


# ------------------------------------------------------------------ pinning

def pin_conda(i: Installed, platform: str) -> LockedPackage | Finding:
    p = i.package
    if not i.url:
        return Finding(package=p.id, reason="conda-meta records no url: cannot name the archive")
    if not p.md5:
        return Finding(package=p.id, reason="conda-meta records no md5 of the archive")
    return LockedPackage(name=p.name, version=p.version, manager="conda", platform=platform,
                         url=i.url, md5=p.md5, sha256=p.sha256, build=p.build,
                         dependencies=conda_dependencies(i.depends))


def _direct(i: Installed) -> tuple[str, str | None] | Finding | None:
    """(url, sha256) from direct_url.json; a Finding when it names no pinnable wheel; None
    when there is no direct_url.json (the package came from an index)."""
    doc, pid = i.direct_url, i.package.id
    if doc is None:
        return None
    url = doc.get("url")
    if not isinstance(url, str):
        url = ""
    if isinstance(doc.get("vcs_info"), dict):
        vcs = doc["vcs_info"]
        return Finding(package=pid, reason=f"a VCS checkout ({vcs.get('vcs', 'vcs')}+{url}@"
                       f"{vcs.get('commit_id', '?')}): built from source, no archive to pin")
    if isinstance(doc.get("dir_info"), dict):
        how = "an editable install" if doc["dir_info"].get("editable") else "a local directory"
        return Finding(package=pid, reason=f"{how} of {url}: built from source, no archive "
                       "to pin")
    archive = doc.get("archive_info")
    if not isinstance(archive, dict):
        return Finding(package=pid, reason=f"direct_url.json names {url or 'nothing'} without "
                       "archive_info")
    if not url.split("#")[0].endswith(".whl"):
        return Finding(package=pid, reason=f"a local build from {url}: the wheel was built "
                       "here, no archive to pin")
    hashes = archive.get("hashes")
    if not isinstance(hashes, dict):
        hashes = {}
    sha = hashes.get("sha256")
    if not sha and isinstance(archive.get("hash"), str) and archive["hash"].startswith("sha256="):
        sha = archive["hash"][7:]
    if not sha:
        return Finding(package=pid, reason=f"{url}: direct_url.json records no sha256")
    return url, sha


def pin_pip(i: Installed, platform: str, offered: list[IndexFile], index: str,
            locked_names: set[str]) -> LockedPackage | Finding:
    p = i.package
    name = str(canonicalize_name(p.name))
    deps = _pip_deps(i, locked_names)
    direct = _direct(i)
    if isinstance(direct, Finding):
        return direct
    if direct is not None:
        url, sha = direct
        return LockedPackage(name=name, version=p.version, manager="pip", platform=platform,
                             url=url, sha256=sha, dependencies=deps)
    tags = frozenset(p.tags)
    if not tags:
        return Finding(package=p.id, reason="its WHEEL file names no tags")
    matches = []
    for f in offered:
        try:
            fname, fversion, _, ftags = parse_wheel_filename(f.filename)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if str(fname) == name and _same_version(str(fversion), p.version) \
                and frozenset(str(t) for t in ftags) == tags:
            matches.append(f)
    if not matches:
        return Finding(package=p.id, reason=f"no wheel of {name}=={p.version} with its tags "
                       f"({', '.join(sorted(tags))}) on {index}: a local build, or another "
                       "index (pass --index)")
    if len({f.sha256 for f in matches}) > 1:
        return Finding(package=p.id, reason=f"{len(matches)} wheels on {index} fit its tags "
                       f"({', '.join(sorted(f.filename for f in matches))}): ambiguous")
    f = matches[0]
    if not f.sha256:
        return Finding(package=p.id, reason=f"{index} gives no sha256 for {f.filename}")
    return LockedPackage(name=name, version=p.version, manager="pip", platform=platform,
                         url=f.url, sha256=f.sha256.lower(), dependencies=deps)


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _pip_deps(i: Installed, locked: set[str]) -> tuple[tuple[str, str], ...]:
    out = set()
    for text in i.depends:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        name = str(canonicalize_name(req.name))
        if name in locked:
            try:
                if req.marker is not None and "extra" in str(req.marker):
                    continue
            except InvalidMarker:
                continue
            out.add(name)
    return tuple((d, "*") for d in sorted(out))


def _repin(i: Installed, platform: str, pip_names: set[str], offered: list[IndexFile],
           index: str) -> LockedPackage | Finding:
    return pin_pip(i, platform, offered, index, pip_names)


def freeze(prefix: Path, *, kind: str, index: str, extra: Sequence[str] = (),
           lister: Lister = project_files) -> tuple[Frozen, list[str]]:
    """Pin every installed package of ``prefix``; (the result, unreadable records).

    A wheel installed from a ``file://`` URL is traced to the index that serves the same
    sha256 (``index``, ``extra``, a PyTorch local version's own index); a wheel with a local
    version that ``index`` lacks is looked for on the others."""
    installed, problems = read_installed(prefix)
    platform = prefix_platform(installed)
    python = python_version(prefix, kind, installed) or ""
    cuda, torch = cuda_line(installed)
    facts = Facts(kind=kind, python=python, platform=platform, glibc=glibc_floor(installed),
                  cuda=cuda, torch=torch)
    pip = [i for i in installed if i.package.manager == "pip"]
    need_index = sorted({i.package.name for i in pip if i.direct_url is None})
    with ThreadPoolExecutor(max_workers=8) as pool:
        listed = dict(zip(need_index, pool.map(lambda n: lister(index, n), need_index),
                          strict=True))
    pip_names = {str(canonicalize_name(i.package.name)) for i in pip}
    packages: list[LockedPackage] = []
    findings: list[Finding] = []
    local: list[Finding] = []
    traced: list[str] = []
    by_url: list[str] = []
    for i in installed:
        got: LockedPackage | Finding
        if i.package.manager == "conda":
            got = pin_conda(i, platform)
        else:
            t = trace(pin_pip(i, platform, listed.get(i.package.name, []), index, pip_names),
                      package_id=i.package.id, index=index, extra=extra, lister=lister,
                      from_index=i.direct_url is None and bool(i.package.tags),
                      repin=functools.partial(_repin, i, platform, pip_names))
            got = t.pin
            local += [t.local] if t.local else []
            traced += [t.line] if t.line else []
            if t.by_url and isinstance(got, LockedPackage):
                by_url.append(got.name)
        if isinstance(got, LockedPackage):
            packages.append(got)
        else:
            findings.append(got)
    channels = tuple(dict.fromkeys(p.url.rsplit("/", 2)[0] for p in packages
                                   if p.manager == "conda"))
    return Frozen(facts=facts, packages=tuple(packages), findings=tuple(findings),
                  channels=channels, local=tuple(local), traced=tuple(traced),
                  by_url=tuple(sorted(by_url))), problems

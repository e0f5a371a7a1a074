"""Conda packages: a cache entry linked into a prefix the way py-rattler links it.

``plan_conda`` reads the entry's ``info/index.json``, ``info/paths.json`` (or, for old
packages, ``info/files`` + ``info/has_prefix``) and ``info/link.json``, each proved against the
manifest (``entryfiles``), and returns what to place:

    file            copied (or cloned) from the entry, as the archive held it
    placeholder     read, proved, the prefix placeholder replaced (``placeholder``), written;
                    ``sha256_in_prefix`` is the sha256 of the bytes written
    softlink        recreated with the archive's target (refused when it leaves the prefix)
    directory       created
    noarch: python  ``site-packages/`` goes to ``lib/pythonX.Y/site-packages/`` and
                    ``python-scripts/`` to ``bin/``; ``info/link.json`` entry points become
                    ``bin/`` scripts with rattler's template

and the ``conda-meta/<name>-<version>-<build>.json`` record, written with py-rattler's own
``PrefixRecord`` (so conda, mamba and pixi read it as theirs) from the lock's URL and channel and
the manifest's hashes, never a path of the machine that installed it. Link scripts are not run.

**Why not ``rattler.install``.** py-rattler 0.28's ``install(records, target_prefix,
cache_dir=...)`` downloads, unpacks and links in one call, from each record's URL through its
own client into its own package cache. samebits needs the steps apart: a file is fetched under
samebits' rules (``samebits.install.fetch``: any file with the lock's sha256 via
``--find-links``/``--mirror``, the size caps, ``file://`` only from named folders), unpacked
into an entry whose every member is proved against the archive's records before use
(``samebits.install.cache``), planned together with the PyPI wheels so that two packages
writing one path are caught before anything is written (``samebits.install.place``), placed
by the chosen link mode into a staging folder that becomes the prefix only whole, and proved
again after placement. The linking rules themselves (placeholders, noarch python, entry
points, the conda-meta record) follow rattler's, and the record is rattler's own
``PrefixRecord``; tests/integration/test_install_conda.py installs real rattler-build packages
and checks the prefix against what ``rattler.install`` makes of the same packages.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.archives import link_problem, path_problem
from samebits.install.cache import Entry, Member
from samebits.install.entryfiles import CorruptEntry, read_checked, read_member
from samebits.install.place import Copy
from samebits.install.placeholder import PlaceholderError, replace_binary, replace_text
from samebits.lock.model import LockedPackage

ENTRY_POINT = """{shebang}
# -*- coding: utf-8 -*-
import re
import sys

from {module} import {import_name}

if __name__ == '__main__':
\tsys.argv[0] = re.sub(r'(-script\\.pyw?|\\.exe)?$', '', sys.argv[0])
\tsys.exit({func}())
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CondaPlan:
    package: LockedPackage
    copies: tuple[Copy, ...]
    writes: tuple[tuple[Path, bytes, bool], ...]
    links: tuple[tuple[Path, str], ...]            # (where, target)
    dirs: tuple[Path, ...]
    record: tuple[str, bytes]                     # (conda-meta/<...>.json, its bytes)
    sources: tuple[str, ...] = field(default=())  # prefix-relative .py (noarch: python)


def channel_of(url: str) -> str:
    """``.../conda-forge/linux-64/x.conda`` -> ``.../conda-forge``."""
    return url.rsplit("/", 2)[0]


def _json(entry: Entry, members: dict[str, Member], path: str) -> Any:
    data = read_member(entry, members, path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as exc:
        raise CorruptEntry(entry, path, f"not JSON ({exc})") from None


def _paths(entry: Entry, members: dict[str, Member]) -> list[dict[str, Any]]:
    """info/paths.json's entries, or the same built from info/files and info/has_prefix."""
    doc = _json(entry, members, "info/paths.json")
    if isinstance(doc, dict) and isinstance(doc.get("paths"), list):
        return [e for e in doc["paths"] if isinstance(e, dict) and "_path" in e]
    files = (read_member(entry, members, "info/files") or b"").decode().splitlines()
    prefixed: dict[str, tuple[str, str]] = {}
    for line in (read_member(entry, members, "info/has_prefix") or b"").decode().splitlines():
        parts = line.strip().split(" ")
        if len(parts) == 3:
            prefixed[parts[2].strip('"')] = (parts[0].strip('"'), parts[1])
        elif len(parts) == 1 and parts[0]:
            prefixed[parts[0]] = ("/opt/anaconda1anaconda2anaconda3", "text")
    out = []
    for f in (f.strip() for f in files if f.strip()):
        m = members.get(f)
        e: dict[str, Any] = {"_path": f,
                             "path_type": "softlink" if m and m.type == "symlink"
                             else "hardlink"}
        if f in prefixed:
            e["prefix_placeholder"], e["file_mode"] = prefixed[f]
        out.append(e)
    return out


def _noarch_python(index: dict[str, Any]) -> bool:
    noarch = index.get("noarch")
    return noarch == "python" or (isinstance(noarch, dict) and noarch.get("type") == "python")


def plan_conda(entry: Entry, p: LockedPackage, *, stage: Path, final: str,
               line: str | None) -> CondaPlan:
    """Every file of ``p`` under ``stage`` (the prefix as staged), ``final`` its real path."""
    import rattler

    members = entry.by_path()
    index = _json(entry, members, "info/index.json")
    if not isinstance(index, dict):
        raise CorruptEntry(entry, "info/index.json", "missing")
    noarch = _noarch_python(index)
    if noarch and not line:
        raise ValueError("a noarch: python package and no python in the lock")
    site = f"lib/python{line}/site-packages"

    def target(rel: str) -> str:
        if noarch and rel.startswith("site-packages/"):
            return f"{site}/{rel[len('site-packages/'):]}"
        if noarch and rel.startswith("python-scripts/"):
            return f"bin/{rel[len('python-scripts/'):]}"
        return rel

    copies: list[Copy] = []
    writes: list[tuple[Path, bytes, bool]] = []
    links: list[tuple[Path, str]] = []
    dirs: list[Path] = []
    sources: list[str] = []
    entries = []
    for e in _paths(entry, members):
        rel = posixpath.normpath(str(e["_path"]))
        dest = target(rel)
        bad = path_problem(dest)
        if bad:
            raise CorruptEntry(entry, rel, bad)
        kind = e.get("path_type", "hardlink")
        m = members.get(rel)
        if kind == "directory":
            dirs.append(stage / dest)
            entries.append(_paths_entry(dest, kind, e, None, None, None))
            continue
        if m is None:
            raise CorruptEntry(entry, rel, "listed in info/paths.json, not in the archive")
        if kind == "softlink" or m.type == "symlink":
            link = m.target or ""
            bad = link_problem(dest, link)
            if bad:
                raise CorruptEntry(entry, rel, bad)
            links.append((stage / dest, link))
            entries.append(_paths_entry(dest, "softlink", e, e.get("sha256"),
                                        hashlib.sha256(link.encode()).hexdigest(),
                                        len(link.encode())))
            continue
        placeholder = e.get("prefix_placeholder")
        if placeholder:
            data = read_checked(entry, m)
            mode = e.get("file_mode", "text")
            try:
                new = (replace_binary if mode == "binary" else replace_text)(
                    data, placeholder, final)
            except PlaceholderError as exc:
                raise ValueError(f"{rel}: {exc}") from None
            writes.append((stage / dest, new, m.exec))
            entries.append(_paths_entry(dest, kind, e, m.sha256,
                                        hashlib.sha256(new).hexdigest(), len(new)))
        else:
            copies.append(Copy(entry.source(m.path), dest, m.exec, m.size,
                               linkable=not e.get("no_link")))
            entries.append(_paths_entry(dest, kind, e, m.sha256, None, m.size))
        if noarch and dest.startswith(site + "/") and dest.endswith(".py"):
            sources.append(dest)
    if noarch:
        link_json = _json(entry, members, "info/link.json") or {}
        points = ((link_json.get("noarch") or {}).get("entry_points") or []) \
            if isinstance(link_json, dict) else []
        for spec in points:
            name, data = _entry_point(str(spec), final, line or "")
            writes.append((stage / "bin" / name, data, True))
            entries.append(_paths_entry(f"bin/{name}", "unix_python_entry_point", {},
                                        hashlib.sha256(data).hexdigest(), None, len(data)))
    entries.sort(key=lambda e: str(e.relative_path))  # py-rattler's order
    record = _prefix_record(rattler, entry, p, index, entries)
    name = f"conda-meta/{p.name}-{p.version}-{p.build or index.get('build', '')}.json"
    return CondaPlan(package=p, copies=tuple(copies), writes=tuple(writes), links=tuple(links),
                     dirs=tuple(dirs), record=(name, record), sources=tuple(sources))


def _entry_point(spec: str, final: str, line: str) -> tuple[str, bytes]:
    """``name = module:func`` -> (name, rattler's unix entry-point script)."""
    name, _, ref = (s.strip() for s in spec.partition("="))
    module, _, func = ref.partition(":")
    path = f"{final}/bin/python{line}"
    shebang = (f"#!/bin/sh\n'''exec' \"{path}\" \"$0\" \"$@\" #'''" if len(path) > 125
               else f"#!{path}")
    text = ENTRY_POINT.format(shebang=shebang, module=module.strip(),
                              import_name=func.strip().split(".")[0], func=func.strip())
    return name, text.encode()


def _paths_entry(dest: str, kind: str, e: dict[str, Any], sha: str | None,
                 in_prefix: str | None, size: int | None) -> Any:
    from rattler.package.paths_json import FileMode
    from rattler.prefix.prefix_paths import PrefixPathsEntry, PrefixPathType

    mode = e.get("file_mode") if e.get("prefix_placeholder") else None
    return PrefixPathsEntry(
        relative_path=Path(dest), path_type=PrefixPathType(kind),  # type: ignore[arg-type]
        prefix_placeholder=e.get("prefix_placeholder") or None,
        file_mode=FileMode(mode) if mode else None,
        sha256=bytes.fromhex(sha) if sha else None,
        sha256_in_prefix=bytes.fromhex(in_prefix) if in_prefix else None,
        size_in_bytes=size)


def _prefix_record(rattler: Any, entry: Entry, p: LockedPackage, index: dict[str, Any],
                   entries: list[Any]) -> bytes:
    """conda-meta JSON: py-rattler's PrefixRecord of the lock's URL, channel and hashes."""
    from rattler.prefix.prefix_paths import PrefixPaths

    md5 = p.md5 or entry.md5
    sha = p.sha256 or entry.sha256
    with tempfile.TemporaryDirectory(prefix="samebits-meta-") as tmp:
        idx = Path(tmp) / "index.json"
        idx.write_text(json.dumps(index))
        record = rattler.PackageRecord.from_index_json(
            idx, size=entry.size or None, sha256=sha or None, md5=md5 or None)
        repodata = rattler.RepoDataRecord(record, p.filename, p.url, channel_of(p.url))
        paths = PrefixPaths()
        paths.paths = entries
        prefix_record = rattler.PrefixRecord(
            repodata, paths, requested_specs=[],
            files=[e.relative_path for e in entries if not e.path_type.directory])
        out = Path(tmp) / "record.json"
        prefix_record.write_to_path(out, pretty=True)
        doc = json.loads(out.read_bytes())
    return json.dumps(doc, indent=2, ensure_ascii=False).encode()

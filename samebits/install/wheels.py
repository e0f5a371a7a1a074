"""Wheels: a wheel's cache entry laid out in a prefix, as pypa/installer lays it out.

``plan_wheel`` is pure apart from reading the entry's small files (``entryfiles``): it maps every
member to its scheme (the archive root to site-packages; ``<name>.data/<scheme>/`` to
site-packages, ``bin/``, ``include/pythonX.Y/`` or the prefix), rewrites ``#!python`` in
scripts, generates console and GUI scripts with installer's own generator, and writes the
dist-info files installer would, plus:

    INSTALLER         ``samebits``
    direct_url.json   PEP 610, as pip writes it for a wheel installed from a URL: the lock's URL
                      and ``archive_info.hashes.sha256`` (and the legacy ``hash``), so
                      ``verify env LOCK`` can tell a swapped wheel
    RECORD            installer's format and order; every hash is the manifest's (computed from
                      the proved archive) or, for a generated file, of the bytes written

Bytecode is not listed in RECORD (pip lists it without a hash, which proves nothing); the
environment digest leaves it out either way, so it is the same whether or not bytecode could
be compiled.
"""

from __future__ import annotations

import binascii
import csv
import hashlib
import io
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from samebits.install.cache import Entry
from samebits.install.entryfiles import CorruptEntry, read_checked, read_member
from samebits.install.place import Copy
from samebits.lock.model import LockedPackage

INSTALLER_NAME = b"samebits\n"
SCHEMES = ("purelib", "platlib", "headers", "scripts", "data")


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelPlan:
    """What placing one wheel writes: copies from the entry, generated files, its .py files."""

    package: LockedPackage
    copies: tuple[Copy, ...]
    writes: tuple[tuple[Path, bytes, bool], ...]
    sources: tuple[str, ...]            # prefix-relative .py files in site-packages
    dist_info: str                      # prefix-relative
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """Where a wheel's schemes go, relative to the prefix, and the interpreter of scripts."""

    site: str          # lib/pythonX.Y/site-packages
    include: str       # include/site/pythonX.Y in a venv, else include/pythonX.Y
    python: str        # absolute path of the final prefix's interpreter (shebangs)

    def scheme_dir(self, scheme: str, dist: str) -> str:
        """The folder of ``scheme`` for the distribution ``dist`` (its headers' own)."""
        return {"purelib": self.site, "platlib": self.site, "scripts": "bin",
                "headers": f"{self.include}/{dist}", "data": ""}[scheme]


def layout_for(line: str, python: str, *, venv: bool) -> Layout:
    """pip's scheme (``pip._internal.locations``): headers go to ``include/site/pythonX.Y/
    <name>`` in a virtual environment (pip's historical header path, uv's too) and to
    ``include/pythonX.Y/<name>`` in a prefix with its own Python (a conda environment)."""
    include = f"include/site/python{line}" if venv else f"include/python{line}"
    return Layout(site=f"lib/python{line}/site-packages", include=include, python=python)


def installed_path(member: str, data_dir: str, layout: Layout) -> str:
    """Where a wheel's ``member`` lands, relative to the prefix: the archive root and
    ``<data_dir>/purelib|platlib/`` in site-packages, ``scripts/`` in ``bin/``, ``headers/``
    in the layout's include folder under the distribution's name, ``data/`` at the prefix
    (ValueError for another ``.data`` subfolder). What ``plan_wheel`` places, and what the
    lock's shared paths name."""
    return _dest(layout, *_scheme(member, data_dir, "purelib"), dist_of(data_dir))


def dist_of(data_dir: str) -> str:
    """The distribution's name as its wheel spells it (``greenlet`` of
    ``greenlet-1.1.3.data``), which names its headers' folder. pip names that folder by the
    requirement as written where it was asked for (``Greenlet`` typed gives ``Greenlet/``);
    a lock does not keep how a name was typed, and the wheel's own spelling is what almost
    every requirement writes."""
    return data_dir.rsplit("-", 1)[0]


def _dest(layout: Layout, scheme: str, rel: str, dist: str) -> str:
    folder = layout.scheme_dir(scheme, dist)
    return posixpath.join(folder, rel) if folder else rel


def direct_url(url: str, sha256: str) -> bytes:
    """PEP 610 ``direct_url.json`` exactly as pip writes it for a wheel installed by URL."""
    doc = {"url": url, "archive_info": {"hash": f"sha256={sha256}",
                                        "hashes": {"sha256": sha256}}}
    return json.dumps(doc, sort_keys=True).encode()


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _b64(hexdigest: str) -> str:
    """RECORD's digest: urlsafe base64 of the bytes, unpadded (``base64.urlsafe_b64encode``
    without its wrapper: 17,000 of them per install)."""
    return binascii.b2a_base64(bytes.fromhex(hexdigest), newline=False) \
        .translate(_URLSAFE).rstrip(b"=").decode()


def dist_info_of(entry: Entry) -> str:
    """The wheel's one top-level ``*.dist-info`` folder (CorruptEntry if not one)."""
    tops = sorted({m.path.split("/", 1)[0] for m in entry.members
                   if "/" in m.path and m.path.split("/", 1)[0].endswith(".dist-info")})
    if len(tops) != 1:
        raise CorruptEntry(entry, "*.dist-info", f"{len(tops)} dist-info folders")
    return tops[0]


def _scheme(path: str, data_dir: str, root: str) -> tuple[str, str]:
    if not path.startswith(data_dir + "/"):
        return root, path
    scheme, _, rest = path[len(data_dir) + 1:].partition("/")
    if scheme not in SCHEMES or not rest:
        raise ValueError(f"{path} is not in a valid .data subfolder")
    return scheme, rest


def plan_wheel(entry: Entry, p: LockedPackage, *, stage: Path, layout: Layout) -> WheelPlan:
    """Every file installing ``p`` from ``entry`` writes under ``stage``, and its RECORD."""
    from installer.scripts import Script
    from installer.utils import parse_entrypoints, parse_metadata_file

    members = entry.by_path()
    info = dist_info_of(entry)
    data_dir = info[: -len(".dist-info")] + ".data"
    wheel = parse_metadata_file((read_member(entry, members, f"{info}/WHEEL") or b"").decode())
    if not (wheel["Wheel-Version"] or "").startswith("1."):
        raise ValueError(f"Wheel-Version {wheel['Wheel-Version']}: only 1.x wheels install")
    root = "purelib" if wheel["Root-Is-Purelib"] == "true" else "platlib"

    dist = dist_of(data_dir)
    folders = {scheme: layout.scheme_dir(scheme, dist) for scheme in SCHEMES}

    def dest(scheme: str, rel: str) -> str:
        folder = folders[scheme]  # _dest's join, without its lookups: once per member
        return f"{folder}/{rel}" if folder and rel and rel[0] != "/" and folder[-1] != "/" \
            else _dest(layout, scheme, rel, dist)

    copies: list[Copy] = []
    writes: list[tuple[Path, bytes, bool]] = []
    records: list[tuple[str, str, str, str]] = []   # (scheme, path, hash, size)
    sources: list[str] = []

    def generated(scheme: str, rel: str, data: bytes, executable: bool) -> None:
        writes.append((stage / dest(scheme, rel), data, executable))
        records.append((scheme, rel, f"sha256={_b64(hashlib.sha256(data).hexdigest())}",
                        str(len(data))))

    record_path = f"{info}/RECORD"
    for m in entry.members:
        if m.type != "file" or m.path == record_path:
            continue
        scheme, rel = _scheme(m.path, data_dir, root)
        if scheme == "scripts":
            data = read_checked(entry, m)
            if data.startswith(b"#!python"):
                data = f"#!{layout.python}\n".encode() + data.split(b"\n", 1)[1] \
                    if b"\n" in data else f"#!{layout.python}\n".encode()
            generated(scheme, rel, data, m.exec)
            continue
        target = dest(scheme, rel)
        copies.append(Copy(entry.source(m.path), target, m.exec, m.size, package=p.name))
        records.append((scheme, rel, f"sha256={_b64(m.sha256 or '')}", str(m.size)))
        if scheme in ("purelib", "platlib") and rel.endswith(".py"):
            sources.append(target)

    entry_points = read_member(entry, members, f"{info}/entry_points.txt")
    if entry_points is not None:
        for name, module, attr, section in parse_entrypoints(entry_points.decode()):
            script_name, data = Script(name, module, attr, section).generate(
                layout.python, "posix")
            generated("scripts", script_name, data, True)
    generated(root, f"{info}/INSTALLER", INSTALLER_NAME, False)
    generated(root, f"{info}/direct_url.json", direct_url(p.url, _sha256_of(p, entry)),
              False)
    records.append((root, record_path, "", ""))
    writes.append((stage / dest(root, record_path),
                   record_file(records, root, layout, dist), False))
    return WheelPlan(package=p, copies=tuple(copies), writes=tuple(writes),
                     sources=tuple(sources), dist_info=dest(root, info), notes=entry.notes)


def record_file(records: list[tuple[str, str, str, str]], root: str, layout: Layout,
                dist: str) -> bytes:
    """RECORD as pypa/installer writes it (``construct_record_file``): rows sorted by their
    path within their scheme, paths of other schemes relative to the root's folder."""
    prefixes = {scheme: "" if scheme == root else
                posixpath.relpath(layout.scheme_dir(scheme, dist) or ".", layout.site) + "/"
                for scheme in SCHEMES}
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=",", quotechar='"', lineterminator="\n")
    lines = []
    for scheme, path, digest, size in sorted(records, key=lambda r: r[1]):
        path = prefixes[scheme] + path
        if _PLAIN.isdisjoint(path):  # what csv writes for a field it need not quote
            lines.append(f"{path},{digest},{size}\n")
        else:
            writer.writerow((path, digest, size))
            lines.append(out.getvalue())
            out.seek(0)
            out.truncate()
    return "".join(lines).encode()


_PLAIN = frozenset(',"\r\n')  # a path with none of these is written as it is (QUOTE_MINIMAL)


def _sha256_of(p: LockedPackage, entry: Entry) -> str:
    """The archive's sha256 for direct_url.json: the lock's, else the one computed when the
    archive was proved (a lock that names a wheel by md5 only)."""
    return (p.sha256 or entry.sha256).lower()

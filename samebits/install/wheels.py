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
import contextlib
import csv
import hashlib
import io
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.install.cache import Entry, Member
from samebits.install.entryfiles import CorruptEntry, read_checked, read_member
from samebits.install.place import Copy
from samebits.lock.model import LockedPackage

INSTALLER_NAME = b"samebits\n"
PLANS = "plans"   # the cache's folder of ``PlanMemo`` files
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


def plan_wheel(entry: Entry, p: LockedPackage, *, stage: Path, layout: Layout,
               memo: Path | None = None) -> WheelPlan:
    """Every file installing ``p`` from ``entry`` writes under ``stage``, and its RECORD.

    ``memo``: a folder where what planning learnt of the same entry, package and layout is kept
    (``PlanMemo``): its RECORD but the scripts' rows, its entry points. The files copied as
    they are come from the entry's manifest every time, and the scripts are made again (their
    shebang names the interpreter of the prefix being installed)."""
    kept = PlanMemo(memo, entry, p, layout) if memo is not None else None
    doc = kept.read() if kept is not None else None
    plan = _plan_wheel(entry, p, stage, layout, doc, None) if doc is not None else None
    if plan is None:
        plan = _plan_wheel(entry, p, stage, layout, None, kept)
        assert plan is not None  # planned from the files: always a plan
    return plan


def _plan_wheel(entry: Entry, p: LockedPackage, stage: Path, layout: Layout,
                doc: dict[str, Any] | None, kept: PlanMemo | None) -> WheelPlan | None:
    """``plan_wheel`` from the entry's files (``doc`` None; what it learnt kept in ``kept``) or
    from a ``PlanMemo``'s ``doc`` (None when it does not fit the entry's scripts)."""
    members = entry.by_path() if doc is None else {}
    info, root = (doc["info"], doc["root"]) if doc else _wheel_of(entry, members)
    data_dir = info[: -len(".dist-info")] + ".data"
    dist = dist_of(data_dir)
    copies, sources, rows = _copies(entry, p.name, data_dir, f"{info}/RECORD", root, layout)

    generated: list[tuple[str, bytes, bool]] = []
    records: list[tuple[str, str, str, str]] = []   # (scheme, path, hash, size)
    scripts: list[int] = []                          # the rows of generated scripts

    def generate(scheme: str, rel: str, data: bytes, executable: bool) -> None:
        generated.append((_dest(layout, scheme, rel, dist), data, executable))
        if scheme == "scripts":
            scripts.append(len(records))
        records.append((scheme, rel, f"sha256={_b64(hashlib.sha256(data).hexdigest())}",
                        str(len(data))))

    for scheme, rel, m in rows:
        if scheme != "scripts":
            if doc is None:
                records.append((scheme, rel, f"sha256={_b64(m.sha256 or '')}", str(m.size)))
            continue
        data = read_checked(entry, m)
        if data.startswith(b"#!python"):
            data = f"#!{layout.python}\n".encode() + data.split(b"\n", 1)[1] \
                if b"\n" in data else f"#!{layout.python}\n".encode()
        generate(scheme, rel, data, m.exec)
    points = doc["points"] if doc else _entry_points(entry, members, info)
    for name, module, attr, section, body in points:
        generate("scripts", name, launcher(name, module, attr, section, body, layout.python),
                 True)
    record_path = f"{info}/RECORD"
    if doc:  # the rows kept, each script's own row where its number stands
        if len(doc["record"]) != 2 * len(scripts) + 1:
            return None
        prefix = _prefixes(root, layout, dist)["scripts"]
        record = "".join(part if isinstance(part, str)
                         else _record_line(prefix, *records[scripts[part]][1:])
                         for part in doc["record"]).encode()
        generated += [(_dest(layout, root, f"{info}/INSTALLER", dist), INSTALLER_NAME, False),
                      (_dest(layout, root, f"{info}/direct_url.json", dist),
                       direct_url(p.url, _sha256_of(p, entry)), False)]
    else:
        generate(root, f"{info}/INSTALLER", INSTALLER_NAME, False)
        generate(root, f"{info}/direct_url.json", direct_url(p.url, _sha256_of(p, entry)),
                 False)
        records.append((root, record_path, "", ""))
        lines = record_lines(records, root, layout, dist)
        record = "".join(line for _, line in lines).encode()
        if kept is not None:  # the lines between scripts' rows joined: [text, 0, text, 1, text]
            number = {row: k for k, row in enumerate(scripts)}
            parts: list[str | int] = []
            text: list[str] = []
            for i, line in lines:
                if i in number:
                    parts += ["".join(text), number[i]]
                    text = []
                else:
                    text.append(line)
            kept.write(info, root, points, [*parts, "".join(text)])
    generated.append((_dest(layout, root, record_path, dist), record, False))
    return WheelPlan(package=p, copies=copies, sources=sources,
                     writes=tuple((stage / rel, data, x) for rel, data, x in generated),
                     dist_info=_dest(layout, root, info, dist), notes=entry.notes)


def _wheel_of(entry: Entry, members: dict[str, Member]) -> tuple[str, str]:
    """(the dist-info folder, the scheme of the archive's root: purelib or platlib)."""
    from installer.utils import parse_metadata_file

    info = dist_info_of(entry)
    wheel = parse_metadata_file((read_member(entry, members, f"{info}/WHEEL") or b"").decode())
    if not (wheel["Wheel-Version"] or "").startswith("1."):
        raise ValueError(f"Wheel-Version {wheel['Wheel-Version']}: only 1.x wheels install")
    return info, "purelib" if wheel["Root-Is-Purelib"] == "true" else "platlib"


def _entry_points(entry: Entry, members: dict[str, Member], info: str
                  ) -> list[tuple[str, str, str, str, str | None]]:
    """The console and GUI scripts of entry_points.txt: (name, module, attr, section, the body
    installer writes below a plain shebang line; None if it writes none)."""
    text = read_member(entry, members, f"{info}/entry_points.txt")
    return _entry_points_of(text.decode()) if text is not None else []


def _entry_points_of(text: str) -> list[tuple[str, str, str, str, str | None]]:
    from installer.scripts import Script
    from installer.utils import parse_entrypoints

    out: list[tuple[str, str, str, str, str | None]] = []
    for name, module, attr, section in parse_entrypoints(text):
        data = Script(name, module, attr, section).generate(_PLAIN_PYTHON, "posix")[1]
        head = b"#!" + _PLAIN_PYTHON.encode() + b"\n"
        out.append((name, module, attr, section,
                    data[len(head):].decode() if data.startswith(head) else None))
    return out


_PLAIN_PYTHON = "/python"  # an interpreter path installer writes as it is after "#!"


def launcher(name: str, module: str, attr: str, section: str, body: str | None,
             python: str) -> bytes:
    """installer's posix console or GUI script running ``python``: "#!", the path and the
    ``body`` it writes below, where installer writes the path as it is (no space and a line
    of at most 127 bytes: ``Script._is_executable_simple``; a test holds the two equal);
    installer's own for any other path (a /bin/sh trampoline) or no body."""
    exe = python.encode()
    if body is not None and b" " not in exe and len(exe) + 3 <= 127:
        return b"#!" + exe + b"\n" + body.encode()
    from installer.scripts import Script

    script = Script(name, module, attr, section)  # type: ignore[arg-type]
    return script.generate(python, "posix")[1]


def _copies(entry: Entry, name: str, data_dir: str, record_path: str, root: str,
            layout: Layout) -> tuple[tuple[Copy, ...], tuple[str, ...],
                                     list[tuple[str, str, Member]]]:
    """The members placed as they are (every file but RECORD and the scripts), the ``.py`` files
    among them, and (scheme, path in it, member) of each file but RECORD, scripts included."""
    data_head = f"{data_dir}/"
    dist = dist_of(data_dir)
    folders = {scheme: layout.scheme_dir(scheme, dist) for scheme in SCHEMES}
    site, tree = folders[root], f"{entry.root}/tree/"
    plain = bool(site) and site[-1] != "/"
    new = tuple.__new__  # Copy(...) without its Python-level __new__: 17,000 a warm install
    copies: list[Copy] = []
    sources: list[str] = []
    rows: list[tuple[str, str, Member]] = []
    for m in entry.members:
        path = m.path
        if m.type != "file" or path == record_path:
            continue
        if path.startswith(data_head):
            scheme, rel = _scheme(path, data_dir, root)
            rows.append((scheme, rel, m))
            if scheme == "scripts":
                continue  # generated: its shebang rewritten
            folder = folders[scheme]
            target = f"{folder}/{rel}" if folder and rel[0] != "/" and folder[-1] != "/" \
                else _dest(layout, scheme, rel, dist)
        else:  # the archive root, to site-packages (most members: _dest's join, no lookups)
            scheme, rel = root, path
            rows.append((scheme, rel, m))
            target = f"{site}/{rel}" if plain and rel[0] != "/" \
                else _dest(layout, scheme, rel, dist)
        copies.append(new(Copy, (tree + path, target, m.exec, m.size, True, name)))
        if rel.endswith(".py") and scheme in ("purelib", "platlib"):
            sources.append(target)
    return tuple(copies), tuple(sources), rows


class PlanMemo:
    """What planning a wheel learnt that does not depend on where it is installed, kept at
    ``<folder>/<planner>/<key>.json``: the dist-info folder, the root's scheme, the entry points
    (each with the body installer writes below its shebang: ``launcher``) and RECORD's rows
    but the generated scripts' (in their place, the script's number). The key hashes the
    entry's manifest (which names every member's sha256; the seal check proves the files are
    those), the lock's URL and sha256 of the package and the layout's folders; <planner>
    hashes this module's source and installer's version. A warm install of the 32 wheels of
    the cpu lock then neither hashes 17,000 rows into RECORD again nor reads the entries'
    WHEEL and entry_points.txt, nor imports installer. A file that is not exactly of the shape
    written (torn, edited, another key) is not used; a cache that cannot be written is only
    not used."""

    _planner: list[str] = []

    def __init__(self, folder: Path, entry: Entry, p: LockedPackage, layout: Layout) -> None:
        if not self._planner:
            from samebits.host import installed_version

            try:
                installer = installed_version("installer", "installer")
            except ImportError:
                installer = ""
            h = hashlib.sha256(Path(__file__).read_bytes())
            h.update(f"\0{installer}".encode())
            self._planner.append(h.hexdigest()[:16])
        self.key = json.dumps([entry.manifest_sha256, p.url, _sha256_of(p, entry),
                               layout.site, layout.include])
        name = hashlib.sha256(self.key.encode()).hexdigest()
        self.path = folder / self._planner[0] / f"{name}.json"

    def read(self) -> dict[str, Any] | None:
        try:
            doc = json.loads(self.path.read_bytes())
            ok = (doc["format"] == 1 and doc["key"] == self.key
                  and isinstance(doc["info"], str) and doc["info"].endswith(".dist-info")
                  and "/" not in doc["info"] and doc["root"] in ("purelib", "platlib")
                  and all(len(e) == 5 and all(isinstance(x, str) for x in e[:4])
                          and e[3] in ("console", "gui") and isinstance(e[4], (str, type(None)))
                          for e in doc["points"]))
            record = doc["record"]  # text, 0, text, 1, ..., text: every script's number once
            ok = ok and all(isinstance(x, str) for x in record[::2]) and sorted(
                record[1::2]) == list(range(len(record) // 2)) and len(record) % 2 == 1
            ok = ok and all(type(x) is int for x in record[1::2])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return doc if ok else None

    def write(self, info: str, root: str, points: list[tuple[str, str, str, str, str | None]],
              record: list[str | int]) -> None:
        from samebits._io import atomic_write

        doc = {"format": 1, "key": self.key, "info": info, "root": root,
               "points": [list(e) for e in points], "record": record}
        with contextlib.suppress(OSError):  # a read-only cache: planned again next time
            atomic_write(self.path, json.dumps(doc), sync=False)  # read() checks it


def record_file(records: list[tuple[str, str, str, str]], root: str, layout: Layout,
                dist: str) -> bytes:
    """RECORD as pypa/installer writes it (``construct_record_file``): rows sorted by their
    path within their scheme, paths of other schemes relative to the root's folder."""
    return "".join(line for _, line in record_lines(records, root, layout, dist)).encode()


def record_lines(records: list[tuple[str, str, str, str]], root: str, layout: Layout,
                 dist: str) -> list[tuple[int, str]]:
    """RECORD's lines in order, each with the number of its row in ``records``."""
    prefixes = _prefixes(root, layout, dist)
    order = sorted(range(len(records)), key=lambda i: records[i][1])
    return [(i, _record_line(prefixes[records[i][0]], *records[i][1:])) for i in order]


def _prefixes(root: str, layout: Layout, dist: str) -> dict[str, str]:
    return {scheme: "" if scheme == root else
            posixpath.relpath(layout.scheme_dir(scheme, dist) or ".", layout.site) + "/"
            for scheme in SCHEMES}


def _record_line(prefix: str, path: str, digest: str, size: str) -> str:
    path = prefix + path
    if _PLAIN.isdisjoint(path):  # what csv writes for a field it need not quote
        return f"{path},{digest},{size}\n"
    out = io.StringIO(newline="")
    csv.writer(out, delimiter=",", quotechar='"', lineterminator="\n").writerow(
        (path, digest, size))
    return out.getvalue()


_PLAIN = frozenset(',"\r\n')  # a path with none of these is written as it is (QUOTE_MINIMAL)


def _sha256_of(p: LockedPackage, entry: Entry) -> str:
    """The archive's sha256 for direct_url.json: the lock's, else the one computed when the
    archive was proved (a lock that names a wheel by md5 only)."""
    return (p.sha256 or entry.sha256).lower()

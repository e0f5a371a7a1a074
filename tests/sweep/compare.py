"""Two installed environments of one lock, file by file: samebits' prefix against pip's venv.

Both trees are walked whole (every file, link and folder under the prefix); the same paths must
hold the same bytes, the same kind (file, link, folder), the same executable bit and the same
link target, except where the written rule below says what each installer writes of its own:

    bytecode     ``__pycache__/`` and its ``.pyc`` files: each installer compiles the same
                 sources with the same interpreter (samebits' are checked against their sources
                 by ``verify env``)
    scaffolding  ``pyvenv.cfg``, ``bin/python*``, ``bin/activate*``, ``bin/Activate.ps1``,
                 ``lib64`` (the link to ``lib`` that ``python -m venv`` makes; a real
                 ``lib64`` folder is compared): each tool makes its own venv (``verify env``
                 judges both)
    installer    ``*.dist-info/INSTALLER``, ``REQUESTED`` and ``direct_url.json``: who
                 installed it and how it was asked for (pip writes ``REQUESTED`` for a
                 requirement of the file; samebits names the locked URL in ``direct_url.json``)
    RECORD       compared as the set of its rows (path, the digest's bytes, size) without the
                 rows of the files above; a console script's row by its path alone. A row
                 that differs because the wheel's own RECORD is wrong about a file (the same
                 bytes in both trees; samebits writes the row of what it placed, pip copies
                 the wheel's: torch 1.12.1's METADATA) is kind ``record-slip``, explained
    scripts      a console script in ``bin/`` (a file whose first line is ``#!`` and the
                 prefix's interpreter) is written by each installer from the wheel's
                 ``entry_points.txt`` with its own template (pip's distlib, samebits' and
                 uv's pypa/installer): compared by the entry point it runs (its ``from MODULE
                 import NAME`` lines); a script the wheel ships (``.data/scripts``) byte for
                 byte after the ``#!`` line
    folders      compared through what they hold: ``python -m venv`` makes an empty
                 ``include/pythonX.Y``, and no wheel can ship an empty folder; a RECORD row
                 naming a folder (``cmake/,,`` in cmake 3.26.3's, which pip copies) names no
                 file, and is left out
    sdist builds a package the lock takes as an sdist (``built``) is built into a wheel by
                 each installer with its own build environment (pip: the newest setuptools
                 on the day; samebits: the locked build record), so the files of its RECORD
                 may differ by the build tools (WHEEL's ``Generator:``, METADATA's version,
                 compiled code): such a difference is kind ``sdist-build``, listed apart, not a
                 divergence; a path only one side has is still one, except where that
                 build's METADATA is the cause: a requirement samebits' build of a package
                 declares and pip's (today's setuptools) does not, as Python's own reader
                 (``email.parser``: pip's and importlib.metadata's) reads each, brings the
                 package it names and what only that needs into samebits' tree alone. Those
                 paths are kind ``build-requires``, explained: sklearn 0.0's multi-line
                 Author-email ends setuptools 80's METADATA headers before its
                 ``Requires-Dist: scikit-learn`` (setuptools 65, of the lock's day, writes that
                 line first), so pip installs no scikit-learn where the authors' pip did

Every other difference is a ``Divergence``: a path only one side has, or other bytes.
"""

from __future__ import annotations

import csv
import email.parser
import hashlib
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from samebits.archives import record_hash

INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json")
SCAFFOLDING = ("pyvenv.cfg", "lib64", "bin/Activate.ps1")
# differences the rule explains, listed apart from divergences
EXPLAINED = ("sdist-build", "record-slip", "build-requires")


@dataclass(frozen=True, slots=True)
class Divergence:
    path: str
    kind: str       # only-samebits | only-pip | bytes | type | mode | link | record
    #                 | sdist-build, record-slip, build-requires: explained (EXPLAINED)
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.path}" + (f" ({self.detail})" if self.detail else "")


def excepted(rel: str) -> bool:
    """Whether the written rule leaves ``rel`` (a prefix-relative path) out of the comparison."""
    parts = rel.split("/")
    if "__pycache__" in parts:
        return True
    if rel in SCAFFOLDING or (parts[0] == "bin" and len(parts) == 2
                              and parts[1].startswith(("python", "activate"))):
        return True
    return len(parts) >= 2 and parts[-2].endswith(".dist-info") and parts[-1] in INSTALLER_FILES


def walk(root: Path) -> dict[str, os.stat_result]:
    """Every entry under ``root`` (prefix-relative POSIX path -> lstat), the rule's exceptions
    left out; a folder that is excepted is not descended into."""
    out: dict[str, os.stat_result] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(root / rel if rel else root) as it:
            for e in it:
                path = f"{rel}/{e.name}" if rel else e.name
                if excepted(path) and not (path == "lib64" and e.is_dir(follow_symlinks=False)):
                    continue  # lib64 the venv's link to lib, not a folder of files
                st = e.stat(follow_symlinks=False)
                out[path] = st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(path)
    return out


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


_ENTRY = re.compile(rb"^from (\S+) import (\S+)\s*$", re.M)


def _script(data: bytes, prefix: Path) -> bytes | None:
    """What a script in ``bin/`` is compared by, or None when it does not start with the
    prefix's interpreter: a generated console script's entry point (``from M import N``), else
    its bytes after the ``#!`` line."""
    first, _, rest = data.partition(b"\n")
    if not first.startswith(b"#!") or str(prefix).encode() not in first:
        return None
    entry = _ENTRY.findall(rest)
    if len(entry) == 1 and b"sys.exit(" in rest and len(rest) < 1024:
        return b"entry point " + b":".join(entry[0])
    return rest


def _record_rows(data: bytes) -> set[tuple[str, bytes, str]]:
    rows = set()
    for row in csv.reader(io.StringIO(data.decode("utf-8", "replace"))):
        if not row or not row[0]:
            continue
        path = row[0]
        name = path.rsplit("/", 1)[-1]
        if path.endswith("/"):  # a folder's row (cmake 3.26.3 lists cmake/): names no file
            continue
        if "__pycache__" in path.split("/") or name.endswith(".pyc") or (
                ".dist-info/" in path and name in (*INSTALLER_FILES, "RECORD")):
            continue
        if path.startswith("../../../bin/") or path.startswith("../../bin/"):
            rows.add((path, b"", ""))  # a console script: each installer's own shebang
            continue
        try:
            got = record_hash(row[1]) if len(row) > 1 else None
        except ValueError:
            got = ("?", row[1].encode())
        rows.add((path, got[1] if got else b"", row[2] if len(row) > 2 else ""))
    return rows


def _record_slips(ra: set[tuple[str, bytes, str]], rb: set[tuple[str, bytes, str]],
                  ours: Path, pips: Path, record: str) -> list[str] | None:
    """The paths where the two RECORDs differ, when each is a wheel's own RECORD slip: the
    file is the same bytes in both trees and samebits' row is those bytes (pip copied the
    wheel's wrong row: torch 1.12.1's METADATA); None when any difference is another."""
    site = record.rsplit("/", 2)[0]
    paths = sorted({r[0] for r in ra ^ rb})
    mine = {r[0]: r for r in ra}
    for path in paths:
        a, b = ours / site / path, pips / site / path
        try:
            same = a.read_bytes() == b.read_bytes()
        except OSError:
            return None
        row = mine.get(path)
        if not same or row is None or row[1] != hashlib.sha256(a.read_bytes()).digest():
            return None
    return paths


def _holds_nothing(rel: str, tree: dict[str, os.stat_result]) -> bool:
    """A folder with no file or link below it (the rule's exceptions aside)."""
    if not stat.S_ISDIR(tree[rel].st_mode):
        return False
    below = rel + "/"
    return not any(p.startswith(below) and not stat.S_ISDIR(st.st_mode)
                   for p, st in tree.items())


def built_files(root: Path, tree: dict[str, os.stat_result], built: set[str]) -> set[str]:
    """The prefix-relative paths the RECORDs of the packages in ``built`` (canonical names)
    list, with their dist-info folders: the files each installer's own build made."""
    out: set[str] = set()
    for rel in tree:
        parts = rel.rsplit("/", 2)
        if len(parts) < 2 or not rel.endswith(".dist-info/RECORD"):
            continue
        info = parts[-2]
        name = re.sub(r"[-_.]+", "-", info[:-len(".dist-info")].rsplit("-", 1)[0]).lower()
        if name not in built:
            continue
        site = rel[:-len(f"{info}/RECORD")]
        for row in csv.reader(io.StringIO((root / rel).read_text("utf-8", "replace"))):
            if row and row[0]:
                out.add(os.path.normpath(site + row[0]))
    return out


def _of_build(rel: str, by_build: set[str]) -> bool:
    """Whether ``rel`` is a file an installer's build of an sdist made, or a folder holding
    only such files' paths (PEP 639's ``.dist-info/licenses/``, which setuptools 77 and later
    write where older ones put ``LICENSE`` beside ``METADATA``: pyod 2.0.0 in the sweep)."""
    return rel in by_build or any(f.startswith(rel + "/") for f in by_build)


def canonical(name: str) -> str:
    """PEP 503's form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _dists(root: Path, tree: dict[str, os.stat_result]) -> dict[str, str]:
    """Canonical name -> its ``.dist-info`` folder (prefix-relative) of every installed
    distribution under ``root``."""
    return {canonical(rel.rsplit("/", 1)[-1][:-len(".dist-info")].rsplit("-", 1)[0]): rel
            for rel, st in tree.items()
            if rel.endswith(".dist-info") and stat.S_ISDIR(st.st_mode)}


def _requires(root: Path, info: str) -> set[str]:
    """The names a distribution's METADATA requires, as Python's own reader reads them (a
    line that ends the headers ends them: what follows is the description)."""
    try:
        text = (root / info / "METADATA").read_text("utf-8", "replace")
    except OSError:
        return set()
    got = email.parser.Parser().parsestr(text, headersonly=True).get_all("Requires-Dist")
    return {canonical(re.split(r"[\s;(<>=!~\[]", r.strip(), maxsplit=1)[0])
            for r in got or ()}


def build_requires(ours: Path, pips: Path, a: dict[str, os.stat_result],
                   b: dict[str, os.stat_result], built: set[str]) -> dict[str, str]:
    """The paths only samebits' tree has because a package built from an sdist declares a
    requirement in samebits' build and not in pip's: path -> why."""
    da, db = _dists(ours, a), _dists(pips, b)
    lost: dict[str, str] = {}
    for name in sorted(built & da.keys() & db.keys()):
        for req in sorted(_requires(ours, da[name]) - _requires(pips, db[name])):
            lost.setdefault(req, f"{name}: pip's build of it does not require {req}")
    queue = [n for n in lost if n in da and n not in db]
    seen = set(queue)
    while queue:  # and what only those need
        cur = queue.pop()
        for req in _requires(ours, da[cur]):
            if req in da and req not in db and req not in seen:
                seen.add(req)
                lost.setdefault(req, lost[cur])
                queue.append(req)
    out: dict[str, str] = {}
    for name in seen:
        info = da[name]
        site = info.rsplit("/", 1)[0] + "/"
        out[info] = lost[name]
        try:
            rows = (ours / info / "RECORD").read_text("utf-8", "replace")
        except OSError:
            continue
        for row in csv.reader(io.StringIO(rows)):
            if row and row[0]:
                path = os.path.normpath(site + row[0])
                out[path] = lost[name]
                while (path := path.rsplit("/", 1)[0]) + "/" != site and "/" in path:
                    out.setdefault(path, lost[name])
    return out


def compare(ours: Path, pips: Path, *, built: set[str] = frozenset()) -> list[Divergence]:
    """Every divergence between samebits' prefix ``ours`` and pip's ``pips``, sorted by path
    (``built``: the canonical names of the packages the lock takes as sdists)."""
    a, b = walk(ours), walk(pips)
    by_build = built_files(ours, a, set(built)) | built_files(pips, b, set(built))
    required = build_requires(ours, pips, a, b, set(built))
    out: list[Divergence] = []
    for rel in sorted(a.keys() - b.keys()):
        if rel in required:
            out.append(Divergence(rel, "build-requires", required[rel]))
        elif _of_build(rel, by_build):
            out.append(Divergence(rel, "sdist-build", "only in samebits' build"))
        elif not _holds_nothing(rel, a):
            out.append(Divergence(rel, "only-samebits"))
    for rel in sorted(b.keys() - a.keys()):
        if _of_build(rel, by_build):
            out.append(Divergence(rel, "sdist-build", "only in pip's build"))
        elif not _holds_nothing(rel, b):
            out.append(Divergence(rel, "only-pip"))
    for rel in sorted(a.keys() & b.keys()):
        sa, sb = a[rel], b[rel]
        ta, tb = stat.S_IFMT(sa.st_mode), stat.S_IFMT(sb.st_mode)
        if ta != tb:
            out.append(Divergence(rel, "type", f"{stat.filemode(sa.st_mode)} against "
                                  f"{stat.filemode(sb.st_mode)}"))
            continue
        if stat.S_ISLNK(sa.st_mode):
            la, lb = os.readlink(ours / rel), os.readlink(pips / rel)
            if la != lb:
                out.append(Divergence(rel, "link", f"{la} against {lb}"))
            continue
        if not stat.S_ISREG(sa.st_mode):
            continue
        if (sa.st_mode & 0o111 != 0) != (sb.st_mode & 0o111 != 0):
            out.append(Divergence(rel, "mode", f"{oct(sa.st_mode & 0o777)} against "
                                  f"{oct(sb.st_mode & 0o777)}"))
        if rel.endswith(".dist-info/RECORD"):
            ra = _record_rows((ours / rel).read_bytes())
            rb = _record_rows((pips / rel).read_bytes())
            slips = _record_slips(ra, rb, ours, pips, rel)
            if ra != rb and rel in by_build:
                out.append(Divergence(rel, "sdist-build", "RECORD rows of the build"))
            elif ra != rb and slips is not None:
                out.append(Divergence(rel, "record-slip", ", ".join(slips)))
            elif ra != rb:
                only_a = sorted(r[0] for r in ra - rb)[:3]
                only_b = sorted(r[0] for r in rb - ra)[:3]
                out.append(Divergence(rel, "record", f"rows only samebits writes: {only_a}; "
                                      f"only pip: {only_b}"))
            continue
        if rel.startswith("bin/") and sa.st_size < 1 << 16:
            # a script of a package built from an sdist too: its shebang names each prefix,
            # a difference of paths, not of builds (deepspeed's bin/deepspeed, 2 bytes)
            kind = "sdist-build" if rel in by_build else "bytes"
            da, db = (ours / rel).read_bytes(), (pips / rel).read_bytes()
            xa, xb = _script(da, ours), _script(db, pips)
            if xa is not None or xb is not None:
                if xa != xb:
                    out.append(Divergence(rel, kind, "script: "
                                          + " against ".join(repr(x[:60]) for x in (xa, xb)
                                                             if x is not None)))
                continue
            if da != db:
                out.append(Divergence(rel, kind))
            continue
        if sa.st_size != sb.st_size or _digest(ours / rel) != _digest(pips / rel):
            out.append(Divergence(rel, "sdist-build" if rel in by_build else "bytes",
                                  f"{sa.st_size} bytes against {sb.st_size}"))
    return out

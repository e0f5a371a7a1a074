"""What Python runs before any user code, outside the prefix: each file needs an owner.

``startup_findings`` checks what Python runs before any user code and the walk of the prefix
cannot see: ``sitecustomize`` / ``usercustomize`` (module, package, bytecode or extension) in
the base interpreter's stdlib and ``lib-dynload`` folders, a ``pythonXY.zip`` on sys.path, and
for a venv with ``include-system-site-packages = true`` every ``*.pth`` of the base's
site-packages. Each must be owned by a record (a dist-info RECORD of that site-packages, the
base's conda-meta, Debian's dpkg database) with a matching hash; else it is a ``startup``
finding. A venv's base interpreter in a conda prefix also has every file checked against its
conda-meta, and a Debian system Python its stdlib against ``/var/lib/dpkg/info/*.md5sums``.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

from verify.env.drift import Finding
from verify.env.interpreter import Located, zip_path
from verify.env.manifest import Entry, Manifest

_STARTUP = re.compile(r"^(site|user)customize(\.py|\.pyc|\..*\.so)?$")


def startup_candidates(manifest: Manifest, loc: Located) -> list[Entry]:
    """Base-interpreter files outside the prefix that Python runs at start-up."""
    if loc.inside:
        return []  # in the prefix: the walk gives them an owner or calls them unowned
    out = []
    folders = {loc.stdlib, f"{loc.stdlib}/lib-dynload"} if loc.stdlib else set()
    z = zip_path(loc)
    packages = (f"{loc.stdlib}/sitecustomize/", f"{loc.stdlib}/usercustomize/")
    for e in manifest.outside:
        folder, name = posixpath.split(e.path)
        if e.path == z or (folder in folders and _STARTUP.match(name)) \
                or e.path.startswith(packages):
            out.append(e)
    return out


def startup_findings(manifest: Manifest, loc: Located,
                     owners: dict[str, tuple[str, str | None, str]] | None = None
                     ) -> list[Finding]:
    """``owners``: ``base_records(loc)`` when the caller read them already (while hashing)."""
    owners = base_records(loc) if owners is None else owners
    out: list[Finding] = []
    for e in startup_candidates(manifest, loc):
        claim = owners.get(e.path)
        if claim is None:
            out.append(Finding(kind="startup", path=e.path, package=_who(loc),
                               actual=_describe(e),
                               detail="runs at start-up; no record owns it"))
        elif claim[1] is not None and claim[1] != _digest_of(e, claim[2]):
            out.append(Finding(kind="modified", path=e.path, package=claim[0],
                               expected=claim[1], actual=_digest_of(e, claim[2]),
                               detail="runs at start-up"))
    if loc.system_site and loc.base_prefix and loc.line:
        out.extend(_system_site_findings(loc))
    if owners and not loc.inside:
        out.extend(_recorded_base_findings(manifest, owners))
    return out


def _who(loc: Located) -> str:
    return f"<python {loc.binary}>"


def _describe(e: Entry) -> str:
    return f"symlink -> {e.target}" if e.type == "symlink" else f"file sha256 {e.sha256}"


def _digest_of(e: Entry, algo: str) -> str | None:
    if e.type == "symlink":
        return e.target
    if algo == "md5":
        return _file_digest(Path(e.path), "md5")
    return e.sha256


def base_records(loc: Located) -> dict[str, tuple[str, str | None, str]]:
    """Absolute path -> (owner, expected digest or link target or None, algorithm), from the
    base interpreter's records: its conda-meta, or Debian's dpkg database."""
    base = loc.base_prefix
    if loc.inside or not base:
        return {}
    if os.path.isdir(f"{base}/conda-meta"):
        from verify.env.records import read_records

        recs = read_records(Path(base))
        out: dict[str, tuple[str, str | None, str]] = {}
        for rel, claims in recs.claims.items():
            c = claims[-1]
            out[f"{base}/{rel}"] = (c.package, c.target if c.type == "symlink" else c.sha256,
                                    "sha256")
        return out
    return dpkg_records(loc)


def dpkg_records(loc: Located, root: str = "/") -> dict[str, tuple[str, str | None, str]]:
    """Debian: which package owns the base interpreter's start-up files, with their md5.

    dpkg keeps, per package, ``<pkg>.list`` (every path it installed) and ``<pkg>.md5sums``
    (the md5 of each regular file of them, conffiles aside): a path is in a package's md5sums
    only if it is in its list. So each list is read first, as bytes (no decoding of the ~30 MB
    that never name the stdlib), and a package's md5sums only when its list names the stdlib
    (or it has no list); what is read is decoded as before."""
    info = os.path.join(root, "var/lib/dpkg/info")
    if not loc.stdlib or not os.path.isdir(info):
        return {}
    zipped = zip_path(loc)
    want = (loc.stdlib.lstrip("/") + "/", *((zipped.lstrip("/"),) if zipped else ()))
    needles = tuple(os.fsencode(w) for w in want)
    names = sorted(os.listdir(info))
    listed = {n[:-len(".list")] for n in names if n.endswith(".list")}
    naming: set[str] = set()  # packages whose .list names the stdlib
    out: dict[str, tuple[str, str | None, str]] = {}
    for name in names:
        stem, _, kind = name.rpartition(".")
        if kind not in ("list", "md5sums") or (
                kind == "md5sums" and stem in listed and stem not in naming):
            continue  # not a file list, or its list names no stdlib path: nor can its md5sums
        try:
            with open(os.path.join(info, name), "rb") as f:
                data = f.read()
        except OSError:
            continue
        if not any(n in data for n in needles):
            continue
        if kind == "list":
            naming.add(stem)
        pkg = "deb:" + stem.split(":")[0]
        for line in data.decode("utf-8", errors="replace").splitlines():
            if kind == "md5sums":
                md5, _, path = line.partition("  ")
                if path.startswith(want):
                    out["/" + path] = (pkg, md5, "md5")
            elif line.lstrip("/").startswith(want) and line not in out:
                out.setdefault(line, (pkg, None, "md5"))  # owned (a symlink or a conffile)
    return out


def _system_site_findings(loc: Located) -> list[Finding]:
    """include-system-site-packages: the base's site-packages run their *.pth at start-up."""
    from verify.env.records import read_records

    assert loc.base_prefix is not None
    base = Path(loc.base_prefix)
    sp = f"lib/python{loc.line}/site-packages"
    folder = base / sp
    if not folder.is_dir():
        return []
    claims = read_records(base).claims
    out = []
    for name in sorted(os.listdir(folder)):
        if not (name.endswith(".pth") or _STARTUP.match(name)):
            continue
        path = folder / name
        rel = f"{sp}/{name}"
        have = claims.get(rel)
        sha = _file_digest(path, "sha256")
        if not have:
            out.append(Finding(kind="startup", path=str(path), package=_who(loc),
                               actual=f"file sha256 {sha}",
                               detail="runs at start-up (include-system-site-packages); "
                               "no record owns it"))
        elif have[-1].sha256 and have[-1].sha256 != sha:
            out.append(Finding(kind="modified", path=str(path), package=have[-1].package,
                               expected=have[-1].sha256, actual=sha,
                               detail="runs at start-up (include-system-site-packages)"))
    return out


def _recorded_base_findings(manifest: Manifest,
                            owners: Mapping[str, tuple[str, str | None, str]]) -> list[Finding]:
    """A venv on a conda or Debian Python: every base file its records hash, checked."""
    out = []
    for e in manifest.outside:
        claim = owners.get(e.path)
        if claim is None or claim[1] is None or e.category == "cache" or e.type != "file":
            continue
        actual = _digest_of(e, claim[2])
        if actual != claim[1]:
            out.append(Finding(kind="modified", path=e.path, package=claim[0],
                               expected=claim[1], actual=actual,
                               detail="the venv's base interpreter"))
    return out


def _file_digest(path: Path, algo: str) -> str | None:
    h = hashlib.new(algo)
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def copied_interpreter_findings(manifest: Manifest, ident: Mapping[str, object]
                                ) -> list[Finding]:
    """``python -m venv --copies``: each bin/python* copy must be the base's binary."""
    want = ident.get("sha256")
    if manifest.kind != "venv" or not want:
        return []
    return [Finding(kind="scaffold", path=e.path, package=f"<{manifest.made_by or 'venv'}>",
                    expected=str(want), actual=e.sha256,
                    detail=f"a copy of the interpreter that is not {ident.get('path')}")
            for e in manifest.entries
            if e.category == "scaffold" and e.type == "file"
            and re.match(r"^bin/python(3(\.\d+)?)?$", e.path) and e.sha256 != want]

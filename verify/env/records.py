"""What the installers recorded: which package claims which file, with which hash.

Two sources, read as the installers wrote them:

- conda: ``conda-meta/<name>-<version>-<build>.json`` — the package's ``md5``/``sha256`` and
  ``paths_data``: per file the sha256 from the package (``sha256``), the sha256 after the prefix
  placeholder was rewritten (``sha256_in_prefix``; for a softlink py-rattler stores the sha256
  of the link text there and the target's contents in ``sha256``; conda and mamba the target's
  contents), the size. The package cache (``extracted_package_dir``), when it is still there,
  gives the expected executable bit and link target; once it is gone, the archive in samebits'
  download cache does (``verify.env.archivefacts``).
- pip: every ``*.dist-info`` in site-packages that conda does not own — ``RECORD`` (path,
  ``sha256=<urlsafe base64>``, size; the RECORD itself and compiled ``__pycache__`` files carry
  no hash), ``METADATA`` (name, version), ``WHEEL`` (tags), ``direct_url.json`` (PEP 610: the
  archive's URL and sha256, editable).

``read_records(prefix)`` does the I/O and returns ``Records``: the packages, every claim by
prefix-relative path, and every record it could not read (``Problem``), never stopping at one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from samebits.archives import record_hash

Manager = Literal["conda", "pip"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Package:
    manager: Manager
    name: str
    version: str
    record: str                        # prefix-relative path of what the installer wrote
    build: str | None = None           # conda build string
    md5: str | None = None             # conda archive md5
    sha256: str | None = None          # archive sha256 (conda-meta, or pip's direct_url.json)
    subdir: str | None = None          # conda subdir
    tags: tuple[str, ...] = ()         # wheel tags (WHEEL "Tag:")
    editable: bool = False             # pip install -e: the sources live outside the prefix
    url: str | None = None             # where the archive came from (conda-meta, direct_url.json)

    @property
    def id(self) -> str:
        if self.manager == "conda":
            return f"conda:{self.name}-{self.version}-{self.build}"
        return f"pip:{self.name}=={self.version}"

    def identity(self) -> dict[str, Any]:
        """What names this package wherever it is installed (the packages digest's input)."""
        if self.manager == "conda":
            out: dict[str, Any] = {"manager": "conda", "name": self.name,
                                   "version": self.version, "build": self.build}
            if self.sha256:
                out["sha256"] = self.sha256
            elif self.md5:
                out["md5"] = self.md5
            return out
        out = {"manager": "pip", "name": canonical_name(self.name), "version": self.version,
               "tags": sorted(self.tags)}
        if self.editable:
            out["editable"] = True
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "manager": self.manager, "name": self.name,
                               "version": self.version, "record": self.record}
        for key in ("build", "md5", "sha256", "subdir", "url"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.tags:
            out["tags"] = sorted(self.tags)
        if self.editable:
            out["editable"] = True
        return out


class Claim(NamedTuple):
    """One package's word about one path (a NamedTuple: a prefix has tens of thousands)."""

    package: str                        # Package.id
    type: Literal["file", "symlink"]
    sha256: str | None = None           # file: content; symlink: sha256 of the target string
    size: int | None = None
    exec: bool | None = None            # expected owner-execute bit, when known
    target: str | None = None           # expected symlink target, when known
    unhashed: str | None = None         # why there is no sha256 to check
    alt: str | None = None              # symlink: a second sha256 the record accepts
    source: str = "record"              # where exec/target came from: package cache, archive


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """A record that could not be read: it is a finding, never a crash."""

    record: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Records:
    packages: tuple[Package, ...] = ()
    claims: dict[str, tuple[Claim, ...]] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()


def canonical_name(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def site_packages(prefix: Path) -> list[str]:
    """Prefix-relative site-packages folders (``lib/pythonX.Y/site-packages``)."""
    out = []
    lib = prefix / "lib"
    if lib.is_dir() and not lib.is_symlink():
        for child in sorted(os.listdir(lib)):
            if child.startswith("python") and (lib / child / "site-packages").is_dir():
                out.append(f"lib/{child}/site-packages")
    return out


def read_records(prefix: Path, *, archives: Path | None = None) -> Records:
    """``archives``: samebits' download cache, whose conda archives give executable bits and
    link targets when the extracted package cache is gone (``verify.env.archivefacts``)."""
    prefix = Path(prefix)
    packages: list[Package] = []
    claims: dict[str, tuple[Claim, ...]] = {}
    problems: list[Problem] = []
    meta = prefix / "conda-meta"
    if meta.is_dir():
        for name in sorted(os.listdir(meta)):
            if name.endswith(".json"):
                _read_conda(prefix, f"conda-meta/{name}", packages, claims, problems,
                            archives)
    conda_owned = set(claims)
    for sp in site_packages(prefix):
        for name in sorted(os.listdir(prefix / sp)):
            if name.endswith(".dist-info") and (prefix / sp / name).is_dir():
                dist = f"{sp}/{name}"
                if f"{dist}/METADATA" in conda_owned or f"{dist}/RECORD" in conda_owned:
                    continue  # a conda package's Python metadata: conda-meta speaks for it
                _read_dist(prefix, sp, dist, packages, claims, problems)
    links = folder_links(prefix)
    if links:
        claims = through_links(claims, links)
    return Records(packages=tuple(sorted(packages, key=lambda p: (p.manager, p.name.lower()))),
                   claims=claims,
                   problems=tuple(problems))


def folder_links(prefix: Path) -> dict[str, str]:
    """The prefix's top-level symlinks to a folder inside it, name -> the folder's
    prefix-relative path: ``lib64`` -> ``lib``, which ``python -m venv`` (and uv) make on
    64-bit Linux. A file a RECORD lists under ``lib64/`` is written through it into ``lib/``:
    blosc2 2.0.0's wheel installs ``lib64/libblosc2.so`` (its ``.data/data/lib64``), which pip
    puts at ``lib/libblosc2.so`` of such a venv."""
    out: dict[str, str] = {}
    root = os.path.realpath(prefix)
    try:
        entries = list(os.scandir(prefix))
    except OSError:
        return out
    for e in entries:
        if not e.is_symlink():
            continue
        target = os.path.realpath(e.path)
        rel = os.path.relpath(target, root)
        if rel != "." and not rel.startswith("../") and rel != ".." and os.path.isdir(target):
            out[e.name] = rel
    return out


def through_links(claims: dict[str, tuple[Claim, ...]], links: dict[str, str]
                  ) -> dict[str, tuple[Claim, ...]]:
    """``claims`` with each path under one of ``links`` (``folder_links``) named where the file
    is: ``lib64/libblosc2.so`` -> ``lib/libblosc2.so``; where packages claim one file by both
    names, their claims are kept together, as for one path."""
    through = tuple(f"{name}/" for name in links)
    if not any(path.startswith(through) for path in claims):
        return claims  # a venv's lib64/: no record names a file through it (most wheels)
    out: dict[str, tuple[Claim, ...]] = {}
    for path, got in claims.items():
        head, sep, rest = path.partition("/")
        if sep and head in links:
            path = f"{links[head]}/{rest}"
        out[path] = (*out[path], *got) if path in out else got
    return out


# ------------------------------------------------------------------------------------ conda

def _read_conda(prefix: Path, rel: str, packages: list[Package],
                claims: dict[str, tuple[Claim, ...]], problems: list[Problem],
                archives: Path | None) -> None:
    try:
        doc = json.loads((prefix / rel).read_bytes())
        name, version, build = doc["name"], doc["version"], doc["build"]
        if not all(isinstance(v, str) for v in (name, version, build)):
            raise TypeError("name, version and build must be strings")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problems.append(Problem(record=rel, message=f"unreadable conda record: {_why(exc)}"))
        return
    url = doc.get("url") if isinstance(doc.get("url"), str) else None
    pkg = Package(manager="conda", name=name, version=version, build=build, record=rel,
                  md5=doc.get("md5"), sha256=doc.get("sha256"), subdir=doc.get("subdir"),
                  url=url)
    packages.append(pkg)
    cache = doc.get("extracted_package_dir")
    cache_dir = Path(cache) if isinstance(cache, str) and os.path.isdir(cache) else None
    facts = None
    if cache_dir is None:  # the extracted cache is gone: the archive may still be there
        from verify.env.archivefacts import archive_facts

        fn = doc.get("fn") if isinstance(doc.get("fn"), str) else None
        sha = pkg.sha256 if isinstance(pkg.sha256, str) else None
        facts = archive_facts(archives, sha, fn)
    noarch = doc.get("noarch") == "python" or (doc.get("noarch") or {}) == {"type": "python"}
    entries = (doc.get("paths_data") or {}).get("paths")
    if not isinstance(entries, list):  # an old record: a file list without hashes
        entries = [{"_path": p, "path_type": "hardlink"} for p in doc.get("files") or ()]
    for entry in entries:
        try:
            claim = _conda_claim(pkg.id, entry, cache_dir, facts, noarch)
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(Problem(record=rel, message=f"bad paths_data entry: {_why(exc)}"))
            continue
        if claim is not None:
            path = posixpath.normpath(entry["_path"])
            claims[path] = (*claims.get(path, ()), claim)


def _member(path: str, noarch: bool) -> str:
    """The archive member a noarch: python package's installed path came from."""
    if noarch:
        parts = path.split("/")
        if len(parts) > 3 and parts[0] == "lib" and parts[1].startswith("python") \
                and parts[2] == "site-packages":
            return "/".join(["site-packages", *parts[3:]])
        if len(parts) == 2 and parts[0] == "bin":
            return f"python-scripts/{parts[1]}"
    return path


def _conda_claim(pid: str, entry: dict[str, Any], cache: Path | None,
                 facts: dict | None, noarch: bool) -> Claim | None:
    path = entry["_path"]
    kind = entry.get("path_type", "hardlink")
    if kind == "directory":
        return None
    exec_bit = target = None
    source = "record"
    if cache is not None:
        try:
            st = os.lstat(cache / path)
        except OSError:
            pass
        else:
            source = "package cache"
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(cache / path)
            else:
                exec_bit = bool(st.st_mode & stat.S_IXUSR)
    elif facts is not None:
        fact = facts.get(path) or facts.get(_member(path, noarch))
        if fact is not None:
            source = "package archive"
            exec_bit, target = fact.exec, fact.target
    if kind == "softlink":
        # py-rattler records the sha256 of the link text in sha256_in_prefix and the target's
        # contents in sha256; conda and mamba the target's contents: either is accepted.
        text_or_target = entry.get("sha256_in_prefix") or entry.get("sha256") or None
        alt = entry.get("sha256") if entry.get("sha256_in_prefix") else None
        return Claim(package=pid, type="symlink", sha256=text_or_target, target=target,
                     unhashed=None if text_or_target else "no link-target hash", alt=alt,
                     source=source)
    sha = entry.get("sha256_in_prefix") or None
    unhashed = None
    if sha is None:
        if entry.get("prefix_placeholder"):
            unhashed = "prefix rewritten and no sha256_in_prefix recorded"
        else:
            sha = entry.get("sha256") or None
            unhashed = None if sha else "no sha256 in conda-meta"
    size = entry.get("size_in_bytes") if not entry.get("prefix_placeholder") else None
    return Claim(package=pid, type="file", sha256=sha, size=size, exec=exec_bit,
                 unhashed=unhashed, source=source)


# -------------------------------------------------------------------------------------- pip

def _read_dist(prefix: Path, sp: str, dist: str, packages: list[Package],
               claims: dict[str, tuple[Claim, ...]], problems: list[Problem]) -> None:
    base = prefix / dist
    headers = _headers(base / "METADATA")
    name, version = headers.get("name"), headers.get("version")
    if not name or not version:
        stem = dist.rsplit("/", 1)[-1][: -len(".dist-info")]
        name, _, version = stem.partition("-")
        problems.append(Problem(record=f"{dist}/METADATA",
                                message="no Name/Version in METADATA"))
    tags = tuple(v for k, v in _header_items(base / "WHEEL") if k == "tag")
    direct = _direct_url(base / "direct_url.json")
    pkg = Package(manager="pip", name=name, version=version, record=f"{dist}/RECORD",
                  tags=tags, sha256=direct.get("sha256"), editable=direct.get("editable", False),
                  url=direct.get("url"))
    packages.append(pkg)
    try:
        text = (base / "RECORD").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(record=f"{dist}/RECORD", message=f"unreadable: {_why(exc)}"))
        return
    pid = pkg.id
    for n, row in enumerate(_record_rows(text), 1):
        if not row or not row[0]:
            continue
        listed = row[0]
        if listed.endswith("/"):  # a folder's row (cmake 3.26.3's wheel lists cmake/): no file
            continue
        if listed[0] == "/" or ".." in listed or "/./" in listed or "//" in listed:
            inside = _inside(prefix, sp, listed)
            if inside is None:
                continue  # installed outside the prefix (an absolute data path): not ours
            path = inside
        else:
            path = f"{sp}/{listed}"
        value = row[1] if len(row) > 1 else ""
        size = row[2] if len(row) > 2 else ""
        try:
            sha = record_sha256(value)
        except ValueError as exc:
            problems.append(Problem(record=f"{dist}/RECORD", message=f"line {n}: {exc}"))
            sha = None
        unhashed = None
        if sha is None:
            unhashed = "no hash in RECORD" if not value else f"RECORD hash {value.split('=')[0]}"
        claim = Claim(pid, "file", sha, int(size) if size.isdigit() else None, None, None,
                      unhashed)
        had = claims.get(path)
        claims[path] = (claim,) if had is None else (*had, claim)


def _record_rows(text: str) -> Iterator[list[str]]:
    """RECORD's rows exactly as ``csv.reader`` reads them: text with no quote, carriage return
    or NUL is split on newlines and then commas (what the csv module does with it, at a
    fraction of the cost); anything else goes through the csv module."""
    if '"' in text or "\r" in text or "\0" in text:
        yield from csv.reader(io.StringIO(text))
        return
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    for line in lines:
        yield line.split(",") if line else []


def _inside(prefix: Path, sp: str, path: str) -> str | None:
    if posixpath.isabs(path):
        root = str(prefix).rstrip("/") + "/"
        if not path.startswith(root):
            return None
        return posixpath.normpath(path[len(root):])
    rel = posixpath.normpath(posixpath.join(sp, path))
    return None if rel.startswith("../") or rel == ".." else rel


def record_sha256(value: str) -> str | None:
    """``sha256=<base64>`` (padded or not: ``samebits.archives.record_hash``) as hex; None for
    no hash or another algorithm."""
    if not value.startswith("sha256="):
        return None
    try:
        got = record_hash(value)
    except ValueError:
        raise ValueError(f"bad sha256 {value[7:]!r}") from None
    if got is None or len(got[1]) != 32:
        raise ValueError(f"bad sha256 {value[7:]!r}")
    return got[1].hex()


def _header_items(path: Path) -> Iterator[tuple[str, str]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    return
                key, sep, value = line.partition(":")
                if sep and not line[0].isspace():
                    yield key.strip().lower(), value.strip()
    except OSError:
        return


def _headers(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _header_items(path):
        out.setdefault(key, value)
    return out


def _direct_url(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    out: dict[str, Any] = {}
    if not isinstance(doc, dict):
        return out
    if isinstance(doc.get("url"), str):
        out["url"] = doc["url"]
    if isinstance(doc.get("dir_info"), dict) and doc["dir_info"].get("editable"):
        out["editable"] = True
    archive = doc.get("archive_info")
    if isinstance(archive, dict):
        hashes = archive.get("hashes") or {}
        if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
            out["sha256"] = hashes["sha256"]
        elif isinstance(archive.get("hash"), str) and archive["hash"].startswith("sha256="):
            out["sha256"] = archive["hash"].split("=", 1)[1]
    return out


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r}"
    return str(exc)

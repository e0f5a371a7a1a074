"""Checking a lockfile document before anything trusts it: every required field, every hash.

``lock_problems(doc, file)`` is pure. It takes whatever YAML gave (``None`` for an empty file,
a list, a mapping cut short) and returns one ``Problem`` per bad value, naming the file, the
package entry (its index, name and platform) and the field:

    lockfiles/cpu.conda-lock.yml: package[1] cuda-pathfinder (linux-64): hash: missing
    x.yml: package[3] numpy (linux-64): hash.sha256 = "zz12": not a sha256 (64 hex digits)

Checked: the top-level keys, metadata's required keys, and for every package the fields
conda-lock requires, a manager of conda or pip, and its hashes: only md5 and sha256, each hex
of the right length (md5 32, sha256 64); conda packages need md5 (conda-lock's rule) and pip
packages sha256 (the one hash a wheel is installed by); its URL must end in a plain file name
once percent-decoded (``url_problem``). ``locked_problems`` applies the same URL and hash rules
to what every other reader (pixi.lock, uv.lock, pylock, requirements) built. conda-lock's own
model then judges the rest of the format (``samebits.lock.model.parse_lock``);
``pydantic_problems`` words what it finds the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from samebits.errors import Problem, clip

if TYPE_CHECKING:
    from samebits.lock.model import LockedPackage

HASH_LENGTHS = {"md5": 32, "sha256": 64}
# conda-lock locks a pip VCS requirement as ``url: git+https://...@<commit>`` with the commit
# id (40 hex for git's SHA-1, 64 for SHA-256 repositories) written as ``hash.sha256``: a
# commit, not an archive's digest (conda-lock's pypi_solver, "TODO: FIXME git ls-remote").
VCS_SCHEMES = ("git+", "hg+", "svn+", "bzr+")
COMMIT_LENGTHS = (40, 64)
REQUIRED_HASH = {"conda": "md5", "pip": "sha256"}
MANAGERS = ("conda", "pip")
VERSIONS = (1, 2)
TOP_FIELDS = ("version", "metadata", "package")
METADATA_FIELDS = ("content_hash", "channels", "platforms", "sources")
PACKAGE_FIELDS = {1: ("name", "version", "manager", "platform", "url", "hash", "optional"),
                  2: ("name", "version", "manager", "platform", "url", "hash")}
HEX = _HEX = re.compile(r"[0-9a-fA-F]*")


def lock_problems(doc: Any, file: str) -> list[Problem]:
    """Every problem in a conda-lock document, in file order; [] when it may be parsed."""
    def add(key: str, value: object, message: str) -> None:
        out.append(Problem(file=file, key=key, value=value, message=message))

    out: list[Problem] = []
    if doc is None:
        add("", None, "empty file")
        return out
    if not isinstance(doc, Mapping):
        add("", None, f"the document is {_kind(doc)}, not a mapping with version, metadata "
                      "and package")
        return out
    for key in TOP_FIELDS:
        if key not in doc:
            add(key, None, "missing")
    version = doc.get("version")
    if "version" in doc and (isinstance(version, bool) or version not in VERSIONS):
        add("version", version, "unknown (conda-lock files are version 1 or 2)")
        return out
    _metadata(doc.get("metadata"), "metadata" in doc, add)
    packages = doc.get("package")
    if "package" in doc and not isinstance(packages, list):
        add("package", packages, f"must be a list of packages, not {_kind(packages)}")
        return out
    platforms = _platforms(doc.get("metadata"))
    for i, entry in enumerate(packages or ()):
        _package(i, entry, PACKAGE_FIELDS[version if version in VERSIONS else 1], platforms,
                 add)
    return out


def is_vcs_url(url: object) -> bool:
    return isinstance(url, str) and url.startswith(VCS_SCHEMES)


def is_structural(problem: Problem) -> bool:
    """A problem with the document's shape (not with one package entry): the file is not a
    conda-lock file at all."""
    return not problem.key.startswith("package[")


def package_label(i: int, entry: Any) -> str:
    """``package[3] numpy (linux-64)``: the index, then name and platform where readable."""
    label = f"package[{i}]"
    if isinstance(entry, Mapping):
        name, platform = entry.get("name"), entry.get("platform")
        if isinstance(name, str) and name:
            label += f" {_short(name)}"
        if isinstance(platform, str) and platform:
            label += f" ({_short(platform)})"
    return label


def _metadata(meta: Any, present: bool, add: Any) -> None:
    if not present:
        return
    if not isinstance(meta, Mapping):
        add("metadata", meta, f"must be a mapping, not {_kind(meta)}")
        return
    for key in METADATA_FIELDS:
        if key not in meta:
            add(f"metadata.{key}", None, "missing")
    platforms = meta.get("platforms")
    if "platforms" in meta and (not isinstance(platforms, list) or not platforms or not all(
            isinstance(p, str) and p for p in platforms)):
        add("metadata.platforms", platforms, "must be a list of platform names")


def _platforms(meta: Any) -> tuple[str, ...] | None:
    if not isinstance(meta, Mapping):
        return None
    platforms = meta.get("platforms")
    if isinstance(platforms, list) and all(isinstance(p, str) for p in platforms):
        return tuple(platforms)
    return None


def _package(i: int, entry: Any, fields: Sequence[str], platforms: tuple[str, ...] | None,
             add: Any) -> None:
    label = package_label(i, entry)
    if not isinstance(entry, Mapping):
        add(label, entry, f"must be a mapping with {', '.join(fields)}")
        return
    for key in fields:
        if key not in entry or entry[key] is None:
            add(f"{label}: {key}", None, "missing")
    for key in ("name", "version", "platform", "url"):
        val = entry.get(key)
        if val is not None and (not isinstance(val, str) or not val.strip()):
            add(f"{label}: {key}", val, "must be a non-empty string")
    manager = entry.get("manager")
    if manager is not None and manager not in MANAGERS:
        add(f"{label}: manager", manager, "must be conda or pip")
    platform = entry.get("platform")
    if platforms is not None and isinstance(platform, str) and platform \
            and platform not in platforms:
        add(f"{label}: platform", platform,
            f"not one of metadata.platforms ({', '.join(platforms)})")
    if entry.get("hash") is not None:
        _hashes(f"{label}: hash", entry["hash"], manager, add,
                vcs=manager == "pip" and is_vcs_url(entry.get("url")))
    url = entry.get("url")
    if isinstance(url, str) and url.strip() and (why := url_problem(url)) is not None:
        add(f"{label}: url", url, why)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a locked archive, or None: its last path segment, percent-decoded
    as every fetcher decodes it, must be a plain file name (``%2E%2E%2Fx.whl`` is ``../x.whl``).
    The same rule for every reader: conda-lock, pixi.lock, uv.lock, pylock, requirements."""
    if is_vcs_url(url):
        return None
    from urllib.parse import unquote, urlsplit

    try:
        path = urlsplit(url).path
    except ValueError as exc:
        return f"not a URL ({exc})"
    name = unquote(path.rsplit("/", 1)[-1])
    if name in ("", ".", ".."):
        return "names no file (its path ends in a folder)"
    if any(c in name for c in "/\\") or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"its file name decodes to {clip(name, 80)!r}, not a plain file name"
    return None


def _hashes(key: str, hashes: Any, manager: Any, add: Any, *, vcs: bool = False) -> None:
    if not isinstance(hashes, Mapping):
        add(key, hashes, "must be a mapping of md5 and/or sha256 to hex digests")
        return
    for algo, digest in hashes.items():
        where = f"{key}.{algo}"
        if vcs and algo == "sha256":  # the commit id (see VCS_SCHEMES)
            if not isinstance(digest, str) or not _HEX.fullmatch(digest) \
                    or len(digest) not in COMMIT_LENGTHS:
                add(where, digest, "not a commit id (40 or 64 hex digits) of the VCS URL")
            continue
        if algo not in HASH_LENGTHS:
            add(where, digest, "unknown hash (md5 and sha256 are known)")
        elif digest is None:
            continue  # an explicit null is the same as no entry: judged below
        elif not isinstance(digest, str) or not _HEX.fullmatch(digest):
            add(where, digest, f"not a {algo} ({HASH_LENGTHS[algo]} hex digits)")
        elif len(digest) != HASH_LENGTHS[algo]:
            add(where, digest, f"{len(digest)} hex digits; a {algo} has {HASH_LENGTHS[algo]}")
    needed = REQUIRED_HASH.get(manager) if isinstance(manager, str) else None
    if needed and hashes.get(needed) is None:
        add(f"{key}.{needed}", None, f"missing: every {manager} package needs its {needed}")


def locked_problems(packages: Iterable[LockedPackage], file: str, *,
                    required: bool = True) -> list[Problem]:
    """The same URL and hash rules for packages another reader built (a pixi.lock, a uv.lock, ...):
    each md5 and sha256 hex of the right length and, with ``required``, conda packages with
    md5, pip with sha256 (``samebits.lock.read`` leaves a missing hash to install, which refuses
    the package; a malformed one is never carried over). Each problem names the package by
    name and version (positions in a converted lock are not the file's), once however many
    platforms share the artifact."""
    out: dict[str, Problem] = {}

    def add(key: str, value: object, message: str) -> None:
        problem = Problem(file=file, key=key, value=value, message=message)
        out.setdefault(str(problem), problem)

    for p in packages:
        if (why := url_problem(p.url)) is not None:
            add(f"{_short(p.name)} {_short(p.version)} ({p.manager}): url", p.url, why)
        if p.commit is not None:  # a VCS package: a commit, no archive hash
            continue
        hashes = {k: v for k, v in (("md5", p.md5), ("sha256", p.sha256)) if v is not None}
        _hashes(f"{_short(p.name)} {_short(p.version)} ({p.manager}): hash", hashes,
                p.manager if required else None, add)
    return list(out.values())


def pydantic_problems(errors: Sequence[Mapping[str, Any]], doc: Mapping[str, Any],
                      file: str) -> list[Problem]:
    """conda-lock's model errors (``ValidationError.errors()``) worded as problems."""
    out = []
    packages = doc.get("package")
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if len(loc) >= 2 and loc[0] == "package" and isinstance(loc[1], int) \
                and isinstance(packages, list) and loc[1] < len(packages):
            label = package_label(loc[1], packages[loc[1]])
            rest = ".".join(str(p) for p in loc[2:])
            key = f"{label}: {rest}" if rest else label
        else:
            key = ".".join(str(p) for p in loc)
        message = str(err.get("msg", "invalid"))
        message = message[:1].lower() + message[1:]
        missing = err.get("type") == "missing"
        out.append(Problem(file=file, key=key, value=None if missing else err.get("input"),
                           message="missing" if missing else message))
    return out


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "empty"
    return f"a {type(value).__name__}"


def _short(text: str) -> str:
    return clip(text, 60)

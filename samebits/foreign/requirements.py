"""``requirements.txt`` in pip's hash-checking mode (``pip-compile --generate-hashes``,
``uv pip compile --generate-hashes``, ``uv export``), resolved to one wheel per target.

pip's rules (its "Requirements File Format" and "Secure installs" docs): a logical line may
continue with ``\\``; ``#`` after whitespace starts a comment; each requirement must be pinned
with ``==`` (or ``===``) and carry one or more ``--hash=sha256:...``, or pip refuses the whole
file. Supported options: ``-i/--index-url``, ``--extra-index-url``, ``-f/--find-links`` (a
relative folder is relative to the file), ``--no-index``, ``-r`` (another file, relative to
this one); ``--require-hashes``, ``--trusted-host``, ``--pre``, ``--prefer-binary`` and
``--only-binary`` change nothing here. ``-e`` (editable) cannot be locked and is listed as
dropped; ``-c`` is refused.

A file names no platform or Python, so each ``Target`` picks: for every requirement whose
marker holds, the index's files of that exact version whose sha256 is one of the
requirement's hashes (each index file's hash checked against the file's list), and of those
the wheel that fits the target best (pip's tag order). ``name @ URL`` with a hash is taken as
given. Every problem is listed at once, with its line number.
"""

from __future__ import annotations

import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from samebits.errors import LockfileError
from samebits.foreign.model import DEFAULT_PLATFORMS, Conversion, Converted, Dropped, ReadOptions
from samebits.foreign.simpleindex import PYPI, IndexFile, project_files
from samebits.foreign.target import Target, targets
from samebits.lock.model import Lock, LockedPackage, sort_packages

FORMAT = "requirements.txt"
IGNORED = ("--require-hashes", "--trusted-host", "--pre", "--prefer-binary", "--only-binary",
           "--no-binary", "--use-feature", "--progress-bar")
MAX_DEPTH = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Pinned:
    line: int
    file: str
    name: str
    version: str
    hashes: frozenset[str]
    marker: str | None
    url: str | None = None


@dataclass(slots=True, kw_only=True)
class Parsed:
    pins: list[Pinned]
    editable: list[tuple[int, str]]
    index: str | None
    extra: list[str]
    find_links: list[str]
    no_index: bool
    problems: list[str]


def is_hashed_requirements(text: str) -> bool:
    return "--hash=" in text or "--hash " in text


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first physical line number, text) with continuations joined and comments dropped."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def parse(path: Path, text: str, *, source: str, depth: int = 0,
          into: Parsed | None = None) -> Parsed:
    got = into or Parsed(pins=[], editable=[], index=None, extra=[], find_links=[],
                         no_index=False, problems=[])
    for n, line in logical_lines(text):
        where = f"{source}:{n}"
        if line.startswith("-"):
            _option(path, line, where, got, depth)
            continue
        req_text, _, opts = line.partition(" --")
        opts = ("--" + opts) if opts else ""
        try:
            req = Requirement(req_text.strip())
        except InvalidRequirement as exc:
            got.problems.append(f"{where}: {_q(req_text)}: not a requirement: {exc}")
            continue
        hashes, bad = _hash_options(opts)
        got.problems += [f"{where}: {req.name}: {b}" for b in bad]
        if req.url:
            frag = req.url.partition("#")[2]
            if frag.startswith("sha256="):
                hashes.add(frag[7:].lower())
        marker = str(req.marker) if req.marker else None
        if req.url:
            url = req.url.partition("#")[0]
            if not hashes:
                got.problems.append(f"{where}: {req.name}: no --hash (pip's hash-checking mode "
                                    "needs one on every requirement)")
            got.pins.append(Pinned(line=n, file=source, name=req.name, version="",
                                   hashes=frozenset(hashes), marker=marker, url=url))
            continue
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator not in ("==", "===") or "*" in specs[0].version:
            got.problems.append(f"{where}: {_q(req_text.strip())}: not pinned with == (pip's "
                                "hash-checking mode needs an exact version)")
            continue
        if not hashes:
            if not bad:
                got.problems.append(f"{where}: {req.name}=={specs[0].version}: no --hash "
                                    "(pip's hash-checking mode needs one on every requirement)")
            continue
        got.pins.append(Pinned(line=n, file=source, name=req.name, version=specs[0].version,
                               hashes=frozenset(hashes), marker=marker))
    return got


def _q(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _hash_options(opts: str) -> tuple[set[str], list[str]]:
    hashes: set[str] = set()
    bad: list[str] = []
    try:
        words = shlex.split(opts)
    except ValueError as exc:
        return hashes, [f"options {_q(opts)}: {exc}"]
    i = 0
    while i < len(words):
        w = words[i]
        value = None
        if w.startswith("--hash="):
            value = w[7:]
        elif w == "--hash" and i + 1 < len(words):
            value = words[i + 1]
            i += 1
        else:
            bad.append(f"option {_q(w)}: only --hash may follow a requirement")
        if value is not None:
            algo, _, digest = value.partition(":")
            if algo == "sha256" and re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                hashes.add(digest.lower())
            elif algo != "sha256":
                bad.append(f"--hash={_q(value)}: samebits checks sha256 hashes only")
            else:
                bad.append(f"--hash={_q(value)}: not a sha256 hex digest")
        i += 1
    return hashes, bad


def _option(path: Path, line: str, where: str, got: Parsed, depth: int) -> None:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        got.problems.append(f"{where}: {_q(line)}: {exc}")
        return
    flag, _, inline = words[0].partition("=")
    value = inline or (words[1] if len(words) > 1 else "")
    if flag in ("-i", "--index-url"):
        got.index = value
    elif flag == "--extra-index-url":
        got.extra.append(value)
    elif flag in ("-f", "--find-links"):
        link = value if "://" in value else str((path.parent / value).resolve())
        got.find_links.append(link)
    elif flag == "--no-index":
        got.no_index = True
    elif flag in ("-r", "--requirement"):
        nested = path.parent / value
        if depth >= MAX_DEPTH:
            got.problems.append(f"{where}: -r {value}: nested more than {MAX_DEPTH} deep")
            return
        try:
            text = nested.read_text()
        except OSError as exc:
            got.problems.append(f"{where}: -r {value}: cannot read: {exc.strerror}")
            return
        parse(nested, text, source=str(nested), depth=depth + 1, into=got)
    elif flag in ("-e", "--editable"):
        got.editable.append((int(where.rsplit(":", 1)[1]), value))
    elif flag in IGNORED:
        return
    else:
        got.problems.append(f"{where}: option {_q(words[0])} is not supported here")


def read_requirements(path: Path, text: str, *, source: str, options: ReadOptions) -> Converted:
    parsed = parse(Path(path), text, source=source)
    if parsed.problems:
        head = parsed.problems[0] if len(parsed.problems) == 1 else (
            f"{len(parsed.problems)} problems:\n  " + "\n  ".join(parsed.problems))
        raise LockfileError(head, hint="samebits reads requirements files in pip's "
                            "hash-checking mode: `pip-compile --generate-hashes`")
    indexes = ([] if parsed.no_index else [parsed.index or PYPI, *parsed.extra]) \
        + parsed.find_links
    ts = targets(options, default_platforms=DEFAULT_PLATFORMS)
    names = sorted({p.name for p in parsed.pins if not p.url})
    files = _offered(indexes, names)
    packages: list[LockedPackage] = []
    dropped: list[Dropped] = []
    for target in ts:
        env = {**target.environment(), "extra": ""}
        for p in parsed.pins:
            if p.marker and not Marker(p.marker).evaluate(env):
                continue
            got = _choose(p, files.get(p.name, []), target, indexes)
            if isinstance(got, LockedPackage):
                packages.append(got)
            else:
                dropped.append(got)
        for n, value in parsed.editable:
            dropped.append(Dropped(platform=target.platform, name=value, version=None,
                                   source=f"{source}:{n}", reason="an editable install: built "
                                   "from source, no artifact is locked"))
    t0 = ts[0]
    custom = {"samebits.converted-from": FORMAT, "samebits.python": t0.line,
              **{f"samebits.__glibc.{t.platform}": t.glibc for t in ts}}
    return Converted(
        lock=Lock(platforms=tuple(t.platform for t in ts), channels=(), sources=(source,),
                  content_hash={}, custom=custom, packages=sort_packages(packages)),
        conversion=Conversion(format=FORMAT, source=source,
                              choices=(("python", t0.python), ("glibc", t0.glibc),
                                       ("indexes", " ".join(indexes) or "none")),
                              dropped=tuple(dropped)))


def _offered(indexes: list[str], names: list[str]) -> dict[str, list[IndexFile]]:
    jobs = [(i, n) for n in names for i in indexes]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: project_files(*job), jobs))
    out: dict[str, list[IndexFile]] = {}
    for (_, name), got in zip(jobs, results, strict=True):
        out.setdefault(name, []).extend(got)
    return out


def file_version(filename: str) -> tuple[str, Version] | None:
    """(canonical name, version) a wheel's or an sdist's file name says, or None."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return str(name), version


def _choose(p: Pinned, offered: list[IndexFile], target: Target,
            indexes: list[str]) -> LockedPackage | Dropped:
    name = str(canonicalize_name(p.name))
    if p.url:
        if not p.url.split("?")[0].endswith(".whl"):
            return Dropped(platform=target.platform, name=name, version=None, source=p.url,
                           reason="a direct URL that is not a wheel: it would be built on "
                           "install, so no artifact is locked")
        version = file_version(p.url.rsplit("/", 1)[-1])
        return LockedPackage(name=name, version=str(version[1]) if version else "", manager="pip",
                             platform=target.platform, url=p.url, sha256=min(p.hashes))
    want = Version(p.version)
    matching = []
    for f in offered:
        fv = file_version(f.filename)
        if fv and fv[0] == name and fv[1] == want and f.sha256 \
                and f.sha256.lower() in p.hashes:
            matching.append(f)
    best = target.best((f, f.filename) for f in matching)
    if best is None:
        if matching:
            why = (f"none of the files with its hashes is a wheel for {target.describe()} "
                   f"({', '.join(sorted(f.filename for f in matching))})")
        else:
            why = (f"no file of {name}=={p.version} with one of its hashes on "
                   f"{', '.join(indexes) or 'no index (--no-index)'}")
        return Dropped(platform=target.platform, name=name, version=p.version,
                       source=f"{p.file}:{p.line}", reason=why)
    return LockedPackage(name=name, version=p.version, manager="pip", platform=target.platform,
                         url=best.url, sha256=best.sha256.lower() if best.sha256 else None)

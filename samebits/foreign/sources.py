"""What authors ship instead of a lock, read into one model a spec is drafted from.

    Declared                 what a file asks for (``samebits init --from FILE``)
      pypi                   Requested: each PEP 508 requirement, markers and extras kept;
                             ``pinned`` is the version of an exact ``==`` pin
      conda, channels        conda match specs (the strict form specs take) and channels
      index, extra_indexes   ``-i/--index-url`` and ``--extra-index-url``, in order
      python                 a Python the file pins (environment.yml ``python=3.9``, a lock)
      requires_python        pyproject's ``requires-python``
      left                   Left: what does not become part of a spec, and why (``-e``, a VCS
                             checkout, a local path, a find-links page, a constraints file)

Readers, one per format, each pure (text in, model out; every problem at once as a
``SourceError``): ``read_requirements`` (this module: pip's requirements-file syntax, ``-r``
includes read through the ``include`` callable the edge passes), ``environment.yml`` and
``pyproject.toml`` (``samebits.foreign.sources_files``), and the locks samebits already reads
(``declared_from_lock``). ``source_format(name, text)`` names the format of a file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from samebits.errors import Problem, SourceError, clip
from samebits.foreign.requirements import logical_lines

FORMATS = ("requirements.txt", "environment.yml", "pyproject.toml")
MAX_DEPTH = 10
VCS_SCHEMES = ("git+", "hg+", "svn+", "bzr+")
# options that change how pip installs, not what: nothing of them belongs in a spec
IGNORED = ("--pre", "--prefer-binary", "--trusted-host", "--require-hashes", "--use-feature",
           "--progress-bar", "--no-deps", "--upgrade", "-U", "--user", "--no-cache-dir",
           "--no-build-isolation")
# options that change which file pip installs: ``--no-binary NAME,...`` becomes the spec's
# ``[pypi] no-binary`` (GPT-SoVITS's --no-binary=opencc: pip builds opencc from its sdist,
# and so does the lock); what a spec cannot say is left out, and the spec says so
WHICH_FILE = {
    "--no-binary": "pip builds every package from its sdist; a spec names each package in "
                   "[pypi] no-binary, and samebits locks the publisher's wheel of the others",
    "--only-binary": "pip refuses these packages' sdists; samebits locks a wheel wherever one "
                     "fits and builds an sdist only where none does",
}
# Reads an included file: (the including file, the path it names) -> (display name, text).
Include = Callable[[str, str], tuple[str, str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Requested:
    """One PEP 508 requirement as the author wrote it (as packaging writes it back)."""

    text: str
    name: str  # canonical
    pinned: str | None  # the version of an exact == / === pin (or of a lock's artifact)
    where: str  # "requirements.txt:3", "environment.yml: dependencies.pip[2]"
    url: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CondaWanted:
    spec: str  # the strict match spec a samebits spec takes
    name: str
    where: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Left:
    """Something in the file that does not become part of the spec, and why."""

    where: str
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {clip(self.text, 100)}: {self.reason}"

    def to_json(self) -> dict[str, str]:
        return {"where": self.where, "text": self.text, "reason": self.reason}


@dataclass(frozen=True, slots=True, kw_only=True)
class Declared:
    format: str
    source: str
    pypi: tuple[Requested, ...] = ()
    conda: tuple[CondaWanted, ...] = ()
    channels: tuple[str, ...] = ()
    index: str | None = None
    extra_indexes: tuple[str, ...] = ()
    no_binary: tuple[str, ...] = ()     # --no-binary NAME: built from their sdists, as pip does
    python: str | None = None
    requires_python: str | None = None
    left: tuple[Left, ...] = ()
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # every file read: the source and what it includes

    @property
    def pins(self) -> tuple[Requested, ...]:
        return tuple(r for r in self.pypi if r.pinned is not None)


def source_format(name: str, text: str) -> str | None:
    """``requirements.txt``, ``environment.yml``, ``pyproject.toml``, or None (a lock, or
    something else: ``samebits.foreign.sniff`` decides)."""
    if name == "pyproject.toml" or (name.endswith(".toml") and re.search(
            r"^\[project\]", text, re.M)):
        return "pyproject.toml"
    if name.endswith((".yml", ".yaml")) and re.search(r"^dependencies\s*:", text, re.M) \
            and not re.search(r"^(version|metadata|package)\s*:", text, re.M):
        return "environment.yml"
    if name.endswith((".txt", ".in")) and not re.search(r"^@EXPLICIT", text, re.M):
        return "requirements.txt"
    return None


# ------------------------------------------------------------------ requirements files

@dataclass(slots=True, kw_only=True)
class _Reading:
    """What a requirements text gives, gathered across its includes."""

    pypi: list[Requested] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    index: str | None = None
    extra: list[str] = field(default_factory=list)
    no_binary: list[str] = field(default_factory=list)   # --no-binary NAME,...
    files: list[str] = field(default_factory=list)


def read_requirements(text: str, *, source: str, include: Include | None = None) -> Declared:
    """A requirements file (pip's syntax, pinned or not) as a ``Declared``."""
    got = _Reading(files=[source])
    read_lines(((f"{source}:{n}", line) for n, line in logical_lines(text)), source=source,
               include=include, into=got, depth=0)
    if got.problems:
        raise SourceError(got.problems, hint="fix the file, or list what it should install "
                          "in a spec by hand (docs/reference/spec.md)")
    return Declared(format="requirements.txt", source=source, pypi=_unique(got.pypi, got.notes),
                    index=got.index, extra_indexes=tuple(dict.fromkeys(got.extra)),
                    no_binary=tuple(dict.fromkeys(canonicalize_name(n) for n in got.no_binary)),
                    left=tuple(got.left), notes=tuple(got.notes), files=tuple(got.files))


def read_lines(lines: Iterable[tuple[str, str]], *, source: str, include: Include | None,
               into: _Reading, depth: int) -> None:
    """Requirement and option lines, each with where it is (shared with environment.yml's
    ``pip:`` part)."""
    for where, line in lines:
        if line.startswith("-"):
            _option(line, where, source=source, include=include, into=into, depth=depth)
        else:
            _requirement(line, where, into)


def _requirement(line: str, where: str, got: _Reading) -> None:
    req_text, sep, opts = line.partition(" --")
    req_text = req_text.strip()
    others = [w for w in opts.split() if not w.startswith(("hash", "--hash", "sha256:"))]
    if sep and others:  # --hash is checked by the lock, against the index's own hashes
        got.notes.append(f"{where}: options after the requirement ignored: --{opts.strip()}")
    if req_text.startswith(VCS_SCHEMES) or "://" in req_text.split(";")[0].split("@")[0]:
        got.left.append(Left(where=where, text=req_text, reason=_url_reason(req_text)))
        return
    try:
        req = Requirement(req_text)
    except InvalidRequirement as exc:
        if _looks_like_path(req_text):
            got.left.append(Left(where=where, text=req_text, reason="a local path: built from "
                                 "source, nothing to lock"))
            return
        got.problems.append(_problem(where, req_text, "not a PEP 508 requirement: "
                                     + clip(str(exc).splitlines()[0], 160)))
        return
    if req.url:
        url = req.url
        if url.startswith(VCS_SCHEMES) or url.startswith("file:") or "://" not in url:
            got.left.append(Left(where=where, text=req_text, reason=_url_reason(url)))
            return
    specs = list(req.specifier)
    pinned = None
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        pinned = specs[0].version
    got.pypi.append(Requested(text=str(req), name=str(canonicalize_name(req.name)),
                              pinned=pinned, where=where, url=req.url))


def _url_reason(url: str) -> str:
    if url.startswith(VCS_SCHEMES):
        return "a VCS checkout: built from source, no archive to lock"
    if url.startswith("file:") or "://" not in url:
        return "a local path: built from source, nothing to lock"
    return "a URL without a project name: write it as NAME @ URL"


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.endswith((".whl", ".zip", ".tar.gz")) \
        or "/" in text


def _problem(where: str, value: str, message: str) -> Problem:
    file, _, line = where.rpartition(":")
    if line.isdigit():
        return Problem(file=file, key=f"line {line}", value=value, message=message)
    file, _, key = where.partition(": ")
    return Problem(file=file, key=key, value=value, message=message)


def _option(line: str, where: str, *, source: str, include: Include | None, into: _Reading,
            depth: int) -> None:
    try:
        words = shlex.split(line)
    except ValueError as exc:
        into.problems.append(_problem(where, line, str(exc)))
        return
    flag, eq, inline = words[0].partition("=")
    if not eq and len(flag) > 2 and flag[1] != "-":  # -rfile, -ehttps://...
        flag, inline = flag[:2], flag[2:]
    value = inline or (words[1] if len(words) > 1 else "")
    if flag in ("-i", "--index-url"):
        into.index = value
    elif flag == "--extra-index-url":
        into.extra.append(value)
    elif flag in ("-r", "--requirement"):
        _include(value, where, source=source, include=include, into=into, depth=depth)
    elif flag in ("-e", "--editable"):
        into.left.append(Left(where=where, text=line, reason="an editable install: built from "
                              "source, nothing to lock"))
    elif flag in ("-c", "--constraint"):
        into.left.append(Left(where=where, text=line, reason="a constraints file: its pins are "
                              "not carried over (move the ones that matter into the file)"))
    elif flag in ("-f", "--find-links"):
        into.left.append(Left(where=where, text=line, reason="a find-links page: specs take "
                              "indexes ([pypi] extra-indexes); PyTorch's local versions get "
                              "their download.pytorch.org index"))
    elif flag == "--no-index":
        into.notes.append(f"{where}: --no-index ignored: the spec names its indexes")
    elif flag == "--no-binary" and value and not set(value.split(",")) & {":all:", ":none:"}:
        into.no_binary.extend(n.strip() for n in value.split(",") if n.strip())
    elif flag in WHICH_FILE:
        into.left.append(Left(where=where, text=line, reason=WHICH_FILE[flag]))
    elif flag in IGNORED:
        into.notes.append(f"{where}: {flag} ignored: it changes how pip installs, not what")
    else:
        into.problems.append(_problem(where, line, f"option {words[0]!r} is not one samebits "
                                      "reads (-r, -i, --extra-index-url, -e, -c, -f)"))


def _include(value: str, where: str, *, source: str, include: Include | None, into: _Reading,
             depth: int) -> None:
    if include is None:
        into.problems.append(_problem(where, value, "-r includes another file; none can be read "
                                      "here"))
        return
    if depth >= MAX_DEPTH:
        into.problems.append(_problem(where, value, f"-r nested more than {MAX_DEPTH} deep"))
        return
    try:
        display, text = include(source, value)
    except SourceError as exc:
        into.problems.append(_problem(where, value, exc.message))
        return
    if display in into.files:
        into.notes.append(f"{where}: -r {value}: already read")
        return
    into.files.append(display)
    read_lines(((f"{display}:{n}", line) for n, line in logical_lines(text)), source=display,
               include=include, into=into, depth=depth + 1)


def _unique(reqs: list[Requested], notes: list[str]) -> tuple[Requested, ...]:
    """The same requirement twice is kept once (a note says so); the same package with other
    words stays twice (markers may tell them apart: the draft decides)."""
    seen: dict[str, Requested] = {}
    out = []
    for r in reqs:
        if r.text in seen:
            notes.append(f"{r.where}: {r.text} repeats {seen[r.text].where}")
            continue
        seen[r.text] = r
        out.append(r)
    return tuple(out)


def with_notes(declared: Declared, notes: Iterable[str]) -> Declared:
    return replace(declared, notes=(*declared.notes, *notes))

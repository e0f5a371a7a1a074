"""Bytecode is derived data: every ``.pyc`` Python would load is checked against its source.

Which files: ``<dir>/__pycache__/<mod>.<cache_tag>[.opt-N].pyc`` beside an existing
``<dir>/<mod>.py`` (in the prefix, and in a venv's base stdlib), unless a record hashes the
pyc itself (a conda package's shipped bytecode is a package file, checked by its sha256); and a
sourceless ``<dir>/<mod>.pyc`` that a record lists without a hash. A pyc in ``__pycache__``
with no source beside it is never loaded (counted as ``orphans``); one for another cache tag
or magic number is never loaded by this interpreter (listed, not a finding).

How: the environment's own interpreter, started isolated and without site (``-I -S -W
ignore``: none of the environment's start-up code runs), unmarshals each pyc body and compiles
its source with the optimisation level of the file name (``-B``: it writes no bytecode of its
own into the environment); the two code objects must be equal
(``==`` compares bytecode, constants, names, line and exception tables, recursively; it ignores
``co_filename``, which is the install path) and so must every ``co_qualname``. Raw marshal
bytes are not compared: they differ between processes (FLAG_REF). The header decides whether
Python would load it at all: a timestamp pyc whose mtime/size do not match the source, or a
checked-hash pyc whose source hash does not, is stale (Python ignores and rewrites it): a note,
not a forgery. An unchecked-hash pyc is always loaded, so it is always compared.

Findings (kind ``bytecode``): a loaded pyc that differs from its source's compile, does not
unmarshal, whose source does not compile, or whose source is unowned; a sourceless pyc no record
hashes. When the interpreter cannot run here (another architecture), the report says how many
pycs are unchecked and calls none of them checked.

Verdicts are cached under ``<cache>/bytecode/`` keyed by everything a compile depends on: the
interpreter (binary and libpython sha256, version, cache tag, magic), the source's sha256,
the optimisation level and the pyc's sha256 (not the path: the same files installed
elsewhere are the same verdict); a repeated check compiles nothing. Compiles run in one
interpreter process per core.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from verify.env.drift import Finding
from verify.env.manifest import Entry, Manifest
from verify.env.pycheck import (
    VERDICTS,
    Handed,
    Runner,
    VerdictCache,
    compiler_key,
    interpreter_key,
    run_checker,
    verdict_key,
)

MAX_LISTED = 20
_PYC = re.compile(r"^(?P<dir>(?:.*/)?)__pycache__/(?P<mod>[^/.]+)\.(?P<tag>[^/.]+)"
                  r"(?:\.opt-(?P<opt>[12]))?\.pyc$")


class Task(NamedTuple):
    """One pyc to check against its source (a NamedTuple: a warm verify makes 10,700)."""

    pyc: Entry
    source: Entry
    opt: int
    name: str                      # how the report names the pyc
    package: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class BytecodeReport:
    interpreter_runs: bool
    checked: int = 0               # compared with their source (this run or from the cache)
    compiled: int = 0              # of which compiled this run
    stale: tuple[str, ...] = ()    # Python would ignore and rewrite them
    other: tuple[str, ...] = ()    # another cache tag or magic: never loaded by this Python
    orphans: int = 0               # no source beside them: never loaded
    by_record: int = 0             # shipped by a package whose record hashes them: they match
    unchecked: int = 0             # could not be checked (the interpreter does not run here)
    findings: tuple[Finding, ...] = ()
    cache: str | None = None
    problem: str | None = None     # why some could not be checked
    handed: int = 0                # of the checked, decided by the install's own compile

    def to_json(self) -> dict[str, Any]:
        # not "compiled": how much the cache held is not a fact about the environment, and
        # the report must be the same bytes whatever the cache held
        return {"checked": self.checked,
                "interpreter_runs": self.interpreter_runs, "unchecked": self.unchecked,
                "stale": len(self.stale), "stale_files": list(self.stale[:MAX_LISTED]),
                "other_interpreter": len(self.other),
                "other_files": list(self.other[:MAX_LISTED]), "orphans": self.orphans,
                "by_record": self.by_record,
                "findings": len(self.findings), "cache": self.cache,
                "problem": self.problem}


def _abs(manifest: Manifest, e: Entry) -> str:
    return e.path if e.path.startswith("/") else f"{manifest.prefix}/{e.path}"


class Plan(NamedTuple):
    tasks: list[Task]
    stale: list[str]
    other: list[str]
    orphans: int
    by_record: int
    findings: list[Finding]


def tasks_of(manifest: Manifest, cache_tag: str | None, magic: bytes | None) -> Plan:
    """What to compile, for every pyc of the manifest and its outside files; what needs no
    interpreter (record hashes, cache tags, magic numbers) is decided here."""
    tasks: list[Task] = []
    stale: list[str] = []
    other: list[str] = []
    findings: list[Finding] = []
    orphans = by_record = 0
    for group in (manifest.entries, manifest.outside):
        by_path = manifest.by_path() if group is manifest.entries else {
            e.path: e for e in group}
        for e in group:
            if not e.path.endswith(".pyc") or e.type != "file":
                continue
            m = _PYC.match(e.path)
            if m is None:
                findings.extend(_sourceless(e, by_path))
                continue
            if e.category != "cache":
                continue
            if e.claim is not None and e.claim.sha256 and e.claim.sha256 == e.sha256:
                by_record += 1  # the package shipped it and its record hashes it
                continue
            folder, mod, tag, opt = m.groups()
            source = by_path.get(f"{folder}{mod}.py")
            if source is None or source.type != "file":
                orphans += 1
                continue
            if cache_tag is not None and tag != cache_tag:
                other.append(e.path)
                continue
            head = e.head or b""
            if magic is not None and head[:4] != magic:
                (stale if len(head) < 16 else other).append(e.path)
                continue
            package = e.owner if e.owner and not e.owner.startswith("<") else source.owner
            if source.category == "unowned":
                findings.append(Finding(kind="bytecode", path=e.path, package=package,
                                        detail=f"its source {source.path} is unowned"))
                continue
            tasks.append(Task(e, source, 0 if opt is None else int(opt), e.path, package))
    return Plan(tasks, stale, other, orphans, by_record, findings)


def _sourceless(e: Entry, by_path: Mapping[str, Entry]) -> list[Finding]:
    folder, name = posixpath.split(e.path)
    stem = name[:-4]
    if "." in stem or posixpath.join(folder, f"{stem}.py") in by_path:
        return []  # not importable by that name, or the source wins
    if e.category == "package" and e.claim is not None and e.claim.sha256 is None:
        return [Finding(kind="bytecode", path=e.path, package=e.owner,
                        detail="sourceless bytecode that no record hashes")]
    return []


def timestamp_valid(pyc: Entry, source: Entry) -> bool | None:
    """For a timestamp pyc: does its header match the source's mtime and size? None: hash-based."""
    head = pyc.head or b""
    if len(head) < 16:
        return False
    if int.from_bytes(head[4:8], "little") & 1:
        return None
    mtime = int.from_bytes(head[8:12], "little")
    size = int.from_bytes(head[12:16], "little")
    return mtime == source.mtime & 0xFFFFFFFF and size == source.size & 0xFFFFFFFF


def task_key(t: Task) -> str | None:
    """``verdict_key`` of the task; None when a file could not be hashed: such a verdict is
    never remembered."""
    if not t.source.sha256 or not t.pyc.sha256:
        return None
    return verdict_key(t.source.sha256, t.opt, t.pyc.sha256)


def check_bytecode(manifest: Manifest, *, executable: str | None, runs: bool,
                   cache_tag: str | None, magic: bytes | None, ident: Mapping[str, Any],
                   cache: Path | None, jobs: int = 1, progress: Any = None,
                   runner: Runner = run_checker, handed: Handed | None = None
                   ) -> BytecodeReport:
    """Every pyc Python would load against its source (module docstring). ``handed``: the
    verdicts of the install that compiled these pycs a moment ago (``samebits install``'s own
    verify), used when they are of this very interpreter (the same ``interpreter_key``) and
    remembered like the verifier's own."""
    tasks, stale, other, orphans, by_record, findings = tasks_of(manifest, cache_tag, magic)
    if not runs or executable is None:
        return BytecodeReport(interpreter_runs=False, unchecked=len(tasks), stale=tuple(stale),
                              other=tuple(other), orphans=orphans, by_record=by_record,
                              findings=tuple(findings),
                              problem="the environment's interpreter does not run here")
    folder = cache / "bytecode" if cache else None
    interp = interpreter_key(ident, magic)
    vc = VerdictCache(folder, interp)
    keys = [task_key(t) for t in tasks]
    verdicts: list[str | None] = [vc.known.get(k) if k else None for k in keys]
    taken: dict[str, str] = {}      # what the install decided that the cache did not hold
    handed_count = 0
    missing = [i for i, v in enumerate(verdicts) if v is None and keys[i] is not None]
    if missing and handed is not None \
            and compiler_key(handed.identity) == interp:
        given = {verdict_key(src, opt, pyc): v for src, opt, pyc, v in handed.verdicts
                 if v.split(" ")[0] in VERDICTS}
        for i in missing:
            k = keys[i]
            if k in given:
                verdicts[i] = taken[k] = given[k]
                handed_count += 1
    if taken:
        vc.add(taken)
    todo = [i for i, v in enumerate(verdicts) if v is None]
    problem = None
    if todo:
        problem = _compile_all(manifest, tasks, todo, verdicts, executable, jobs, progress,
                               runner)
        vc.add({k: v for i in todo if (v := verdicts[i]) and (k := keys[i])})
    checked = unchecked = 0
    for t, verdict in zip(tasks, verdicts, strict=True):
        if verdict is None:
            unchecked += 1
            continue
        checked += 1
        what, _, hashed = verdict.partition(" ")
        loaded = hashed != "hash-stale" if hashed else timestamp_valid(t.pyc, t.source)
        unchecked_hash = hashed and not int.from_bytes((t.pyc.head or b"")[4:8], "little") & 2
        if unchecked_hash:
            loaded = True  # an unchecked-hash pyc is loaded whatever the source says
        if what == "same":
            if not loaded:
                stale.append(t.name)
            continue
        if not loaded:
            stale.append(t.name)
            continue
        detail = {"differs": f"differs from a fresh compile of {t.source.path}",
                  "unmarshal": "its body does not unmarshal to a code object",
                  "nocompile": f"its source {t.source.path} does not compile",
                  "unreadable": "could not be read"}[what]
        findings.append(Finding(kind="bytecode", path=t.name, package=t.package,
                                detail=detail))
    return BytecodeReport(interpreter_runs=True, checked=checked, compiled=len(todo),
                          stale=tuple(sorted(stale)), other=tuple(sorted(other)),
                          orphans=orphans, by_record=by_record, unchecked=unchecked,
                          findings=tuple(sorted(findings, key=Finding.sort_key)),
                          cache=str(vc.file) if vc.file else None, problem=problem,
                          handed=handed_count)


def _compile_all(manifest: Manifest, tasks: list[Task], todo: list[int],
                 verdicts: list[str | None], executable: str, jobs: int, progress: Any,
                 runner: Runner) -> str | None:
    n = max(jobs, math.ceil(len(todo) / 1000))
    chunks = [todo[k::n] for k in range(n) if todo[k::n]]
    problems: list[str] = []
    bar = progress("bytecode (files)", float(len(todo))) if progress else \
        nullcontext(lambda n=1: None)

    def one(chunk: list[int]) -> None:
        batch = [(os.fsencode(_abs(manifest, tasks[i].pyc)),
                  os.fsencode(_abs(manifest, tasks[i].source)), tasks[i].opt) for i in chunk]
        got = runner(executable, batch)
        if isinstance(got, str):
            problems.append(got)
            return
        for i, v in zip(chunk, got, strict=True):
            verdicts[i] = v

    with bar as advance, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for chunk, _ in zip(chunks, pool.map(one, chunks), strict=True):
            advance(len(chunk))
    return sorted(problems)[0] if problems else None

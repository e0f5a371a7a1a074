"""Bytecode: every installed ``.py`` compiled by the environment's own interpreter, once.

What a pyc is made of (``RECIPE``), the same wherever and however often it is made:

    interpreter     the prefix's own (a venv's ``bin/python``, a conda prefix's
                    ``bin/pythonX.Y``), run from the staged prefix with ``-S -s -B`` and
                    ``PYTHONHASHSEED=0`` in an empty environment; when it cannot run here
                    (another architecture, a broken binary) nothing is compiled and the report
                    says why
    header          ``invalidation_mode=CHECKED_HASH``: the magic number, flags 0b11 and the
                    source's siphash; Python checks it against the source on every import and
                    never trusts a timestamp
    code            ``compile(source, dfile, "exec", dont_inherit=True, optimize=0)`` with
                    ``dfile`` the file's prefix-relative path (``lib/python3.12/site-packages/
                    x/y.py``): the same bytes wherever the prefix is. Python sets
                    ``co_filename`` to the source's real path as it loads a pyc beside its
                    source (``importlib``'s ``_fix_co_filename``), so tracebacks and
                    ``inspect`` name the installed file all the same
    serialisation   ``marshal`` version 2: without object references, so the bytes do not
                    depend on reference counts in the compiling process (version 4 sets
                    FLAG_REF from them: the same source gives other bytes after other work);
                    a fixed hash seed orders frozenset constants on Python 3.10

Compiled pycs are kept in ``CACHE/pyc/<archive>/<key>/``, one entry per package and
interpreter, keyed by the sha256 of the recipe, the interpreter's identity
(``Interpreter.identity``: version, cache tag, magic, sha256 of its binary and libpython) and
the file list, under the archive's own key: a warm install into any path places them like
package files. Each entry is sealed like an unpacked archive (``samebits.install.seal``: every
file read-only, its inode and sha256 in ``seal.json``), checked against its seal before it is
placed (a damaged entry is evicted and compiled again) and re-sealed after linking, so the
verify that follows proves a linked pyc by a stat. They are not in RECORD or conda-meta:
``verify env`` checks each against its source.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import posixpath
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.install.cache import (
    PYC,
    Entry,
    Member,
    commit,
    evict,
    manifest_bytes,
    remove_tree,
    staging,
)
from samebits.install.entryfiles import CorruptEntry
from samebits.install.interpreter import Interpreter, probe_known
from samebits.install.place import Copy, Placer, one_copy_per_path, place_all
from samebits.install.seal import CheckResult, sealed_of, write_seal
from samebits.install.seal import check as check_seal
from samebits.pycompare import SAME

PYC_KIND = "samebits.pyc"
RECIPE = ("samebits-pyc 2: checked-hash, optimize 0, marshal 2, PYTHONHASHSEED=0, "
          "prefix-relative co_filename")
COMPILE_TIMEOUT = 3600.0

WORKER = r"""
import sys, os, json, marshal, importlib.util
MAGIC = importlib.util.MAGIC_NUMBER
FLAGS = (3).to_bytes(4, "little")
import hashlib
""" + SAME + r"""
for line in sys.stdin:
    i, src, dfile, out = json.loads(line)
    try:
        with open(src, "rb") as f:
            data = f.read()
        code = compile(data, dfile, "exec", dont_inherit=True, optimize=0)
        pyc = MAGIC + FLAGS + importlib.util.source_hash(data) + marshal.dumps(code, 2)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.fchmod(fd, 0o444)
        with os.fdopen(fd, "wb") as f:
            f.write(pyc)
        # the verifier's check of these bytes (verify.env.pycheck), on the code just compiled
        try:
            body = marshal.loads(pyc[16:])
            verdict = ("same" if type(body) is CODE and same(body, code) else "differs")
        except Exception:
            verdict = "unmarshal"
        res = [i, "ok", hashlib.sha256(pyc).hexdigest(), len(pyc),
               hashlib.sha256(data).hexdigest(), verdict + hash_head(pyc, data)]
    except Exception as exc:
        res = [i, "error", "%s: %s" % (type(exc).__name__, exc)]
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sources:
    """One package's ``.py`` files, prefix-relative, and the cache key of its archive."""

    archive: str
    files: tuple[str, ...]
    name: str = ""          # the archive's filename, for messages


@dataclass(frozen=True, slots=True, kw_only=True)
class BytecodeReport:
    interpreter: str | None = None      # the final prefix's interpreter path
    version: str | None = None
    compiled: int = 0                   # compiled now
    reused: int = 0                     # placed from the pyc cache
    failed: tuple[str, ...] = ()        # sources that do not compile (pip skips them too)
    skipped: str | None = None          # why nothing was compiled
    recipe: str = RECIPE
    sources: dict[str, str] = field(default_factory=dict)   # placed pyc -> "pyc/<a>/<key>"
    entries: dict[str, Entry] = field(default_factory=dict)  # the pyc entries placed from
    checked: dict[str, CheckResult] = field(default_factory=dict)  # their seals' checks
    identity: dict[str, str | None] = field(default_factory=dict)  # the compiling interpreter's
    # per pyc compiled now: (source sha256, optimisation level, pyc sha256, verdict), the
    # verifier's check of the bytes written (verify.env.pycheck), for the install's own verify
    verdicts: tuple[tuple[str, int, str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"interpreter": self.interpreter, "version": self.version,
                "compiled": self.compiled, "reused": self.reused,
                "failed": list(self.failed), "skipped": self.skipped, "recipe": self.recipe}


def pyc_path(src: str, cache_tag: str) -> str:
    """``a/b/m.py`` -> ``a/b/__pycache__/m.<tag>.pyc`` (importlib's cache_from_source)."""
    head, tail = posixpath.split(src)
    return posixpath.join(head, "__pycache__", f"{tail[:-3]}.{cache_tag}.pyc")


def group_key(identity: dict[str, Any], s: Sources) -> str:
    """The entry's key: recipe, interpreter and file list (the archive is its folder)."""
    doc = {"recipe": RECIPE, "interpreter": identity, "archive": s.archive,
           "files": sorted(s.files)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_pyc_entry(root: Path, name: str = "") -> Entry | None:
    """The pyc entry at ``root`` (``CACHE/pyc/<archive>/<key>``) as an ``Entry`` whose
    members are its pycs, or None when there is no whole one."""
    try:
        data = (root / "manifest.json").read_bytes()
        doc = json.loads(data)
        if doc.get("kind") != PYC_KIND or doc.get("format") != 1 \
                or doc.get("recipe") != RECIPE:
            return None
        members = tuple(Member(str(rel), "file", str(sha), int(size))
                        for rel, sha, size in doc["files"])
        failed = tuple(str(f) for f in doc["failed"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return Entry(root=root, key=root.name, filename=f"{name or root.parent.name} (bytecode)",
                 kind="pyc", members=members, notes=failed,
                 manifest_sha256=hashlib.sha256(data).hexdigest())


def compile_bytecode(stage: Path, final: str, python: str, groups: Sequence[Sources],
                     cache: Path, placer: Placer, *, runs_here: str | None = None,
                     progress: Callable[..., Any] | None = None,
                     facts: Path | None = None) -> BytecodeReport:
    """Compile (or take from the cache) every group's pycs and place them under ``stage``.

    ``python`` is the interpreter's prefix-relative path; ``runs_here`` a reason it cannot
    (another architecture) found before trying it; ``facts`` where what was learnt of the
    interpreter is kept (``interpreter.probe_known``), ``cache`` unless given.
    """
    groups = [g for g in groups if g.files]
    where = f"{final}/{python}"
    if not groups:
        return BytecodeReport(interpreter=where, skipped="no Python sources")
    if runs_here:
        return BytecodeReport(interpreter=where, skipped=runs_here)
    known = probe_known(str(stage / python), facts if facts is not None else cache,
                        env={"PYTHONHASHSEED": "0"})
    if isinstance(known, str):
        return BytecodeReport(interpreter=where, skipped=f"{where} cannot run here: {known}")
    got, identity = known
    if not got.cache_tag:
        return BytecodeReport(interpreter=where, version=got.version,
                              skipped=f"{where} writes no bytecode (no cache tag)")
    folder = Path(os.path.abspath(cache / PYC))  # the compilers run in folders of their own
    copies: list[Copy] = []
    placed: dict[str, str] = {}
    failed: list[str] = []
    todo: list[tuple[str, Sources]] = []
    entries: dict[str, Entry] = {}
    checked: dict[str, CheckResult] = {}
    reused = 0
    for g in groups:
        key = group_key(identity, g)
        entry = read_pyc_entry(folder / g.archive / key, g.name)
        if entry is not None:
            try:  # every pyc against the entry's seal (a stat each), before it is placed
                checked[key] = check_seal(entry, refresh_links=False)
            except CorruptEntry:
                entry = None
        if entry is None:
            evict(folder / g.archive, key)  # a torn, older or damaged entry: compiled afresh
            todo.append((key, g))
            continue
        entries[key] = entry
        copies += [Copy(entry.source(m.path), m.path, False, m.size) for m in entry.members]
        placed.update((m.path, f"{PYC}/{g.archive}/{key}") for m in entry.members)
        failed += entry.notes
        reused += len(entry.members)
    compiled = 0
    verdicts: list[tuple[str, int, str, str]] = []
    if todo:
        total = sum(len(g.files) for _, g in todo)
        ctx = progress(f"compiling {total:,} Python files", total) if progress else None
        advance = ctx.__enter__() if ctx else None
        try:
            made = _compile_groups(stage, str(stage / python), got, identity, todo, folder,
                                   advance, verdicts)
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
        for entry, bad in made:
            entries[entry.key] = entry
            copies += [Copy(entry.source(m.path), m.path, False, m.size)
                       for m in entry.members]
            placed.update((m.path, f"{PYC}/{entry.root.parent.name}/{entry.key}")
                          for m in entry.members)
            failed += bad
            compiled += len(entry.members)
    place_all(one_copy_per_path(copies), str(stage), placer)
    return BytecodeReport(interpreter=where, version=got.version, compiled=compiled,
                          reused=reused, failed=tuple(sorted(failed)), sources=placed,
                          entries=entries, checked=checked, identity=identity,
                          verdicts=tuple(verdicts))


def _compile_groups(stage: Path, python: str, interp: Interpreter,
                    identity: dict[str, str | None], todo: list[tuple[str, Sources]],
                    folder: Path,
                    advance: Callable[..., Any] | None,
                    verdicts: list[tuple[str, int, str, str]]) -> list[tuple[Entry, list[str]]]:
    """Compile every group into a staged entry, seal it there (the worker hashed each pyc
    as it wrote it, read-only) and publish it: (the entry, the sources that do not compile).
    ``verdicts`` gets, per pyc written, (source sha256, 0, pyc sha256, the checker's verdict
    on those bytes, as the worker found it)."""
    tag = interp.cache_tag or ""
    tmps: dict[str, Path] = {}
    jobs: list[tuple[str, str, str, str, str]] = []   # key, src rel, src, dfile, out
    for key, g in todo:
        tmp = tmps[key] = staging(folder / g.archive)
        (tmp / "tree").mkdir()
        for rel in sorted(g.files):
            jobs.append((key, rel, str(stage / rel), rel,
                         str(tmp / "tree" / pyc_path(rel, tag))))
    try:
        results = _run_workers(python, jobs, advance)
        made = []
        for key, g in todo:
            files: list[tuple[str, str, int]] = []
            bad: list[str] = []
            for (k, rel, *_), res in zip(jobs, results, strict=True):
                if k != key:
                    continue
                if res[1] == "ok":
                    files.append((pyc_path(rel, tag), res[2], res[3]))
                    verdicts.append((res[4], 0, res[2], res[5]))
                else:
                    bad.append(f"{rel}: {res[2]}")
            tmp = tmps.pop(key)
            doc = {"format": 1, "kind": PYC_KIND, "recipe": RECIPE, "interpreter": identity,
                   "files": sorted(files), "failed": sorted(bad)}
            manifest = hashlib.sha256(manifest_bytes(doc)).hexdigest()
            write_seal(tmp, key, manifest, {
                rel: sealed_of(os.lstat(f"{tmp}/tree/{rel}"), sha, False)
                for rel, sha, _size in files})
            root = commit(folder / g.archive, tmp, key, doc)
            entry = read_pyc_entry(root, g.name)
            if entry is None:  # pragma: no cover - published a moment ago
                raise OSError(f"{root}: the bytecode entry just written cannot be read")
            made.append((entry, bad))
        return made
    finally:
        for tmp in tmps.values():
            remove_tree(tmp)


def _run_workers(python: str, jobs: list[tuple[str, str, str, str, str]],
                 advance: Callable[..., Any] | None) -> list[list[Any]]:
    """Compile ``jobs`` on one interpreter process per core; one result per job, in order."""
    from samebits.host import cores

    n = max(1, min(cores(), math.ceil(len(jobs) / 64)))
    sizes = [_size(j[2]) for j in jobs]
    order = sorted(range(len(jobs)), key=lambda i: -sizes[i])
    shares: list[list[int]] = [[] for _ in range(n)]
    loads = [0] * n
    for i in order:  # largest first onto the least-loaded worker
        w = loads.index(min(loads))
        shares[w].append(i)
        loads[w] += sizes[i]
    results: list[list[Any] | None] = [None] * len(jobs)
    lock = threading.Lock()
    errors: list[str] = []

    def worker(share: list[int]) -> None:
        try:
            compile_share(share)
        except Exception as exc:  # reported per job below, never lost with the thread
            errors.append(f"{type(exc).__name__}: {exc}")

    def compile_share(share: list[int]) -> None:
        feed = "".join(json.dumps([i, *jobs[i][2:]]) + "\n" for i in share)
        with tempfile.TemporaryDirectory(prefix="samebits-compile-") as cwd, \
                tempfile.TemporaryFile() as err, \
                subprocess.Popen([python, "-S", "-s", "-B", "-c", WORKER], cwd=cwd,
                                 env={"PYTHONHASHSEED": "0"}, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            writer = threading.Thread(target=_feed, args=(proc, feed), daemon=True)
            writer.start()
            assert proc.stdout is not None
            for line in proc.stdout:
                res = json.loads(line)
                results[res[0]] = res
                if advance is not None:
                    with lock:
                        advance(1)
            writer.join()
            if proc.wait(timeout=COMPILE_TIMEOUT) != 0:
                err.seek(0)
                tail = err.read().decode(errors="replace").strip()[-300:]
                errors.append(f"exit {proc.returncode}: {tail}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in shares if s]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out: list[list[Any]] = []
    for i, res in enumerate(results):
        if res is None:
            why = errors[0] if errors else "no answer"
            res = [i, "error", f"the compiling interpreter failed ({why})"]
        out.append(res)
    return out


def _feed(proc: subprocess.Popen[str], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0

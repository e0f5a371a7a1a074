"""``verify env``'s library API: ``check_env(prefix, lockfile=...)`` -> ``EnvReport``.

What every caller of verify env runs: the command (``verify.env.cmd_env``), ``samebits
install``'s own verify after placing, and the audit's and attest's environment step. The
report, its JSON and its text: ``verify.env.envreport``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Collection
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, cast

from samebits.errors import UsageError, plural
from samebits.gcpause import paused_gc
from samebits.host import host_platform
from samebits.lock.read import ReadOptions

if TYPE_CHECKING:
    from samebits.lock.read import LockedEnv
    from verify.env.envreport import EnvReport
    from verify.env.interpreter import Located
    from verify.env.linkage import LinkageReport
    from verify.env.manifest import Manifest
    from verify.env.pycheck import Handed
    from verify.env.sealproof import Placed

# seconds for the walk of a venv's base interpreter files on the other core (a stale memo: its
# 290 MB hashed); past this it is walked here, after the prefix
OUTSIDE_LIMIT = 300.0


P = ParamSpec("P")


def _proven(check: Callable[P, EnvReport]) -> Callable[P, EnvReport]:
    """``check`` whose report stands only once what the install ``placed`` is proven
    (``check_env``'s docstring): else ``check`` again, with a stat of every file."""
    @functools.wraps(check)
    def run(*args: P.args, **kwargs: P.kwargs) -> EnvReport:
        report = check(*args, **kwargs)
        placed = cast("Placed | None", kwargs.get("placed"))
        if placed is not None:
            unproven = placed.unproven()
            if unproven is None or unproven:
                kwargs["placed"] = None
                report = check(*args, **kwargs)
                why = (f"{plural(len(unproven), 'file')} the install linked (first: "
                       f"{sorted(unproven)[0]}) not its sealed cache file when proven"
                       if unproven else "the proof of the files the install linked could "
                       "not be had")
                report = replace(report, notes=(
                    *report.notes, f"{why}: every file checked again, each by its own stat"))
        return report
    return run


@paused_gc()
@_proven
def check_env(prefix: Path, *, lockfile: Path | None = None, platform: str | None = None,
              against: Path | None = None, jobs: int | None = None, linkage: bool = True,
              bytecode: bool = True, cache: Path | None = None,
              progress: Any = None, read: ReadOptions | None = None,
              coverage: bool = True, trust_seal: bool | Collection[str] = False,
              loaded: LockedEnv | None = None, handed: Handed | None = None,
              import_timeout: float | None = None,
              interpreter_cache: Path | None = None,
              placed: Placed | None = None) -> EnvReport:
    """Everything ``verify env`` checks, as an ``EnvReport`` (also ``samebits audit``'s API).
    ``read`` says how to read a lockfile of another format (converted on read).
    ``trust_seal``: prove sealed cache inodes by a stat (``verify.env.sealproof``): True for
    the entries the prefix's records name, or the keys of the entries to trust.
    ``loaded``: ``lockfile`` as the caller has already read it (install: the lock it placed
    from); used when it is a conda-lock file, whose reading takes no options.
    ``handed``: the bytecode verdicts of the install that compiled the prefix's pycs a moment
    ago (``verify.env.bytecode.check_bytecode``).
    ``import_timeout``: seconds for each import of the import probe, which judges what the
    linkage check leaves unresolved (``verify.env.importverdict``; default
    ``verify.env.importprobe.IMPORT_TIMEOUT``).
    ``interpreter_cache``: where what is learnt of the environment's interpreter is kept (the
    stat memo of a venv's base interpreter files and their heads, the bytecode verdicts, each
    keyed by the interpreter's files and identity); ``cache`` unless given (install keeps
    them in the user's cache whatever ``--cache-dir`` says).
    ``placed``: what the calling install hardlinked into the prefix a moment ago
    (``verify.env.sealproof``), proven by a stat of each while the walk goes on (it starts as
    soon as the seals are read); the report is returned once that proof is had, and where it
    fails (a file that is not its sealed inode, unchanged but for its links) or cannot be
    had, everything is checked again with a stat of every file."""
    from samebits.forked import answer, spawn_call
    from samebits.install import default_cache_dir
    from samebits.lock.read import load_lock
    from verify.env import sealproof
    from verify.env.archivefacts import cached_wheel_tags
    from verify.env.basefiles import base_files
    from verify.env.bytecode import check_bytecode
    from verify.env.digest import digests
    from verify.env.drift import file_findings, merge, reference_findings, scaffold_findings
    from verify.env.envreport import EnvReport, load_reference
    from verify.env.hashing import default_jobs
    from verify.env.interpreter import (
        identity,
        identity_digest,
        locate,
        outside_paths,
        probe_result,
        start_probe,
        stop_probe,
    )
    from verify.env.linkage import check_linkage, host_library_dirs
    from verify.env.lockcheck import lock_check, shared_writers, unproven
    from verify.env.manifest import build_manifest, prefix_kind, with_outside
    from verify.env.overwritten import overwrite_notes
    from verify.env.recordslip import archive_slips, cached_member_sha256
    from verify.env.scaffold import read_pyvenv_cfg
    from verify.env.startup import base_records, copied_interpreter_findings, startup_findings
    from verify.env.statmemo import StatMemo

    kind = prefix_kind(prefix)  # a bad prefix fails before the lockfile is even read
    if loaded is None or loaded.format != "conda-lock" or lockfile is None \
            or Path(loaded.path) != Path(lockfile):
        loaded = load_lock(lockfile, _read_options(read, prefix, platform)) if lockfile \
            else None
    lock = loaded.lock if loaded else None
    reference = load_reference(against) if against else None
    if lock is not None and platform is not None:  # bad input fails before any hashing
        _check_platform(lockfile, lock, platform)
    cache = cache or default_cache_dir()

    trusted = bool(trust_seal)  # seals_for reads the seals exactly then
    # the base interpreter's files: proved by the stat memo where the seals are trusted,
    # the memo refreshed from what is hashed either way (verify.env.statmemo)
    facts = interpreter_cache or cache
    loc = locate(prefix, kind, read_pyvenv_cfg(prefix), facts=facts if trusted else None)
    outside = outside_paths(loc)
    apart = trusted and bool(outside)

    # trusted, the base interpreter's files (7,500 of CPython 3.12, each a stat the memo
    # proves) are walked by a fresh interpreter on the other core while this process reads
    # the seals and walks the prefix (``verify.env.basefiles``; here, after the walk, where
    # none could be started); untrusted, every byte is hashed, by the same workers as the
    # prefix's
    job = (loc, outside, facts, jobs, linkage)
    ahead = spawn_call(base_files, *job) if apart else None
    try:
        seals, records = sealproof.seals_for(prefix, cache, trust_seal)
    except BaseException:
        if ahead is not None:
            ahead.stop()
        raise
    assert (seals is not None) == trusted
    if placed is not None and seals is not None:  # before any thread: it may fork
        placed.start(seals)
    memo = StatMemo(facts, outside, trusted=False) if outside and not apart else None
    # the interpreter answers while the walk goes on; no thread is started before the walk
    # ends (the hashing workers fork: verify.env.hashing)
    asked = start_probe(loc.executable)
    try:
        manifest = build_manifest(prefix, jobs=jobs, elf=linkage, progress=progress,
                                  archives=cache, outside=() if apart else outside,
                                  seals=seals, records=records, memo=memo,
                                  placed=placed.paths if placed is not None else None)
    except BaseException:
        stop_probe(asked)  # not waited for
        if ahead is not None:
            ahead.stop()
        raise
    if apart:
        walked, owners = answer(ahead, lambda: base_files(*job), OUTSIDE_LIMIT)
        manifest = with_outside(manifest, walked)
    else:
        owners = base_records(loc)
    found = probe_result(asked)
    interpreter = identity(manifest, loc, found)
    platform = platform or _default_platform(lock, manifest)
    shared = shared_writers(lock, platform, file=loaded.origin if loaded else "")
    groups = [file_findings(manifest, shared), startup_findings(manifest, loc, owners=owners),
              copied_interpreter_findings(manifest, interpreter)]
    notes = loaded.conversion.one_line_notes() if loaded and loaded.conversion else []
    notes.extend(scaffold_findings(manifest)[1])
    notes.extend(overwrite_notes(manifest, shared))
    # a venv, or a prefix of Python packages, whose interpreter is not there cannot run at all:
    # never "identical, exit 0" (an image built without a base that has its Python)
    not_runnable = None
    if loc.problem and (kind == "venv" or any(p.manager == "pip"
                                              for p in manifest.records.packages)):
        not_runnable = f"the environment's Python cannot start: {loc.problem}"
    elif loc.problem:
        notes.append(f"interpreter: {loc.problem}")
    bc = None
    if bytecode:
        bc = check_bytecode(manifest, executable=loc.executable, runs=found is not None,
                            cache_tag=found.cache_tag if found else None,
                            magic=found.magic if found else None, ident=interpreter,
                            cache=facts, jobs=jobs or default_jobs(), progress=progress,
                            handed=handed)
        groups.append(list(bc.findings))
        if bc.unchecked:
            why = bc.problem or "the interpreter did not answer"
            notes.append(f"{bc.unchecked:,} bytecode files not checked: {why}")
    locked = None
    if lock is not None:
        _check_platform(lockfile, lock, platform)
        packages = lock.packages_for(platform)
        locked = len(packages)
        checked = lock_check(manifest.records.packages, packages,
                             archive_tags=cached_wheel_tags(cache))
        groups.append(checked.findings)
        notes.extend(checked.notes)
        groups[0], slips = archive_slips(groups[0], packages, cached_member_sha256(cache))
        notes.extend(slips)
    if reference is not None:
        groups.append(reference_findings(manifest, reference.entries))
        if reference.prefix and reference.prefix != str(prefix):
            notes.append(f"the reference was taken at {reference.prefix}: files with the "
                         "install path written in them differ for that reason alone")
    editable = [p.id for p in manifest.records.packages if p.editable]
    if editable:
        notes.append("editable installs (sources outside the prefix, not checked): "
                     + ", ".join(editable))
    links = None
    if linkage:
        with (progress or _no_progress)("resolving every ELF file's shared libraries", None):
            links = check_linkage(manifest, host_dirs=host_library_dirs())
        if links.unresolved:  # judged by what really loads: only then, only their packages
            links = _judge_by_imports(links, manifest, loc, runs=found is not None,
                                      timeout=import_timeout, progress=progress)
    ident_digest = identity_digest(interpreter) if kind != "conda" else None
    kernels = _coverage(manifest, cache) if coverage else None
    return EnvReport(
        manifest=manifest, digests=digests(manifest, ident_digest),
        findings=tuple(merge(*groups)), linkage=links, platform=platform,
        locked_packages=locked, lockfile=str(lockfile) if lockfile else None,
        reference=reference, notes=tuple(notes), interpreter=interpreter, bytecode=bc,
        unproven=tuple(unproven(manifest.records.packages)), coverage=kernels,
        not_runnable=not_runnable, proof=sealproof.proof_doc(manifest, seals))


def _judge_by_imports(links: LinkageReport, manifest: Manifest, loc: Located, *, runs: bool,
                      timeout: float | None, progress: Any) -> LinkageReport:
    """The import probe in the environment's interpreter, which sees the environment and its
    base interpreter (bound read-only into its sandbox)."""
    import os

    from verify.env.importprobe import IMPORT_TIMEOUT
    from verify.env.importverdict import judge_by_imports

    readable = [str(manifest.prefix), *(d for d in (
        loc.base_prefix, loc.binary and os.path.dirname(os.path.dirname(loc.binary))) if d)]
    with (progress or _no_progress)("importing the packages of unresolved libraries", None):
        return judge_by_imports(links, manifest, executable=loc.executable, runs=runs,
                                readable=readable, environ=os.environ,
                                timeout=IMPORT_TIMEOUT if timeout is None else timeout)


def _coverage(manifest, cache: Path) -> dict[str, Any]:
    """Which GPUs the environment's kernels run on (``samebits check --prefix``'s document);
    a file whose bytes were scanned before is not read again (``codescan.ScanCache``)."""
    from verify.kernels.codescan import scan_manifest
    from verify.kernels.report import platform_doc

    return platform_doc(scan_manifest(manifest, cache=cache))


def _read_options(read: ReadOptions | None, prefix: Path, platform: str | None) -> ReadOptions:
    """The prefix's own Python line is the default for a universal Python lock."""
    from dataclasses import replace

    from verify.env.records import site_packages

    read = read or ReadOptions()
    if read.python is None:
        lines = [sp.split("/")[1][len("python"):] for sp in site_packages(prefix)]
        if len(lines) == 1:
            read = replace(read, python=lines[0])
    return replace(read, platforms=(platform,)) if platform and not read.platforms else read


def _no_progress(description: str, total: float | None) -> Any:
    return nullcontext(lambda n=1, description=None: None)


def _check_platform(lockfile: Path | None, lock: Any, platform: str) -> None:
    if platform not in lock.platforms:
        raise UsageError(f"{lockfile}: no platform {platform} "
                         f"(it has {', '.join(lock.platforms)})",
                         hint="pass --platform with one of those")


def _default_platform(lock, manifest) -> str:
    if lock is not None and len(lock.platforms) == 1:
        return lock.platforms[0]
    subdirs = Counter(p.subdir for p in manifest.records.packages
                      if p.manager == "conda" and p.subdir and p.subdir != "noarch")
    if subdirs:
        return subdirs.most_common(1)[0][0]
    return host_platform()

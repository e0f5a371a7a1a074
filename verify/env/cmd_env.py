"""``samebits verify env`` (and ``python -m verify env``): are the installed files the locked ones?

    samebits verify env                                   # the running environment
    samebits verify env lockfiles/hopper.conda-lock.yml --prefix /opt/env --platform linux-64
    samebits verify env hopper --prefix /opt/env          # LOCK: an id or a path
    samebits verify env --json > manifest.json            # the report is also a manifest
    samebits verify env --prefix /opt/env --against manifest.json

Exit codes, in the spirit of ``nix store verify``: 0 identical (and every ELF library
resolves), 1 drift or an unresolved library found, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samebits._io import canonical_json
from samebits.cli import options
from samebits.errors import UsageError
from samebits.host import host_platform
from samebits.lock.read import ReadOptions
from samebits.ui import Output

if TYPE_CHECKING:
    from verify.env.envreport import EnvReport


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "env", parents=parents,
        help="prove the installed files are exactly the locked ones",
        description="Walk an environment, hash every file in parallel and check it against "
        "the installers' records (conda-meta/*.json, dist-info RECORD), a lockfile's "
        "packages and, with --against, an earlier report; check every .pyc against its "
        "source with the environment's own interpreter (run with -I -S); identify that "
        "interpreter and check the files it runs at start-up; resolve every ELF file's "
        "libraries. Prints two digests: the environment (every file, and the interpreter "
        "of a venv) and the packages: what that proves, docs/explanation/verify-env.md.",
        epilog="exit codes: 0 identical, 1 drift or an unresolved library found, "
        "2 bad input or usage. See README \"verify env\".",
    )
    options.add_lock(p, what="compare the installed packages with this lock (one of another "
                     "format is converted on read; --lock-python defaults to the prefix's "
                     "Python)", optional=True, once=True)
    options.deprecated_lockfile(p)
    options.add_prefix(p, what="to check", default="default: the running one, sys.prefix")
    options.add_platform(p, what="the lock platform to compare with",
                         default="the lock's only one, else the prefix's conda subdir, else "
                         "this machine's")
    p.add_argument("--against", type=Path, metavar="REPORT",
                   help="compare every file with an earlier `verify env --json` report")
    options.add_read_flags(p, python_default="the prefix's Python")
    p.add_argument("--no-linkage", action="store_true",
                   help="skip resolving ELF files' shared libraries")
    p.add_argument("--no-bytecode", action="store_true",
                   help="skip checking each .pyc against its source (the report says so)")
    options.add_cache_dir(p, what="bytecode verdicts, and the conda archives that give "
                          "executable bits and link targets (the one `samebits install` fills)")
    p.add_argument("--no-coverage", action="store_true",
                   help="skip reading the CUDA kernels (which GPUs the environment runs on)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="hashing processes (default: one per available core)")
    options.add_project(p)
    p.set_defaults(func=run_env)


def run_env(args: argparse.Namespace, out: Output) -> int:
    from verify.env.envreport import report_json, report_text

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    lockfile = options.lock_file(args.lock, options.project_of(args)) if args.lock else None
    report = check_env((args.prefix or Path(sys.prefix)).absolute(), lockfile=lockfile,
                       platform=args.platform, against=args.against, jobs=args.jobs,
                       linkage=not args.no_linkage, bytecode=not args.no_bytecode,
                       cache=args.cache_dir, progress=out.progress,
                       read=ReadOptions(environment=args.lock_env, python=args.lock_python),
                       coverage=not args.no_coverage)
    if out.json:
        sys.stdout.flush()
        sys.stdout.buffer.write(canonical_json(report_json(report)))
        sys.stdout.flush()
    else:
        out.emit({}, report_text(report))
    return report.exit_code


def check_env(prefix: Path, *, lockfile: Path | None = None, platform: str | None = None,
              against: Path | None = None, jobs: int | None = None, linkage: bool = True,
              bytecode: bool = True, cache: Path | None = None,
              progress: Any = None, read: ReadOptions | None = None,
              coverage: bool = True) -> EnvReport:
    """Everything ``verify env`` checks, as an ``EnvReport`` (also ``samebits audit``'s API).
    ``read`` says how to read a lockfile of another format (converted on read)."""
    from samebits.install import default_cache_dir
    from samebits.lock.read import load_lock
    from verify.env.archivefacts import cached_wheel_tags
    from verify.env.bytecode import check_bytecode
    from verify.env.digest import digests
    from verify.env.drift import file_findings, merge, reference_findings, scaffold_findings
    from verify.env.envreport import EnvReport, load_reference
    from verify.env.hashing import default_jobs
    from verify.env.interpreter import identity, identity_digest, locate, outside_paths, probe
    from verify.env.linkage import check_linkage, host_library_dirs
    from verify.env.lockcheck import lock_check, unproven
    from verify.env.manifest import build_manifest, prefix_kind
    from verify.env.scaffold import read_pyvenv_cfg
    from verify.env.startup import copied_interpreter_findings, startup_findings

    kind = prefix_kind(prefix)  # a bad prefix fails before the lockfile is even read
    loaded = load_lock(lockfile, _read_options(read, prefix, platform)) if lockfile else None
    lock = loaded.lock if loaded else None
    reference = load_reference(against) if against else None
    if lock is not None and platform is not None:  # bad input fails before any hashing
        _check_platform(lockfile, lock, platform)
    cache = cache or default_cache_dir()

    loc = locate(prefix, kind, read_pyvenv_cfg(prefix))
    manifest = build_manifest(prefix, jobs=jobs, elf=linkage, progress=progress,
                              archives=cache, outside=outside_paths(loc))
    found = probe(loc.executable)
    interpreter = identity(manifest, loc, found)
    platform = platform or _default_platform(lock, manifest)
    groups = [file_findings(manifest), startup_findings(manifest, loc),
              copied_interpreter_findings(manifest, interpreter)]
    notes = loaded.conversion.one_line_notes() if loaded and loaded.conversion else []
    notes.extend(scaffold_findings(manifest)[1])
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
                            cache=cache, jobs=jobs or default_jobs(), progress=progress)
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
    ident_digest = identity_digest(interpreter) if kind != "conda" else None
    kernels = _coverage(manifest) if coverage else None
    return EnvReport(
        manifest=manifest, digests=digests(manifest, ident_digest),
        findings=tuple(merge(*groups)), linkage=links, platform=platform,
        locked_packages=locked, lockfile=str(lockfile) if lockfile else None,
        reference=reference, notes=tuple(notes), interpreter=interpreter, bytecode=bc,
        unproven=tuple(unproven(manifest.records.packages)), coverage=kernels,
        not_runnable=not_runnable)


def _coverage(manifest) -> dict[str, Any]:
    """Which GPUs the environment's kernels run on (``samebits check --prefix``'s document)."""
    from verify.kernels.codescan import scan_manifest
    from verify.kernels.report import platform_doc

    return platform_doc(scan_manifest(manifest))


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

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
from pathlib import Path

from samebits._io import canonical_json
from samebits.cli import options
from samebits.errors import UsageError
from samebits.lock.read import ReadOptions
from samebits.ui import Output
from verify.env.check import check_env


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
    p.add_argument("--trust-seal", action="store_true",
                   help="prove a file that is a sealed inode of samebits' cache (a hardlink "
                   "install's) by a stat instead of hashing it; the report says how many "
                   "(default: every byte is hashed)")
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
                       coverage=not args.no_coverage, trust_seal=args.trust_seal)
    if out.json:
        sys.stdout.flush()
        sys.stdout.buffer.write(canonical_json(report_json(report)))
        sys.stdout.flush()
    else:
        out.emit({}, report_text(report))
    return report.exit_code

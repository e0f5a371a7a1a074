"""``samebits verify env`` (and ``python -m verify env``): are the installed files the locked ones?

    samebits verify env                                   # the running environment
    samebits verify env --prefix /opt/env --lockfile lockfiles/hopper.conda-lock.yml \\
        --platform linux-64
    samebits verify env --json > manifest.json            # the report is also a manifest
    samebits verify env --prefix /opt/env --against manifest.json

Exit codes, in the spirit of ``nix store verify``: 0 identical (and every ELF library
resolves), 1 drift or an unresolved library found, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import platform as _platform
import sys
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samebits._io import canonical_json
from samebits.errors import UsageError
from samebits.ui import Output

if TYPE_CHECKING:
    from verify.envreport import EnvReport

HOST_PLATFORMS = {"x86_64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64"}


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "env", parents=parents,
        help="prove the installed files are exactly the locked ones",
        description="Walk an environment, hash every file in parallel and check it against "
        "the installers' records (conda-meta/*.json, dist-info RECORD), a lockfile's "
        "packages and, with --against, an earlier report; resolve every ELF file's "
        "libraries. Prints two digests: the environment (every file) and the packages.",
        epilog="exit codes: 0 identical, 1 drift or an unresolved library found, "
        "2 bad input or usage. See README \"verify env\".",
    )
    p.add_argument("--prefix", type=Path, metavar="P",
                   help="the environment to check (default: the running one, sys.prefix)")
    p.add_argument("--lockfile", type=Path, metavar="L",
                   help="compare the installed packages with this conda-lock file")
    p.add_argument("--platform", metavar="P",
                   help="the lock platform to compare with (default: the lock's only one, "
                   "else the prefix's conda subdir, else this machine's)")
    p.add_argument("--against", type=Path, metavar="REPORT",
                   help="compare every file with an earlier `verify env --json` report")
    p.add_argument("--no-linkage", action="store_true",
                   help="skip resolving ELF files' shared libraries")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="hashing processes (default: one per available core)")
    p.set_defaults(func=run_env)


def run_env(args: argparse.Namespace, out: Output) -> int:
    from verify.envreport import report_json, report_text

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: must be at least 1")
    report = check_env((args.prefix or Path(sys.prefix)).absolute(), lockfile=args.lockfile,
                       platform=args.platform, against=args.against, jobs=args.jobs,
                       linkage=not args.no_linkage, progress=out.progress)
    if out.json:
        sys.stdout.flush()
        sys.stdout.buffer.write(canonical_json(report_json(report)))
        sys.stdout.flush()
    else:
        out.emit({}, report_text(report))
    return report.exit_code


def check_env(prefix: Path, *, lockfile: Path | None = None, platform: str | None = None,
              against: Path | None = None, jobs: int | None = None, linkage: bool = True,
              progress: Any = None) -> EnvReport:
    """Everything ``verify env`` checks, as an ``EnvReport`` (also ``samebits audit``'s API)."""
    from samebits.lockfile import parse_lock
    from verify.digest import digests
    from verify.drift import file_findings, merge, reference_findings
    from verify.envreport import EnvReport, load_reference
    from verify.linkage import check_linkage, host_library_dirs
    from verify.lockcheck import lock_findings
    from verify.manifest import build_manifest, prefix_kind

    prefix_kind(prefix)  # a bad prefix fails before the lockfile is even read
    lock = parse_lock(lockfile) if lockfile else None
    reference = load_reference(against) if against else None
    if lock is not None and platform is not None:  # bad input fails before any hashing
        _check_platform(lockfile, lock, platform)

    manifest = build_manifest(prefix, jobs=jobs, elf=linkage, progress=progress)
    platform = platform or _default_platform(lock, manifest)
    groups = [file_findings(manifest)]
    notes: list[str] = []
    locked = None
    if lock is not None:
        _check_platform(lockfile, lock, platform)
        packages = lock.packages_for(platform)
        locked = len(packages)
        groups.append(lock_findings(manifest.records.packages, packages))
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
    return EnvReport(
        manifest=manifest, digests=digests(manifest), findings=tuple(merge(*groups)),
        linkage=links, platform=platform, locked_packages=locked,
        lockfile=str(lockfile) if lockfile else None,
        reference=reference, notes=tuple(notes))


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
    machine = _platform.machine()
    return HOST_PLATFORMS.get(machine, f"linux-{machine}")

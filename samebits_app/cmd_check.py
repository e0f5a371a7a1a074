"""``samebits check``: on which GPUs does an environment run, read from its kernels.

    samebits check hopper [--gpu H100|sm_90|9.0|hopper] [--driver 535.104] [--platform P]
    samebits check lockfiles/volta.conda-lock.yml --gpu V100 --package torch
    samebits check --prefix /opt/env [--gpu ...] [--driver ...]
    samebits check --all --write        lockfiles/<env>.coverage.json + .coverage.md, every lock
    samebits check hopper --write       the same for one lock
    samebits check --all --check        exit 1 when one of those is missing or names another lock

A lock whose coverage table beside it (``lockfiles/<env>.coverage.json``, written by
``--write``) is fresh, i.e. names this lock's sha256, is answered from that table: nothing is
downloaded. Otherwise (or with ``--package``) the archives of the platforms asked (``--platform``,
default this machine's where the lock has it) are fetched into the cache, hash-checked, their
size said first, and read without installing (``samebits_app.lockcoverage``); a prefix is read
in place (``verify.kernels.codescan``). The decisions are ``verify.kernels.coverage``'s, the
documents ``verify.kernels.report``'s.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, canonical_json, read_json
from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.ui import Output

COVERAGE_SUFFIX = ".coverage"


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "check", parents=parents,
        help="on which GPUs does a lock or an environment run? read from its kernels",
        description="Read the fatbins of every CUDA library of a lock (its archives are "
        "fetched into the cache, hash-checked, and read without installing) or of an installed "
        "environment (--prefix): the SASS architectures and PTX versions each carries. Decide "
        "per GPU generation: runs natively, runs by PTX JIT (and the driver that needs), or "
        "fails, naming the library and the missing architecture; and what the CUDA runtime "
        "asks of the driver.",
        epilog="exit codes: 0 runs (with --gpu), printed, written or fresh; 1 does not run on "
        "that GPU or driver (--gpu), or a coverage file is stale (--all --check); 2 bad input; "
        "4 an archive could not be fetched. Examples: samebits check hopper --gpu H100; "
        "samebits check volta --gpu V100 --driver 535.104; samebits check --all --write")
    options.add_locks(p, what="the locks to read", default="none: name one, or pass --all or "
                      "--prefix")
    options.add_prefix(p, what="to read instead of a lock", default="default: none")
    p.add_argument("--gpu", metavar="G",
                   help="sm_90, 9.0, a model (H100, L4, V100, B200, GB300, RTX 5090) or a "
                   "generation (hopper): decide for it alone")
    p.add_argument("--driver", metavar="V",
                   help="the NVIDIA driver version to check against (535.104.05)")
    options.add_platforms(p, what="only this platform of the lock",
                          default="every platform of the lock")
    p.add_argument("--package", action="append", metavar="NAME",
                   help="read only these packages' archives (repeatable; default: every "
                   "archive that can hold native code)")
    p.add_argument("--all", action="store_true", help="every lockfile of the project")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true",
                      help="write lockfiles/<env>.coverage.json and .coverage.md beside each "
                      "lock")
    options.add_check(mode, what="a coverage file is missing or stale")
    options.add_cache_dir(p, what="the archives read (fetched into it first when missing)")
    options.add_project(p)
    p.set_defaults(func=run_check)


def _gpu(value: str | None) -> tuple[str, tuple[str, ...]] | None:
    from samebits.spec.gpus import registry

    if value is None:
        return None
    got = registry().resolve_gpu(value)
    if got is None:
        known = ", ".join(sorted(registry().models))
        raise UsageError(f'--gpu "{value}": not a compute capability (9.0, sm_90), a GPU model '
                         "or a generation",
                         hint=f"known models: {known}; generations: "
                         f"{', '.join(g for g in registry().generations if g != 'cpu')}")
    return got


def _driver(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"\d+\.\d+(\.\d+)?", value):
        raise UsageError(f'--driver "{value[:80]}": expected a driver version like 535.104.05')
    return value


def coverage_paths(lockfile: Path) -> tuple[Path, Path]:
    from samebits.lock.model import LOCK_SUFFIX

    stem = lockfile.name.removesuffix(LOCK_SUFFIX)
    return (lockfile.with_name(stem + COVERAGE_SUFFIX + ".json"),
            lockfile.with_name(stem + COVERAGE_SUFFIX + ".md"))


def run_check(args: argparse.Namespace, out: Output) -> int:
    gpu = _gpu(args.gpu)
    driver = _driver(args.driver)
    if args.prefix is not None:
        if args.locks or args.all or args.write or args.check:
            raise UsageError("--prefix checks one installed environment: give no LOCK, --all, "
                             "--write or --check with it")
        return _check_prefix(args.prefix, gpu, driver, out)
    if args.all and args.locks:
        raise UsageError("give LOCK names or --all, not both")
    if args.write and (args.package or gpu or driver or args.platform):
        raise UsageError("--write records whole locks: no --package, --gpu, --driver or "
                         "--platform with it")
    from samebits_app.cmd_render import locked_env

    project = options.project_of(args)
    names = args.locks or ([i for i in project.lock_ids() if "/" not in i]
                           if args.all else [])
    if not names:
        raise UsageError("name an environment or a lockfile, or pass --all or --prefix",
                         hint="samebits check hopper --gpu H100")
    envs = [locked_env(n, project) for n in names]
    if args.check:
        return _check_fresh(envs, out)
    return _check_locks(envs, args, gpu, driver, out)


def _check_prefix(prefix: Path, gpu: tuple[str, tuple[str, ...]] | None, driver: str | None,
                  out: Output) -> int:
    from verify.env.manifest import prefix_kind
    from verify.kernels.codescan import scan_prefix
    from verify.kernels.report import gpu_doc, gpu_text, platform_doc, platform_text

    prefix = prefix.absolute()
    prefix_kind(prefix)
    out.info(f"reading the device code of {prefix}")
    cov = scan_prefix(prefix)
    if gpu is not None:
        doc = gpu_doc(cov, gpu[0], gpu[1], driver=driver)
        out.emit({"prefix": str(prefix), **doc}, gpu_text(doc, str(prefix)))
        return EXIT_OK if doc["runs"] else EXIT_DIFFERENT
    doc = platform_doc(cov, driver=driver)
    out.emit({"prefix": str(prefix), **doc}, platform_text(doc, str(prefix)))
    return EXIT_OK


def _check_locks(envs: list, args: argparse.Namespace, gpu: Any, driver: str | None,
                 out: Output) -> int:
    from samebits_app.lockcoverage import lock_coverage
    from samebits_app.sourceflags import own_sources
    from verify.kernels.report import (
        gpu_doc,
        gpu_text,
        lock_doc,
        markdown,
        platform_doc,
        platform_text,
    )

    cache = options.cache_of(args)
    project = options.project_of(args)
    payload: dict[str, Any] = {}
    text: list[str] = []
    runs = True
    for env in envs:
        if args.write and coverage_state(env) == "fresh":
            # the lock's sha256 is the one its coverage was read for: nothing to download
            payload[env.name] = {"lockfile": str(env.path), "lock_sha256": env.digest,
                                 "unchanged": True}
            text.append(f"{coverage_paths(env.path)[0]}: unchanged (lock sha256 "
                        f"{env.digest[:12]})")
            continue
        platforms = [env.check_platform(p) for p in args.platform or (
            env.platforms if args.write else _default_platforms(env))]
        table = None if args.write or args.package else committed_coverage(env)
        covs = {}
        for plat in platforms:
            if table is not None and plat in table:
                covs[plat] = table[plat]
                continue
            covs[plat], _ = lock_coverage(env, plat, cache, packages=args.package,
                                          progress=out.info,
                                          sources=own_sources(project, env))
        if table is not None and all(p in table for p in platforms):
            text.append(f"{coverage_paths(env.path)[0]}: the coverage read for this lock "
                        f"(sha256 {env.digest[:12]}), nothing downloaded")
        entry: dict[str, Any] = {"lockfile": str(env.path), "lock_sha256": env.digest,
                                 "platforms": {}}
        for plat, cov in covs.items():
            where = f"{env.origin} {plat}" + (f" ({', '.join(args.package)} only)"
                                              if args.package else "")
            if gpu is not None:
                doc = gpu_doc(cov, gpu[0], gpu[1], driver=driver)
                runs = runs and doc["runs"]
                text.append(gpu_text(doc, where))
            else:
                doc = platform_doc(cov, driver=driver)
                text.append(platform_text(doc, where))
            entry["platforms"][plat] = doc
        if args.write:
            written = lock_doc(environment=env.name, lockfile=env.path.name,
                               lock_sha256=env.digest, platforms=covs)
            jpath, mpath = coverage_paths(env.path)
            atomic_write(jpath, canonical_json(written))
            atomic_write(mpath, markdown(written))
            entry["written"] = [str(jpath), str(mpath)]
            text.append(f"wrote {jpath} and {mpath}")
        payload[env.name] = entry
    result: dict[str, Any] = {"environments": payload}
    if gpu is not None:
        result["runs"] = runs
    out.emit(result, "\n".join(text))
    return EXIT_OK if runs else EXIT_DIFFERENT


def _default_platforms(env: Any) -> list[str]:
    """This machine's platform where the lock has it, else every platform of the lock."""
    from samebits.host import host_platform

    here = host_platform()
    return [here] if here in env.platforms else list(env.platforms)


def committed_coverage(env: Any) -> dict[str, Any] | None:
    """platform -> ``Coverage`` from the table beside ``env``'s lock when it is fresh (this
    lock's sha256, this reader's format: ``coverage_state``); None otherwise, and the archives
    are read instead."""
    from verify.kernels.coverage import Coverage, LibraryCode
    from verify.kernels.cudastack import CudaStack

    if coverage_state(env) != "fresh":
        return None
    doc = read_json(coverage_paths(env.path)[0], what="coverage file")
    try:
        return {plat: Coverage(libraries=tuple(LibraryCode.from_dict(lib)
                                               for lib in d["libraries"]),
                               stack=CudaStack.from_dict(d["stack"]),
                               elf_files=int(d.get("elf_files", 0)))
                for plat, d in doc["platforms"].items()}
    except (KeyError, TypeError, ValueError):
        return None


def coverage_state(env: Any) -> str:
    """"fresh" when the coverage files beside ``env``'s lock are this reader's, for this lock's
    sha256 and platforms; else "missing" or "stale"."""
    from verify.kernels.report import DOC_FORMAT, DOC_KIND

    jpath, mpath = coverage_paths(env.path)
    if not jpath.exists() or not mpath.exists():
        return "missing"
    doc = read_json(jpath, what="coverage file")
    fresh = (isinstance(doc, dict) and doc.get("kind") == DOC_KIND
             and doc.get("format") == DOC_FORMAT and doc.get("lock_sha256") == env.digest
             and sorted(doc.get("platforms", {})) == sorted(env.platforms)
             and _markdown_of(doc) == mpath.read_text())
    return "fresh" if fresh else "stale"


def _markdown_of(doc: Any) -> str:
    from verify.kernels.report import markdown as render

    return str(render(doc))


def _check_fresh(envs: list, out: Output) -> int:
    states: dict[str, str] = {}
    for env in envs:
        states[str(coverage_paths(env.path)[0])] = coverage_state(env)
    bad = [p for p, s in states.items() if s != "fresh"]
    lines = [f"{p}: {s}" for p, s in states.items()]
    if bad:
        lines.append(f"{len(bad)} coverage files are out of date: run `samebits check --all "
                     "--write`")
    out.emit({"files": states, "fresh": not bad}, "\n".join(lines))
    return EXIT_DIFFERENT if bad else EXIT_OK

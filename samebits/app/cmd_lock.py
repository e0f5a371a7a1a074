"""``samebits lock``: solve specs into lockfiles, ``--check`` their freshness, ``diff`` two."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from samebits._io import atomic_write
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, LockfileError, SamebitsError, clip, plural
from samebits.lockdiff import diff_locks, format_diff
from samebits.lockfile import parse_lock
from samebits.locking import DEFAULT_TIMEOUT, lock_one
from samebits.project import Project
from samebits.specio import read_spec
from samebits.ui import Output

MAX_CONCURRENT = 6


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "lock", parents=parents,
        help="solve environments/*.toml into lockfiles/*.conda-lock.yml",
        description="Solve each spec (conda part with py-rattler, PyPI part with uv) into "
        "lockfiles/<env>.conda-lock.yml, written atomically and only once every platform "
        "solved. With no names, every top-level spec that is not abstract. "
        "`samebits lock diff OLD NEW` compares two lockfiles.",
        epilog="exit codes: 0 done or fresh, 1 stale (--check), 2 bad spec or usage, "
        "3 unsatisfiable, 4 channel or index unreachable, 5 uv failed",
    )
    p.add_argument("names", nargs="*", metavar="ENV",
                   help="environment ids (e.g. hopper, conda-forge/hopper) or spec paths")
    p.add_argument("--check", action="store_true",
                   help="compare each lock's recorded spec digest with its spec; no solving")
    _project_args(p)
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help="seconds a channel or index may take to answer "
                   f"(default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--offline", action="store_true",
                   help="answer from the uv and rattler caches only; no network")
    p.set_defaults(func=run_lock)

    d = sub.add_parser(
        "lock-diff", parents=parents, help="compare two lockfiles (also spelled `lock diff`)",
        description="List added, removed and changed packages per platform between two lockfiles.",
        epilog="exit codes: 0 identical, 1 different, 2 bad input",
        prog="samebits lock diff",
    )
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    d.set_defaults(func=run_diff)


def _project_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path("."), help="project root (default: .)")
    p.add_argument("--environments", type=Path, help="spec folder (default: ROOT/environments)")
    p.add_argument("--lockfiles", type=Path, help="lockfile folder (default: ROOT/lockfiles)")


def project_from(args: argparse.Namespace) -> Project:
    return Project.at(args.root, environments=args.environments, lockfiles=args.lockfiles)


def run_lock(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    ids = project.resolve(args.names)
    if args.check:
        return _check(project, ids, out)
    return asyncio.run(_lock_all(project, ids, out, timeout=args.timeout, offline=args.offline))


async def _lock_all(project: Project, ids: list[str], out: Output, *, timeout: float,
                    offline: bool) -> int:
    sem = asyncio.Semaphore(MAX_CONCURRENT)
    results: dict[str, dict[str, Any]] = {}
    errors: list[tuple[str, SamebitsError]] = []

    what = f"solving {plural(len(ids), 'environment')}: {', '.join(ids)}"
    with out.progress(clip(what, 100), total=len(ids)) as advance:
        async def one(env_id: str) -> None:
            async with sem:
                try:
                    spec = read_spec(project.spec_path(env_id), root=project.root)
                    res = await lock_one(spec, root=project.root, path=project.lock_path(env_id),
                                         timeout=timeout, offline=offline)
                except SamebitsError as exc:
                    errors.append((env_id, exc))
                    advance(description=f"{env_id}: failed")
                    return
                old = res.path.read_text() if res.path.exists() else None
                state = "unchanged" if old == res.text else ("updated" if old else "created")
                if state != "unchanged":
                    atomic_write(res.path, res.text)
                counts = {t.platform: len(res.lock.packages_for(t.platform))
                          for t in spec.platforms}
                results[env_id] = {"lockfile": str(res.path), "state": state,
                                   "packages": counts, "spec_digest": spec.digest}
                advance(description=f"{env_id}: {state}")

        await asyncio.gather(*(one(i) for i in ids))

    lines = []
    for env_id in ids:
        if env_id in results:
            r = results[env_id]
            counts = ", ".join(f"{k}: {plural(v, 'package')}" for k, v in r["packages"].items())
            lines.append(f"{env_id}: {r['state']} {r['lockfile']} ({counts})")
    if not out.json:  # in --json mode the errors are part of the one document
        for env_id, exc in sorted(errors, key=lambda e: e[0]):
            out.error(_prefixed(env_id, exc))
    payload = {"locked": dict(sorted(results.items())),
               "errors": {i: e.to_json() for i, e in sorted(errors, key=lambda e: e[0])}}
    out.emit(payload, "\n".join(lines))
    if errors:
        return max(e.exit_code for _, e in errors)
    return EXIT_OK


def _prefixed(env_id: str, exc: SamebitsError) -> SamebitsError:
    if exc.message.startswith(("environments/", env_id)):
        return exc
    clone = SamebitsError(f"{env_id}: {exc.message}", hint=exc.hint)
    clone.exit_code = exc.exit_code
    return clone


def _check(project: Project, ids: list[str], out: Output) -> int:
    report: dict[str, dict[str, Any]] = {}
    for env_id in ids:
        spec = read_spec(project.spec_path(env_id), root=project.root)
        path = project.lock_path(env_id)
        entry: dict[str, Any] = {"lockfile": str(path), "spec_digest": spec.digest}
        if not path.exists():
            entry.update(state="missing")
        else:
            try:
                recorded = parse_lock(path).spec_digest
            except LockfileError as exc:
                entry.update(state="unreadable", reason=exc.message)
            else:
                entry.update(state="fresh" if recorded == spec.digest else "stale",
                             recorded_digest=recorded)
        report[env_id] = entry
    stale = [i for i, e in report.items() if e["state"] != "fresh"]
    lines = [f"{i}: {e['state']}" + (f" ({e['reason']})" if "reason" in e else "")
             for i, e in report.items()]
    if stale:
        lines.append(f"{len(stale)} of {plural(len(report), 'lockfile')} "
                     f"{'needs' if len(stale) == 1 else 'need'} `nox -s lock -- "
                     f"{' '.join(stale)}`")
    out.emit({"fresh": not stale, "environments": report}, "\n".join(lines))
    return EXIT_DIFFERENT if stale else EXIT_OK


def run_diff(args: argparse.Namespace, out: Output) -> int:
    doc = diff_locks(parse_lock(args.old), parse_lock(args.new))
    doc = {"old": str(args.old), "new": str(args.new), **doc}
    out.emit(doc, format_diff(doc))
    return EXIT_OK if doc["identical"] else EXIT_DIFFERENT

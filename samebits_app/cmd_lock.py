"""``samebits lock``: solve specs into lockfiles, ``--check`` their freshness, ``diff`` two."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from typing import Any

from samebits._io import atomic_write
from samebits.cli import options
from samebits.errors import (
    EXIT_DIFFERENT,
    EXIT_OK,
    LockfileError,
    SamebitsError,
    UsageError,
    clip,
    plural,
)
from samebits.lock.diff import diff_locks, format_diff
from samebits.lock.make import DEFAULT_TIMEOUT, lock_one
from samebits.lock.model import parse_lock
from samebits.lock.read import load_lock
from samebits.project import Project
from samebits.solve.indexproxy import IndexProxy
from samebits.spec.read import read_spec
from samebits.ui import Output

MAX_CONCURRENT = 6


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    opts = argparse.ArgumentParser(add_help=False)
    options.add_check(opts, what="a lock's recorded spec digest is not its spec's (no "
                      "solving)")
    options.add_project(opts, environments=True)
    opts.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                      help="seconds a channel or index may take to answer "
                      f"(default {DEFAULT_TIMEOUT:g})")
    opts.add_argument("--offline", action="store_true",
                      help="answer from the caches only; no network")
    opts.add_argument("--refresh", action="store_true",
                      help="fetch every PyPI answer again instead of reading the final cache "
                      "(to see files yanked or deleted since they were cached)")
    options.add_cache_dir(opts, what="PyPI answers at a past exclude-newer, and content "
                          "hashes")
    p = sub.add_parser(
        "lock", parents=[*parents, opts],
        help="solve environments/*.toml into lockfiles/*.conda-lock.yml; diff two locks",
        usage="%(prog)s [options] [ENV ...]\n       %(prog)s diff OLD NEW [options]",
        description="Solve each spec (conda part with py-rattler, PyPI part with uv) into "
        "lockfiles/<env>.conda-lock.yml, written atomically and only once every platform "
        "solved. With no names, every top-level spec that is not abstract. "
        "When exclude-newer is at least a day in the past, the PyPI index's answers as they "
        "stood then are final: they are kept in the cache and read from it first, and the "
        "index is asked only for what is missing. "
        "`samebits lock diff OLD NEW` compares two locks.",
        epilog="exit codes: 0 done or fresh, 1 stale (--check), 2 bad spec or usage, "
        "3 unsatisfiable, 4 channel or index unreachable, 5 uv failed",
    )
    commands = options.add_commands(
        p, dest="lock_command", metavar="ENV ... | diff", parents=[*parents, opts],
        help="ENV: environment ids (hopper, conda-forge/hopper) or spec paths to solve "
        "(default: every top-level spec that is not abstract); or a subcommand:")
    commands.words.add_argument("names", nargs="*", metavar="ENV",
                                help="environment ids (e.g. hopper, conda-forge/hopper) or "
                                "spec paths")
    p.set_defaults(func=run_lock, names=[])

    d = commands.add_parser(
        "diff", parents=parents, help="compare two locks, in any formats samebits reads",
        description=DIFF_DESCRIPTION, epilog=DIFF_EPILOG)
    _diff_args(d)
    d.set_defaults(func=run_diff)
    # the old spelling, hidden from `samebits --help` (no help=): one release more
    old = sub.add_parser("lock-diff", parents=parents, prog="samebits lock diff",
                         description=DIFF_DESCRIPTION, epilog=DIFF_EPILOG)
    _diff_args(old)
    old.set_defaults(func=options.deprecated_command("samebits lock-diff", "samebits lock diff",
                                                     run_diff))


DIFF_DESCRIPTION = (
    "List added, removed and changed packages per platform between two locks, each in any "
    "format samebits reads: conda-lock, pixi.lock (v6, v7), uv.lock, pylock.toml, "
    "requirements.txt with --hash, a conda explicit file (e.g. a `samebits freeze` lock against "
    "the pixi.lock it came from).")
DIFF_EPILOG = ("exit codes: 0 identical, 1 different, 2 bad input, 4 an index did not answer "
               "(requirements.txt)")


def _diff_args(d: argparse.ArgumentParser) -> None:
    options.add_lock_pair(d)
    options.add_platforms(d, what="compare only this platform of the locks (also the "
                          "platforms a uv.lock, pylock.toml or requirements.txt is read for)",
                          default="every platform; linux-64 and linux-aarch64 for those")
    options.add_read_flags(d)
    options.add_project(d)


def run_lock(args: argparse.Namespace, out: Output) -> int:
    project = options.project_of(args)
    ids = project.resolve(args.names)
    if args.check:
        return _check(project, ids, out)
    if args.offline and args.refresh:
        raise UsageError("--offline and --refresh contradict each other",
                         hint="--refresh asks the index again; --offline never asks it")
    with IndexProxy(root=options.cache_of(args), timeout=args.timeout,
                    now=dt.datetime.now(dt.timezone.utc), offline=args.offline,
                    refresh=args.refresh) as proxy:
        return asyncio.run(_lock_all(project, ids, out, timeout=args.timeout,
                                     offline=args.offline, proxy=proxy))


async def _lock_all(project: Project, ids: list[str], out: Output, *, timeout: float,
                    offline: bool, proxy: IndexProxy) -> int:
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
                                         timeout=timeout, offline=offline, proxy=proxy,
                                         cache=proxy.root)
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
    routes = proxy.routes()
    if routes:
        fetched = sum(r.fetched for r in routes)
        out.info(f"PyPI at a final exclude-newer: {fetched} answers fetched from the index, "
                 f"the rest read from the cache in {proxy.root}")
    payload = {"locked": dict(sorted(results.items())),
               "errors": {i: e.to_json() for i, e in sorted(errors, key=lambda e: e[0])},
               "pypi_cache": {"root": str(proxy.root),
                              "fetched": sum(r.fetched for r in routes)}}
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
                     f"{'needs' if len(stale) == 1 else 'need'} `samebits lock "
                     f"{' '.join(stale)}`")
    out.emit({"fresh": not stale, "environments": report}, "\n".join(lines))
    return EXIT_DIFFERENT if stale else EXIT_OK


def run_diff(args: argparse.Namespace, out: Output) -> int:
    platforms = tuple(args.platform or ())
    read = options.read_options(args, platforms=platforms)
    project = options.project_of(args)
    old_path, new_path = (options.lock_file(args.old, project),
                          options.lock_file(args.new, project))
    old, new = load_lock(old_path, read), load_lock(new_path, read)
    for loaded in (old, new):
        for line in loaded.conversion_lines():
            out.info(line)
    doc = diff_locks(old.lock, new.lock, platforms=platforms)
    doc = {"old": str(old_path), "new": str(new_path), **doc,
           "formats": {"old": old.format, "new": new.format},
           "conversions": {k: v.conversion_json() for k, v in (("old", old), ("new", new))
                           if v.conversion is not None}}
    out.emit(doc, format_diff(doc))
    return EXIT_OK if doc["identical"] else EXIT_DIFFERENT

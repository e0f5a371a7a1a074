"""``samebits install``: a lock's platform into a prefix, then ``verify env`` of the result.

    samebits install LOCK --target DIR [--platform P] [--python PY] [--link-mode M]
                     [--no-bytecode] [--cache-dir C] [--no-cache-interpreter] [--replace]
                     [--from-nix [--store URI]]
                     [--find-links DIR ...] [--mirror FROM=TO ...]
                     [--lock-env NAME] [--lock-python X.Y]
    samebits install --from-bundle FILE --target DIR [...]

The work is ``samebits.install`` (fetch, unpack, place, compile); this module finds the lock and
the interpreter (a lock of another format is read with ``samebits.lock.read``; the archives
may come from a bundle or the Nix store into the cache first, or from ``--find-links`` folders
and ``--mirror`` URLs by their hash: ``samebits_app.sourceflags``), stages the prefix beside its
target and renames it into place, runs the verifier in this process
(``verify.env.check.check_env``, exactly what ``samebits verify env L --prefix DIR
--platform P`` runs) and returns its exit code (the report's ``ok``): one verdict. Files that
verify finds changed evict the cache entries they were placed from.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from samebits.cli import options
from samebits.errors import InputError, UsageError
from samebits.gcpause import paused_gc
from samebits.install.place import LINK_MODES
from samebits.install.prefix import silent
from samebits.lock.read import ReadOptions
from samebits.ui import Output
from samebits_app.cmd_render import _install_args, locked_env, show_conversion
from samebits_app.sourceflags import sources_for


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    i = sub.add_parser(
        "install", parents=parents, help="install a lock's platform into a prefix",
        description="Install exactly the locked archives (hash-checked; unpacked once into "
        "the cache, then placed by reflink or copy; nothing resolved) into --target, compile "
        "its bytecode with the prefix's own interpreter, then run `verify env` on it: the "
        "verdict and exit code are verify env's. A locked sdist is built into the wheel the "
        "lock recorded, from its locked build environment (or taken from the cache), and "
        "refused if the bytes differ; a package install cannot place is named before "
        "anything is downloaded.",
        epilog="exit codes: 0 installed and verify env identical, 1 installed but verify env "
        "found drift or an unresolved library, 2 bad input (hash mismatch, unsafe archive, no "
        "interpreter, a package install cannot place, an sdist that builds into other bytes "
        "than the lock recorded), 4 unreachable, 5 a tool failed (an sdist's build). See "
        "README \"The install cache\".")
    options.add_lock(i, what="the lock to install (not with --from-bundle)", optional=True)
    i.add_argument("--from-bundle", type=Path, metavar="FILE",
                   help="install offline from a `samebits bundle` tar: its lock and archives, "
                   "every hash checked, unpacked into the cache first")
    options.add_target(i, what="where to install the environment (required)")
    options.deprecated(i, "--prefix", dest="target", type=Path,
                       instead="pass --target DIR (the folder to create)")
    options.add_platform(i, default="this machine's")
    options.add_python(i, default="the first pythonX.Y that runs, from PATH, pyenv, "
                       "/usr/local/bin, /usr/bin, `uv python find`")
    i.add_argument("--link-mode", choices=LINK_MODES, default="auto",
                   help="how files go from the cache into the prefix: auto (the default: "
                   "reflink where the filesystem clones, else a hardlink to the sealed, "
                   "read-only cache file, else a copy), reflink, hardlink, or copy (the "
                   "prefix owns every byte)")
    i.add_argument("--no-bytecode", action="store_true",
                   help="do not compile bytecode (verify env then checks no pycs)")
    i.add_argument("--no-cache-interpreter", action="store_true",
                   help="keep what the verify learns of the Python interpreter (its stdlib "
                   "files by stat, every pyc's verdict) in --cache-dir only; by default it is "
                   "kept in the user's samebits cache, keyed by the interpreter's files and "
                   "identity, so a new --cache-dir does not check the same interpreter's "
                   "stdlib again (this flag shows what a first machine pays)")
    i.add_argument("--from-nix", action="store_true",
                   help="take every archive from the Nix store (realised by `nix-build "
                   "containers/ENV -A all`), hash-checked, and install offline")
    options.add_store(i, what="with --from-nix: ")
    options.add_sources(i)
    _install_args(i)
    options.add_project(i)
    i.set_defaults(func=run_install)


def _phases(out: Output) -> Any:
    """Install's progress: rich rows on a terminal (``Output.progress``), one line per phase
    on stderr when piped, nothing with --quiet or --json."""
    if out.json or out.quiet:
        return silent
    if sys.stderr.isatty():
        return out.progress

    @contextlib.contextmanager
    def lines(description: str, total: float | None) -> Any:
        out.info(f"{description} ...")
        yield lambda n=1, description=None: None

    return lines


def _fill_cache_from_nix(env: Any, platform: str, cache: Path, store: str | None) -> None:
    """Every locked archive of ``platform`` from the Nix store into the install cache, each
    one hash-checked: the install that follows needs no network."""
    from samebits.render.nixstore import NixStore, fill_cache

    problems = fill_cache([*env.conda(platform), *env.pip(platform)], cache, NixStore(store))
    if problems:
        raise InputError(f"{len(problems)} locked archive"
                         + ("" if len(problems) == 1 else "s")
                         + " not in the Nix store as locked:\n  " + "\n  ".join(problems),
                         hint=f"realise them: nix-build containers/{env.name} -A all "
                         f"--argstr platform {platform}")


def _facts(args: argparse.Namespace) -> Path:
    """Where what is learnt of Python is kept: the user's cache folder, or with
    --no-cache-interpreter the install's own cache (a first machine's)."""
    from samebits.host import cache_dir

    return options.cache_of(args) if args.no_cache_interpreter else cache_dir()


def _python_version(interpreter: str | None, facts: Path) -> str | None:
    """``X.Y.Z`` of ``--python``, the Python a uv.lock/pylock/requirements lock is read for:
    what ``probe_known`` remembers of that binary (proved by its stat; nothing runs), else
    its answer now."""
    if not interpreter:
        return None
    from samebits.install.interpreter import probe_known

    known = probe_known(interpreter, facts)
    if isinstance(known, str):  # why it does not run here
        raise UsageError(f'--python "{interpreter}": {known}')
    return known[0].version


def _locked(args: argparse.Namespace, out: Output, platform: str) -> tuple[Any, ReadOptions]:
    """The lock to install (from ENV, or the bundle's own) and how it was read."""
    project = options.project_of(args)
    if args.from_bundle is not None and args.from_nix:
        raise UsageError("--from-bundle and --from-nix: choose one source of archives")
    if args.from_bundle is not None:
        from samebits_app.cmd_bundle import unpack_for_install

        env = unpack_for_install(args.from_bundle, args.lock, project=project, out=out,
                                 platform=platform, cache=options.cache_of(args))
        return env, options.read_options(args, platforms=(platform,), python=None)
    if args.lock is None:
        raise UsageError("install needs LOCK (an environment id or a lockfile) or --from-bundle")
    read = options.read_options(args, platforms=(platform,),
                                python=_python_version(args.python, _facts(args)))
    return locked_env(args.lock, project, read), read


VERIFY_KEYS = ("format", "kind", "identical", "ok", "digests", "summary", "findings",
               "linkage", "proof", "notes")
REPAIR_KINDS = ("modified", "missing", "type", "exec", "symlink", "bytecode")


@paused_gc()  # to the end: the collector would walk the verify's report (gcpause)
def run_install(args: argparse.Namespace, out: Output) -> int:
    from samebits.host import host_platform
    from samebits.install import find_interpreter, install_prefix
    from samebits.install.cache import evict
    from samebits.install.prefix import check_something_to_place, resealed
    from samebits.install.resealing import Resealer
    from samebits.staging import staged_dir
    from verify.env.check import check_env
    from verify.env.envreport import report_json, report_text
    from verify.env.pycheck import Handed

    if args.store and not args.from_nix:
        raise UsageError("--store goes with --from-nix")
    options.need(args.target, "install needs --target DIR: the folder to install into",
                 hint="samebits install LOCK --target DIR")
    platform = args.platform or host_platform()
    env, read_as = _locked(args, out, platform)
    conversion = show_conversion(out, env)
    platform = env.check_platform(platform)
    check_something_to_place(env, platform)  # before any prefix is made
    progress = _phases(out)
    cache = options.cache_of(args)
    facts = _facts(args)
    python = None
    if env.python and env.pip(platform) and not any(p.name == "python"
                                                   for p in env.conda(platform)):
        with progress(f"finding a Python {env.python} interpreter", None):
            python = find_interpreter(env.python, args.python, facts=facts).executable
    prefix = Path(args.target).absolute()
    sources = sources_for(args, options.project_of(args), env.name)
    if args.from_nix:
        with progress("archives from the Nix store", None):
            _fill_cache_from_nix(env, platform, cache, args.store)
    # exactly what `verify env L --platform P [--lock-env E --lock-python X]` reads
    read = (ReadOptions(environment=read_as.environment, python=read_as.python)
            if env.conversion is not None else None)
    try:
        with staged_dir(prefix, replace=args.replace) as stage:
            report = install_prefix(env, platform, stage, final=str(prefix), cache=cache,
                                    interpreter=python, link_mode=args.link_mode,
                                    bytecode=not args.no_bytecode, progress=progress,
                                    sources=sources, build_python=args.python,
                                    reseal=False, interpreter_cache=facts)
    except OSError as exc:  # a full disk, a read-only cache: said, not a traceback
        where = exc.filename or prefix
        raise InputError(f"{where}: {exc.strerror or exc}",
                         hint=f"nothing was installed at {prefix}") from None
    with progress(f"verify env {prefix}", None):
        bc = report.bytecode
        handed = Handed(bc.identity, bc.verdicts) if bc is not None and bc.verdicts else None
        # what was linked: proven by a stat of each and re-sealed from it, on the other core
        resealer = Resealer(report.to_reseal, report.linked, str(prefix))
        verdict = check_env(prefix, lockfile=env.path, platform=platform, cache=cache,
                            progress=progress, read=read, trust_seal=report.sealed_entries,
                            loaded=env, handed=handed, interpreter_cache=facts,
                            placed=resealer)
        report = resealed(report, *resealer.finish())
    broken = sorted(report.entries_of([f.path for f in verdict.findings
                                       if f.kind in REPAIR_KINDS and f.path]))
    for where in broken:  # a placed file differs from its record: its cache entry is bad
        folder, _, key = where.rpartition("/")
        evict(cache / folder, key)
    doc = report_json(verdict, only=VERIFY_KEYS)
    payload = {**report.to_json(), "lockfile": str(env.path), "identical": verdict.identical,
               "ok": verdict.ok, "exit_code": verdict.exit_code,
               "evicted": broken, "verify": doc}
    if conversion is not None:
        payload["conversion"] = conversion
    lines = [f"{prefix}: {env.name} ({platform}) installed: {len(report.conda)} conda, "
             f"{len(report.pip)} PyPI packages"]
    placed = ", ".join(f"{n:,} by {how}" for how, n in report.placed.items()) or "none"
    reused = len(report.conda) + len(report.pip) - len(report.unpacked)
    lines.append(f"  files      {placed} (link mode {report.link_mode}); "
                 f"{reused} of {reused + len(report.unpacked)} packages from the cache")
    bc = report.bytecode
    if bc is None:
        lines.append("  bytecode   not compiled (--no-bytecode)")
    elif bc.skipped:
        lines.append(f"  bytecode   none compiled: {bc.skipped}")
    else:
        lines.append(f"  bytecode   {bc.compiled + bc.reused:,} pycs by {bc.interpreter} "
                     f"(Python {bc.version}): {bc.compiled:,} compiled, {bc.reused:,} from the "
                     f"cache" + (f", {len(bc.failed)} sources do not compile"
                                 if bc.failed else ""))
        if verdict.bytecode is not None and verdict.bytecode.handed:
            lines.append(f"             verify: {verdict.bytecode.handed:,} pycs proven by this "
                         "install's compile (the checker's own comparison, made as each was "
                         "written), not compiled again")
    lines.extend(report.lines())
    lines.extend(f"  note: {n}" for n in report.notes)
    if broken:
        lines.append(f"  cache: {len(broken)} entries had changed since they were unpacked and "
                     "were removed; install again to unpack them afresh")
    lines.append(report_text(verdict, doc["summary"]))
    out.emit(payload, "\n".join(lines))
    return verdict.exit_code

"""``samebits bundle``: a lock and every archive it installs in one reproducible tar.

    samebits bundle LOCK [--platform P ...] [--out FILE] [--cache-dir DIR]
    samebits bundle check FILE
    samebits install --from-bundle FILE --target DIR      (``cmd_install``; ``bundleread``)

LOCK is an environment id or a lockfile path (as for ``samebits install``); the platforms are
every platform of the lock unless --platform names some. Archives missing from the cache are
fetched first (hash-checked); then the tar is streamed in one pass, every archive hashed on
the way (``samebits.bundle.make``). ``bundle check`` reads it back once
(``samebits.bundle.read``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError, plural
from samebits.lock.read import LockedEnv
from samebits.project import Project
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    opts = argparse.ArgumentParser(add_help=False)
    options.add_platforms(opts, what="a platform of the lock to bundle",
                          default="every platform of the lock")
    options.add_out_file(opts, what="the tar to write",
                         default="default: ROOT/build/<env>.bundle.tar")
    options.add_cache_dir(opts, what="the archives `samebits install` uses; what it lacks is "
                          "fetched")
    opts.add_argument("--replace", action="store_true", help="overwrite an existing --out")
    options.add_sources(opts)
    options.add_project(opts)
    options.deprecated(opts, "--check", dest="check_file", type=Path, metavar="FILE",
                       instead="write `samebits bundle check FILE`")
    b = sub.add_parser(
        "bundle", parents=[*parents, opts],
        help="a lock and every archive it installs in one reproducible tar; check one",
        usage="%(prog)s [options] LOCK\n       %(prog)s check FILE",
        description="Write one uncompressed tar holding the lockfile, every archive the lock "
        "installs on the platforms given (conda and PyPI, by hash), the conda files rendered "
        "from the lock, the project's containers/<env>/ files (Containerfile, Nix files), "
        "SHA256SUMS and a README on installing it without network. The same lock, platforms "
        "and containers/ files give the same bytes on any machine, in any folder. "
        "`samebits bundle check FILE` reads one back.",
        epilog="exit codes: 0 written; 2 bad input (an archive in the cache that is not the "
        "lock's, stale containers/ files); 4 an archive could not be fetched. Install one "
        "offline with `samebits install --from-bundle FILE --target DIR`.")
    commands = options.add_commands(
        b, dest="bundle_command", metavar="LOCK | check", parents=[*parents, opts],
        help="LOCK: the lock to bundle. " + options.LOCK_RULE + "; or a subcommand:")
    options.add_lock(commands.words, what="the lock to bundle")
    b.set_defaults(func=run_bundle, lock=None)
    c = commands.add_parser(
        "check", parents=parents, help="check a bundle: every hash, the lock's coverage",
        description="Read a bundle back once: every archive's and file's hash against "
        "SHA256SUMS and the lock, and whether it holds every archive the lock installs on "
        "its platforms.",
        epilog="exit codes: 0 every hash checks and the lock is covered; 1 problems (each "
        "named); 2 unreadable bundle")
    c.add_argument("file", type=Path, metavar="FILE", help="the bundle tar")
    c.set_defaults(func=run_check_command)


def run_bundle(args: argparse.Namespace, out: Output) -> int:
    if args.check_file is not None:  # the old `bundle --check FILE`
        if args.lock or args.platform or args.out:
            raise UsageError("--check FILE reads a bundle: pass no LOCK, --platform or --out")
        return run_check(args.check_file, out)
    if not args.lock:
        raise UsageError("bundle needs LOCK (or `samebits bundle check FILE`)",
                         hint="samebits bundle cpu --platform linux-64 --out paper.bundle.tar")
    return run_write(args, out)


def run_check_command(args: argparse.Namespace, out: Output) -> int:
    if args.platform or args.out:
        raise UsageError("bundle check FILE reads a bundle: pass no --platform or --out")
    return run_check(args.file, out)


def run_write(args: argparse.Namespace, out: Output) -> int:
    from samebits.bundle.make import write_bundle
    from samebits.bundle.prep import prepare
    from samebits_app.cmd_render import locked_env
    from samebits_app.sourceflags import own_sources, sources_for

    project = options.project_of(args)
    env = locked_env(args.lock, project)
    platforms = [env.check_platform(p) for p in dict.fromkeys(args.platform or env.platforms)]
    dest = args.out or project.root / "build" / f"{env.slug}.bundle.tar"
    if dest.exists() and not args.replace:
        raise UsageError(f"{dest}: already exists", hint="pass --replace to overwrite it")
    with out.progress("fetching what the cache lacks", total=None):
        bundle = prepare(env, platforms, cache=options.cache_of(args),
                         containers=project.root / "containers" / env.name, note=out.info,
                         sources=sources_for(args, project, env.name).merged(
                             own_sources(project, env)))
    total = bundle.archive_bytes
    out.info(f"bundle: {plural(len(bundle.archives), 'archive')}, {total:,} bytes -> {dest}")
    with out.progress(f"bundle {env.name}", total=total) as advance:
        result = write_bundle(bundle, dest, advance=lambda n: advance(n))
    payload: dict[str, Any] = {
        "bundle": str(dest), "sha256": result.sha256, "size": result.size,
        "environment": env.name, "platforms": platforms,
        "lockfile": {"path": str(env.path), "sha256": env.digest},
        "archives": result.archives, "archive_bytes": result.archive_bytes,
        "files": sorted(bundle.files), "root": bundle.root}
    out.emit(payload, "\n".join([
        f"{dest}: {env.name} for {', '.join(platforms)}: {plural(result.archives, 'archive')} "
        f"({result.archive_bytes:,} bytes), the lock, {len(bundle.files) - 1} other files",
        f"sha256 {result.sha256} ({result.size:,} bytes)",
        f"check: samebits bundle check {dest}",
        f"install offline: samebits install --from-bundle {dest} --target DIR"]))
    return EXIT_OK


def run_check(path: Path, out: Output) -> int:
    from samebits.bundle.read import check

    size = path.stat().st_size if path.is_file() else None
    with out.progress(f"check {path.name}", total=size) as advance:
        result = check(path, advance=lambda n: advance(n))
    m = result.manifest
    lock = m["lockfile"]
    payload = {"bundle": str(path), "ok": result.ok, "problems": list(result.problems),
               "environment": m.get("environment"), "platforms": m["platforms"],
               "lockfile": lock, "files": result.files, "archives": result.archives,
               "samebits": m.get("samebits")}
    head = (f"{path}: {m.get('environment')} for {', '.join(map(str, m['platforms']))}, lock "
            f"{lock['path']} (sha256 {lock.get('sha256')}), {plural(result.archives, 'archive')}, "
            f"{result.files} files")
    if result.ok:
        text = f"{head}\nok: every hash checks and every archive the lock installs is there"
    else:
        text = "\n".join([head, f"{len(result.problems)} problem(s):",
                          *(f"  {p}" for p in result.problems)])
    out.emit(payload, text)
    return EXIT_OK if result.ok else EXIT_DIFFERENT


def unpack_for_install(bundle: Path, name: str | None, *, project: Project, out: Output,
                       platform: str, cache: Path) -> LockedEnv:
    """``install --from-bundle``: the bundle's lock, with the archives ``platform`` needs
    unpacked into ``cache`` (every hash checked), so the install that follows is offline."""
    from samebits.bundle.read import unpack
    from samebits_app.cmd_render import locked_env

    if name is not None:
        raise UsageError(f"pass LOCK ({name}) or --from-bundle, not both: the bundle holds its "
                         "lock")
    size = bundle.stat().st_size if bundle.is_file() else None
    with out.progress(f"unpack {bundle.name}", total=size) as advance:
        result = unpack(bundle, cache, platform, advance=lambda n: advance(n))
    assert result.lockfile is not None
    out.info(f"{bundle}: {plural(result.archives, 'archive')} checked; "
             f"{result.lockfile.name} and the {platform} archives unpacked into {cache}")
    return locked_env(str(result.lockfile), project)

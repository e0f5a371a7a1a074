"""``samebits bundle``: a lock and every archive it installs in one reproducible tar.

    samebits bundle ENV --platform P [--platform P2] [--out FILE] [--cache-dir DIR]
    samebits bundle --check FILE
    samebits install --from-bundle FILE --prefix ENV      (``cmd_install``; ``bundleread``)

ENV is an environment id or a lockfile path (as for ``samebits install``). Archives missing
from the cache are fetched first (hash-checked); then the tar is streamed in one pass, every
archive hashed on the way (``samebits.bundle.make``). ``--check`` reads it back once
(``samebits.bundle.read``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.project import Project
from samebits.render.source import LockedEnv
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    b = sub.add_parser(
        "bundle", parents=parents,
        help="a lock and every archive it installs in one reproducible tar (or --check one)",
        description="Write one uncompressed tar holding the lockfile, every archive the lock "
        "installs on the platforms given (conda and PyPI, by hash), the conda files rendered "
        "from the lock, the project's containers/<env>/ files (Containerfile, Nix files), "
        "SHA256SUMS and a README on installing it without network. The same lock, platforms "
        "and containers/ files give the same bytes on any machine, in any folder.",
        epilog="exit codes: 0 written (or --check: every hash checks and the lock is "
        "covered); 1 --check found problems (each named); 2 bad input (an archive in the "
        "cache that is not the lock's, stale containers/ files, unreadable bundle); "
        "4 an archive could not be fetched. Install one offline with `samebits install "
        "--from-bundle FILE --prefix ENV`.")
    b.add_argument("name", nargs="?", metavar="ENV", help="environment id or lockfile path")
    b.add_argument("--platform", action="append", metavar="P",
                   help="a platform of the lock to bundle (repeatable; at least one)")
    b.add_argument("--out", type=Path, metavar="FILE",
                   help="the tar to write (default: ROOT/build/<env>.bundle.tar)")
    b.add_argument("--check", type=Path, metavar="FILE",
                   help="check a bundle instead: every hash, the lock's coverage")
    b.add_argument("--cache-dir", type=Path,
                   help="the archive cache `samebits install` uses (default: "
                   "$XDG_CACHE_HOME/samebits); what it lacks is fetched")
    b.add_argument("--replace", action="store_true", help="overwrite an existing --out")
    b.add_argument("--root", type=Path, default=Path("."), help="project root (default: .)")
    b.add_argument("--lockfiles", type=Path, help="lockfile folder (default: ROOT/lockfiles)")
    b.set_defaults(func=run_bundle)


def run_bundle(args: argparse.Namespace, out: Output) -> int:
    if args.check is not None:
        if args.name or args.platform or args.out:
            raise UsageError("--check FILE reads a bundle: pass no ENV, --platform or --out")
        return run_check(args.check, out)
    if not args.name or not args.platform:
        raise UsageError("bundle needs ENV and --platform (or --check FILE)",
                         hint="samebits bundle cpu --platform linux-64 --out paper.bundle.tar")
    return run_write(args, out)


def run_write(args: argparse.Namespace, out: Output) -> int:
    from samebits.bundle.make import write_bundle
    from samebits.bundle.prep import prepare
    from samebits.install import default_cache_dir
    from samebits_app.cmd_render import locked_env
    from samebits_app.sourceflags import own_sources

    project = Project.at(args.root, lockfiles=args.lockfiles)
    env = locked_env(args.name, project)
    platforms = [env.check_platform(p) for p in dict.fromkeys(args.platform)]
    dest = args.out or project.root / "build" / f"{env.slug}.bundle.tar"
    if dest.exists() and not args.replace:
        raise UsageError(f"{dest}: already exists", hint="pass --replace to overwrite it")
    with out.progress("fetching what the cache lacks", total=None):
        bundle = prepare(env, platforms, cache=args.cache_dir or default_cache_dir(),
                         containers=project.root / "containers" / env.name, note=out.info,
                         sources=own_sources(project, env))
    total = bundle.archive_bytes
    out.info(f"bundle: {len(bundle.archives)} archives, {total:,} bytes -> {dest}")
    with out.progress(f"bundle {env.name}", total=total) as advance:
        result = write_bundle(bundle, dest, advance=lambda n: advance(n))
    payload: dict[str, Any] = {
        "bundle": str(dest), "sha256": result.sha256, "size": result.size,
        "environment": env.name, "platforms": platforms,
        "lockfile": {"path": str(env.path), "sha256": env.digest},
        "archives": result.archives, "archive_bytes": result.archive_bytes,
        "files": sorted(bundle.files), "root": bundle.root}
    out.emit(payload, "\n".join([
        f"{dest}: {env.name} for {', '.join(platforms)}: {result.archives} archives "
        f"({result.archive_bytes:,} bytes), the lock, {len(bundle.files) - 1} other files",
        f"sha256 {result.sha256} ({result.size:,} bytes)",
        f"check: samebits bundle --check {dest}",
        f"install offline: samebits install --from-bundle {dest} --prefix ENV"]))
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
            f"{lock['path']} (sha256 {lock.get('sha256')}), {result.archives} archives, "
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
        raise UsageError(f"pass ENV ({name}) or --from-bundle, not both: the bundle holds its "
                         "lock")
    size = bundle.stat().st_size if bundle.is_file() else None
    with out.progress(f"unpack {bundle.name}", total=size) as advance:
        result = unpack(bundle, cache, platform, advance=lambda n: advance(n))
    assert result.lockfile is not None
    out.info(f"{bundle}: {result.archives} archives checked; {result.lockfile.name} and the "
             f"{platform} archives unpacked into {cache}")
    return locked_env(str(result.lockfile), project)

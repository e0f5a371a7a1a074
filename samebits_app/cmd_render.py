"""``samebits render conda|containerfile|oci``: the edge that writes.

    samebits render conda [LOCK ...] [--platform P] [--check]     containers/<env>/<P>.explicit.txt
                                                                   containers/<env>/<P>.environment.yml
    samebits render containerfile [LOCK ...] [--base REF@sha256:D] containers/<env>/Containerfile
    samebits render nix [LOCK ...] [--platform P] [--check]       containers/<env>/*.nix
    samebits render oci LOCK [--platform P] [--base oci:DIR@sha256:D] [--out DIR] [--archive FILE]

LOCK is an environment id (``hopper``, ``conda-forge/hopper``: lockfiles/<id>.conda-lock.yml)
or a lockfile path, told apart by ``samebits.cli.options.LOCK_RULE``. The renderers are pure
(samebits.render.*); this module reads the locks, writes every file atomically and every folder
by rename, and turns the results into text or --json. ``samebits install``
(``samebits_app.cmd_install``) shares the helpers that find a lock.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path
from typing import Any

from samebits._io import atomic_write, atomic_writer
from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError, plural
from samebits.host import host_platform
from samebits.lock.model import LOCK_SUFFIX
from samebits.lock.read import LockedEnv, ReadOptions, load_lock, lock_name
from samebits.project import Project
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    r = sub.add_parser(
        "render", help="render a lock: conda files, a Containerfile, Nix, an OCI image",
        description="Render lockfiles into conda files (explicit + environment.yml), "
        "Containerfiles, or a bit-reproducible OCI image layout (no daemon).")
    rsub = r.add_subparsers(dest="render_command", metavar="KIND", required=True)

    c = rsub.add_parser(
        "conda", parents=parents, help="explicit file + environment.yml per platform",
        description="Write containers/<env>/<platform>.explicit.txt (the same lines as "
        "`conda-lock render --kind explicit`) and <platform>.environment.yml (every package "
        "pinned, a pip section with hashes).",
        epilog="exit codes: 0 written or fresh, 1 stale (--check), 2 bad input")
    _locks(c)
    options.add_platforms(c, default="every platform of the lock")
    _out_args(c)
    c.set_defaults(func=run_conda)

    f = rsub.add_parser(
        "containerfile", parents=parents, help="containers/<env>/Containerfile",
        description="Write containers/<env>/Containerfile (base pinned by digest, the lock "
        "installed by hash, `python -m verify env` last) and the files it copies.",
        epilog="exit codes: 0 written or fresh, 1 stale (--check), 2 bad input")
    _locks(f)
    f.add_argument("--base", metavar="IMAGE@sha256:D",
                   help="the base image, pinned by digest (default: a placeholder that fails to "
                   "build until a digest is given)")
    f.add_argument("--micromamba", metavar="IMAGE@sha256:D",
                   help="the micromamba image that creates a lock's conda part")
    _image_prefix(f)
    _out_args(f)
    f.set_defaults(func=run_containerfile)

    n = rsub.add_parser(
        "nix", parents=parents, help="Nix expressions: every artifact checked by Nix itself",
        description="Write containers/<env>/lock.nix (every locked artifact: url, sha256), "
        "default.nix (one fixed-output derivation per artifact with Nix's builtin fetcher, "
        "no nixpkgs needed; `nix-build containers/ENV -A all` realises the whole lock) and "
        "flake.nix (for nixpkgs users: wheels installed with autoPatchelfHook, a dev shell, "
        "an OCI image; not built here).",
        epilog="exit codes: 0 written or fresh, 1 stale (--check), 2 bad input")
    _locks(n)
    options.add_platforms(n, default="every platform of the lock")
    _out_args(n)
    n.set_defaults(func=run_nix)

    o = rsub.add_parser(
        "oci", parents=parents, help="a bit-reproducible OCI image layout",
        description="Install the lock's platform, verify it, and write an OCI image layout "
        "with the environment at --image-prefix on top of an optional base layout pinned by "
        "digest. The same lock, base and SOURCE_DATE_EPOCH give the same manifest digest "
        "anywhere.",
        epilog="exit codes: 0 written, 2 bad input (bad base, unsafe archive), 4 unreachable, "
        "5 a tool failed or the built prefix did not verify")
    options.add_lock(o, what="the lock to build an image of")
    options.add_platform(o, what="the image's platform", default="this machine's")
    o.add_argument("--base", metavar="oci:DIR@sha256:D",
                   help="base image: a local OCI layout and its manifest (or index) digest")
    options.add_out_dir(o, what="the OCI image layout", default="default: ROOT/build/oci/<env>")
    o.add_argument("--archive", type=Path, metavar="FILE",
                   help="also write an oci-archive tarball here")
    o.add_argument("--tag", help="the image's ref name in the layout (default: the env name)")
    _image_prefix(o)
    options.add_python(o, where=", a path in the base image",
                       default="/usr/local/bin/pythonX.Y, as in the python:X.Y images")
    o.add_argument("--compression", choices=("gzip", "zstd"), default="gzip",
                   help="layer compression (default gzip, which every runtime reads; zstd is "
                   "several times faster, read by containerd >= 1.5, Docker Engine >= 23, "
                   "podman/CRI-O/skopeo, not by umoci 0.4.7; see docs/how-to/render-oci.md, "
                   "\"zstd layers\")")
    _install_args(o)
    options.add_project(o)
    o.set_defaults(func=run_oci)


def _locks(p: argparse.ArgumentParser) -> None:
    options.add_locks(p, what="the locks to render", default="every top-level lockfile")
    options.add_project(p)
    options.add_read_flags(p)


def _image_prefix(p: argparse.ArgumentParser) -> None:
    options.add_image_prefix(p)
    options.deprecated(p, "--prefix", dest="image_prefix",
                       instead="pass --image-prefix PATH (where the environment lives in the "
                       "image)")


def _out_args(p: argparse.ArgumentParser) -> None:
    options.add_out_dir(p, what="the folder of per-environment folders",
                        default="default: ROOT/containers")
    options.add_check(p, what="a file is missing or differs")


def _install_args(p: argparse.ArgumentParser) -> None:
    """What install and render oci share: the cache, --replace, how a foreign lock is read."""
    options.add_cache_dir(p, what="archives and unpacked packages; install runs offline "
                          "when it holds every archive")
    p.add_argument("--replace", action="store_true", help="replace an existing output")
    options.add_read_flags(p, python_default="the --python interpreter's, else this "
                           "interpreter's")


# ------------------------------------------------------------------ finding locks

def locked_env(name: str, project: Project, read: ReadOptions | None = None) -> LockedEnv:
    """A LOCK argument (an environment id or a lockfile path, in any format ``load_lock``
    reads: ``samebits.cli.options.LOCK_RULE``) -> the lock."""
    if options.is_lock_path(name):
        path = options.lock_file(name, project)
        env = load_lock(path, read, name=path.name.removesuffix(LOCK_SUFFIX),
                        root=project.root)
        recorded = env.lock.meta("environment")
        if env.conversion is not None:
            recorded = lock_name(env)
        return dataclasses.replace(env, name=recorded) if recorded else env
    return load_lock(options.lock_file(name, project), name=name, root=project.root)


def show_conversion(out: Output, env: LockedEnv) -> dict[str, Any] | None:
    """A converted lock's conversion, on stderr (and returned for --json)."""
    if env.conversion is None:
        return None
    for line in env.conversion.lines():
        out.info(line)
    return env.conversion.to_json()


def _envs(args: argparse.Namespace, out: Output) -> tuple[Project, list[LockedEnv]]:
    project = options.project_of(args)
    names = args.locks or [i for i in project.lock_ids() if "/" not in i]
    if not names:
        raise UsageError(f"{project.lockfiles}: no lockfiles", hint="run `samebits lock` first")
    read = options.read_options(args, platforms=tuple(getattr(args, "platform", None) or ()))
    envs = [locked_env(n, project, read) for n in names]
    for env in envs:
        show_conversion(out, env)
    return project, envs


# ------------------------------------------------------------------ text renderings

def _write_files(out: Output, rendered: dict[str, dict[str, str]], *, check: bool,
                 kind: str) -> int:
    """env folder -> {file name: text}; write (or --check) them all; one report."""
    report: dict[str, dict[str, str]] = {}
    for folder, files in rendered.items():
        states = {}
        for fname, text in files.items():
            path = Path(folder) / fname
            old = path.read_text() if path.exists() else None
            state = "unchanged" if old == text else ("stale" if old is not None else "missing")
            if not check and state != "unchanged":
                atomic_write(path, text)
                state = "updated" if old is not None else "created"
            states[str(path)] = state
        report[folder] = states
    bad = [p for states in report.values() for p, s in states.items()
           if s in ("stale", "missing")]
    lines = [f"{p}: {s}" for states in report.values() for p, s in states.items()]
    if check and bad:
        lines.append(f"{len(bad)} rendered files are out of date: run `samebits render {kind}` "
                     "(without --check)")
    out.emit({"files": report, "fresh": not bad, "check": check}, "\n".join(lines))
    return EXIT_DIFFERENT if check and bad else EXIT_OK


def _out_root(args: argparse.Namespace, project: Project) -> Path:
    return args.out or project.root / "containers"


def run_conda(args: argparse.Namespace, out: Output) -> int:
    from samebits.render.conda import conda_files

    project, envs = _envs(args, out)
    rendered: dict[str, dict[str, str]] = {}
    for env in envs:
        files: dict[str, str] = {}
        for plat in args.platform or env.platforms:
            files.update(conda_files(env, env.check_platform(plat)))
        rendered[str(_out_root(args, project) / env.name)] = files
    return _write_files(out, rendered, check=args.check, kind="conda")


def run_nix(args: argparse.Namespace, out: Output) -> int:
    from samebits.render.nix import nix_files

    project, envs = _envs(args, out)
    rendered = {str(_out_root(args, project) / env.name):
                nix_files(env, args.platform or env.platforms) for env in envs}
    return _write_files(out, rendered, check=args.check, kind="nix")


def run_containerfile(args: argparse.Namespace, out: Output) -> int:
    from samebits.render.containerfile import containerfile_files

    project, envs = _envs(args, out)
    for ref, flag in ((args.base, "--base"), (args.micromamba, "--micromamba")):
        if ref and "@sha256:" not in ref:
            raise UsageError(f'{flag} "{ref}": pin it by digest (IMAGE@sha256:<64 hex>)',
                             hint="`skopeo inspect docker://IMAGE` prints the digest")
    rendered = {str(_out_root(args, project) / env.name):
                containerfile_files(env, base=args.base, micromamba=args.micromamba,
                                    prefix=args.image_prefix) for env in envs}
    return _write_files(out, rendered, check=args.check, kind="containerfile")


# ------------------------------------------------------------------ image and install

def run_oci(args: argparse.Namespace, out: Output) -> int:
    from samebits.install.sources import user_sources
    from samebits.render.image import ImageRequest, build_image
    from samebits.render.oci import parse_base_ref, platform_json
    from samebits.render.tarball import source_date_epoch
    from samebits.staging import staged_dir
    from samebits_app.sourceflags import own_sources
    from samebits_app.verifyrun import run_verify_env

    project = options.project_of(args)
    platform = args.platform or host_platform()
    env = locked_env(args.lock, project, options.read_options(args, platforms=(platform,)))
    show_conversion(out, env)
    platform = env.check_platform(platform)
    prefix = args.image_prefix
    if not prefix.startswith("/") or prefix.rstrip("/") in ("", "/"):
        raise UsageError(f'--image-prefix "{prefix}": must be an absolute path below /')
    python = args.python or (f"/usr/local/bin/python{env.python}" if env.python else None)
    req = ImageRequest(env=env, platform=platform, prefix=prefix.rstrip("/"),
                       base=parse_base_ref(args.base) if args.base else None,
                       interpreter=python, cache=options.cache_of(args),
                       epoch=source_date_epoch(os.environ), tag=args.tag or env.slug,
                       compression=args.compression,
                       sources=own_sources(project, env).merged(user_sources()))
    target = args.out or project.root / "build" / "oci" / env.slug
    if args.archive and args.archive.exists() and not args.replace:
        raise UsageError(f"{args.archive}: already exists", hint="pass --replace")
    with staged_dir(target, replace=args.replace) as stage, out.steps() as step:
        result = build_image(req, stage, work=stage.parent, verify=run_verify_env,
                             progress=step)
        if args.archive:
            step(f"writing the oci-archive {args.archive}")
            write_oci_archive(stage, args.archive, epoch=req.epoch)
    payload: dict[str, Any] = {"layout": str(target), "archive": str(args.archive or "") or None,
                               "platform": platform_json(platform), **result.to_json()}
    lines = [f"{target}: {env.name} for {platform} at {req.prefix}",
             f"manifest {result.manifest_digest} (tag {result.tag}, {args.compression} layers)",
             *(f"  layer {x['name']:<7} {x['digest']}  {x['size']:>12,} bytes  "
               f"{plural(len(x['packages']), 'package')}" for x in result.layers),
             f"files digest {result.env_digest} (verify env: ok)",
             f"inspect: skopeo inspect oci:{target}:{result.tag}"]
    if args.archive:
        lines.append(f"archive: {args.archive} (oci-archive:{args.archive})")
    for warning in result.warnings:
        out.info(f"warning: {warning}")
    out.emit(payload, "\n".join(lines))
    return EXIT_OK


def write_oci_archive(layout: Path, dest: Path, *, epoch: int) -> None:
    """The layout as an (uncompressed) oci-archive tarball, deterministic, written atomically."""
    from samebits.render.tarball import scan_prefix, tar_chunks

    with atomic_writer(dest) as f:
        for chunk in tar_chunks(layout, scan_prefix(layout), root="", mtime=epoch):
            f.write(chunk)

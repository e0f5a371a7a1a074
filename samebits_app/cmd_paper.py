"""``samebits paper init`` (authors): a paper's manifest in one command, by running the paper.

    samebits paper init PAPER/ --prefix ENV [--name NAME] [--margin 10] [--accept-noise]
                        [--input PATH ...] [--env NAME=VALUE ...] [--timeout SECONDS]
                        [--replace] [--lock FILE] [--json] -- COMMAND [ARGS...]

Runs COMMAND three times as ``samebits attest`` runs it (``samebits_app.paper.trials``),
finds what it wrote and read, knows each output's kind from its content and measures how far
the runs are apart (``samebits_app.paper.survey``, ``kinds``, ``noise``), and writes the
command's ``[[commands]]`` block and the data it read (``[[inputs]]``) into
``PAPER/samebits-paper.toml`` (``samebits_app.paper.manifestwrite``), creating it or adding to
it: a second command (another ``--name``) goes after the first; a command of the same name is
measured again and replaced only with ``--replace``. This module reads the arguments, chooses
the lock, prints the table (or ``--json``) and turns the result into an exit code:

    0   written; every output reproducible (or accepted with --accept-noise)
    1   written without an output that two alike runs disagree on (named, with its first
        differing element and what usually causes it); or nothing written: the command failed
        (its last lines and a hint) or changed the paper's own code (named)
    2   bad input: a flag, the paper folder, the lock, an --input, an existing manifest's
        problems (all listed), a command of that name already declared without --replace
    5   the environment's interpreter could not read the tensors (the worker failed)
"""

from __future__ import annotations

import argparse
import math
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.ui import Output

USAGE = "%(prog)s PAPER [options] -- COMMAND [ARGS...]"
LOCKS = ("conda-lock.yml", "*.conda-lock.yml", "pixi.lock", "uv.lock", "pylock.toml",
         "pylock.*.toml")
EXITS = ("exit codes: 0 written, every output reproducible (or accepted with --accept-noise); "
         "1 not reproducible: two alike runs disagree on an output (named, with its first "
         "differing element and what usually causes it; the manifest is written without it), "
         "or the command failed or changed the paper's own code (nothing written); 2 bad "
         "input (a flag, the folder, the lock, an --input, the existing manifest, a command "
         "of that name without --replace); 5 the environment's interpreter could not read "
         "the tensors.")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser("paper", parents=parents,
                       help="authors: write a paper's manifest by running the paper",
                       description="Write samebits-paper.toml, the manifest `samebits attest` "
                       "and `samebits audit` read, by running the paper's commands.")
    verbs = p.add_subparsers(dest="paper_command", metavar="COMMAND", required=True)
    i = options.add_tail_parser(
        verbs, "init", "command_line", parents=parents, usage=USAGE,
        help="run a command three times, measure its outputs, write its manifest block",
        description="Run COMMAND three times in fresh scratch copies of PAPER, as `samebits "
        "attest` runs it (the sandbox, the attested settings): twice alike, once with "
        "OMP_NUM_THREADS=MKL_NUM_THREADS=1. Every file it created or changed is an output "
        "(caches and temporary files left out by a written rule), stdout and stderr too "
        "where they read as a curve; each output's kind is known from its content "
        "(tensors, metrics, curve, file); each is measured (the largest |Δ| between the "
        "alike runs, and against the perturbed one, by the audit's own comparison) and "
        "gets atol = that |Δ| x --margin, rounded up to one significant digit, a comment "
        "beside it saying what was measured. Files the command read from the paper folder "
        "that are not its code become [[inputs]], pinned by sha256. The manifest is "
        "written atomically once its own reader accepts it; an existing one keeps its "
        "text, the command's block added after the others (or replaced, --replace). See "
        "docs/reference/paper-manifest.md, \"Written by samebits paper init\".",
        epilog=EXITS + " Example: samebits paper init paper/ --prefix /opt/env --name "
        "train -- python train.py --steps 200")
    i.add_argument("paper", metavar="PAPER", type=Path,
                   help="the paper's folder: its code, its data, its lock")
    options.add_prefix(i, what="to run the command in",
                       default="default: the running one")
    options.add_workload_python(i)
    i.add_argument("--name", metavar="NAME",
                   help="the command's name in the manifest (default: the script's name: "
                   "python train.py -> train)")
    i.add_argument("--margin", type=float, default=10.0, metavar="FACTOR",
                   help="a tolerance is the measured |Δ| times this, rounded up (default 10)")
    i.add_argument("--accept-noise", action="store_true",
                   help="declare outputs two alike runs disagree on too, their tolerance "
                   "covering that noise (default: named and left out, exit 1)")
    i.add_argument("--input", action="append", default=[], type=Path, metavar="PATH",
                   help="a file in the paper folder to pin in [[inputs]] whether or not the "
                   "command was seen reading it (repeatable)")
    i.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a variable the command needs, written into its block (env = {...}) "
                   "and set in every run (repeatable)")
    i.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="each run's limit, written into the command's block (default: the "
                   "manifest's [run] timeout, else 600)")
    i.add_argument("--replace", action="store_true",
                   help="measure a command the manifest already declares again and replace "
                   "its block")
    i.add_argument("--lock", type=Path, metavar="FILE",
                   help="the lock the manifest names, inside PAPER (default: an existing "
                   "manifest's; else the one lock in PAPER or PAPER/lockfiles, conda-lock.yml "
                   "first; none yet: conda-lock.yml, where attest will look for it)")
    i.set_defaults(func=run_init)


def default_name(argv: Sequence[str]) -> str:
    """The script's name (``python train.py`` -> train, ``python -m pkg.eval`` -> eval), else
    the program's, as a manifest name."""
    word = PurePosixPath(argv[0]).name
    for k, w in enumerate(argv):
        if w == "-m" and k + 1 < len(argv):
            word = argv[k + 1].rsplit(".", 1)[-1]
            break
        if w.endswith(".py"):
            word = PurePosixPath(w).stem
            break
    return re.sub(r"[^A-Za-z0-9_.-]", "-", word).strip("-._")[:64] or "main"


def _inside(path: Path, paper: Path) -> str | None:
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(paper))
    return None if rel == ".." or rel.startswith("../") or os.path.isabs(rel) else rel


def choose_lock(paper: Path, given: Path | None, existing: Any) -> str:
    """The lock the manifest names, relative to ``paper`` (``--lock``'s help)."""
    if existing is not None:
        rel = _inside(existing.lockfile, paper) or str(existing.lockfile)
        if given is not None and _inside(given, paper) != rel:
            raise UsageError(f"--lock {given}: {existing.file} names lockfile = \"{rel}\"",
                             hint="paper init does not change an existing manifest's lock: "
                             "omit --lock, or edit lockfile in the manifest")
        return rel
    if given is not None:
        path = given if given.is_file() or given.is_absolute() else paper / given
        if not path.is_file():
            raise UsageError(f"--lock {given}: no such file (here or in {paper})",
                             hint="name the lock the paper runs in, or leave --lock out")
        inside = _inside(path, paper)
        if inside is None:
            raise UsageError(f"--lock {given}: not inside the paper folder {paper}",
                             hint="the manifest names its lock relative to the paper folder: "
                             "copy the lock into it")
        return inside
    if (paper / "conda-lock.yml").is_file():
        return "conda-lock.yml"
    found = sorted({_inside(f, paper) or "" for folder in (paper, paper / "lockfiles")
                    for pattern in LOCKS for f in folder.glob(pattern) if f.is_file()})
    if len(found) == 1:
        return found[0]
    if not found:  # not locked yet: the manifest names the default; attest needs it there
        return "conda-lock.yml"
    raise UsageError(f"{paper}: {len(found)} locks: {', '.join(found)}",
                     hint="pass --lock FILE: the one the paper runs in")


def hand_inputs(paper: Path, given: Sequence[Path]) -> list[tuple[str, str]]:
    """``--input`` files: (path in the paper folder, sha256)."""
    from samebits._io import sha256_file

    out: list[tuple[str, str]] = []
    for g in given:
        path = g if g.exists() or g.is_symlink() or g.is_absolute() else paper / g
        rel = _inside(path, paper) if path.exists() else None
        if not path.exists():
            raise UsageError(f"--input {g}: no such file (here or in {paper})",
                             hint="give a file of the paper folder, relative to it or to here")
        if rel is None:
            raise UsageError(f"--input {g}: not inside the paper folder {paper}",
                             hint="an input is pinned at its path in the paper folder: copy "
                             "it into the folder (or give it a url in [[inputs]] by hand)")
        if path.is_symlink() or not path.is_file():
            raise UsageError(f"--input {g}: not a plain file (an input is a file, not a "
                             "folder or a link)")
        if rel not in (p for p, _ in out):
            out.append((rel, sha256_file(path)))
    return out


def parse_env(given: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``--env NAME=VALUE`` words as (name, value) pairs, in order, a name given twice keeping
    its last value."""
    from samebits_app.paper.manifest import ENV_NAME, RESERVED_ENV

    out: dict[str, str] = {}
    for word in given:
        name, eq, value = word.partition("=")
        if not eq or not ENV_NAME.match(name):
            raise UsageError(f"--env {word!r}: expected NAME=VALUE (NAME letters, digits and "
                             "'_', not starting with a digit)", hint="--env SEED=0")
        if name in RESERVED_ENV:
            raise UsageError(f"--env {word!r}: samebits sets {name} for every command "
                             f"({', '.join(RESERVED_ENV)} are not the manifest's to set)",
                             hint="docs/reference/paper-manifest.md, \"How a command runs\"")
        out.pop(name, None)
        out[name] = value
    return tuple(out.items())


def run_init(args: argparse.Namespace, out: Output) -> int:
    from samebits_app.paper.manifest import MANIFEST_NAME, NAME, read_manifest

    paper: Path = args.paper
    if not paper.is_dir():
        raise UsageError(f"{paper}: no such folder", hint="give the paper's folder: the one "
                         "that holds its code, its data and its lock")
    argv = tuple(args.command_line or ())
    if not argv:
        raise UsageError("no command to run: give it after --", hint="samebits paper init "
                         f"{paper} --prefix ENV -- python train.py")
    if not (math.isfinite(args.margin) and args.margin > 0):
        raise UsageError(f"--margin {args.margin:g}: expected a number > 0 (a tolerance is "
                         "the measured difference times the margin)", hint="--margin 10")
    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError(f"--timeout {args.timeout:g}: expected seconds > 0",
                         hint="--timeout 900")
    env = parse_env(args.env)
    name = args.name or default_name(argv)
    if not NAME.match(name):
        raise UsageError(f"--name {name!r}: expected letters, digits, '.', '_' or '-' (64 at "
                         "most, starting with a letter or digit)", hint="--name train")
    file = paper / MANIFEST_NAME
    existing = read_manifest(paper) if file.exists() else None
    if existing is not None and name in (c.name for c in existing.commands) and not (
            args.replace):
        raise UsageError(f"{file}: a command named {name!r} is already declared",
                         hint=f"pass --replace to measure it again and replace its block, or "
                         f"--name another (paper init {paper} --name {name} --replace -- ...)")
    lock = choose_lock(paper, args.lock, existing)
    by_hand = hand_inputs(paper, args.input)
    notes = () if (paper / lock).is_file() else (
        f"{paper / lock}: no lock there yet; the manifest names it: put the environment's "
        "lock there before samebits attest (samebits lock, or samebits freeze --prefix ENV)",)
    from samebits_app.paper.initrun import Request, initialize, render

    req = Request(paper=paper, file=file, name=name, argv=argv, lockfile=lock,
                  by_hand=tuple(by_hand), env=env, timeout=args.timeout, prefix=args.prefix,
                  python=args.workload_python,
                  margin=args.margin, accept=args.accept_noise, existing=existing,
                  notes=notes)
    start = time.perf_counter()
    with out.steps("paper init: ") as step:
        done = initialize(req, progress=step,
                          info=out.info if out.shows_progress else lambda s: None)
    payload, text = render(done, seconds=time.perf_counter() - start)
    out.emit(payload, text)
    return EXIT_DIFFERENT if payload["exit_code"] else EXIT_OK


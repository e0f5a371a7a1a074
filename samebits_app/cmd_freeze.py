"""``samebits freeze --prefix DIR``: an installed environment -> a spec and its lock, no solving.

    samebits freeze --prefix ~/envs/paper [--name paper] [--index URL] [--extra-index URL]
                    [--generation G]
        -> environments/paper.toml          every package pinned (conda: name ==version build;
                                            PyPI: name==version, or name @ URL when the index
                                            does not list it), python, platform, glibc floor,
                                            and for a CUDA torch the CUDA line and the
                                            generation (none for --generation cpu: a CUDA build
                                            run on the CPU)
        -> lockfiles/paper.conda-lock.yml   conda-lock v1, every artifact with its hash, read
                                            from the installers' records (samebits_app.freezing)

``samebits verify env lockfiles/paper.conda-lock.yml --prefix DIR`` then says
identical, and ``samebits lock paper`` re-solves the spec to the same packages while the
channels and the index still serve them. What cannot be pinned (an editable install, a VCS
checkout, a local build) is listed, left out of both files, and makes the exit code 1.

A wheel installed from a local file (``file:///opt/wheels/torch-2.13.0+cpu-...whl``) is traced
to the index serving the same sha256; when none does, the lock names the file and freeze says in
one line that it is not reproducible elsewhere, and why (exit 1). A traced wheel's lock URL is
the index's while the installer recorded the file, so verify env names that URL difference.

Exit codes: 0 every package pinned, 1 written but some package could not be pinned or is
pinned to a file on this machine, 2 bad input (not an environment, a spec problem, files exist
without --replace), 4 the index did not answer.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import atomic_write
from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.foreign.simpleindex import PYPI, is_folder
from samebits.foreign.sources_files import pin_conda
from samebits.lock.model import Lock, render_lock, sort_packages
from samebits.project import Project
from samebits.spec.gpus import registry
from samebits.spec.model import NAME_RE, EnvironmentSpec
from samebits.spec.write import spec_mapping, spec_toml
from samebits.ui import Output
from samebits_app.freezing import Facts, Frozen, freeze

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "freeze", parents=parents,
        help="an installed environment -> a spec and a lockfile, without solving",
        description="Read an installed environment's records (conda-meta/*.json; each wheel's "
        "dist-info: direct_url.json, else the index's wheel with exactly the installed tags) "
        "and write environments/NAME.toml (every package pinned; python, platform, glibc "
        "floor, CUDA line and generation) and lockfiles/NAME.conda-lock.yml (a hash on every "
        "artifact). `samebits verify env NAME --prefix DIR` of the result: identical.",
        epilog="exit codes: 0 every package pinned, 1 written, but a package could not be "
        "pinned (editable, VCS checkout, local build: listed) or is pinned to a local file no "
        "index serves (not reproducible elsewhere), 2 bad input, 4 the index did not answer")
    options.add_prefix(p, what="to freeze", default="required", required=True)
    p.add_argument("--name", help="the environment id to write (default: the prefix's folder "
                   "name)")
    p.add_argument("--index", default=PYPI, metavar="URL",
                   help="where wheels without a direct_url.json were installed from: a simple "
                   f"index or a folder of wheels (default {PYPI})")
    p.add_argument("--extra-index", action="append", default=[], metavar="URL",
                   help="another index a wheel installed from a local file or with a local "
                   "version (2.13.0+cpu) may have come from (repeatable; a PyTorch local "
                   "version's download.pytorch.org index is always asked)")
    p.add_argument("--generation", choices=sorted(registry().generations),
                   help="the GPU generation (needed when the environment has a CUDA runtime; "
                   "cpu for a CUDA build used without a GPU)")
    options.add_project(p, environments=True)
    p.add_argument("--replace", action="store_true", help="overwrite an existing spec/lock")
    p.set_defaults(func=run_freeze)


def _name(args: argparse.Namespace, prefix: Path) -> str:
    if args.name:
        if not NAME_RE.match(args.name):
            raise UsageError(f'--name "{args.name}": use lower-case letters, digits, ".", "_" '
                             'and "-"')
        return str(args.name)
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in prefix.name.lower())
    name = name.lstrip("._-") or "frozen"
    return name


def _index_url(index: str) -> str:
    if "://" not in index:
        folder = Path(index)
        if not folder.is_dir():
            raise UsageError(f'--index "{index}": not a URL and not a folder of wheels')
        return folder.resolve().as_uri()
    return index.rstrip("/") if not is_folder(index) else index


def _generation(args: argparse.Namespace, facts: Facts) -> str:
    if facts.cuda is None:
        return args.generation or "cpu"
    if args.generation:
        return str(args.generation)
    gpus = [g for g in sorted(registry().generations) if g != "cpu"]
    raise UsageError(f"the environment has a CUDA {facts.cuda} runtime"
                     + (f" ({facts.torch})" if facts.torch else "")
                     + ": pass --generation, the GPUs it is for "
                     f"({', '.join(gpus)}), or --generation cpu where it runs without a GPU")


def spec_text(frozen: Frozen, *, name: str, generation: str, index: str) -> str:
    """The spec, as TOML, pinning exactly the frozen packages (deterministic: sorted).

    A CUDA runtime gives ``[cuda]`` unless the generation is ``cpu`` (a CUDA build of torch
    run on the CPU); a PyPI package its index does not list is pinned by URL."""
    f = frozen.facts
    conda = sorted(pin_conda(p.name, p.version, p.build) for p in frozen.packages
                   if p.manager == "conda")
    pip = sorted(f"{p.name} @ {p.url}" if p.name in frozen.by_url else f"{p.name}=={p.version}"
                 for p in frozen.packages if p.manager == "pip")
    what = f"{f.kind}, Python {f.python}, {f.platform}" + (f", {f.torch}" if f.torch else "")
    mapping = spec_mapping(
        name=name, description=f"frozen from an installed {f.kind}", generation=generation,
        python=".".join(f.python.split(".")[:2]), platforms={f.platform: f.glibc},
        cuda=f.cuda if generation != "cpu" else None, channels=frozen.channels, conda=conda,
        index=index, requirements=pip)
    return spec_toml(mapping, (f"Frozen by samebits {__version__} from an installed environment "
                               f"({what}).",
                               f"Every package is pinned; re-lock with `samebits lock {name}`."))


def lock_header(name: str, facts: Facts) -> str:
    return (f"# samebits {__version__} freeze of an installed {facts.kind} (conda-lock v1 "
            f"format): environments/{name}.toml pins the same packages.\n"
            f"# Check an environment: samebits verify env THIS_FILE --prefix DIR\n"
            f"# Re-solve the spec: samebits lock {name}\n")


def build(frozen: Frozen, *, name: str, generation: str, index: str, project: Project,
          ) -> tuple[str, str, EnvironmentSpec]:
    """(spec text, lockfile text, the validated spec)."""
    from samebits.lock.make import content_hashes, custom_metadata

    text = spec_text(frozen, name=name, generation=generation, index=index)
    spec_path, lock_path = project.spec_path(name), project.lock_path(name)
    display = os.path.relpath(spec_path, project.root)
    spec = EnvironmentSpec.from_mapping(tomllib.loads(text), file=display)
    lock = Lock(
        platforms=(frozen.facts.platform,), channels=spec.conda_channels,
        sources=(os.path.relpath(spec_path, lock_path.parent),),
        content_hash=content_hashes(spec),
        custom={**custom_metadata(spec),
                "samebits.frozen-from": f"{frozen.facts.kind}, Python {frozen.facts.python}"},
        packages=sort_packages(frozen.packages), header=lock_header(name, frozen.facts))
    return text, render_lock(lock), spec


def run_freeze(args: argparse.Namespace, out: Output) -> int:
    from verify.env.manifest import prefix_kind

    prefix = Path(args.prefix).absolute()
    kind = prefix_kind(prefix)
    name = _name(args, prefix)
    project = options.project_of(args)
    spec_path, lock_path = project.spec_path(name), project.lock_path(name)
    existing = [str(p) for p in (spec_path, lock_path) if p.exists()]
    if existing and not args.replace:
        raise UsageError(f"{', '.join(existing)}: already exist(s)",
                         hint="pass --replace, or another --name")
    index = _index_url(args.index)
    extra = [_index_url(x) for x in args.extra_index]
    out.info(f"reading the records of {prefix} ({kind})")
    frozen, unreadable = freeze(prefix, kind=kind, index=index, extra=extra)
    if not frozen.facts.python:
        raise UsageError(f"{prefix}: cannot tell its Python version (no conda python, no "
                         "pyvenv.cfg version, no lib/python3.*)")
    generation = _generation(args, frozen.facts)
    spec_txt, lock_txt, spec = build(frozen, name=name, generation=generation, index=index,
                                     project=project)
    atomic_write(spec_path, spec_txt)
    atomic_write(lock_path, lock_txt)
    return _report(out, frozen, unreadable, spec_path=spec_path, lock_path=lock_path,
                   prefix=prefix, generation=generation)


def _report(out: Output, frozen: Frozen, unreadable: list[str], *, spec_path: Path,
            lock_path: Path, prefix: Path, generation: str) -> int:
    f = frozen.facts
    counts = {m: sum(1 for p in frozen.packages if p.manager == m) for m in ("conda", "pip")}
    complete = not frozen.findings and not unreadable and not frozen.local
    payload: dict[str, Any] = {
        "prefix": str(prefix), "spec": str(spec_path), "lockfile": str(lock_path),
        "facts": {"kind": f.kind, "python": f.python, "platform": f.platform,
                  "glibc": f.glibc, "cuda": f.cuda, "torch": f.torch,
                  "generation": generation},
        "packages": counts, "complete": complete,
        "findings": [x.to_json() for x in frozen.findings], "unreadable": unreadable,
        "local": [x.to_json() for x in frozen.local], "traced": list(frozen.traced)}
    lines = [f"{prefix}: {f.kind}, Python {f.python}, {f.platform}, glibc >= {f.glibc}, "
             f"generation {generation}" + (f", CUDA {f.cuda}" if f.cuda else ""),
             f"pinned {counts['conda']} conda and {counts['pip']} PyPI packages",
             f"wrote {spec_path}", f"wrote {lock_path}"]
    if frozen.findings:
        lines.append(f"{len(frozen.findings)} package(s) could not be pinned (left out of "
                     "both files):")
        lines += [f"  {x.package}: {x.reason}" for x in frozen.findings]
    lines += [f"traced: {t}" for t in frozen.traced]
    lines += [f"{x.package}: {x.reason}" for x in frozen.local]
    if unreadable:
        lines.append(f"{len(unreadable)} record(s) could not be read:")
        lines += [f"  {u}" for u in unreadable]
    lines.append(f"check: samebits verify env {options.lock_arg(lock_path)} --prefix {prefix}")
    out.emit(payload, "\n".join(lines))
    return EXIT_OK if complete else EXIT_DIFFERENT

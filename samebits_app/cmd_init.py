"""``samebits init NAME --from FILE``: the file a paper ships -> ``environments/NAME.toml``.

    samebits init kan --from requirements.txt [--python-version 3.11] [--generation G]
        [--exclude-newer 2024-03-28] [--extra GROUP] [--platform P] [--index URL]
        [--cuda X.Y] [--root DIR] [--replace] [--json]

FILE is a requirements.txt (pinned or not; ``-r``, ``-i``, ``--extra-index-url``, markers,
``name @ URL``), an environment.yml (conda dependencies, channels, its ``pip:`` part), a
pyproject.toml (``[project]`` dependencies, ``--extra`` groups) or any lock samebits reads
(``samebits.lock.read``). The readers are pure (``samebits.foreign.sources``,
``samebits.foreign.sources_files``) and so are the choices (``samebits.spec.draft``,
``samebits.spec.torchcuda``); ``samebits_app.initread`` reads the file and its includes and asks
the indexes about each pinned release (PEP 691 JSON: its files' tags, requires-python and
upload-time); this command drafts the spec, resolves it at the drafted Python to see what the
resolution takes beyond the file's pins (``_settle_python``: a release built from its sdist
there that has wheels for another Python moves the choice), validates it with the spec
reader's own rules and writes it atomically: on any error nothing is written.

Exit codes: 0 written, 2 bad input (the file, a choice it cannot make, NAME exists without
--replace), 4 the index did not answer.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import atomic_write
from samebits.cli import options
from samebits.errors import (
    EXIT_OK,
    SourceError,
    UsageError,
    plural,
)
from samebits.foreign.model import DEFAULT_GLIBC
from samebits.foreign.simpleindex import PYPI
from samebits.foreign.sources import Declared, Left, Requested
from samebits.foreign.target import Target
from samebits.project import Project
from samebits.spec.draft import (
    PYTHONS,
    Choice,
    PinWheels,
    applicable,
    choose_python,
    marker_lines,
    newest_upload,
    pytorch_index,
    range_pythons,
    wheel_pythons,
)
from samebits.spec.gpus import registry
from samebits.spec.model import NAME_RE, PLATFORMS, EnvironmentSpec, parse_instant
from samebits.spec.torchcuda import choose_generation, cuda_evidence, needs_torch_metadata
from samebits.spec.write import spec_mapping, spec_toml
from samebits.ui import Output
from samebits_app.initread import offers, read_source, torch_requires

METADATA_TIMEOUT = 30.0


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "init", parents=parents,
        help="a paper's requirements.txt, environment.yml or pyproject.toml -> a spec",
        description="Write environments/NAME.toml from the file an author ships: a "
        "requirements.txt (pinned or not; -r, -i, --extra-index-url, markers, name @ URL; -e "
        "is listed as left out), an environment.yml (conda dependencies and channels, its pip: "
        "part), a pyproject.toml ([project] dependencies, --extra groups) or a lock samebits "
        "reads. Markers and extras are kept. The Python is the one you run (or --from-prefix "
        "ENV's) when every pinned release has a wheel for it, else the newest of "
        f"{PYTHONS[0]}-{PYTHONS[-1]} that has (PEP 691 tags and requires-python); exclude-newer "
        "is one second after the newest pinned release's upload; a CUDA build of torch gives "
        "the CUDA line, and the generation when only one fits. Then: samebits lock NAME.",
        epilog="exit codes: 0 written, 2 bad input or a choice to make (the message says "
        "which flag), 4 an index did not answer")
    p.add_argument("name", metavar="NAME", help="the environment id to write "
                   "(environments/NAME.toml)")
    p.add_argument("--from", dest="source", type=Path, required=True, metavar="FILE",
                   help="requirements.txt, environment.yml, pyproject.toml or a lockfile")
    p.add_argument("--python-version", metavar="X.Y", help="the Python (default: the file's "
                   "own, else the one you run when every pinned package has a wheel for it, "
                   f"else the newest of {PYTHONS[0]}-{PYTHONS[-1]} that has)")
    options.deprecated(p, "--python", dest="python_version", metavar="X.Y",
                       instead="pass --python-version X.Y (--python names an interpreter)")
    p.add_argument("--generation", choices=sorted(registry().generations),
                   help="the GPU generation (default: cpu without a CUDA torch; with one, the "
                   "only generation its CUDA line serves, else the message names the choices)")
    p.add_argument("--from-prefix", type=Path, metavar="ENV", help="the environment you ran "
                   "the paper in: its Python's line is preferred (default: the Python running "
                   "samebits), when every pinned package has a wheel for it")
    p.add_argument("--cuda", metavar="X.Y", help="the CUDA line, when the file does not tell "
                   "(torch not pinned)")
    p.add_argument("--exclude-newer", metavar="DATE", help="ignore releases after this date or "
                   "UTC time (default: one second after the newest pinned release's upload)")
    p.add_argument("--extra", action="append", default=[], metavar="GROUP",
                   help="a pyproject.toml optional-dependencies group to include (repeatable)")
    options.add_platforms(p, what="a platform to lock for", default="linux-64",
                          choices=PLATFORMS)
    p.add_argument("--index", metavar="URL", help="the index (a mirror; default: the file's "
                   f"-i/--index-url, else {PYPI})")
    options.add_project(p, environments=True, lockfiles=False)
    p.add_argument("--replace", action="store_true", help="overwrite an existing spec")
    p.set_defaults(func=run_init)


# ------------------------------------------------------------------ the command

def run_init(args: argparse.Namespace, out: Output) -> int:
    name = str(args.name)
    if not NAME_RE.match(name):
        raise UsageError(f'NAME "{name}": use lower-case letters, digits, ".", "_" and "-"')
    project = Project.at(args.root, environments=args.environments)
    spec_path = project.spec_path(name)
    if spec_path.exists() and not args.replace:
        raise UsageError(f"{spec_path}: already exists", hint="pass --replace, or another NAME")
    if args.python_version and not re.fullmatch(r"3\.\d{1,2}", args.python_version):
        raise UsageError(f'--python-version "{args.python_version}": expected X.Y, e.g. 3.11')
    if args.cuda and not re.fullmatch(r"\d+\.\d+", args.cuda):
        raise UsageError(f'--cuda "{args.cuda}": expected MAJOR.MINOR, e.g. 12.1')
    if args.exclude_newer and parse_instant(args.exclude_newer) is None:
        raise UsageError(f'--exclude-newer "{args.exclude_newer}": expected a date or UTC time '
                         'like 2024-03-28 or 2024-03-28T12:00:00Z')
    platforms = tuple(dict.fromkeys(args.platform or ["linux-64"]))
    declared = read_source(Path(args.source), extras=list(args.extra), platform=platforms[0],
                           python=args.python_version)
    draft = make_draft(declared, args=args, platforms=platforms)
    display = os.path.relpath(spec_path, project.root)
    draft = _settle_python(draft, declared, args=args, platforms=platforms, display=display)
    spec = EnvironmentSpec.from_mapping(draft.mapping, file=display)  # SpecError: nothing written
    if not args.exclude_newer and spec.pypi_requirements and spec.exclude_newer:
        draft = _settle_exclude_newer(draft, spec, display)
    text = spec_toml(draft.mapping, draft.comments)
    atomic_write(spec_path, text)
    return _report(out, draft, spec_path=spec_path, name=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    declared: Declared
    mapping: dict[str, Any]
    comments: tuple[str, ...]
    python: Choice
    generation: Choice
    exclude_newer: Choice | None
    left: tuple[Left, ...]
    notes: tuple[str, ...]
    wheels: tuple[PinWheels, ...]


def make_draft(declared: Declared, *, args: argparse.Namespace,
               platforms: tuple[str, ...], transitive: tuple[PinWheels, ...] = ()) -> Draft:
    """The spec for ``declared``; ``transitive``: releases the resolution takes that the file
    does not pin, which constrain the Python as a pin does (``_settle_python``)."""
    glibc = DEFAULT_GLIBC
    notes = list(declared.notes)
    conda_python = next((c for c in declared.conda if c.name == "python"), None)
    wanted = args.python_version
    if wanted and conda_python and declared.python and declared.python != wanted:
        raise UsageError(f"--python-version {wanted}: {conda_python.where} asks for "
                         f"{conda_python.spec}", hint=f"pass --python-version {declared.python}, "
                         "or change the file's python")
    index = args.index or declared.index or PYPI
    extra = list(declared.extra_indexes)
    # candidates for markers: every Python init may choose, or the one given
    given = args.python_version or declared.python
    lines: list[str] = [given] if given else list(PYTHONS)
    targets = [Target(platform=p, python=v, glibc=glibc) for p in platforms for v in lines]
    pypi, left = applicable(declared.pypi, targets)
    declared = replace(declared, pypi=pypi)
    for r in declared.pins:
        own = pytorch_index(r.name, r.pinned or "")
        if own and own not in extra and own != index:
            extra.append(own)
            notes.append(f"{r.where}: {r.text} is a PyTorch build: its index {own} is an extra "
                         "index")
    pins = [r for r in declared.pins if r.url is None]
    ranges = [r for r in declared.pypi if not r.pinned and not r.url]
    found = offers([index, *extra], sorted({r.name for r in (*pins, *ranges)}))
    notes += [f"index {i} did not answer ({why}): its releases were not checked"
              for i, why in sorted(found.unreachable.items())]
    wheels = [marker_lines(wheel_pythons(r, found.files.get(r.name, []), platforms=platforms,
                                         glibc=glibc), platforms, glibc)
              for r in declared.pypi if r.pinned or r.url]
    for w in wheels:
        if w.state == "sdist-only":
            notes.append(f"{w.pin.where}: {w.pin.text} has no wheel, only an sdist: it is "
                         "built from source, on any Python")
        elif w.state == "not-found" and not found.unreachable:
            raise SourceError(f"{w.pin.where}: {w.pin.text}: no such release on "
                              f"{', '.join([index, *extra])}",
                              hint="fix the pin, or pass --index with the index that has it")
    where = f"{', '.join(platforms)} (glibc {glibc})"
    # an unpinned requirement constrains the Python too: some release it allows, as of the
    # exclude-newer given, must have a wheel (torch>=2.3.0 as of 2024-07 has none for 3.13)
    before = parse_instant(args.exclude_newer) if args.exclude_newer else None
    ranged = [marker_lines(got, platforms, glibc) for r in ranges
              if (got := range_pythons(r, found.files.get(r.name, []), platforms=platforms,
                                     glibc=glibc, before=before)) is not None]
    python = choose_python([*wheels, *ranged, *transitive], requested=args.python_version,
                           pinned=declared.python, requires_python=declared.requires_python,
                           where=where, preferred=_author_python(args.from_prefix))
    chosen = [Target(platform=p, python=python.value, glibc=glibc) for p in platforms]
    pypi, more_left = applicable(declared.pypi, chosen)
    left += more_left
    declared = replace(declared, pypi=pypi)
    kept = {r.where for r in pypi}
    wheels = [w for w in wheels if w.pin.where in kept]  # the chosen Python's own pins
    requires = None
    if args.generation != "cpu" and args.cuda is None and needs_torch_metadata(declared):
        requires = torch_requires(wheels, python.value, platforms[0], glibc)
    evidence = cuda_evidence(declared, torch_requires=requires)
    gen, cuda, gen_why = choose_generation(
        evidence, requested=args.generation, cuda=args.cuda,
        has_torch=any(r.name == "torch" for r in declared.pypi),
        retry=f"samebits init {args.name} --from {declared.source} --generation G")
    exclude = _exclude_newer(args.exclude_newer, wheels, chosen, notes)
    conda = [c.spec for c in declared.conda]
    if conda and not any(c.name == "python" for c in declared.conda):
        conda.insert(0, f"python {python.value}.*")
    mapping = spec_mapping(
        name=args.name, description=_description(declared), generation=gen,
        python=python.value,
        platforms={p: glibc for p in platforms}, cuda=cuda,
        exclude_newer=exclude.value if exclude else None, channels=declared.channels,
        conda=conda, index=index, extra_indexes=extra,
        requirements=[r.text for r in declared.pypi], no_binary=declared.no_binary)
    comments = (f"Written by samebits {__version__} init from {declared.source} "
                f"({declared.format}).",
                f"python {python.value}: {python.why}.",
                f"generation {gen}: {gen_why}.",
                *([f"exclude-newer: {exclude.why}."] if exclude else []),
                *(f"left out: {x}" for x in (*declared.left, *left)),
                f"Lock it: samebits lock {args.name}")
    return Draft(declared=declared, mapping=mapping, comments=comments, python=python,
                 generation=Choice(value=gen, why=gen_why), exclude_newer=exclude,
                 left=(*declared.left, *left), notes=tuple(notes), wheels=tuple(wheels))


def _settle_python(draft: Draft, declared: Declared, *, args: argparse.Namespace,
                   platforms: tuple[str, ...], display: str) -> Draft:
    """The draft again, its Python chosen with what the resolution takes as well as what the
    file pins, where the resolution at the drafted Python builds a release from its sdist
    that has wheels for other Pythons: pip would build it there, where the authors' machines
    took a wheel. SimCSE's ``transformers==4.2.1`` pins ``tokenizers==0.9.4`` (wheels for
    3.5-3.9; its sdist needs Rust), self-instruct's unpinned ``benepar`` takes
    ``sentencepiece`` 0.1.97 (wheels for 3.6-3.10, as of its date); both locked on 3.11 and
    failed there. Each round resolves the PyPI part (uv, metadata only, through the final
    cache) at the drafted Python; the draft is kept when the file gives the Python, when
    nothing is built that has a wheel elsewhere, when the choice stands, or when the
    resolution fails (``samebits lock`` then says why)."""
    if args.python_version or declared.python or not draft.declared.pypi:
        return draft
    seen: dict[str, PinWheels] = {}
    for _ in PYTHONS:
        spec = EnvironmentSpec.from_mapping(draft.mapping, file=display)
        built = _built_from_sdists(spec, {r.name for r in draft.declared.pypi if r.url})
        if isinstance(built, str):  # not an unsatisfiable one: lock says why in its words
            return replace(draft, notes=(*draft.notes, f"what the resolution takes at Python "
                                         f"{draft.python.value} was not checked: {built}"))
        new = {n: (v, via) for n, (v, via) in built.items() if n not in seen}
        if not new:
            return draft
        found = offers([spec.pypi_index, *spec.pypi_extra_indexes], sorted(new))
        glibc = next(iter(spec.platforms)).glibc
        for name, (version, via) in sorted(new.items()):
            pin = Requested(text=f"{name}=={version} (via {via})", name=name,
                            pinned=version, where="what the resolution takes")
            seen[name] = wheel_pythons(pin, found.files.get(name, []), platforms=platforms,
                                       glibc=glibc)
        taken = tuple(w for w in seen.values() if w.state == "wheels" and w.pythons)
        again = make_draft(declared, args=args, platforms=platforms, transitive=taken)
        if again.python.value == draft.python.value:
            return draft
        draft = again
    return draft


# seconds init's resolution may work beyond uv's network timeouts before the Python choice
# goes unchecked (said so): TinyLlama's stack builds sdists for their metadata, minutes at a
# load of 10, which the lock then does with the 15 minutes a lock allows
CHECK_WORK = 120.0


def _built_from_sdists(spec: EnvironmentSpec, urls: set[str]
                       ) -> dict[str, tuple[str, str]] | str:
    """name -> (version, what requires it) of each release ``spec``'s resolution builds
    from an sdist on some platform, but those required by URL (``urls``); empty when it
    does not resolve (``samebits lock`` says why); why not, when the index did not answer
    or uv did not finish."""
    import asyncio

    from samebits.errors import SamebitsError, UnsatisfiableError
    from samebits.solve.indexcache import default_cache_root
    from samebits.solve.indexproxy import IndexProxy
    from samebits.solve.pypi import solve_pypi

    built: dict[str, tuple[str, str]] = {}
    try:
        with IndexProxy(root=default_cache_root(), timeout=60.0,
                        now=dt.datetime.now(dt.timezone.utc)) as proxy:
            for target in spec.platforms:
                got = asyncio.run(solve_pypi(spec, target, timeout=30.0, proxy=proxy,
                                             work=CHECK_WORK))
                parents: dict[str, list[str]] = {}
                for p in got:
                    for dep, _ in p.dependencies:
                        parents.setdefault(dep, []).append(p.name)
                for p in got:
                    if p.name not in urls and not p.filename.endswith(".whl"):
                        via = ", ".join(sorted(parents.get(p.name, []))) or "the file"
                        built.setdefault(p.name, (p.version, via))
    except UnsatisfiableError:
        return {}
    except SamebitsError as exc:
        return exc.message.splitlines()[0] if exc.message else type(exc).__name__
    return built


def _author_python(prefix: Path | None) -> Choice:
    """The Python the author runs: ``--from-prefix ENV``'s interpreter (run to ask, never
    named by its path), else the one running samebits; a UsageError for an ENV whose Python
    does not run. The reason names no path: it goes into the spec, which is committed."""
    if prefix is None:
        line = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return Choice(value=line, why=f"the Python you run ({line})")
    from samebits.install.interpreter import probe

    python = prefix / "bin" / "python"
    got = probe(str(python))
    if isinstance(got, str):
        raise UsageError(f"--from-prefix {prefix}: {python} does not run: {got}",
                         hint="pass the environment's folder (the one holding bin/python)")
    return Choice(value=got.line, why=f"--from-prefix's Python ({got.line})")


def _description(declared: Declared) -> str:
    base = Path(declared.source).name
    what = base if base == declared.format else f"{base} ({declared.format})"
    return f"from {what} by samebits init"


# How far past the newest pinned upload exclude-newer may move, tried in order, when the index
# at that instant cannot satisfy the pins: a dependency of a pinned release was often uploaded
# later (torch 2.0.0 on 2023-03-15, the triton 2.0.0 wheel it needs for cp311 on 2023-03-20).
SETTLE_DAYS = (1, 7, 30, 90, 365)


def _settle_exclude_newer(draft: Draft, spec: EnvironmentSpec, display: str) -> Draft:
    """The first instant of ``SETTLE_DAYS`` after the drafted exclude-newer at which the PyPI
    part resolves (uv, metadata only, through the final cache), when it does not at the
    drafted one; the draft unchanged when it does, or when no instant helps (then
    ``samebits lock`` says why)."""
    import asyncio

    from samebits.errors import SamebitsError, UnsatisfiableError
    from samebits.solve.indexcache import default_cache_root
    from samebits.solve.indexproxy import IndexProxy
    from samebits.solve.pypi import solve_pypi

    start = parse_instant(spec.exclude_newer or "")
    now = dt.datetime.now(dt.timezone.utc)
    assert start is not None

    def resolves(when: dt.datetime, proxy: IndexProxy) -> str | None:
        """None when the requirements resolve as of ``when``, else uv's first line."""
        mapping = {**draft.mapping, "exclude-newer": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
        candidate = EnvironmentSpec.from_mapping(mapping, file=display)
        try:
            for target in candidate.platforms:
                asyncio.run(solve_pypi(candidate, target, timeout=60.0, proxy=proxy))
        except UnsatisfiableError as exc:
            lines = [ln.strip() for ln in exc.message.splitlines()[1:] if ln.strip()]
            return next((ln for ln in lines if ln.startswith("cause:")), lines[0] if lines
                        else "unsatisfiable")
        return None

    try:
        with IndexProxy(root=default_cache_root(), timeout=60.0, now=now) as proxy:
            why = resolves(start, proxy)
            if why is None:
                return draft
            for days in SETTLE_DAYS:
                when = start + dt.timedelta(days=days)
                if when >= now:
                    break
                if resolves(when, proxy) is None:
                    value = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                    because = (f"{days} day{'s' if days > 1 else ''} after the newest pinned "
                               f"upload: at {spec.exclude_newer} the index could not yet "
                               f"satisfy the pins ({why})")
                    mapping = {**draft.mapping, "exclude-newer": value}
                    comments = tuple(
                        f"exclude-newer: {because}." if c.startswith("exclude-newer:") else c
                        for c in draft.comments)
                    return replace(draft, mapping=mapping, comments=comments,
                                   exclude_newer=Choice(value=value, why=because))
    except SamebitsError:  # the index did not answer: lock will say so, with its own words
        return draft
    return draft


def _exclude_newer(given: str | None, wheels: list[PinWheels], targets: list[Target],
                   notes: list[str]) -> Choice | None:
    if given:
        return Choice(value=given, why="--exclude-newer")
    got = newest_upload(wheels, targets)
    if got is not None:
        return Choice(value=got[0], why=got[1])
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    notes.append("no pinned release has an upload time on the index: exclude-newer is now")
    return Choice(value=now, why="now: no pinned release has an upload time")


def _report(out: Output, draft: Draft, *, spec_path: Path, name: str) -> int:
    d = draft.declared
    pins = sum(1 for r in d.pypi if r.pinned)
    lines = [f"python {draft.python.value}: {draft.python.why}",
             f"{d.source}: read as {d.format} ("
             + plural(len(d.pypi), "PyPI requirement") + f", {pins} pinned"
             + (f"; {plural(len(d.conda), 'conda dependency', 'conda dependencies')}"
                if d.conda else "") + ")",
             f"generation {draft.generation.value}: {draft.generation.why}"]
    if draft.exclude_newer:
        lines.append(f"exclude-newer {draft.exclude_newer.value}: {draft.exclude_newer.why}")
    if draft.left:
        lines.append(f"left out ({len(draft.left)}):")
        lines += [f"  {x}" for x in draft.left]
    lines += [f"note: {n}" for n in draft.notes]
    lines += [f"wrote {spec_path}", f"next: samebits lock {name}"]
    payload = {
        "spec": str(spec_path), "name": name, "from": d.source, "format": d.format,
        "files": list(d.files),
        "python": {"value": draft.python.value, "why": draft.python.why},
        "generation": {"value": draft.generation.value, "why": draft.generation.why,
                       "cuda": (draft.mapping.get("cuda") or {}).get("version")},
        "exclude_newer": ({"value": draft.exclude_newer.value, "why": draft.exclude_newer.why}
                          if draft.exclude_newer else None),
        "pypi": {"index": (draft.mapping.get("pypi") or {}).get("index"),
                 "extra_indexes": (draft.mapping.get("pypi") or {}).get("extra-indexes", []),
                 "no_binary": (draft.mapping.get("pypi") or {}).get("no-binary", []),
                 "requirements": [r.text for r in d.pypi]},
        "conda": draft.mapping.get("conda") or {},
        "pins": [{"requirement": w.pin.text, "where": w.pin.where, "state": w.state,
                  "pythons": list(w.pythons)} for w in draft.wheels],
        "left": [x.to_json() for x in draft.left], "notes": list(draft.notes)}
    out.emit(payload, "\n".join(lines))
    return EXIT_OK

"""``install_prefix``: one platform of a lock into a staged prefix, phase by phase.

    check     every locked package is one install can place (a wheel, an sdist whose build the
              lock records, a conda package): all that are not are named before any download
              (``samebits.lock.builds``)
    fetch     each package without a cache entry: its archive proved (``fetch.prove``), from a
              ``--find-links`` folder or ``--mirror`` where given (``sources``); an sdist's
              wheel taken from the cache or built again and proved against the lock's record
              (``build``)
    unpack    ... and unpacked into the cache (``unpack``) as soon as it is proved, while the
              others download (eight downloads, four unpacks at a time, the largest archive
              waiting first, each archive's hashes computed as its bytes stream in); every
              problem of every archive is listed in one error before anything is placed
    check     every entry's files against its seal (``seal.check``: a stat each; what the
              seal cannot vouch for is hashed); a broken entry is evicted and unpacked again,
              once
    settle    a path two wheels write with different bytes: the file of the one pip installs
              last is placed (the lock's record of it, else pip's order computed here), and
              the report warns, naming the packages and the paths (``overwrite``)
    place     every file from the entries into the staged prefix (``place``): conda packages
              (``conda``), the venv's scaffolding (a lock without a conda python), the wheels
              (``wheels``), the records
    compile   bytecode, when asked (``bytecode``)
    re-seal   every hardlinked file re-stated and its new ctime and link count sealed
              (``seal.reseal_all``), so the verify that follows proves it by a stat; or, for
              ``samebits install`` (``reseal=False``), from the stats its verify's walk
              took of those very inodes, while the verify goes on (``resealing``)

The caller stages the prefix beside its target, renames it into place and runs ``verify env``
on it (``samebits_app.cmd_render``). ``progress(description, total)`` is the caller's progress
factory (``Output.progress``): each phase is one row, or one line when piped.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from samebits.errors import InputError, LockfileError, SamebitsError, plural
from samebits.forked import answer, fork_call
from samebits.gcpause import paused_gc
from samebits.host import host_platform
from samebits.install.build import Artifacts, build_pythons
from samebits.install.bytecode import BytecodeReport, compile_bytecode
from samebits.install.bytecode import Sources as PycSources
from samebits.install.cache import UNPACKED, Entry, evict, read_entry
from samebits.install.conda import CondaPlan, plan_conda
from samebits.install.entryfiles import CorruptEntry, EntryGone
from samebits.install.fetch import (
    Fetcher,
    cache_key,
    download_text,
    fetch_url,
    label,
    labelled,
    raise_problems,
    size_text,
)
from samebits.install.overwrite import Overwrite, installed_order, settle, warning_lines
from samebits.install.place import (
    Copy,
    LinkMode,
    Placer,
    make_dirs,
    one_copy_per_path,
    place_all,
    write_all,
)
from samebits.install.seal import (
    CHILD_LIMIT,
    CheckResult,
    archive_of,
    linked_entries,
    read_ahead,
    reseal_all,
)
from samebits.install.seal import check as check_seal
from samebits.install.sources import NO_SOURCES, Sources
from samebits.install.unpack import UnpackError, unpack
from samebits.install.wheels import PLANS, WheelPlan, layout_for, plan_wheel
from samebits.lock.builds import builds_of, check_placeable
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from samebits.lock.shared import SharedPaths, shared_of

# The one link a venv prefix may have out of itself: the interpreter it runs on.
VENV_LINKS = ("bin/python",)
UNPACK_THREADS = 4
FETCH_THREADS = 8

Progress = Callable[[str, float | None], contextlib.AbstractContextManager[Callable[..., Any]]]


@contextlib.contextmanager
def silent(description: str, total: float | None) -> Iterator[Callable[..., None]]:
    """A progress factory that shows nothing."""
    yield lambda n=1, description=None: None


@dataclass(frozen=True, slots=True, kw_only=True)
class InstallReport:
    platform: str
    prefix: str  # the final path, as files in the prefix name it
    python: str | None
    conda: tuple[str, ...]  # name=version=build
    pip: tuple[str, ...]  # name==version
    venv_interpreter: str | None  # bin/python -> this, when the prefix is a venv
    links_out: tuple[str, ...]  # links that may point out of the prefix (the venv interpreter)
    link_mode: str = "auto"
    placed: dict[str, int] = field(default_factory=dict)   # method -> files
    unpacked: tuple[str, ...] = ()                         # archives unpacked by this install
    bytecode: BytecodeReport | None = None
    sources: dict[str, str] = field(default_factory=dict)  # placed path -> "unpacked/<key>"
    notes: tuple[str, ...] = ()
    fetch: dict[str, float] = field(default_factory=dict)   # see FetchStats.to_json
    seal: dict[str, int] = field(default_factory=dict)      # see _seal_counts
    sealed_entries: tuple[str, ...] = ()   # keys of the entries files were hardlinked from
    overwritten: tuple[Overwrite, ...] = ()  # paths two wheels write with different bytes
    # reseal=False: each entry with its members hardlinked, to re-seal once the verify has
    # proven them (``resealing``), and where each was linked: prefix-relative path -> cache path
    to_reseal: tuple[tuple[Entry, tuple[str, ...]], ...] = ()
    linked: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"platform": self.platform, "prefix": self.prefix, "python": self.python,
                "conda": list(self.conda), "pip": list(self.pip),
                "venv_interpreter": self.venv_interpreter,
                "link_mode": self.link_mode, "placed": dict(self.placed),
                "cache": {"unpacked": list(self.unpacked),
                          "reused": len(self.conda) + len(self.pip) - len(self.unpacked)},
                "bytecode": self.bytecode.to_json() if self.bytecode else None,
                "fetch": dict(self.fetch), "seal": dict(self.seal),
                "overwritten": [o.to_json() for o in self.overwritten],
                "notes": list(self.notes)}

    def lines(self) -> list[str]:
        """What the human report adds about downloads, the seal and overwritten files."""
        out = warning_lines(self.overwritten)
        f = self.fetch
        if f.get("archives"):
            out.append(f"  fetched    {plural(int(f['archives']), 'archive')} "
                       f"({size_text(f['bytes'])}) in {f['seconds']:.1f} s: "
                       f"{size_text(f['bytes_per_second'])}/s, unpacked as they arrived")
        s = self.seal
        if s:
            parts = [f"{s['vouched']:,} files vouched for by their seal"]
            if s.get("relinked"):
                parts.append(f"{s['relinked']:,} whose links had changed")
            if s.get("hashed"):
                parts.append(f"{s['hashed']:,} hashed again (their stat had changed)")
            if s.get("resealed"):
                parts.append(f"{s['resealed']:,} re-sealed after linking")
            out.append("  cache      " + ", ".join(parts))
        return out

    def entries_of(self, paths: Sequence[str]) -> set[str]:
        """The cache entries (``unpacked/<key>``, ``pyc/<key>``, relative to the cache) the
        files at these prefix-relative paths were placed from."""
        return {self.sources[p] for p in paths if p in self.sources}




def python_line(env: LockedEnv, platform: str) -> str | None:
    """The ``X.Y`` the prefix's site-packages are for: the conda python's, else the lock's."""
    conda_py = next((p for p in env.conda(platform) if p.name == "python"), None)
    if conda_py is None:
        return env.python
    line = ".".join(conda_py.version.split(".")[:2])
    if env.python and env.python != line:
        raise LockfileError(f"{env.origin}: samebits.python is {env.python} but the conda part "
                            f"locks python {conda_py.version} on {platform}")
    return line


# A venv's folder links: ``python -m venv`` and uv make ``lib64`` a link to ``lib`` on 64-bit
# Linux (every platform samebits installs for), and pip writes a wheel's ``lib64/`` data files
# through it into ``lib/`` (the sweep's tsl: blosc2 2.0.0's ``lib64/libblosc2.so``).
VENV_FOLDER_LINKS = {"lib64": "lib"}


def venv_files(interpreter: str, line: str) -> tuple[dict[str, str], dict[str, str]]:
    """(files, symlinks) of a venv on ``interpreter`` (an absolute path), Python ``line``."""
    home = interpreter.rsplit("/", 1)[0] or "/"
    cfg = (f"home = {home}\ninclude-system-site-packages = false\nversion = {line}\n"
           f"executable = {interpreter}\n")
    links = {"bin/python": interpreter, "bin/python3": "python", f"bin/python{line}": "python",
             **VENV_FOLDER_LINKS}
    return {"pyvenv.cfg": cfg}, links


def through_folder_links(rel: str) -> str:
    """Where a venv's ``rel`` is: ``lib64/x`` is ``lib/x``."""
    head, sep, rest = rel.partition("/")
    return f"{VENV_FOLDER_LINKS[head]}/{rest}" if sep and head in VENV_FOLDER_LINKS else rel


# ------------------------------------------------------------------------- fetch + unpack

@dataclass(slots=True)
class FetchStats:
    """What the fetch phase downloaded and how fast (archives found in the cache's
    ``archives/`` or a local source are proved but not counted as downloaded)."""

    archives: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, float]:
        if not self.archives:
            return {}
        return {"archives": self.archives, "bytes": self.bytes,
                "seconds": round(self.seconds, 3),
                "bytes_per_second": round(self.bytes / max(self.seconds, 1e-6))}


def _entries(packages: Sequence[LockedPackage], how: Artifacts, progress: Progress,
             stats: FetchStats | None = None) -> tuple[dict[str, Entry], list[str]]:
    """A whole cache entry for every package (fetched, built and unpacked where missing):
    each archive is unpacked as soon as it is proved, while the others still download."""
    cache = how.cache
    entries: dict[str, Entry] = {}
    missing: list[LockedPackage] = []
    for p in packages:
        a = how.artifact(p)
        e = read_entry(cache, cache_key(a), a.filename)
        if e is None:
            missing.append(p)
        else:
            entries[cache_key(a)] = e
    if not missing:
        return entries, []
    problems: list[str | SamebitsError] = []
    proved: list[Any] = []
    lock = threading.Lock()
    # the size first (the lock's sizes, else a HEAD each): a 4.7 GB download says so
    files, size, unknown = how.download_size(missing)
    what = download_text(files, size, unknown) if files else plural(len(missing), "archive")
    started = time.monotonic()
    last = [started]
    with progress(f"fetching and unpacking {what}", len(missing)) as advance, \
            ThreadPoolExecutor(max_workers=UNPACK_THREADS) as unpacking:
        def unpack_one() -> None:
            with lock:  # the largest archive proved and waiting, not the one this job was
                f = heapq.heappop(waiting)[2]  # queued for: torch's 1.1 GB goes first
            try:
                entries[cache_key(f.package)] = unpack(f, cache)
            except UnpackError as exc:
                with lock:
                    problems.extend(f"{label(f.package)}: {x}" for x in exc.problems)
            advance(1, description=f"unpacked {f.package.name}")

        def one(p: LockedPackage) -> None:
            try:
                f = how.prove(p)
            except SamebitsError as exc:
                with lock:
                    problems.append(labelled(exc, label(p)))
                advance(1)
                return
            with lock:
                proved.append(f)
                if getattr(f, "downloaded", False) and stats is not None:
                    stats.archives += 1
                    stats.bytes += f.size
                    last[0] = time.monotonic()
            with lock:
                heapq.heappush(waiting, (-(f.size or 0), len(unpacks), f))
                unpacks.append(unpacking.submit(unpack_one))

        unpacks: list[Future[None]] = []
        waiting: list[tuple[int, int, Any]] = []  # (-size, order, proved archive)
        biggest_first = sorted(missing, key=lambda p: -(p.size or 0))
        with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
            list(pool.map(one, biggest_first))
        for job in unpacks:
            job.result()  # anything but an UnpackError (a full disk) is raised here
    if stats is not None and stats.archives:
        stats.seconds = last[0] - started
    raise_problems(problems)
    return entries, sorted(f.package.filename for f in proved)


# ----------------------------------------------------------------------------------- plan

@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    conda: list[CondaPlan]
    wheels: list[WheelPlan]
    keys: dict[tuple[str, str, str], str]   # package key -> its cache entry's key

    def key(self, plan: CondaPlan | WheelPlan) -> str:
        return self.keys[plan.package.key]


def _plan(env: LockedEnv, platform: str, entries: dict[str, Entry], stage: Path, final: str,
          line: str | None, python: str, how: Artifacts,
          checked: dict[str, CheckResult], *, venv: bool) -> _Plan:
    keys = {p.key: cache_key(how.artifact(p)) for p in [*env.conda(platform),
                                                        *env.pip(platform)]}
    to_check = [key for key in sorted(set(keys.values())) if key not in checked]
    # the child takes the entries with the most files, two thirds of them; this process
    # checks the rest once its plans are made (the child also pays for the pages it touches
    # after the fork: given every entry, it kept the plans waiting 20-60 ms)
    by_size = sorted(to_check, key=lambda k: -len(entries[k].members))
    files = sum(len(entries[k].members) for k in to_check)
    share: list[str] = []
    taken = 0
    while by_size and 3 * taken < 2 * files:
        share.append(by_size.pop(0))
        taken += len(entries[share[-1]].members)

    def check(keys_: list[str]) -> dict[str, CheckResult]:  # re-sealed after linking
        return {key: check_seal(entries[key], refresh_links=False) for key in keys_}

    # every file against its seal before anything is placed: on the other core while the
    # plans are made from the entries' manifests (``samebits.forked``), here where no child
    # could be forked or it did not answer (a corrupt entry is raised here, as before, and
    # before what planning from it raised)
    child = fork_call(lambda: check(share)) if len(to_check) > 1 else None
    if child is None:
        share, by_size = [], to_check

    def settle() -> None:
        try:
            mine = check(by_size)
        except BaseException:
            if child is not None:
                child.stop()
            raise
        if child is not None and not child.answered():  # idle until it does: the seals
            read_ahead(entries[k] for k in share)  # it checks, parsed for the verify here
        got: dict[str, CheckResult] = answer(child, lambda: check(share), CHILD_LIMIT)
        checked.update(mine)
        checked.update(got)

    try:
        plan = _plans(env, platform, entries, keys, stage, final, line, python, venv=venv,
                      memo=how.cache / PLANS)
    except Exception:
        settle()
        raise
    except BaseException:  # an interrupt: no answer is waited for
        if child is not None:
            child.stop()
        raise
    settle()
    return plan


def _plans(env: LockedEnv, platform: str, entries: dict[str, Entry],
           keys: dict[tuple[str, str, str], str], stage: Path, final: str, line: str | None,
           python: str, *, venv: bool, memo: Path | None = None) -> _Plan:
    conda, wheels = [], []
    for p in env.conda(platform):
        e = entries[keys[p.key]]
        try:
            conda.append(plan_conda(e, p, stage=stage, final=final, line=line))
        except ValueError as exc:
            raise InputError(f"{label(p)}: {p.filename}: {exc}") from None
    layout = layout_for(line or "", python, venv=venv)
    for p in env.pip(platform):
        e = entries[keys[p.key]]
        try:
            wheels.append(plan_wheel(e, p, stage=stage, layout=layout, memo=memo))
        except ValueError as exc:
            raise InputError(f"{label(p)}: {p.filename}: {exc}") from None
    return _Plan(conda=conda, wheels=wheels, keys=keys)


class NothingToInstall(InputError):
    """A lock that places no package on the platform: no prefix is made for it."""


def check_something_to_place(env: LockedEnv, platform: str) -> None:
    """``NothingToInstall`` when ``env`` locks no package for ``platform`` (a foreign lock
    whose every package was left out when it was read, say): said before any prefix is
    made, naming what was left out, so no empty folder is left behind."""
    if env.conda(platform) or env.pip(platform):
        return
    dropped = [d for d in (env.conversion.dropped if env.conversion else ())
               if d.platform == platform]
    why = ("; every package of it was left out when it was read: "
           + "; ".join(str(d) for d in dropped)) if dropped else ""
    raise NothingToInstall(f"{env.origin}: {platform}: no package that install can place"
                           + why, hint="nothing was installed and no prefix was made")


@paused_gc()
def install_prefix(env: LockedEnv, platform: str, prefix: Path, *, final: str, cache: Path,
                   interpreter: str | None = None, fetch: Fetcher = fetch_url,
                   link_mode: LinkMode = "auto", bytecode: bool = False,
                   progress: Progress | None = None,
                   host: str | None = None, sources: Sources = NO_SOURCES,
                   build_python: str | None = None, reseal: bool = True,
                   interpreter_cache: Path | None = None) -> InstallReport:
    """Install ``platform`` of ``env`` into ``prefix`` (an empty or new folder).

    ``final`` is the path the prefix will have where it runs (the same as ``prefix`` for a plain
    install; /opt/env in an image): placeholders, shebangs and pycs name it. ``interpreter`` is
    what a venv prefix runs on (a lock with no conda Python and a PyPI part needs one).
    ``bytecode`` compiles every installed ``.py`` with the prefix's own interpreter when it
    runs on ``host`` (default: this machine's platform). ``sources`` are where else a
    locked archive may be found (``--find-links``, ``--mirror``); an sdist is built on
    ``build_python`` when it is of the recorded line, else on a Python of that line found here.
    ``reseal=False``: the hardlinked files are not stated again and re-sealed here; the
    report names them (``linked``, ``to_reseal``) for the verify that follows, whose walk
    stats those very inodes, and ``samebits.install.resealing`` re-seals them from its stats.
    ``interpreter_cache``: where what is learnt of the interpreter that compiles the bytecode
    is kept (``interpreter.probe_known``); ``cache`` unless given.
    """
    env.check_platform(platform)
    check_something_to_place(env, platform)
    # the lock's own folder is one the user named (by naming the lock): file:// URLs into it
    # may be read, as from the sources' folders and the cache (``fetch.fetch_url``)
    sources = sources.with_roots(Path(env.path).absolute().parent)
    progress = progress or silent
    conda, pip = env.conda(platform), env.pip(platform)
    line = python_line(env, platform)
    has_conda_python = any(p.name == "python" for p in conda)
    if pip and not has_conda_python and not interpreter:
        raise InputError(f"{env.origin}: the PyPI part needs a Python {line} interpreter and "
                         "the lock has no conda python",
                         hint=f"pass --python /path/to/python{line}")
    if pip and line is None:
        raise LockfileError(f"{env.origin}: no samebits.python and no conda python: "
                            "cannot tell where site-packages go")
    placer = Placer(link_mode)
    packages = [*conda, *pip]
    builds = builds_of(env.lock.custom, file=env.origin)
    shared = shared_of(env.lock.custom, platform, file=env.origin)
    check_placeable(packages, builds, origin=env.origin)
    how = Artifacts(cache=cache, fetch=fetch, sources=sources, builds=builds,
                    python=build_pythons(build_python or interpreter))
    stats = FetchStats()
    entries, unpacked = _entries(packages, how, progress, stats)
    venv = interpreter if pip and not has_conda_python else None
    python_rel = "bin/python" if venv else f"bin/python{line}"
    python = f"{final}/bin/python" if venv or _has(entries, conda, "bin/python") \
        else f"{final}/bin/python{line}"
    notes: list[str] = []
    checked: dict[str, CheckResult] = {}
    for attempt in (1, 2):
        try:
            with progress(f"checking {plural(len(entries), 'cache entry', 'cache entries')}"
                          " against their seals", None):
                plan = _plan(env, platform, entries, prefix, final, line, python, how,
                             checked, venv=venv is not None)
                plan, overwritten = _settle(plan, env, platform, line, prefix, shared, entries)
            break
        except CorruptEntry as exc:
            if attempt == 2:
                raise InputError(f"the cache entry of {exc}, even after unpacking it again",
                                 hint=f"delete {cache / UNPACKED} and install again") from None
            if isinstance(exc, EntryGone):  # another process's new entry: read, kept
                notes.append(f"cache entry of {exc}: read again")
            else:
                notes.append(f"cache entry of {exc}: evicted and unpacked again")
                evict(cache / UNPACKED, exc.entry.key)
            checked.pop(exc.entry.key, None)
            entries, more = _entries(packages, how, progress, stats)
            unpacked = sorted({*unpacked, *more})
    placed_from = _place(plan, prefix, placer, venv, line, progress)
    report_bytecode = None
    if bytecode:
        groups = [PycSources(archive=plan.key(w), files=w.sources, name=w.package.filename)
                  for w in plan.wheels]
        groups += [PycSources(archive=plan.key(c), files=c.sources, name=c.package.filename)
                   for c in plan.conda]
        host = host or host_platform()
        elsewhere = None if host == platform else (
            f"the environment is for {platform}, this machine is {host}")
        report_bytecode = compile_bytecode(prefix, final, python_rel, groups, cache, placer,
                                           runs_here=elsewhere, progress=progress,
                                           facts=interpreter_cache)
        placed_from.update(report_bytecode.sources)
    for w in plan.wheels:
        notes += [f"{w.package.name}: {n}" for n in w.notes]
    pyc_entries = report_bytecode.entries if report_bytecode else {}
    checked.update(report_bytecode.checked if report_bytecode else {})
    linked = linked_entries({**entries, **pyc_entries}, placer.linked)
    resealed = reseal_all(linked) if reseal else 0
    return InstallReport(
        platform=platform, prefix=final, python=line,
        conda=tuple(f"{p.name}={p.version}={p.build}" for p in conda),
        pip=tuple(f"{p.name}=={p.version}" for p in pip),
        venv_interpreter=venv, links_out=VENV_LINKS if venv else (),
        link_mode=link_mode, placed=placer.methods, unpacked=tuple(unpacked),
        bytecode=report_bytecode, sources=placed_from, notes=tuple(notes),
        fetch=stats.to_json(), seal=_seal_counts(checked, resealed),
        sealed_entries=tuple(sorted({archive_of(str(e.root)) for e, _ in linked})),
        overwritten=overwritten, to_reseal=() if reseal else tuple(linked),
        linked={} if reseal else _linked_at(placer, prefix, venv is not None))


def _linked_at(placer: Placer, stage: Path, venv: bool) -> dict[str, str]:
    """Where ``placer`` hardlinked each cache file: the path under ``stage`` (as a walk of
    it finds it: ``lib64/x`` of a venv is ``lib/x``) -> the cache path."""
    root = f"{stage}/"
    cut = len(root)
    return {(through_folder_links(dest[cut:]) if venv else dest[cut:]): src
            for dest, src in zip(placer.linked_at, placer.linked, strict=True)
            if dest.startswith(root)}


def resealed(report: InstallReport, n: int, note: str = "") -> InstallReport:
    """The report of an ``install_prefix(reseal=False)`` with the files its verify's stats
    re-sealed counted (``samebits.install.resealing``), and what went wrong, if anything."""
    return replace(report, seal={**report.seal, "resealed": n}, to_reseal=(), linked={},
                   notes=(*report.notes, note) if note else report.notes)


def _seal_counts(checked: dict[str, CheckResult], resealed: int) -> dict[str, int]:
    """How the entries' files were proved before placing, summed over the entries."""
    return {"entries": len(checked),
            "vouched": sum(c.vouched for c in checked.values()),
            "relinked": sum(c.relinked for c in checked.values()),
            "hashed": sum(c.hashed for c in checked.values()),
            "sealed_now": sum(1 for c in checked.values() if c.sealed_now),
            "resealed": resealed}


def _has(entries: dict[str, Entry], conda: Sequence[LockedPackage], path: str) -> bool:
    """Whether some conda package installs ``path`` (a conda python's ``bin/python``)."""
    return any(m.path == path for p in conda for m in entries[cache_key(p)].members)


# ---------------------------------------------------------------------------------- place

def _settle(plan: _Plan, env: LockedEnv, platform: str, line: str | None, stage: Path,
            shared: SharedPaths | None, entries: dict[str, Entry]
            ) -> tuple[_Plan, tuple[Overwrite, ...]]:
    """One writer left for each path several wheels write (``overwrite.settle``): the lock's
    recorded winner, else the last in pip's order of the lock's wheels, computed here."""
    from samebits.foreign.target import Target

    def order() -> list[str]:
        environment = Target(platform=platform, python=line or "3", glibc="2.17").environment()
        return installed_order([(w.package, entries[plan.key(w)]) for w in plan.wheels],
                               environment=environment)

    wheels, overwritten = settle(plan.wheels, stage=stage, recorded=shared, order=order,
                                 origin=env.origin)
    return replace(plan, wheels=wheels), overwritten


def _place(plan: _Plan, stage: Path, placer: Placer, venv: str | None, line: str | None,
           progress: Progress) -> dict[str, str]:
    """Everything into ``stage``; the placed-from map (prefix-relative path -> entry key)."""
    copies: list[Copy] = []
    writes: list[tuple[Path, bytes, bool]] = []
    links: list[tuple[Path, str]] = []
    dirs: list[Path] = []
    sources: dict[str, str] = {}
    for c in plan.conda:
        copies += c.copies
        writes += c.writes
        links += c.links
        dirs += c.dirs
        name, record = c.record
        writes.append((stage / name, record, False))
    if plan.conda:
        writes.append((stage / "conda-meta" / "history", b"", False))
    folders: list[tuple[Path, str]] = []  # made before any folder: lib64/ goes through
    if venv is not None:
        assert line is not None
        files, symlinks = venv_files(venv, line)
        writes += [(stage / rel, text.encode(), False) for rel, text in files.items()]
        links += [(stage / rel, target) for rel, target in symlinks.items()
                  if rel not in VENV_FOLDER_LINKS]
        folders += [(stage / rel, target) for rel, target in VENV_FOLDER_LINKS.items()]
        dirs.append(stage / "lib" / f"python{line}" / "site-packages")
    for w in plan.wheels:
        copies += w.copies
        writes += w.writes
    plans: list[CondaPlan | WheelPlan] = [*plan.conda, *plan.wheels]
    through = tuple(f"{rel}/" for rel in VENV_FOLDER_LINKS) if venv else ()
    for plan_ in plans:
        key = f"{UNPACKED}/{plan.key(plan_)}"
        for copy in plan_.copies:
            rel = copy.rel
            sources[through_folder_links(rel) if rel.startswith(through) else rel] = key
    copies = one_copy_per_path(copies)  # wheels settled already: conda's files, same bytes
    total = sum(c.size for c in copies) + sum(len(d) for _, d, _ in writes)
    count = len(copies) + len(writes) + len(links)
    stage.mkdir(parents=True, exist_ok=True)
    for path, target in folders:
        (path.parent / target).mkdir(exist_ok=True)
        os.symlink(target, path)
    with progress(f"placing {count:,} files ({size_text(total)})", total) as advance:
        make_dirs([str(d) for d in dirs] + [str(p.parent) for p, _, _ in writes]
                  + [str(p.parent) for p, _ in links], made=placer.dirs)
        place_all(copies, str(stage), placer, advance=advance)
        clobbered = write_all(writes)
        advance(sum(len(data) for _, data, _ in writes))
        for path, target in links:
            try:
                os.symlink(target, path)
            except FileExistsError:
                clobbered.append(f"{path}: already exists (two packages write it)")
        if clobbered:
            raise InputError(f"{plural(len(clobbered), 'file')} could not be placed:\n  "
                             + "\n  ".join(sorted(clobbered)[:20]))
    return sources


"""Overwrite: a path two wheels of one install write with different bytes, left as pip leaves it.

pip installs a resolution's wheels one after another in its installation order
(``samebits.lock.pipordering``); a later wheel overwrites what an earlier one wrote, so the
file of the last writer stays, and the earlier writer's RECORD still lists the path with its
own hash. ``settle`` does the same with the planned wheels before anything is placed: for each
path more than one wheel writes,

    same bytes    (and mode) placed once: every CUDA 12 ``nvidia-*`` wheel ships one empty
                  ``nvidia/__init__.py``
    recorded      the lock records the path (``samebits.lock.shared``, written by ``samebits
                  lock``): the last writer it names is placed. The wheels that write the path
                  here must be the writers it names; a record that says otherwise (edited, or
                  of other wheels) is a LockfileError naming the key and the path
    unrecorded    pip's order computed here (``order()``): from every locked wheel's METADATA
                  in the cache, markers read for the lock's platform and Python, each locked
                  package a root requirement (what ``pip install -r`` of the lock's pins
                  resolves); the last writer in it is placed

Every different-bytes path is an ``Overwrite``: the install's report warns with the packages
and the paths (``InstallReport``), its ``--json`` lists each. The losers' files are not placed
and their ``.py`` sources are not compiled (the pyc must be of the file that stays).

**Why an unrecorded path is settled, not refused.** A lock written before samebits recorded
shared paths, and every lock of another tool (uv.lock, pylock.toml, pixi.lock: none has a
place to record a winner), can hold such a pair. The order computed here is a function of the
lock's bytes alone (its PyPI packages, and the wheels its hashes fix), so every install of that
lock by this samebits places the same bytes, as a recorded winner does; it is also the order
older samebits installed by where it installed at all (a package that needs the other, last in
pip's order too: sktime over its dependency scikit-base). Refusing would give nothing more
certain and make those locks uninstallable. What only a record gives is that a later samebits,
following a later pip's order, cannot choose otherwise: the warning says the winner was
computed, not recorded, and that a re-lock records it.
"""

from __future__ import annotations

import filecmp
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from samebits.errors import LockfileError, Problem, plural
from samebits.install.cache import Entry
from samebits.install.entryfiles import read_member
from samebits.install.wheels import WheelPlan, dist_info_of
from samebits.lock.model import LockedPackage
from samebits.lock.shared import RELOCK, SharedPaths

SHOWN = 3  # paths a warning line names; --json lists every one


@dataclass(frozen=True, slots=True, kw_only=True)
class Overwrite:
    """One path several wheels write with different bytes."""

    path: str                    # prefix-relative
    writers: tuple[str, ...]     # pip's installation order: the last one's file is placed
    recorded: bool               # the lock records it (else the order was computed here)

    @property
    def winner(self) -> str:
        return self.writers[-1]

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "writers": list(self.writers), "winner": self.winner,
                "recorded": self.recorded}


def warning_lines(overwrites: Sequence[Overwrite]) -> list[str]:
    """One line per sequence of writers: the packages, a count and the first paths."""
    groups: dict[tuple[tuple[str, ...], bool], list[str]] = {}
    for o in overwrites:
        groups.setdefault((o.writers, o.recorded), []).append(o.path)
    out = []
    for (writers, recorded), paths in sorted(groups.items()):
        losers = ", ".join(f"{w}'s" for w in writers[:-1])
        shown = ", ".join(paths[:SHOWN]) + (f" and {len(paths) - SHOWN} more (--json lists "
                                            "every one)" if len(paths) > SHOWN else "")
        how = ("the lock records it" if recorded else
               "pip's order computed here: the lock records none; re-lock to record it")
        out.append(f"  warning    {plural(len(paths), 'file')} written with different bytes "
                   f"by {' and '.join(writers)}: {writers[-1]}'s placed over {losers}, as pip "
                   f"installs them ({how}): {shown}")
    return out


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """Whether two planned files at one path have the same bytes and mode."""
    def facts(item: tuple[str, Any]) -> tuple[bool, bytes | None, str | None]:
        kind, x = item
        return (x.executable, None, x.src) if kind == "copy" else (x[2], x[1], None)

    (xa, da, sa), (xb, db, sb) = facts(a), facts(b)
    if xa != xb:
        return False
    if sa is not None and sb is not None:
        return filecmp.cmp(sa, sb, shallow=False)
    return (da if da is not None else Path(str(sa)).read_bytes()) == \
        (db if db is not None else Path(str(sb)).read_bytes())


def settle(plans: Sequence[WheelPlan], *, stage: Path, recorded: SharedPaths | None,
           order: Callable[[], Sequence[str]], origin: str
           ) -> tuple[list[WheelPlan], tuple[Overwrite, ...]]:
    """The wheels' plans with one writer left for each path several write, and every path
    whose writers' bytes differ (module docstring). ``order()``: pip's installation order of
    the locked packages, asked for only when a path the lock does not record needs it."""
    stage_text = str(stage).rstrip("/") + "/"
    by_path: dict[str, list[tuple[int, tuple[str, Any]]]] = {}
    for i, w in enumerate(plans):
        for c in w.copies:
            by_path.setdefault(c.rel, []).append((i, ("copy", c)))
        for item in w.writes:
            rel = str(item[0])[len(stage_text):]
            by_path.setdefault(rel, []).append((i, ("write", item)))
    record = recorded.writers() if recorded is not None else {}
    _check_record(plans, by_path, record, recorded, origin)
    ranked: list[dict[str, int]] = []
    dropped: dict[int, set[str]] = {}
    lost: set[tuple[int, str]] = set()   # (wheel, path) whose bytes are not placed
    overwrites = []
    # the paths with more than one item (of 17,000, a handful), in order
    for path in sorted(p for p, items in by_path.items() if len(items) > 1):
        items = by_path[path]
        if len({i for i, _ in items}) < 2:
            continue
        if all(_same(items[0][1], other) for _, other in items[1:]):
            keep = items[0][0]  # one file: each writer's source compiles to the same pyc
        else:
            names = {str(canonicalize_name(plans[i].package.name)): i for i, _ in items}
            if path in record:
                writers = record[path]
            else:
                if not ranked:
                    ranked.append({n: k for k, n in enumerate(order())})
                writers = tuple(sorted(names, key=lambda n: (ranked[0].get(n, -1), n)))
            keep = names[writers[-1]]
            overwrites.append(Overwrite(path=path, writers=writers, recorded=path in record))
            lost.update((i, path) for i, _ in items if i != keep)
        for i, _ in items:
            if i != keep:
                dropped.setdefault(i, set()).add(path)
    out = []
    for i, w in enumerate(plans):
        gone = dropped.get(i)
        if not gone:
            out.append(w)
            continue
        out.append(replace(
            w, copies=tuple(c for c in w.copies if c.rel not in gone),
            writes=tuple(x for x in w.writes if str(x[0])[len(stage_text):] not in gone),
            sources=tuple(s for s in w.sources if (i, s) not in lost)))
    return out, tuple(overwrites)


def _check_record(plans: Sequence[WheelPlan], by_path: dict[str, list[tuple[int, Any]]],
                  record: dict[str, tuple[str, ...]], recorded: SharedPaths | None,
                  origin: str) -> None:
    """Every recorded path is written here by exactly the writers the lock names."""
    if recorded is None:
        return
    problems = []
    for path, writers in sorted(record.items()):
        here = sorted({canonicalize_name(plans[i].package.name)
                       for i, _ in by_path.get(path, ())})
        if here != sorted(writers):
            problems.append(Problem(
                file=origin, key=f"metadata.custom_metadata.{recorded.key}", value=path,
                message=f"the lock records it written by {', '.join(writers)}; its wheels "
                f"write it here by {', '.join(here) or 'none'}"))
    if problems:
        raise LockfileError(problems, hint=RELOCK)


def installed_order(wheels: Sequence[tuple[LockedPackage, Entry]], *, environment: dict[str, str]
                    ) -> list[str]:
    """pip's installation order of these locked wheels (their METADATA read from the cache),
    with every one a root requirement: ``pip install -r`` of the lock's pins (asked only where
    several wheels write one path: the requirement parser is not imported otherwise)."""
    from samebits.lock.pipordering import Dist, pip_order

    dists = []
    for p, entry in wheels:
        info = dist_info_of(entry)
        metadata = read_member(entry, entry.by_path(), f"{info}/METADATA") or b""
        dists.append(Dist.from_metadata(p.name, metadata))
    return pip_order(dists, [d.name for d in dists], environment)

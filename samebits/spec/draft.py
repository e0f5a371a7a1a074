"""The choices ``samebits init`` makes for a spec, from what a file declares and what the
indexes offer. Pure: the edge (``samebits_app.cmd_init``) fetches, this decides.

    applicable(reqs, targets)        requirements whose marker holds on some target; the rest
                                     are left out (a macOS-only line), each with its reason
    wheel_pythons(pin, files, ...)   the Pythons with a wheel of a pinned release on every
                                     platform (its tags and requires-python), or why unknown
    choose_python(...)               --python-version, the file's own Python, else the Python
                                     the author runs when every pin has a wheel for it, else
                                     the newest of 3.9-3.13 with a wheel of every pin;
                                     NoWheelError names each pin without one, with the Pythons
                                     that have wheels
    newest_upload(...)               exclude-newer: one second after the newest upload among
                                     the files a pinned release offers for the chosen target
    pytorch_index(name, version)     a PyTorch local version's download.pytorch.org index

The CUDA line of the torch build and the generation are ``samebits.spec.torchcuda``'s.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from samebits.errors import NoWheelError, Problem, SourceError, plural
from samebits.foreign.requirements import file_version
from samebits.foreign.simpleindex import IndexFile
from samebits.foreign.sources import Left, Requested
from samebits.foreign.target import Target

# what init chooses from, oldest first: 3.9 only where no newer line has a wheel of every pin
# (a 2022 paper's transformers==4.2.1 needs tokenizers 0.9.4, whose newest wheels are cp39)
PYTHONS = ("3.9", "3.10", "3.11", "3.12", "3.13")
KNOWN_PYTHONS = ("3.7", "3.8", *PYTHONS, "3.14")  # what an error lists wheels for
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
PYTORCH_LABEL = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+(\.\d+)*)$")


# ------------------------------------------------------------------ markers

def holds(req: Requested, target: Target) -> bool:
    marker = Requirement(req.text).marker
    return marker is None or marker.evaluate({**target.environment(), "extra": ""})


def applicable(reqs: Sequence[Requested], targets: Sequence[Target],
               ) -> tuple[tuple[Requested, ...], tuple[Left, ...]]:
    """(the requirements whose marker holds on at least one target, the others left out);
    two lines of one package with the same marker become one (``merged``); two whose markers
    never both hold on one target (a file compiled for several Pythons: cleanrl's
    ``networkx==3.2.1; python_full_version == '3.9.*'`` and ``networkx==3.4.2;
    python_full_version >= '3.10'``) are both kept, for the choice of the Python to settle
    (``marker_lines``); SourceError when one package is asked for twice on one target."""
    kept, left = [], []
    where = ", ".join(sorted({t.platform for t in targets}))
    for r in reqs:
        if any(holds(r, t) for t in targets):
            kept.append(r)
        else:
            left.append(Left(where=r.where, text=r.text, reason=f"its marker is false on {where}"
                             f" for Python {span(sorted({t.line for t in targets}, key=Version))}"))
    by_name: dict[str, list[Requested]] = {}
    problems = []
    for r in kept:
        same = by_name.setdefault(r.name, [])
        for i, first in enumerate(same):
            both = merged(first, r)
            if both is not None:  # as pip takes them: every line's specifiers, all extras
                same[i] = both
                break
            if any(holds(first, t) and holds(r, t) for t in targets):
                problems.append(Problem(
                    file=r.where.split(":")[0], key=r.where, value=r.text,
                    message=f"{r.name} is already asked for at {first.where} ({first.text}): "
                    "a spec takes one requirement per package"))
                break
        else:
            same.append(r)
    if problems:
        raise SourceError(problems, hint="keep one line per package (markers that tell the "
                          "lines apart on Linux cannot be carried into one spec)")
    return tuple(r for same in by_name.values() for r in same), tuple(left)


def marker_lines(w: PinWheels, platforms: Sequence[str], glibc: str) -> PinWheels:
    """``w`` constraining only the Pythons its marker holds on: a line of Python it never
    applies to counts as having its wheel (networkx==3.4.2's marker ``>= '3.10'`` says
    nothing of 3.9, whose own line pins 3.2.1)."""
    if w.state not in ("wheels", "url") or Requirement(w.pin.text).marker is None:
        return w
    free = [v for v in KNOWN_PYTHONS if v not in w.pythons and not any(
        holds(w.pin, Target(platform=p, python=v, glibc=glibc)) for p in platforms)]
    return replace(w, pythons=tuple(v for v in KNOWN_PYTHONS if v in w.pythons or v in free)) \
        if free else w


def merged(a: Requested, b: Requested) -> Requested | None:
    """Two lines asking for one package as pip takes them, one requirement: both lines'
    specifiers (all must hold) and extras (TinyLlama's ``lightning==2.1.2`` and
    ``lightning[app]``: ``lightning[app]==2.1.2``); None where one names a URL or their markers
    differ (which line applies would depend on the machine)."""
    ra, rb = Requirement(a.text), Requirement(b.text)
    if a.url or b.url or ra.url or rb.url or str(ra.marker) != str(rb.marker):
        return None
    both = Requirement(a.text)
    both.extras = ra.extras | rb.extras
    both.specifier = ra.specifier & rb.specifier
    pins = [sp.version for sp in both.specifier if sp.operator in ("==", "===")
            and "*" not in sp.version]
    return Requested(text=str(both), name=a.name, pinned=pins[0] if len(set(pins)) == 1
                     else a.pinned or b.pinned, where=f"{a.where}, {b.where}")


# ------------------------------------------------------------------ wheels and Pythons

@dataclass(frozen=True, slots=True, kw_only=True)
class PinWheels:
    """What the indexes offer for one pinned release."""

    pin: Requested
    state: Literal["wheels", "sdist-only", "not-found", "url"]
    pythons: tuple[str, ...] = ()  # with a wheel on every platform (state "wheels", "url")
    files: tuple[IndexFile, ...] = ()  # the release's files
    sdist: bool = False  # state "wheels": the release has an sdist too, which builds anywhere

    def describe(self) -> str:
        if self.state in ("wheels", "url"):
            return (f"wheels for Python {span(self.pythons)}" if self.pythons
                    else "no wheel for any CPython 3.7-3.14 on these platforms")
        return "no wheel, only an sdist" if self.state == "sdist-only" else "not on the index"


def span(pythons: Sequence[str]) -> str:
    return ", ".join(pythons) if pythons else "none"


def release_files(name: str, version: str, files: Iterable[IndexFile]) -> list[IndexFile]:
    """The files of ``name``'s release ``version`` as ``name==version`` reads it (PEP 440: a
    version without a local label matches every local one, ``torch==2.13.0`` the files of
    ``2.13.0+cpu``, as pip and uv take them)."""
    try:
        want = SpecifierSet(f"=={version}")
    except InvalidSpecifier:
        return []
    out = []
    for f in files:
        got = file_version(f.filename)
        if got and got[0] == name and want.contains(got[1], prereleases=True):
            out.append(f)
    return out


def fits(filename: str, requires_python: str | None, target: Target) -> bool:
    """Whether a wheel installs on ``target``: its tags and its requires-python."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, InvalidVersion):
        return False
    if not tags & frozenset(target.tags()):
        return False
    if requires_python:
        try:
            return SpecifierSet(requires_python).contains(target.full_version,
                                                          prereleases=True)
        except InvalidSpecifier:
            return True
    return True


def wheel_pythons(pin: Requested, files: Sequence[IndexFile], *, platforms: Sequence[str],
                  glibc: str) -> PinWheels:
    if pin.url is not None:
        name = pin.url.split("#")[0].rsplit("/", 1)[-1]
        if not name.endswith(".whl"):  # an sdist by URL: built on any Python
            return PinWheels(pin=pin, state="sdist-only")
        ok = tuple(p for p in KNOWN_PYTHONS
                   if all(fits(_unquote(name), None, Target(platform=pl, python=p, glibc=glibc))
                          for pl in platforms))
        return PinWheels(pin=pin, state="url", pythons=ok)
    assert pin.pinned is not None
    rel = release_files(pin.name, pin.pinned, files)
    wheels = [f for f in rel if f.filename.endswith(".whl")]
    if not rel:
        return PinWheels(pin=pin, state="not-found")
    if not wheels:
        return PinWheels(pin=pin, state="sdist-only", files=tuple(rel))
    ok = tuple(p for p in KNOWN_PYTHONS
               if all(any(fits(f.filename, f.requires_python,
                               Target(platform=pl, python=p, glibc=glibc)) for f in wheels)
                      for pl in platforms))
    return PinWheels(pin=pin, state="wheels", pythons=ok, files=tuple(rel),
                     sdist=any(not f.filename.endswith(".whl") for f in rel))


def range_pythons(req: Requested, files: Sequence[IndexFile], *, platforms: Sequence[str],
                  glibc: str, before: dt.datetime | None) -> PinWheels | None:
    """For a requirement that pins no release (``torch>=2.3.0``, ``numpy``): the Pythons for
    which some release it allows, uploaded before ``before`` (the spec's exclude-newer) and not
    yanked (PEP 592: a resolver takes a yanked release only when it is pinned), has a wheel on
    every platform; None when nothing can be said (no release matches, or one is sdist-only:
    it builds on any Python). torchvision's yanked sdist-only 0.1.6 made an unpinned
    ``torchvision`` of 2023 say nothing, and init chose Python 3.11, which none of its wheels
    of that time fit."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        spec = Requirement(req.text).specifier
    except InvalidRequirement:
        return None
    releases: dict[Version, list[IndexFile]] = {}
    for f in files:
        got = file_version(f.filename)
        if got is None or got[0] != req.name or got[1].is_prerelease \
                or not spec.contains(got[1]) or f.yanked:
            continue
        uploaded = parse_upload_time(f.upload_time)
        if before is not None and (uploaded is None or uploaded >= before):
            continue
        releases.setdefault(got[1], []).append(f)
    if not releases or any(not any(f.filename.endswith(".whl") for f in rel)
                           for rel in releases.values()):
        return None
    ok = tuple(p for p in KNOWN_PYTHONS
               if any(all(any(f.filename.endswith(".whl") and fits(
                   f.filename, f.requires_python, Target(platform=pl, python=p, glibc=glibc))
                   for f in rel) for pl in platforms) for rel in releases.values()))
    return PinWheels(pin=req, state="wheels", pythons=ok)


def _unquote(name: str) -> str:
    from urllib.parse import unquote

    return unquote(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    value: str
    why: str


def choose_python(wheels: Sequence[PinWheels], *, requested: str | None, pinned: str | None,
                  requires_python: str | None, where: str,
                  preferred: Choice | None = None) -> Choice:
    """``requested`` (--python-version), else the file's own (``pinned``), else ``preferred``
    (the line of the Python the author runs, ``why`` naming it) when it is one of PYTHONS and
    every pin has a wheel for it (a paper's numbers came from that Python), else the newest of
    PYTHONS every pin has a wheel for; NoWheelError otherwise."""
    constraining = [w for w in wheels if w.state in ("wheels", "url")]
    given = requested or pinned
    if given is not None:
        missing = [w for w in constraining if given not in w.pythons]
        if missing:
            flag = f"--python-version {given}" if requested else f"Python {given} (the file's own)"
            raise NoWheelError(
                f"{flag}: no wheel for {where} of " + plural(len(missing), "pinned package")
                + ":\n  "
                + "\n  ".join(f"{w.pin.text} ({w.pin.where}): {w.describe()}" for w in missing),
                hint=_python_hint(constraining, given))
        why = "--python-version" if requested else "the Python the file pins"
        return Choice(value=given, why=why)
    allowed = [p for p in PYTHONS if _allows(requires_python, p)]
    ok = [p for p in allowed if all(p in w.pythons for w in constraining)]
    built = _from_sdists(constraining, allowed, preferred)
    if not ok and built is not None:
        return built
    if not ok:
        blocking = [w for w in constraining if not set(allowed) <= set(w.pythons)]
        raise NoWheelError(
            f"no Python of {allowed[0] if allowed else PYTHONS[0]}-{PYTHONS[-1]} has a wheel "
            f"of every pinned package for {where}:\n  "
            + "\n  ".join(f"{w.pin.text} ({w.pin.where}): {w.describe()}" for w in blocking),
            hint="pass --python-version X.Y (samebits locks CPython 3.9 and newer), or change "
            "the pins")
    if preferred is not None and preferred.value in ok:
        return Choice(value=preferred.value,
                      why=f"{preferred.why}, and every pinned package has a wheel for it"
                      if constraining else preferred.why)
    best = ok[-1]
    if preferred is not None and preferred.value != best:
        stops = [w.pin.text for w in constraining if preferred.value not in w.pythons]
        if preferred.value not in PYTHONS:
            why = f"samebits chooses from {span(PYTHONS)}"
        elif preferred.value not in allowed:
            why = f"requires-python {requires_python} excludes it"
        else:
            why = f"no wheel of {', '.join(stops[:3])}" + (
                f" and {len(stops) - 3} more" if len(stops) > 3 else "")
        return Choice(value=best, why=f"the newest of {span(allowed)} with a wheel of every "
                      f"pinned package, not {preferred.why} ({why})")
    newer = [p for p in allowed if Version(p) > Version(best)]
    if not newer:
        return Choice(value=best, why=f"the newest of {span(allowed)} with a wheel of every "
                      "pinned package" if constraining else "the newest samebits chooses from")
    nxt = newer[0]
    stops = [w.pin.text for w in constraining if nxt not in w.pythons]
    return Choice(value=best, why=f"the newest of {span(allowed)} with a wheel of every pinned "
                  f"package ({nxt}: no wheel of {', '.join(stops[:3])}"
                  + (f" and {len(stops) - 3} more" if len(stops) > 3 else "") + ")")


def _from_sdists(constraining: Sequence[PinWheels], allowed: Sequence[str],
                 preferred: Choice | None) -> Choice | None:
    """Where no Python has a wheel of every pin but the pins without one have an sdist, as pip
    would: the author's Python when it is one of them, else the oldest (the nearest to the
    Pythons those wheels were made for, where an old sdist most likely still builds); None
    when some pin has neither."""
    fits_ = [p for p in allowed if all(p in w.pythons or w.sdist for w in constraining)]
    if not fits_:
        return None
    value = preferred.value if preferred is not None and preferred.value in fits_ \
        else fits_[0]
    built = [w for w in constraining if value not in w.pythons]
    names = ", ".join(f"{w.pin.text} (wheels for {span(w.pythons) if w.pythons else 'none'})"
                      for w in built[:3]) + (f" and {len(built) - 3} more" if len(built) > 3
                                             else "")
    which = preferred.why if preferred is not None and value == preferred.value \
        else "the oldest, nearest the Pythons of their wheels"
    return Choice(value=value, why=f"no Python of {span(allowed)} has a wheel of every "
                  f"pinned package: {value} ({which}), where pip builds {names} from the "
                  "sdist")


def _allows(requires_python: str | None, python: str) -> bool:
    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(f"{python}.0", prereleases=True) or \
            SpecifierSet(requires_python).contains(f"{python}.99", prereleases=True)
    except InvalidSpecifier:
        return True


def _python_hint(constraining: Sequence[PinWheels], given: str) -> str:
    common = [p for p in KNOWN_PYTHONS if all(p in w.pythons for w in constraining)
              and Version(p) >= Version("3.9")]
    if common:
        return f"pass --python-version {common[-1]} (every pin has a wheel for {span(common)})"
    return "change the pins: no Python has a wheel of every one"


# ------------------------------------------------------------------ exclude-newer

def newest_upload(wheels: Sequence[PinWheels], targets: Sequence[Target],
                  ) -> tuple[str, str] | None:
    """(exclude-newer, why): one second after the newest upload among the files a pinned
    release offers for ``targets`` (its sdist when no wheel fits); None when no index gave an
    upload time."""
    best: tuple[dt.datetime, PinWheels, IndexFile] | None = None
    for w in wheels:
        usable = [f for f in w.files if f.filename.endswith(".whl")
                  and any(fits(f.filename, f.requires_python, t) for t in targets)]
        if not usable:
            usable = [f for f in w.files if not f.filename.endswith(".whl")]
        for f in usable:
            when = parse_upload_time(f.upload_time)
            if when is not None and (best is None or when > best[0]):
                best = (when, w, f)
    if best is None:
        return None
    when, w, f = best
    cut = when.replace(microsecond=0) + dt.timedelta(seconds=1)
    text = cut.strftime("%Y-%m-%dT%H:%M:%SZ")
    return text, (f"one second after the newest pinned release's upload: {w.pin.text} "
                  f"({f.filename}, {when.strftime('%Y-%m-%dT%H:%M:%SZ')})")


def parse_upload_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)


# ------------------------------------------------------------------ indexes

def pytorch_index(name: str, version: str) -> str | None:
    """download.pytorch.org's index for a torch/torchvision/torchaudio local version
    (``2.0.1+cu118`` -> https://download.pytorch.org/whl/cu118), else None."""
    if str(canonicalize_name(name)) not in TORCH_FAMILY:
        return None
    try:
        local = Version(version).local
    except InvalidVersion:
        return None
    if local and PYTORCH_LABEL.match(local):
        return f"https://download.pytorch.org/whl/{local}"
    return None

"""The choices ``samebits init`` makes for a spec, from what a file declares and what the
indexes offer. Pure: the edge (``samebits.app.cmd_init``) fetches, this decides.

    applicable(reqs, targets)        requirements whose marker holds on some target; the rest
                                     are left out (a macOS-only line), each with its reason
    wheel_pythons(pin, files, ...)   the Pythons with a wheel of a pinned release on every
                                     platform (its tags and requires-python), or why unknown
    choose_python(...)               --python, the file's own Python, else the newest of
                                     3.10-3.13 with a wheel of every pin; NoWheelError names
                                     each pin without one, with the Pythons that have wheels
    newest_upload(...)               exclude-newer: one second after the newest upload among
                                     the files a pinned release offers for the chosen target
    cuda_evidence / choose_generation
                                     the CUDA line of the torch build (a +cu118 or +cpu local
                                     version, a download.pytorch.org index, an
                                     nvidia-cuda-runtime pin, conda's pytorch-cuda or
                                     cudatoolkit, PyPI's torch by registry or by the wheel's
                                     Requires-Dist) and the generation: --generation, else the
                                     only one that line serves, else say which to pass
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from samebits.errors import NoWheelError, Problem, SourceError, UsageError, plural
from samebits.foreign.simpleindex import IndexFile
from samebits.foreign.sources import Declared, Left, Requested
from samebits.foreign.target import Target
from samebits.gpus import registry, sass_runs_on

PYTHONS = ("3.10", "3.11", "3.12", "3.13")  # what init chooses from, oldest first
KNOWN_PYTHONS = ("3.7", "3.8", "3.9", *PYTHONS, "3.14")  # what an error lists wheels for
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
PYTORCH_LABEL = re.compile(r"^(cpu|cu\d{2,3}|rocm\d+(\.\d+)*)$")
PYTORCH_INDEX = re.compile(r"^https://download\.pytorch\.org/whl/(cpu|cu\d{2,3})/?$")
CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")
CONDA_CUDA = ("pytorch-cuda", "cudatoolkit", "cuda-version", "cuda-cudart", "cuda-runtime")


# ------------------------------------------------------------------ markers

def holds(req: Requested, target: Target) -> bool:
    marker = Requirement(req.text).marker
    return marker is None or marker.evaluate({**target.environment(), "extra": ""})


def applicable(reqs: Sequence[Requested], targets: Sequence[Target],
               ) -> tuple[tuple[Requested, ...], tuple[Left, ...]]:
    """(the requirements whose marker holds on at least one target, the others left out);
    SourceError when one package is still asked for twice."""
    kept, left = [], []
    where = ", ".join(sorted({t.platform for t in targets}))
    for r in reqs:
        if any(holds(r, t) for t in targets):
            kept.append(r)
        else:
            left.append(Left(where=r.where, text=r.text, reason=f"its marker is false on {where}"
                             f" for Python {', '.join(sorted({t.line for t in targets}))}"))
    by_name: dict[str, Requested] = {}
    problems = []
    for r in kept:
        if r.name in by_name:
            first = by_name[r.name]
            problems.append(Problem(file=r.where.split(":")[0], key=r.where, value=r.text,
                                    message=f"{r.name} is already asked for at {first.where} "
                                    f"({first.text}): a spec takes one requirement per package"))
        by_name.setdefault(r.name, r)
    if problems:
        raise SourceError(problems, hint="keep one line per package (markers that tell the "
                          "lines apart on Linux cannot be carried into one spec)")
    return tuple(kept), tuple(left)


# ------------------------------------------------------------------ wheels and Pythons

@dataclass(frozen=True, slots=True, kw_only=True)
class PinWheels:
    """What the indexes offer for one pinned release."""

    pin: Requested
    state: Literal["wheels", "sdist-only", "not-found", "url"]
    pythons: tuple[str, ...] = ()  # with a wheel on every platform (state "wheels", "url")
    files: tuple[IndexFile, ...] = ()  # the release's files

    def describe(self) -> str:
        if self.state in ("wheels", "url"):
            return (f"wheels for Python {span(self.pythons)}" if self.pythons
                    else "no wheel for any CPython 3.7-3.14 on these platforms")
        return "no wheel, only an sdist" if self.state == "sdist-only" else "not on the index"


def span(pythons: Sequence[str]) -> str:
    return ", ".join(pythons) if pythons else "none"


def release_files(name: str, version: str, files: Iterable[IndexFile]) -> list[IndexFile]:
    want = Version(version)
    out = []
    for f in files:
        got = _file_version(f.filename)
        if got and got[0] == name and got[1] == want:
            out.append(f)
    return out


def _file_version(filename: str) -> tuple[str, Version] | None:
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        else:
            name, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return str(name), version


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
    return PinWheels(pin=pin, state="wheels", pythons=ok, files=tuple(rel))


def _unquote(name: str) -> str:
    from urllib.parse import unquote

    return unquote(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Choice:
    value: str
    why: str


def choose_python(wheels: Sequence[PinWheels], *, requested: str | None, pinned: str | None,
                  requires_python: str | None, where: str) -> Choice:
    """``requested`` (--python), else the file's own (``pinned``), else the newest of
    PYTHONS every pin has a wheel for; NoWheelError otherwise."""
    constraining = [w for w in wheels if w.state in ("wheels", "url")]
    given = requested or pinned
    if given is not None:
        missing = [w for w in constraining if given not in w.pythons]
        if missing:
            flag = f"--python {given}" if requested else f"Python {given} (the file's own)"
            raise NoWheelError(
                f"{flag}: no wheel for {where} of " + plural(len(missing), "pinned package")
                + ":\n  "
                + "\n  ".join(f"{w.pin.text} ({w.pin.where}): {w.describe()}" for w in missing),
                hint=_python_hint(constraining, given))
        why = "--python" if requested else "the Python the file pins"
        return Choice(value=given, why=why)
    allowed = [p for p in PYTHONS if _allows(requires_python, p)]
    ok = [p for p in allowed if all(p in w.pythons for w in constraining)]
    if not ok:
        blocking = [w for w in constraining if not set(allowed) <= set(w.pythons)]
        raise NoWheelError(
            f"no Python of {allowed[0] if allowed else PYTHONS[0]}-{PYTHONS[-1]} has a wheel "
            f"of every pinned package for {where}:\n  "
            + "\n  ".join(f"{w.pin.text} ({w.pin.where}): {w.describe()}" for w in blocking),
            hint="pass --python X.Y (samebits locks CPython 3.9 and newer), or change the pins")
    best = ok[-1]
    newer = [p for p in allowed if Version(p) > Version(best)]
    if not newer:
        return Choice(value=best, why=f"the newest of {span(allowed)} with a wheel of every "
                      "pinned package" if constraining else "the newest samebits chooses from")
    nxt = newer[0]
    stops = [w.pin.text for w in constraining if nxt not in w.pythons]
    return Choice(value=best, why=f"the newest of {span(allowed)} with a wheel of every pinned "
                  f"package ({nxt}: no wheel of {', '.join(stops[:3])}"
                  + (f" and {len(stops) - 3} more" if len(stops) > 3 else "") + ")")


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
        return f"pass --python {common[-1]} (every pin has a wheel for {span(common)})"
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


# ------------------------------------------------------------------ CUDA and generation

@dataclass(frozen=True, slots=True, kw_only=True)
class CudaEvidence:
    line: str | None  # "12.1"; None: a CPU-only build
    what: str  # where the line was read, for messages
    sm: tuple[str, ...] = ()  # the architectures the build carries, when the registry knows


def cuda_of_label(label: str) -> str | None:
    """``cu118`` -> "11.8", ``cu121`` -> "12.1", ``cu130`` -> "13.0"."""
    m = re.fullmatch(r"cu(\d+)(\d)", label)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def torch_pin(declared: Declared) -> Requested | None:
    return next((r for r in declared.pypi if r.name == "torch"), None)


def cuda_evidence(declared: Declared, *, torch_requires: Sequence[str] | None = None,
                  ) -> CudaEvidence | None:
    """The CUDA line the environment's torch is built for, from the declaration alone and,
    for a PyPI torch the registry does not know, the wheel's Requires-Dist."""
    torch = torch_pin(declared)
    if torch is not None and torch.pinned:
        local = Version(torch.pinned).local or ""
        if local == "cpu" or local.startswith("rocm"):
            return CudaEvidence(line=None, what=f"{torch.text} ({torch.where}): a "
                                f"{'CPU' if local == 'cpu' else 'ROCm'} build")
        line = cuda_of_label(local)
        if line:
            return CudaEvidence(line=line, what=f"{torch.text} ({torch.where})")
    for url in declared.extra_indexes + ((declared.index,) if declared.index else ()):
        m = PYTORCH_INDEX.match(url)
        if m and torch is not None:
            label = m.group(1)
            if label == "cpu":
                return CudaEvidence(line=None, what=f"the index {url}: CPU builds")
            return CudaEvidence(line=cuda_of_label(label), what=f"{torch.text} from {url}")
    for r in declared.pypi:
        if CUDA_RUNTIME.match(r.name) and r.pinned:
            line = ".".join(r.pinned.split(".")[:2])
            return CudaEvidence(line=line, what=f"{r.text} ({r.where})")
    for c in declared.conda:
        if c.name in CONDA_CUDA:
            m = re.search(r"(\d+)\.(\d+)", c.spec.split(" ", 1)[-1])
            if m:
                return CudaEvidence(line=f"{m.group(1)}.{m.group(2)}",
                                    what=f"{c.spec} ({c.where})")
    if torch is not None and torch.pinned and torch.url is None:
        known = registry().pypi_torch_line(torch.pinned)
        if known is not None:
            return CudaEvidence(line=known.cuda, what=f"{torch.text} from PyPI (CUDA "
                                f"{known.cuda} by samebits' registry)", sm=known.sm)
        for text in torch_requires or ():
            req = Requirement(text)
            spec = list(req.specifier)
            if CUDA_RUNTIME.match(str(canonicalize_name(req.name))) and spec:
                v = spec[0].version
                return CudaEvidence(line=".".join(v.split(".")[:2]),
                                    what=f"{torch.text} (its wheel requires "
                                    f"{canonicalize_name(req.name)} {v})")
    return None


def needs_torch_metadata(declared: Declared) -> bool:
    """Whether ``cuda_evidence`` would read the torch wheel's Requires-Dist."""
    if cuda_evidence(declared) is not None:
        return False
    torch = torch_pin(declared)
    return torch is not None and torch.pinned is not None and torch.url is None


def choose_generation(evidence: CudaEvidence | None, *, requested: str | None,
                      cuda: str | None, has_torch: bool,
                      retry: str = "samebits init NAME --from FILE --generation G",
                      ) -> tuple[str, str | None, str]:
    """(generation, CUDA line or None, why); ``retry`` is the command a hint suggests."""
    gens = registry().generations
    gpus = [g for g in gens.values() if g.needs_cuda]
    line = cuda or (evidence.line if evidence else None)
    if requested == "cpu":
        return "cpu", None, "--generation cpu" + (
            f" (a CUDA {evidence.line} build of torch runs on the CPU)"
            if evidence and evidence.line else "")
    if requested is not None:
        if line is None:
            raise UsageError(f"--generation {requested}: cannot tell the CUDA line of "
                             + (evidence.what if evidence else
                                "this environment (no CUDA build of torch is pinned)"),
                             hint="pass --cuda X.Y, or pin torch to a CUDA build")
        return requested, line, "--generation" + (f"; CUDA {line} from {evidence.what}"
                                                  if evidence and not cuda else "")
    if evidence is None or evidence.line is None:
        why = evidence.what if evidence else (
            "no CUDA build of torch is pinned" if has_torch else "no torch")
        return "cpu", None, f"{why}: generation cpu (pass --generation for a GPU)"
    fitting = [g.name for g in gpus if g.cuda_problem(evidence.line) is None
               and (not evidence.sm or all(sass_runs_on(evidence.sm, cc)
                                           for cc in g.compute_capabilities))]
    if len(fitting) == 1:
        return fitting[0], evidence.line, (f"the only generation CUDA {evidence.line} serves "
                                           f"({evidence.what})")
    raise UsageError(
        f"{evidence.what} is a CUDA {evidence.line} build: pass --generation "
        + (", ".join(fitting[:-1]) + f" or {fitting[-1]}" if len(fitting) > 1 else "")
        + (f" (the GPUs CUDA {evidence.line} serves), or --generation cpu to run it without a "
           "GPU" if fitting else f"cpu: no GPU generation samebits knows runs CUDA "
           f"{evidence.line}"),
        hint=retry)

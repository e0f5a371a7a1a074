"""Where a frozen pip package comes from, when it is not plainly its index's wheel.

    on_index(url, index)        PyPI's files host for PyPI, else a URL under the index
    trace(pin, ...)             a ``file://`` wheel: the index (--index, --extra-index, a
                                PyTorch local version's download.pytorch.org index) that lists
                                a file with its sha256 gives the lock's URL; none: the lock keeps
                                the file and a ``local`` finding says, in one line, that it is
                                not reproducible elsewhere and why. A wheel the index lacks
                                (``2.13.0+cpu`` from PyPI) is looked for on the others by its
                                installed tags. Anything not listed by the index is pinned in
                                the spec by URL (``by_url``), so the spec re-locks to it.

``samebits_app.freezing.freeze`` calls ``trace`` for every pip package it pinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from samebits.errors import InputError, UnreachableError
from samebits.foreign.simpleindex import PYPI, IndexFile
from samebits.lock.model import LockedPackage
from samebits.spec.draft import pytorch_index

Lister = Callable[[str, str], list[IndexFile]]
PYPI_FILES = "https://files.pythonhosted.org/"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A package that cannot be pinned to a hashed archive, and why."""

    package: str  # verify's package id, e.g. pip:foo==1.0
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"package": self.package, "reason": self.reason}


Repin = Callable[[list[IndexFile], str], "LockedPackage | Finding"]


def candidate_indexes(name: str, version: str, *, index: str,
                      extra: Sequence[str]) -> list[str]:
    """Where else a package may have come from: the indexes given with --extra-index, and
    for a PyTorch local version (``2.13.0+cpu``) its download.pytorch.org index."""
    own = pytorch_index(name, version)
    return [i for i in dict.fromkeys([*extra, *([own] if own else [])]) if i != index]


def _ask(lister: Lister, index: str, name: str) -> list[IndexFile] | str:
    try:
        return lister(index, name)
    except (UnreachableError, InputError) as exc:
        return f"{index} did not answer ({exc.message})"


def trace_file(p: LockedPackage, indexes: Sequence[str],
               lister: Lister) -> tuple[LockedPackage, str] | list[str]:
    """A package pinned to a ``file://`` wheel, found by its sha256 on one of ``indexes``:
    (the package pinned to the index's URL, where); else why not, per index."""
    why = []
    for index in indexes:
        got = _ask(lister, index, p.name)
        if isinstance(got, str):
            why.append(got)
            continue
        same = [f for f in got if f.sha256 and p.sha256
                and f.sha256.lower() == p.sha256.lower() and not f.url.startswith("file:")]
        if same:
            f = same[0]
            return replace(p, url=f.url), (f"{p.name} {p.version}: installed from {p.url}; the "
                                           f"same file (sha256) is {f.url} on {index}")
        why.append(f"{index} has no file with its sha256")
    return why


def on_index(url: str, index: str) -> bool:
    """Whether a wheel URL is one ``index`` serves: PyPI's files host for PyPI, else a URL
    under the index (a folder of wheels, download.pytorch.org/whl/cpu/...)."""
    if index.rstrip("/") == PYPI:
        return url.startswith(PYPI_FILES)
    return url.startswith(index.rstrip("/") + "/")


@dataclass(frozen=True, slots=True, kw_only=True)
class Traced:
    pin: LockedPackage | Finding
    by_url: bool = False  # the spec names the artifact (name @ URL): no index has it listed
    local: Finding | None = None  # it stays a file on this machine
    line: str | None = None  # where it was traced to


def trace(got: LockedPackage | Finding, *, package_id: str, index: str, extra: Sequence[str],
          lister: Lister, from_index: bool, repin: Repin) -> Traced:
    """Where a pip package's pin ``got`` really comes from: kept when ``index`` serves it; a
    ``file://`` wheel looked for by sha256; a wheel ``index`` lacks (``from_index``: no
    direct_url.json) looked for on the other candidates with ``repin(files, index)``."""
    if isinstance(got, LockedPackage):
        if on_index(got.url, index):
            return Traced(pin=got)
        if not got.url.startswith("file:"):  # e.g. https://download.pytorch.org/whl/...
            return Traced(pin=got, by_url=True)
        indexes = [index, *candidate_indexes(got.name, got.version, index=index, extra=extra)]
        traced = trace_file(got, indexes, lister)
        if isinstance(traced, tuple):
            return Traced(pin=traced[0], by_url=not on_index(traced[0].url, index),
                          line=traced[1])
        why = "; ".join(traced)
        return Traced(pin=got, by_url=True, local=Finding(
            package=package_id, reason=f"the lock names {got.url}, a file on this machine: not "
            f"reproducible elsewhere ({why})"))
    name, _, version = package_id.removeprefix("pip:").partition("==")
    if from_index and got.reason.startswith("no wheel of "):
        tried = []
        for other in candidate_indexes(name, version, index=index, extra=extra):
            offered = _ask(lister, other, name)
            if isinstance(offered, str):
                tried.append(offered)
                continue
            again = repin(offered, other)
            if isinstance(again, LockedPackage):
                if again.url.startswith("file:"):  # a folder of wheels: trace that file too
                    return trace(again, package_id=package_id, index=index, extra=extra,
                                 lister=lister, from_index=False, repin=repin)
                return Traced(pin=again, by_url=True, line=f"{name} {version}: not on "
                              f"{index}; its wheel is {again.url} on {other}")
            tried.append(f"{other}: {again.reason}")
        if tried:
            return Traced(pin=replace(got, reason=f"{got.reason}; also tried "
                                      + "; ".join(tried)))
    return Traced(pin=got)

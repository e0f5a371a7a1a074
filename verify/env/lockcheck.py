"""The installed package set against a lockfile's packages for one platform.

``lock_findings(installed, locked)`` is pure and lists every difference, per package:

    package-missing   locked, not installed
    package-extra     installed, not locked
    package-version   another version
    package-build     conda: another build string; pip: the installed ``WHEEL`` names other
                      tags than the locked archive's own ``WHEEL`` (never its file name)
    package-hash      conda: md5 or sha256 of the archive differs from conda-meta's;
                      pip: the archive sha256 the installer recorded (PEP 610 direct_url.json,
                      ``archive_info.hashes.sha256`` or the legacy ``hash``) differs
    package-url       pip: the URL direct_url.json records differs from the lock's (fragments
                      ignored) and no recorded sha256 says it is the same archive: the wheel
                      came from somewhere else. With the lock's sha256 recorded beside it
                      (pip from a bundle's offline folder, a --find-links mirror) it is a
                      note: the lock proves the bytes, not where they were fetched from

A wheel's file name is not its record: PyPI's torch 2.0.0 and 2.2.2 files are named
``...-manylinux1_x86_64.whl`` while their ``WHEEL`` says ``Tag: ...-linux_x86_64``. So a pip
package whose recorded archive sha256 is the lock's is that very archive, tags and all (its
``WHEEL`` is checked against RECORD like every file); where the file name and the installed
``WHEEL`` disagree that is a note. Where no hash was recorded, the locked archive's own
``WHEEL`` is read from the install cache when it holds it (checked against the hash the cache
recorded while proving the archive against the lock); without it, tags that agree on
interpreter, ABI and architecture and differ only in the platform's name (``manylinux1_x86_64``
against ``linux_x86_64``) are a note, anything else is drift.

Packages match by (manager, name); pip names are compared canonicalised (PEP 503), versions
as PEP 440 versions. ``shared_writers`` reads the lock's record of the paths two of its wheels
write with different bytes (``samebits.lock.shared``), which ``verify.env.overwritten`` holds
each such file to. A pip package installed from an index records neither URL nor hash: its
files are checked against its RECORD, but nothing proves its wheel was the locked one. Such a
package is **unproven** (``unproven``): listed in the report, not drift.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from samebits.lock.model import Lock, LockedPackage
from verify.env.drift import Finding
from verify.env.records import Package, canonical_name

ArchiveTags = Callable[[LockedPackage], "frozenset[str] | None"]


class LockCheck(NamedTuple):
    findings: list[Finding]
    notes: list[str]


def _no_archive(lp: LockedPackage) -> frozenset[str] | None:
    return None


def lock_findings(installed: Sequence[Package], locked: Sequence[LockedPackage],
                  *, archive_tags: ArchiveTags = _no_archive) -> list[Finding]:
    return lock_check(installed, locked, archive_tags=archive_tags).findings


def lock_check(installed: Sequence[Package], locked: Sequence[LockedPackage],
               *, archive_tags: ArchiveTags = _no_archive) -> LockCheck:
    """Every difference (findings) and every disagreement that is not one (notes, one line
    each). ``archive_tags(lp)``: the tags of the locked archive's own ``WHEEL``, None when
    they cannot be read."""
    out: list[Finding] = []
    notes: list[str] = []
    have = {(p.manager, _key(p.manager, p.name)): p for p in installed}
    want = {(p.manager, _key(p.manager, p.name)): p for p in locked}
    for key in sorted(want.keys() - have.keys()):
        lp = want[key]
        out.append(Finding(kind="package-missing", package=lp.name, source="lockfile",
                           expected=_locked_label(lp), detail=lp.manager))
    for key in sorted(have.keys() - want.keys()):
        p = have[key]
        out.append(Finding(kind="package-extra", package=p.name, source="lockfile",
                           actual=_installed_label(p), detail=p.record))
    for key in sorted(have.keys() & want.keys()):
        out.extend(_compare(have[key], want[key], archive_tags, notes))
    return LockCheck(out, notes)


def _compare(p: Package, lp: LockedPackage, archive_tags: ArchiveTags,
             notes: list[str]) -> list[Finding]:
    out: list[Finding] = []

    def add(kind: str, expected: str | None, actual: str | None, detail: str | None = None):
        out.append(Finding(kind=kind, package=p.name, source="lockfile", expected=expected,
                           actual=actual, detail=detail or p.record))

    if not _same_version(p.manager, p.version, lp.version):
        add("package-version", lp.version, p.version)
    if p.manager == "conda":
        if lp.build is not None and p.build != lp.build:
            add("package-build", lp.build, p.build)
        for algo in ("md5", "sha256"):
            want, have = getattr(lp, algo), getattr(p, algo)
            if want and have and want.lower() != have.lower():
                add("package-hash", f"{algo} {want}", f"{algo} {have}", f"archive {algo}")
        return out
    have_tags = set(expand_tags(p.tags))
    named = wheel_tags(lp.filename)
    same_archive = bool(lp.sha256 and p.sha256 and lp.sha256.lower() == p.sha256.lower())
    if have_tags and named and have_tags != named:
        own = None if same_archive else archive_tags(lp)
        if own is not None and have_tags != own:
            add("package-build", " ".join(sorted(own)), " ".join(sorted(have_tags)),
                "wheel tags (the locked archive's WHEEL)")
        elif own is not None or same_archive or _renamed_platform(named, have_tags):
            why = ("the archive's sha256 is the lock's" if same_archive else
                   "the locked archive's WHEEL says the same" if own is not None else
                   "the same interpreter, ABI and architecture; the locked archive itself "
                   "was not at hand to compare")
            notes.append(f"{p.name}: the lock's file name says {' '.join(sorted(named))}, "
                         f"the installed WHEEL says {' '.join(sorted(have_tags))} ({why})")
        else:
            add("package-build", " ".join(sorted(named)), " ".join(sorted(have_tags)),
                "wheel tags (the lock's file name; its archive was not at hand)")
    if lp.sha256 and p.sha256 and lp.sha256.lower() != p.sha256.lower():
        add("package-hash", f"sha256 {lp.sha256}", f"sha256 {p.sha256}", "archive sha256")
    if p.url and _unfragment(p.url) != _unfragment(lp.url):
        if same_archive:  # where it was fetched from is not what the lock proves: its bytes are
            notes.append(f"{p.name}: installed from {_unfragment(p.url)}, the lock names "
                         f"{_unfragment(lp.url)} (direct_url.json); the archive's sha256 is "
                         "the lock's")
        else:
            add("package-url", _unfragment(lp.url), _unfragment(p.url), "direct_url.json")
    return out


def shared_writers(lock: Lock | None, platform: str, *, file: str
                   ) -> dict[str, tuple[str, ...]]:
    """Path -> its writers in pip's order (the last one's file stays), as ``lock`` records
    them for ``platform``; empty without a lock or a record. A record this samebits did not
    write is a LockfileError naming the key."""
    from samebits.lock.shared import shared_of

    record = shared_of(lock.custom, platform, file=file) if lock is not None else None
    return record.writers() if record is not None else {}


def unproven(installed: Sequence[Package]) -> list[str]:
    """pip packages with no recorded archive hash: nothing says which wheel they came from."""
    return sorted(p.id for p in installed if p.manager == "pip" and not p.sha256
                  and not p.editable)


def _unfragment(url: str) -> str:
    return url.split("#", 1)[0]


def wheel_tags(filename: str) -> set[str]:
    """The tags a wheel's file name promises (empty for an sdist or a bad name)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    if not filename.endswith(".whl"):
        return set()
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return set()
    return {str(t) for t in tags}


def _renamed_platform(named: set[str], have: set[str]) -> bool:
    """Tags equal but for the platform's name on one architecture: ``cp310-cp310-manylinux1_x86_64``
    against ``cp310-cp310-linux_x86_64`` (what PyPI's torch 2.0 wheels say of themselves)."""
    def arch(plat: str) -> str:
        if plat.startswith("manylinux_"):                # manylinux_2_17_x86_64
            return plat.split("_", 3)[-1]
        if plat.startswith(("linux_", "manylinux")):     # linux_x86_64, manylinux1_x86_64
            return plat.split("_", 1)[1]
        return plat

    def shape(tags: set[str]) -> set[tuple[str, ...]]:
        return {(*t.split("-")[:2], arch(t.split("-")[2])) for t in tags}

    return shape(named) == shape(have)


def read_wheel_tags(text: str) -> frozenset[str]:
    """The ``Tag:`` lines of a ``WHEEL`` file (each may be a compressed tag set)."""
    return expand_tags(line.split(":", 1)[1].strip() for line in text.splitlines()
                       if line.startswith("Tag:"))


def expand_tags(tags: Iterable[str]) -> frozenset[str]:
    """Each tag of ``tags`` with its compressed sets expanded: maturin writes
    ``Tag: cp37-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64`` in a WHEEL, which is the two
    tags a file name lists separately. Tags are compared as the sets they mean, never as text;
    one that does not parse stays as written."""
    from packaging.tags import parse_tag

    out: set[str] = set()
    for tag in tags:
        try:
            out.update(str(t) for t in parse_tag(tag))
        except ValueError:
            out.add(tag)
    return frozenset(out)


def _key(manager: str, name: str) -> str:
    return canonical_name(name) if manager == "pip" else name


def _same_version(manager: str, a: str, b: str) -> bool:
    if a == b:
        return True
    if manager != "pip":
        return False
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


def _locked_label(lp: LockedPackage) -> str:
    return f"{lp.version} {lp.build}" if lp.build else lp.version


def _installed_label(p: Package) -> str:
    return f"{p.version} {p.build}" if p.build else p.version

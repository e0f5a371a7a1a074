"""The installed package set against a lockfile's packages for one platform.

``lock_findings(installed, locked)`` is pure and lists every difference, per package:

    package-missing   locked, not installed
    package-extra     installed, not locked
    package-version   another version
    package-build     conda: another build string; pip: other wheel tags than the locked wheel
    package-hash      conda: md5 or sha256 of the archive differs from conda-meta's;
                      pip: the archive sha256 the installer recorded (PEP 610 direct_url.json,
                      ``archive_info.hashes.sha256`` or the legacy ``hash``) differs
    package-url       pip: the URL direct_url.json records differs from the lock's (fragments
                      ignored): the wheel came from somewhere else

Packages match by (manager, name); pip names are compared canonicalised (PEP 503), versions
as PEP 440 versions. A pip package installed from an index records neither URL nor hash: its
files are checked against its RECORD, but nothing proves its wheel was the locked one. Such a
package is **unproven** (``unproven``): listed in the report, not drift.
"""

from __future__ import annotations

from collections.abc import Sequence

from samebits.lockfile import LockedPackage
from verify.drift import Finding
from verify.records import Package, canonical_name


def lock_findings(installed: Sequence[Package], locked: Sequence[LockedPackage]
                  ) -> list[Finding]:
    out: list[Finding] = []
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
        out.extend(_compare(have[key], want[key]))
    return out


def _compare(p: Package, lp: LockedPackage) -> list[Finding]:
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
    want_tags = wheel_tags(lp.filename)
    if want_tags and p.tags and set(p.tags) != want_tags:
        add("package-build", " ".join(sorted(want_tags)), " ".join(sorted(p.tags)),
            "wheel tags")
    if lp.sha256 and p.sha256 and lp.sha256.lower() != p.sha256.lower():
        add("package-hash", f"sha256 {lp.sha256}", f"sha256 {p.sha256}", "archive sha256")
    if p.url and _unfragment(p.url) != _unfragment(lp.url):
        add("package-url", _unfragment(lp.url), _unfragment(p.url), "direct_url.json")
    return out


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

"""A wheel whose own RECORD is wrong about one of its files: the file is the locked archive's.

PyPI's torch 1.12.1 and torchvision 0.13.1 had their ``METADATA`` edited after ``RECORD`` was
written (22,908 bytes recorded, 22,902 shipped). pip copies the wheel's RECORD rows into the
environment as they are, so an environment pip made from such a wheel holds a RECORD that
lies about the file beside it, and ``verify env`` would call that file ``modified``.

It is not drift when the file's bytes are the bytes of the member of the very archive the lock
pins by sha256: ``archive_slips`` looks each such finding up in the install cache's copy of
that archive (``CACHE/archives/<sha256>/<file>``), proved against the lock's sha256 again, and
hashes the member as the zip holds it; a match turns the finding into a note naming the file
and both hashes. A file that is neither its RECORD's nor the locked archive's member, or one
whose archive the cache does not hold (or holds with other bytes), stays a finding: nothing
unproven is accepted. Never the unpacked entry's tree: a default install hardlinks the prefix's
files to it, so a write into the prefix is a write into the tree, and the tree would vouch for
the very bytes it should be checked against.

Only files of a wheel's root scheme (``site-packages/<member>``) are looked up: that is where
the RECORD slips seen so far are, and a member of a ``.data`` scheme maps to its path only
through the wheel's layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from samebits.lock.model import LockedPackage
from verify.env.drift import Finding

SITE = "/site-packages/"
MemberHash = Callable[[LockedPackage, str], "str | None"]


def cached_member_sha256(cache: Path | None) -> MemberHash:
    """``(lp, member) -> sha256`` of that member of the locked archive, read from the install
    cache's archive once it is proved against the lock's sha256; None when the cache does not
    hold that archive or the member."""
    import hashlib
    import zipfile

    from samebits._io import sha256_file
    from samebits.install.fetch import archive_path

    proved: dict[str, bool] = {}

    def member_sha(lp: LockedPackage, member: str) -> str | None:
        if cache is None or not lp.sha256:
            return None
        archive = archive_path(cache, lp)
        try:
            if lp.sha256 not in proved:
                proved[lp.sha256] = sha256_file(archive) == lp.sha256.lower()
            if not proved[lp.sha256]:
                return None
            h = hashlib.sha256()
            with zipfile.ZipFile(archive) as zf, zf.open(member) as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            return h.hexdigest()
        except (OSError, KeyError, zipfile.BadZipFile):
            return None

    return member_sha


def archive_slips(findings: Sequence[Finding], locked: Sequence[LockedPackage],
                  member_sha: MemberHash) -> tuple[list[Finding], list[str]]:
    """(the findings that stay, notes): a ``modified`` file of a pip package whose bytes are
    the locked archive's member of that path is a note, not a finding."""
    from packaging.utils import canonicalize_name

    wheels = {canonicalize_name(lp.name): lp for lp in locked
              if lp.manager == "pip" and lp.filename.endswith(".whl")}
    kept: list[Finding] = []
    notes: list[str] = []
    for f in findings:
        lp = _locked_for(f, wheels, canonicalize_name)
        member = f.path.split(SITE, 1)[1] if f.path and SITE in f.path else None
        if f.kind == "modified" and lp is not None and member and f.actual \
                and member_sha(lp, member) == f.actual:
            notes.append(f"{f.package}: {f.path}: the wheel's own RECORD is wrong about it "
                         f"(sha256 {f.expected}); the file is the locked archive's "
                         f"{lp.filename} member (sha256 {f.actual})")
            continue
        kept.append(f)
    return kept, notes


def _locked_for(f: Finding, wheels: dict, canonicalize_name: Callable) -> LockedPackage | None:
    if not f.package or not f.package.startswith("pip:"):
        return None
    name, _, version = f.package[4:].partition("==")
    lp = wheels.get(canonicalize_name(name))
    return lp if lp is not None and _same(lp.version, version) else None


def _same(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b

"""Drift: every way the installed files differ from what was recorded, as findings.

Pure functions over a ``Manifest``; each returns every mismatch it sees, never the first:

- ``file_findings``: each entry against its package's claim (modified, missing, type,
  exec, symlink), files nobody owns (unowned), files that could not be read (unreadable) and
  records that could not be read (bad-record). A path two packages' RECORDs claim is held to
  the claim of the writer whose file stays (``verify.env.overwritten``: the lock's record of
  it, else the claim the file matches); the others' lines are overwritten, not drift.
- ``reference_findings``: the manifest against an earlier one (``verify env --json``):
  modified, missing, extra, exec, symlink, type; this is what catches a RECORD edited to match
  an edited file, and an executable bit no record knows.
- ``merge``: one finding per (kind, path), the package record's view first.

Package-level findings against a lockfile are ``verify.env.lockcheck``'s.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from verify.env.manifest import Entry, Manifest
from verify.env.overwritten import Shared, winner_claims
from verify.env.records import Claim

FILE_KINDS = ("modified", "missing", "unowned", "startup", "bytecode", "scaffold", "extra",
              "type", "exec", "symlink", "unreadable", "bad-record")
PACKAGE_KINDS = ("package-missing", "package-extra", "package-version", "package-build",
                 "package-hash", "package-url")
KINDS = FILE_KINDS + PACKAGE_KINDS
_SAME = {"extra": "unowned"}  # the same fact seen from a reference and from the records


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    kind: str                      # one of KINDS
    path: str | None = None        # prefix-relative file, or None for a package finding
    package: str | None = None     # owning package id (file findings) or package name
    expected: str | None = None
    actual: str | None = None
    source: str = "record"         # record | package cache | reference | lockfile
    detail: str | None = None

    def sort_key(self) -> tuple[int, str, str]:
        return (KINDS.index(self.kind), self.path or "", self.package or "")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "source": self.source}
        for key in ("path", "package", "expected", "actual", "detail"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


def file_findings(manifest: Manifest, shared: Shared | None = None) -> list[Finding]:
    """``shared``: the lock's record of paths several wheels write (path -> writers in pip's
    order, the last one's file stays; ``verify.env.lockcheck.shared_writers``)."""
    out: list[Finding] = []
    owners: dict[str, str] | None = None  # made for the first unowned file, which names them
    by_path = manifest.by_path()
    winners = winner_claims(manifest, shared)
    for e in manifest.entries:
        won = winners.get(e.path) if winners else None
        if won is not None and e.category == "package" and won is not e.claim:
            e = e._replace(claim=won, owner=won.package)
        if _matches(e):
            continue  # the 30,000 files that match: no generator made for them
        if owners is None and e.category == "unowned":
            owners = _folder_owners(manifest.entries)
        found = _check_entry(e, owners or {}, by_path)
        if won is not None and shared is not None:
            writers = shared[e.path]
            why = (f"the lock records {writers[-1]}'s file here: pip installs "
                   f"{' then '.join(writers)}")
            found = [f if f.kind != "modified" else replace(f, detail=why) for f in found]
        out.extend(found)
    out.extend(scaffold_findings(manifest)[0])
    for path, claims in manifest.records.claims.items():
        if path in by_path:
            continue
        claim = claims[-1]
        if "__pycache__/" in path or path.endswith("/__pycache__") or (
                path.endswith(".pyc") and claim.sha256 is None):
            # bytecode that was never written or was removed (virtualenv's seeded pip lists
            # pycs it never wrote, pip --no-compile skips them): Python builds it again
            continue
        out.append(Finding(kind="missing", path=path, package=claim.package,
                           expected=_describe_claim(claim)))
    for p in manifest.records.problems:
        out.append(Finding(kind="bad-record", path=p.record, detail=p.message,
                           package=_record_owner(manifest, p.record)))
    for folder, why in manifest.unreadable:
        out.append(Finding(kind="unreadable", path=folder, detail=f"folder not listed: {why}"))
    return sorted(out, key=Finding.sort_key)


def _matches(e: Entry) -> bool:
    """Whether ``_check_entry`` has nothing to say of ``e`` without looking further: read, not
    unowned, and no claim to hold it to, or a file claim it meets (hash and exec bit)."""
    c = e.claim
    return e.error is None and e.category != "unowned" and (
        e.category != "package" or c is None
        or (c.type == "file" == e.type and (not c.sha256 or c.sha256 == e.sha256)
            and (c.exec is None or c.exec == e.exec)))


def _check_entry(e: Entry, owners: Mapping[str, str], by_path: Mapping[str, Entry]
                 ) -> Iterable[Finding]:
    if _matches(e):
        return
    if e.error is not None:
        yield Finding(kind="unreadable", path=e.path, package=e.owner, detail=e.error)
        return
    if e.category == "unowned":
        near = owners.get(posixpath.dirname(e.path))
        yield Finding(kind="unowned", path=e.path, actual=_describe(e),
                      detail=f"in a folder of {near}" if near else None)
        return
    c = e.claim
    if e.category != "package" or c is None:
        return
    if c.type != e.type:
        yield Finding(kind="type", path=e.path, package=c.package, expected=c.type,
                      actual=e.type)
        return
    if c.type == "file":
        if c.sha256 and e.sha256 != c.sha256:
            size = f"size {c.size} -> {e.size}" if c.size is not None and c.size != e.size \
                else None
            yield Finding(kind="modified", path=e.path, package=c.package,
                          expected=c.sha256, actual=e.sha256, detail=size)
        if c.exec is not None and c.exec != e.exec:
            yield Finding(kind="exec", path=e.path, package=c.package, source=c.source,
                          expected=_mode(c.exec), actual=_mode(e.exec))
        return
    if c.target is not None:
        if c.target != e.target:
            yield Finding(kind="symlink", path=e.path, package=c.package,
                          source=c.source, expected=c.target, actual=e.target)
    elif c.sha256 and e.target is not None:
        accepted = {c.sha256, c.alt} - {None}
        if _sha_text(e.target) in accepted:
            return  # py-rattler's convention: the sha256 of the link text
        got = _target_sha(e, by_path)
        if got is None or got not in accepted:  # conda's: the sha256 of the target's contents
            yield Finding(kind="symlink", path=e.path, package=c.package,
                          expected=f"a target with sha256 {c.sha256}", actual=e.target)


def _target_sha(e: Entry, by_path: Mapping[str, Entry]) -> str | None:
    """The sha256 of the file a symlink ends at inside the prefix (None: outside, a folder,
    a dangling link or a loop)."""
    seen = 0
    while e.type == "symlink" and e.target is not None and seen < 40:
        if e.target.startswith("/"):
            return None
        path = posixpath.normpath(posixpath.join(posixpath.dirname(e.path), e.target))
        nxt = by_path.get(path)
        if nxt is None:
            return None
        e, seen = nxt, seen + 1
    return e.sha256 if e.type == "file" else None


def scaffold_findings(manifest: Manifest) -> tuple[list[Finding], list[str]]:
    """A venv's scaffolding whose contents are fixed, read and compared (verify.env.scaffold);
    and notes on start-up scaffolding this samebits cannot prove."""
    from verify.env.scaffold import KNOWN_VIRTUALENV_PY, content_problem, fixed_content

    out: list[Finding] = []
    notes: list[str] = []
    made_by = manifest.made_by or "venv"
    for e in manifest.entries:
        if e.category != "scaffold" or e.type != "file":
            continue
        rule = fixed_content(e.path, made_by)
        if rule is not None:
            try:
                data = (manifest.prefix / e.path).read_bytes()
            except OSError as exc:
                out.append(Finding(kind="unreadable", path=e.path, package=e.owner,
                                   detail=exc.strerror or str(exc)))
                continue
            why = content_problem(data, rule)
            if why:
                out.append(Finding(kind="scaffold", path=e.path, package=f"<{made_by}>",
                                   actual=_describe(e), detail=why))
        elif e.path.endswith("/_virtualenv.py") and e.sha256 not in KNOWN_VIRTUALENV_PY:
            known = ", ".join(sorted(set(KNOWN_VIRTUALENV_PY.values())))
            notes.append(f"{e.path} (virtualenv {manifest.venv.get('virtualenv', '?')}) runs "
                         f"at start-up and is not the file of a virtualenv release this "
                         f"samebits knows ({known}): only --against a reference proves it")
    return out, notes


def reference_findings(manifest: Manifest, reference: Mapping[str, Mapping[str, Any]]
                       ) -> list[Finding]:
    """Compare with a reference manifest: path -> {type, exec, sha256|target, owner}."""
    out: list[Finding] = []
    here = {e.path: e for e in manifest.entries if e.in_digest}
    for path, ref in reference.items():
        e = here.get(path)
        owner = ref.get("owner")
        if e is None:
            out.append(Finding(kind="missing", path=path, package=owner, source="reference",
                               expected=_describe_ref(ref)))
            continue
        pkg = e.owner or owner
        if ref.get("type") != e.type:
            out.append(Finding(kind="type", path=path, package=pkg, source="reference",
                               expected=ref.get("type"), actual=e.type))
            continue
        if e.type == "file":
            if ref.get("sha256") != e.sha256:
                out.append(Finding(kind="modified", path=path, package=pkg,
                                   source="reference", expected=ref.get("sha256"),
                                   actual=e.sha256))
            if bool(ref.get("exec")) != e.exec:
                out.append(Finding(kind="exec", path=path, package=pkg, source="reference",
                                   expected=_mode(bool(ref.get("exec"))),
                                   actual=_mode(e.exec)))
        elif e.type == "symlink" and ref.get("target") != e.target:
            out.append(Finding(kind="symlink", path=path, package=pkg, source="reference",
                               expected=ref.get("target"), actual=e.target))
    for path, e in here.items():
        if path not in reference:
            out.append(Finding(kind="extra", path=path, package=e.owner, source="reference",
                               actual=_describe(e)))
    return sorted(out, key=Finding.sort_key)


def merge(*groups: Iterable[Finding]) -> list[Finding]:
    """One finding per (kind, path) for file findings, the earlier group winning."""
    seen: set[tuple[str, str]] = set()
    out: list[Finding] = []
    for group in groups:
        for f in group:
            if f.path is not None and f.kind in FILE_KINDS:
                key = (_SAME.get(f.kind, f.kind), f.path)
                if key in seen:
                    continue
                seen.add(key)
            out.append(f)
    return sorted(out, key=Finding.sort_key)


def _folder_owners(entries: Iterable[Entry]) -> dict[str, str]:
    """folder -> the one package that owns files in it (folders shared by several: none)."""
    owners: dict[str, str | None] = {}
    for e in entries:
        if e.category == "package" and e.owner:
            folder = posixpath.dirname(e.path)
            if owners.setdefault(folder, e.owner) != e.owner:
                owners[folder] = None
    return {k: v for k, v in owners.items() if v}


def _record_owner(manifest: Manifest, record: str) -> str | None:
    """The package a record speaks for, even when the record itself could not be read."""
    if record.startswith("conda-meta/") and record.endswith(".json"):
        return "conda:" + record[len("conda-meta/"):-len(".json")]
    folder = posixpath.dirname(record)
    for p in manifest.records.packages:
        if p.manager == "pip" and posixpath.dirname(p.record) == folder:
            return p.id
    return None


def _describe(e: Entry) -> str:
    if e.type == "file":
        return f"file sha256 {e.sha256}" if e.sha256 else "file"
    if e.type == "symlink":
        return f"symlink -> {e.target}"
    return "special file"


def _describe_ref(ref: Mapping[str, Any]) -> str:
    if ref.get("type") == "symlink":
        return f"symlink -> {ref.get('target')}"
    return f"{ref.get('type')} sha256 {ref.get('sha256')}"


def _describe_claim(claim: Claim) -> str:
    if claim.type == "symlink":
        return f"symlink -> {claim.target}" if claim.target else "symlink"
    return f"file sha256 {claim.sha256}" if claim.sha256 else "file"


def _mode(exec_bit: bool) -> str:
    return "executable" if exec_bit else "not executable"


def _sha_text(text: str) -> str:
    return hashlib.sha256(os.fsencode(text)).hexdigest()

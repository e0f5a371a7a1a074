"""The ``verify env`` report: one versioned JSON document and one human summary, both pure.

The document (``"format": 1``, ``"kind": "samebits.verify-env"``) is written with
``samebits._io.canonical_json``, so equal environments give equal bytes. Top level::

    identical   no file or package finding (the files are exactly the recorded/locked ones)
    ok          identical, every ELF file's libraries resolve, and an environment of Python
                packages has an interpreter that exists (exit 0 iff ok)
    digests     {"environment", "packages"} (see verify.env.digest)
    findings    every mismatch, sorted by kind then path
    linkage     {"checked", "ok", "unresolved", "host", "loaded", "lazy", "imports", ...}
                (verify.env.linkage; "imports": the import probe's record, which judged the
                links that did not resolve statically, verify.env.importverdict)
    packages    what the installers recorded
    summary     counts
    proof       how the files were proven: ``trust_seal`` (false unless asked), ``by_hash``,
                ``by_identity`` (sealed cache inodes proven by a stat), ``by_memo`` (the base
                interpreter's files proven by the stat memo, ``verify.env.statmemo``), the
                seals used
    manifest    every entry: path, type, exec, sha256 | target, size, owner, category

A report is also a reference: ``verify env --against report.json`` compares every file with it
(``load_reference``), which is how two machines find the files behind two different digests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits._io import read_json
from samebits.errors import InputError, plural, quote
from verify.env.bytecode import BytecodeReport
from verify.env.digest import environment_digest
from verify.env.drift import Finding
from verify.env.linkage import LinkageReport
from verify.env.manifest import Entry, Manifest

REPORT_FORMAT = 1
REPORT_KIND = "samebits.verify-env"


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    path: str
    prefix: str | None
    digests: Mapping[str, str]
    entries: Mapping[str, Mapping[str, Any]]   # in-digest entries by path


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvReport:
    manifest: Manifest
    digests: Mapping[str, str]
    findings: tuple[Finding, ...] = ()
    linkage: LinkageReport | None = None
    platform: str | None = None
    lockfile: str | None = None
    locked_packages: int | None = None
    reference: Reference | None = None
    notes: tuple[str, ...] = field(default=())
    interpreter: Mapping[str, Any] | None = None
    bytecode: BytecodeReport | None = None
    unproven: tuple[str, ...] = ()                 # pip packages with no recorded archive hash
    coverage: Mapping[str, Any] | None = None  # verify.kernels.report.platform_doc
    not_runnable: str | None = None   # why the environment's Python cannot start, when it can't
    proof: Mapping[str, Any] | None = None   # verify.env.sealproof.proof_doc

    @property
    def identical(self) -> bool:
        return not self.findings

    @property
    def ok(self) -> bool:
        return self.identical and (self.linkage is None or self.linkage.ok) \
            and self.not_runnable is None

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def text(s: str) -> str:
    """A path as JSON can carry it: bytes that are not UTF-8 become \\xNN escapes."""
    try:
        s.encode()
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def entry_json(e: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {"path": text(e.path), "type": e.type, "owner": e.owner,
                           "category": e.category}
    if e.type == "file":
        out.update(sha256=e.sha256, exec=e.exec, size=e.size)
    elif e.type == "symlink":
        out["target"] = text(e.target) if e.target is not None else None
    if e.error:
        out["error"] = e.error
    return out


def summary(r: EnvReport) -> dict[str, Any]:
    m = r.manifest
    cats = Counter(e.category for e in m.entries)
    managers = Counter(p.manager for p in m.records.packages)
    return {
        "entries": len(m.entries),
        "files": sum(1 for e in m.entries if e.type == "file"),
        "symlinks": sum(1 for e in m.entries if e.type == "symlink"),
        "bytes": sum(e.size for e in m.entries),
        "categories": dict(sorted(cats.items())),
        "packages": {"conda": managers.get("conda", 0), "pip": managers.get("pip", 0)},
        "unhashed": sum(1 for e in m.entries
                        if e.category == "package" and e.claim and e.claim.sha256 is None),
        "findings": dict(sorted(Counter(f.kind for f in r.findings).items())),
    }


def report_json(r: EnvReport, only: Collection[str] | None = None) -> dict[str, Any]:
    """The report's JSON; ``only``: just those keys, the others not computed (install shows a
    few of them, and the manifest alone is a dict per file and the files digest a pass)."""
    m = r.manifest
    parts: dict[str, Callable[[], Any]] = {
        "format": lambda: REPORT_FORMAT,
        "kind": lambda: REPORT_KIND,
        "prefix": lambda: text(str(m.prefix)),
        "prefix_kind": lambda: m.kind,
        "platform": lambda: r.platform,
        "lockfile": lambda: r.lockfile,
        "reference": lambda: r.reference.path if r.reference else None,
        "identical": lambda: r.identical,
        "ok": lambda: r.ok,
        "not_runnable": lambda: r.not_runnable,
        "digests": lambda: dict(r.digests),
        # The prefix's files alone (the environment digest without the interpreter a venv
        # runs on): what an image built from this prefix carries, whichever host built it.
        "files_digest": lambda: environment_digest(m.entries),
        "summary": lambda: summary(r),
        "findings": lambda: [_json_finding(f) for f in r.findings],
        "linkage": lambda: r.linkage.to_json() if r.linkage else {"checked": False},
        "interpreter": lambda: dict(r.interpreter) if r.interpreter else None,
        "bytecode": lambda: r.bytecode.to_json() if r.bytecode else {"checked": False},
        "proof": lambda: dict(r.proof) if r.proof is not None else {"trust_seal": False},
        "unproven": lambda: list(r.unproven),
        "packages": lambda: [p.to_json() for p in m.records.packages],
        "notes": lambda: list(r.notes),
        "manifest": lambda: [entry_json(e) for e in m.entries],
    }
    if r.coverage is not None:
        parts["coverage"] = lambda: dict(r.coverage or {})
    return {k: make() for k, make in parts.items() if only is None or k in only}


def _json_finding(f: Finding) -> dict[str, Any]:
    doc = f.to_json()
    for key in ("path", "actual", "expected"):
        if isinstance(doc.get(key), str):
            doc[key] = text(doc[key])
    return doc


def load_reference(path: Path) -> Reference:
    """An earlier report, read back as the entries to compare with."""
    doc = read_json(path, what="report",
                    hint="write one with `samebits verify env --json > FILE`")
    if not isinstance(doc, dict) or doc.get("kind") != REPORT_KIND:
        raise InputError(f"{path}: not a `verify env` report (kind = {quote(doc.get('kind'))})"
                         if isinstance(doc, dict) else f"{path}: not a `verify env` report")
    if doc.get("format") != REPORT_FORMAT:
        raise InputError(f"{path}: format = {quote(doc.get('format'))}: this samebits reads "
                         f"`verify env` reports of format {REPORT_FORMAT}",
                         hint="regenerate the reference with this samebits version")
    entries = doc.get("manifest")
    if not isinstance(entries, list):
        raise InputError(f"{path}: no manifest list")
    keep = {"package", "scaffold", "base", "unowned"}
    return Reference(
        path=str(path), prefix=doc.get("prefix"), digests=doc.get("digests") or {},
        entries={e["path"]: e for e in entries
                 if isinstance(e, dict) and isinstance(e.get("path"), str)
                 and e.get("category") in keep})


# ------------------------------------------------------------------------------ human text

def report_text(r: EnvReport, counted: dict[str, Any] | None = None) -> str:
    """The report for a terminal; ``counted``: its ``summary``, when the caller has it."""
    m = r.manifest
    s = counted or summary(r)
    cats = s["categories"]
    lines = [f"verify env {m.prefix} ({m.kind}" + (f", {r.platform})" if r.platform else ")")]
    owned = [f"{cats.get('package', 0):,} from {_n(len(m.records.packages), 'package')} "
             f"({s['packages']['conda']} conda, {s['packages']['pip']} pip)"]
    for cat, label in (("scaffold", "venv scaffolding"), ("base", "interpreter"),
                       ("cache", "bytecode cache"), ("meta", "installer records"),
                       ("unowned", "unowned")):
        if cats.get(cat):
            owned.append(f"{cats[cat]:,} {label}")
    lines.append(f"  entries    {s['entries']:,} ({_size(s['bytes'])}): " + ", ".join(owned))
    if s["unhashed"]:
        lines.append(f"  unhashed   {_n(s['unhashed'], 'package file')} recorded without a hash "
                     "(in the manifest and the digest, not checkable)")
    lines.extend(_interpreter_lines(r))
    lines.append(_proof_line(r))
    if r.unproven:
        shown = ", ".join(r.unproven[:8]) + (", ..." if len(r.unproven) > 8 else "")
        lines.append(f"  unproven   {_n(len(r.unproven), 'pip package')} with no record of "
                     f"the wheel it came from (no direct_url.json hash): {shown}")
    if r.lockfile:
        lines.append(f"  lockfile   {r.lockfile} ({r.platform}): "
                     f"{plural(r.locked_packages or 0, 'package')}")
    if r.reference:
        same = r.reference.digests.get("environment") == r.digests["environment"]
        lines.append(f"  reference  {r.reference.path}: environment digest "
                     + ("matches" if same else "differs"))
    lines.append(f"  environment sha256:{r.digests['environment']}")
    lines.append(f"  packages    sha256:{r.digests['packages']}")
    for note in r.notes:
        lines.append(f"  note: {note}")
    if r.coverage is not None:
        libs = len(r.coverage["libraries"])
        lines.append(f"  kernels    {libs} libraries with CUDA device code; runs on: "
                     f"{r.coverage['runs_on']}" if libs else "  kernels    no CUDA device code")
    if r.findings:
        lines.append(f"findings: {len(r.findings):,}")
        lines.extend(f"  {finding_line(f)}" for f in r.findings)
    if r.linkage is not None:
        lk = r.linkage
        lines.append(f"linkage: {lk.elf_files} ELF files, {lk.links} needed libraries: "
                     f"{len(lk.unresolved)} unresolved, {len(lk.host)} found only on this host")
        lines.extend(_import_lines(lk))
        for link in lk.unresolved:
            lines.append(f"  {link.file} [{link.package or 'unowned'}] needs {link.needed}: "
                         "cannot open shared object file"
                         + (f"; {link.detail}" if link.detail else ""))
        for link in lk.host:
            lines.append(f"  {link.file} needs {link.needed}: host only, {link.found}")
        for link in lk.preloaded:
            lines.append(f"  {link.file} needs {link.needed}: preloaded by torch from "
                         f"{link.found}")
        for link in lk.optional:
            lines.append(f"  note: {link.file} [{link.package or 'unowned'}] is a plugin "
                         f"nothing here needs; it loads where {link.needed} exists (an "
                         "optional transport)")
        for link in lk.off_path:
            lines.append(f"  note: {link.file} [{link.package or 'unowned'}] finds "
                         f"{link.needed} ({link.found}) only with LD_LIBRARY_PATH")
        for link in lk.loaded:
            lines.append(f"  {link.file} needs {link.needed}: {link.detail}"
                         + (f" ({link.found})" if link.found else ""))
        for link in lk.lazy:
            lines.append(f"  note: {link.file} [{link.package or 'unowned'}] needs "
                         f"{link.needed}: {link.detail}")
        for f, why in lk.unreadable:
            lines.append(f"  {f}: {why}")
    if r.ok:
        verdict = "identical"
    elif r.identical and r.not_runnable:
        verdict = f"identical files, but NOT RUNNABLE: {r.not_runnable}"
    elif r.identical:
        verdict = "identical files, but libraries do not resolve"
    else:
        verdict = f"DRIFT: {_n(len(r.findings), 'finding')}"
    lines.append(f"result: {verdict} (exit {r.exit_code})")
    return "\n".join(lines)


def _import_lines(lk: LinkageReport) -> list[str]:
    """What the import probe did (``verify.env.importverdict``), when there was anything to
    judge."""
    doc = lk.imports
    if not doc:
        return []
    if not doc.get("ran"):
        return [f"  imports: not probed: {doc.get('why')}"]
    probes = doc.get("probes") or []
    outcomes = Counter(p["outcome"] for p in probes)
    box = doc.get("sandbox") or {}
    where = ("in bubblewrap (no network, read-only)" if box.get("kind") == "bubblewrap"
             else f"without a sandbox ({box.get('why')})")
    mods = ", ".join(f"`import {p['module']}`" if p["module"] else "start-up alone (nothing "
                     "to import)" for p in probes)
    return [f"  imports: {mods} in the environment's Python, one process each, {where}, "
            f"{doc.get('timeout_s'):g} s each: "
            + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items()))]


def _proof_line(r: EnvReport) -> str:
    p = r.proof or {}
    hashed = f"{p.get('by_hash', 0):,} files hashed"
    if not p.get("trust_seal"):
        return f"  proof      {hashed}: every byte read (the cache's seal not trusted)"
    refused = len(p.get("seals_refused") or ())
    entries = plural(int(p.get("seals", 0)), "cache entry", "cache entries")
    memo = f", {p['by_memo']:,} of the base interpreter by the stat memo" \
        if p.get("by_memo") else ""
    return (f"  proof      {hashed}, {p.get('by_identity', 0):,} proven by identity (sealed "
            f"inodes of {entries}, a stat each){memo}"
            + (f"; {refused} seals refused, their files hashed" if refused else ""))


def _interpreter_lines(r: EnvReport) -> list[str]:
    out = []
    ident = r.interpreter
    if ident and ident.get("path"):
        std = ident.get("stdlib") or {}
        runs = "" if ident.get("runs_here") else ", does not run here"
        out.append(f"  python     {ident['path']} ({ident.get('version')}, "
                   f"{ident.get('cache_tag')}{runs}): sha256:{_short(ident.get('sha256'))} "
                   f"stdlib {std.get('files', 0):,} files sha256:{_short(std.get('sha256'))}")
    bc = r.bytecode
    if bc is not None:
        parts = [f"{bc.checked:,} checked against their sources"
                 + (f" ({bc.compiled:,} compiled now)" if bc.compiled else "")]
        if bc.by_record:
            parts.append(f"{bc.by_record:,} as their packages' records hash them")
        if bc.unchecked:
            parts.append(f"{bc.unchecked:,} NOT checked")
        if bc.stale:
            parts.append(f"{len(bc.stale):,} stale (Python ignores and rewrites them)")
        if bc.other:
            parts.append(f"{len(bc.other):,} for another interpreter (never loaded)")
        out.append("  bytecode   " + ", ".join(parts))
    elif r.interpreter is not None:
        out.append("  bytecode   not checked (--no-bytecode)")
    return out


def finding_line(f: Finding) -> str:
    who = f" [{f.package}]" if f.package and f.path else ""
    head = f"{f.kind:<16}{f.path or f.package}{who}"
    if f.kind == "modified":
        tail = f"sha256 {_short(f.expected)} expected, {_short(f.actual)} found"
    elif f.kind in ("exec", "symlink", "type") or (
            f.kind.startswith("package-") and f.expected and f.actual):
        tail = f"{f.expected} expected, {f.actual} found"
    elif f.kind == "package-missing":
        tail = f"{f.expected} locked, not installed"
    elif f.kind == "package-extra":
        tail = f"{f.actual} installed, not locked"
    elif f.kind == "missing":
        tail = "not there"
    elif f.kind in ("bytecode", "startup", "scaffold") and f.detail:
        return f"{head}: {f.detail}" + (f" <{f.source}>" if f.source != "record" else "")
    else:
        tail = f.actual or ""
    extra = f" ({f.detail})" if f.detail else ""
    src = f" <{f.source}>" if f.source not in ("record", "lockfile") else ""
    return f"{head}: {tail}{extra}{src}".replace(": ()", "")


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _short(h: str | None) -> str:
    return (h[:12] + "…") if h else "nothing"


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"

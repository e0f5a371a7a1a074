"""The audit document: what the reports render, as one versioned JSON object. Pure.

``"format": 2, "kind": "samebits.audit"``, written with ``samebits._io.canonical_json``: no
timestamps, no timings, paths as the user gave them, so equal results give equal bytes.
(Format 2: each reason is ``{cause, text, explains}``, one story; ``checks`` and ``counts``.)

    verdict      level, title, meaning, exit code, reasons (each with its cause and the
                 divergences it explains), notes (``verdict.Verdict``)
    checks       per section (code, inputs, environment, drift, workloads, facts, paper):
                 whether its step ran, and if not why: a section whose step did not run
                 says "not checked" and why, never what it would have found
    counts       the suite's comparison, each workload counted once (``Report.counts``)
    inputs       lockfile (path, sha256), attestation (path, sha256), platform, prefix,
                 python, device, outputs
    steps        every step in the order it ran: name, status, summary, reasons, notes
    facts        one row per recorded fact: key, authors, reviewer, differs, class (whether
                 it defines the equivalence class, i.e. may legitimately change bits)
    paper        with a paper: per command its level, the differing facts, and per output
                 its level, a summary with numbers, its rows (metrics, curve statistics,
                 tensors) and the curves themselves (both sides' steps and values); null
                 when no paper was audited
    workloads    one row per workload: both sides' states, the cell (same, explained,
                 unexplained, not-run, absent, skipped), attributed facts, max errors (exact
                 from saved outputs) and lower bounds (from fingerprints)
    environment  verify env's verdict, digests (reviewer's and attested), counts
    drift        every finding of verify env, and the libraries that resolve nowhere
    commands     the exact commands to reproduce this audit
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import sha256_hex
from samebits.cli.options import lock_arg
from samebits_app.audit.pipeline import OUTPUTS, REVIEWER_ATTESTATION, Audit
from verify.gpu.attest import Attestation
from verify.gpu.compare import class_facts, flat_facts, irrelevant, meaning
from verify.gpu.workloads.catalog import BY_NAME, NAMES

DOCUMENT_FORMAT = 2
DOCUMENT_KIND = "samebits.audit"
# Fact rows are grouped in this order (key prefixes); anything else goes last, sorted.
FACT_ORDER = ("device", "suite_version", "samebits", "torch.", "driver.", "gpu.", "gpus",
              "cpu.", "threads.", "glibc", "python", "settings.", "env.")
CELLS = ("same", "explained", "unexplained", "not-run", "absent", "skipped")


def build_document(a: Audit) -> dict[str, Any]:
    req = a.request
    return {
        "format": DOCUMENT_FORMAT,
        "kind": DOCUMENT_KIND,
        "samebits": __version__,
        "verdict": a.verdict.to_json(),
        "inputs": {
            "lockfile": {"path": str(req.lockfile), "sha256": a.lock_sha256,
                         "environment": a.lock.meta("environment")},
            "attestation": {"path": str(req.attestation),
                            "sha256": sha256_hex(Path(req.attestation).read_bytes())},
            "platform": a.platform,
            "prefix": str(a.prefix),
            "python": a.python,
            "device": a.device,
            "authors_device": a.authors.device,
            "outputs": str(req.outputs) if req.outputs is not None else None,
            "manifest": str(req.paper.file) if req.paper is not None else None,
            **({"source": dict(req.source)} if req.source is not None else {}),
        },
        "steps": [s.to_json() for s in a.steps],
        "checks": checks(a),
        "counts": a.comparison.counts() if a.comparison is not None else None,
        "paper": paper(a),
        "facts": fact_rows(a.authors, a.reviewer),
        "workloads": workload_rows(a),
        "environment": environment(a),
        "drift": drift(a.env_report),
        "commands": commands(a),
    }


# Where to look for why a section was not checked: the steps it needs, in the order they run.
NEEDS = {"environment": ("environment", "verify-env"), "drift": ("environment", "verify-env"),
         "workloads": ("environment", "preflight", "workloads", "compare"),
         "facts": ("environment", "preflight", "workloads"),
         "paper": ("environment", "preflight", "paper"), "code": ("code",),
         "inputs": ("inputs",)}


def checks(a: Audit) -> dict[str, dict[str, Any]]:
    """Per section: checked (its step ran and gave what the section shows) or why not."""
    steps = {s.name: s for s in a.steps}
    done = {"environment": a.env_report is not None, "drift": a.env_report is not None,
            "workloads": a.comparison is not None, "facts": a.reviewer is not None,
            "paper": a.paper is not None,
            "code": "code" in steps and steps["code"].status != "skipped",
            "inputs": "inputs" in steps and steps["inputs"].status != "skipped"}
    paper_audit = "paper" in steps or "code" in steps
    out: dict[str, dict[str, Any]] = {}
    for section, ok in done.items():
        why = None
        if not ok:
            blocking = [steps[n] for n in NEEDS[section]
                        if n in steps and steps[n].status != "ok"]
            first = next((s for s in blocking if s.status == "failed"), None) or next(
                iter(blocking), None)
            head = first.summary.splitlines()[0] if first is not None else ""
            why = ("no step of this audit checks it" if first is None else
                   f"the {first.name} step failed: {head}" if first.status == "failed" else
                   f"the {first.name} step did not run: "
                   + head.removeprefix("not checked: ").removeprefix("not run: "))
        out[section] = {"checked": ok, "why": why,
                        "applies": paper_audit if section in ("paper", "code", "inputs")
                        else True}
    return out


def _fact_key(key: str) -> tuple[int, str]:
    for i, prefix in enumerate(FACT_ORDER):
        if key == prefix or (prefix.endswith(".") and key.startswith(prefix)):
            return i, key
    return len(FACT_ORDER), key


def _plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return value


def fact_rows(authors: Attestation, reviewer: Attestation | None) -> list[dict[str, Any]]:
    fa = flat_facts(authors)
    fb = flat_facts(reviewer) if reviewer is not None else {}
    cls = set(class_facts(authors)) | (set(class_facts(reviewer)) if reviewer else set())
    rows = []
    for key in sorted({*fa, *fb}, key=_fact_key):
        if key == "device_name":
            continue  # "cuda:0": the device row and the GPU rows say it
        va, vb = _plain(fa.get(key)), _plain(fb.get(key)) if reviewer else None
        same = reviewer is not None and meaning(key, fa.get(key), authors) == meaning(
            key, fb.get(key), reviewer)  # "—" and "no CUDA in use" on a CPU: one meaning
        unused = irrelevant(key, reviewer or authors)
        rows.append({"key": key, "authors": va, "reviewer": vb, "class": key in cls,
                     "differs": reviewer is not None and va != vb and not same,
                     "unused": unused})
    return rows


def _state(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "absent"
    if rec.get("status") == "ok":
        return f"ok {rec.get('sha256')}"
    return str(rec.get("status"))


def workload_rows(a: Audit) -> list[dict[str, Any]]:
    authors = a.authors.workloads
    mine = a.reviewer.workloads if a.reviewer is not None else None
    diffs = {d.name: d for d in a.comparison.different} if a.comparison else {}
    same_class = a.comparison.same_class if a.comparison else False
    order = {n: i for i, n in enumerate(NAMES)}
    rows = []
    for name in sorted({*authors, *(mine or {})}, key=lambda n: (order.get(n, 1 << 30), n)):
        ra, rb = authors.get(name), (mine or {}).get(name)
        d = diffs.get(name)
        if mine is None or a.comparison is None:
            cell = "skipped"
        elif ra is None or rb is None:
            cell = "absent"
        elif d is not None:
            cell = "unexplained" if same_class or not d.expected else "explained"
        elif ra.get("status") != "ok":
            cell = "not-run"
        else:
            cell = "same"
        rows.append({
            "name": name,
            "summary": BY_NAME[name].summary if name in BY_NAME else "",
            "authors": _state(ra),
            "reviewer": _state(rb) if mine is not None else "not run",
            "detail": {"authors": (ra or {}).get("detail", ""),
                       "reviewer": (rb or {}).get("detail", "")},
            "cell": cell,
            "outputs": list(d.outputs) if d else [],
            "attributed_to": list(d.attributed_to) if d else [],
            "why": list(d.why) if d else [],
            "errors": [_error(e) for e in d.errors] if d else [],
            "bounds": dict(a.bounds.get(name, {})),
        })
    return rows


def _error(e: Any) -> dict[str, Any]:
    from verify.gpu.errorstats.tensors import number

    return {**asdict(e), "max_abs": number(e.max_abs), "max_rel": number(e.max_rel),
            "index": list(e.index)}


def paper(a: Audit) -> dict[str, Any] | None:
    if a.paper is None:
        return None
    manifest = a.request.paper
    return {"title": manifest.title if manifest is not None else "",
            "manifest": str(manifest.file) if manifest is not None else None,
            "commands": [v.to_json() for v in a.paper]}


def environment(a: Audit) -> dict[str, Any]:
    r = a.env_report
    attested = dict(a.authors.subjects)
    out: dict[str, Any] = {"checked": r is not None,
                           "attested": {k: attested.get(k) for k in ("environment", "packages")}}
    if r is None:
        return out
    summary = r.get("summary") or {}
    out.update(identical=r.get("identical"), ok=r.get("ok"), prefix_kind=r.get("prefix_kind"),
               digests=dict(r.get("digests") or {}), entries=summary.get("entries"),
               packages=summary.get("packages"), findings=len(r.get("findings") or []),
               notes=list(r.get("notes") or []))
    return out


def drift(report: Mapping[str, Any] | None) -> dict[str, Any]:
    from samebits_app.audit.envcheck import finding_of
    from verify.env.envreport import finding_line

    if report is None:
        return {"findings": [], "unresolved": []}
    findings = [{**f, "line": finding_line(finding_of(f)).strip()}
                for f in report.get("findings") or []]
    linkage = report.get("linkage") or {}
    unresolved = [{"file": u.get("file"), "needed": u.get("needed"), "package": u.get("package")}
                  for u in linkage.get("unresolved") or []]
    return {"findings": findings, "unresolved": unresolved}


def commands(a: Audit) -> list[dict[str, str]]:
    """What to type to reproduce this audit, each with one line saying what it does."""
    req = a.request
    q = shlex.quote
    lock, att = q(lock_arg(Path(req.lockfile))), q(str(req.attestation))
    out: list[dict[str, str]] = []
    env = req.prefix or req.install
    if req.prefix is not None:
        out.append({"why": "install the lock's exact files (skip when ENV exists)",
                    "command": f"samebits install {lock} --target {q(str(env))} "
                    f"--platform {a.platform}"})
    audit = ["samebits", "audit"]
    manifest = req.paper
    from_manifest = manifest is not None and Path(req.lockfile) == Path(manifest.lockfile) \
        and Path(req.attestation) == Path(manifest.attestation)
    if req.source is not None and (from_manifest or manifest is None):
        from samebits_app.audit.source import source_words

        audit += [q(w) for w in source_words(req.source)]  # the folder as fetched names both
    elif manifest is not None and Path(req.lockfile) == Path(manifest.lockfile):
        audit += [q(str(manifest.folder)), "--attestation", att]  # the manifest names the lock
    else:
        audit += [lock, "--attestation", att]
    if req.prefix is not None:
        audit += ["--prefix", q(str(req.prefix))]
    if req.install is not None:
        audit += ["--target", q(str(req.install)), "--replace"]
    if req.python:
        audit += ["--workload-python", q(req.python)]
    if req.platform:
        audit += ["--platform", req.platform]
    if req.device != "auto":
        audit += ["--device", req.device]
    if req.outputs is not None:
        audit += ["--outputs", q(str(req.outputs))]
    if not req.workloads:
        audit.append("--no-workloads")
    audit += ["--out", q(str(req.out))]
    why = "the whole audit" + ("" if env else " (run inside the environment)")
    out.append({"why": why, "command": " ".join(audit)})
    if env is not None or a.env_report is not None:
        where = f" --prefix {q(str(env))}" if env else ""
        out.append({"why": "the environment against the lock, file by file",
                    "command": f"samebits verify env {lock}{where} "
                    f"--platform {a.platform}"})
    if a.reviewer is not None:
        out.append({"why": "the two attestations, side by side",
                    "command": f"samebits verify compare {att} "
                    f"{q(str(Path(req.out) / REVIEWER_ATTESTATION))}"
                    + (f" --outputs-a {q(str(req.outputs))} --outputs-b "
                       f"{q(str(Path(req.out) / OUTPUTS))}" if req.outputs else "")})
    return out

"""The audit report in Markdown: the verdict first, then what a reviewer checks it against.

``render_markdown(document) -> str`` is pure (``samebits_app.audit.document`` builds the input);
GitHub-flavoured tables, no HTML, byte-stable for an equal document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samebits.errors import plural
from samebits_app.audit.verdict import CAUSES
from verify.gpu.errorstats import ulp_text

CELL_WORDS = {"same": "same bits", "explained": "differs, explained",
              "unexplained": "DIFFERS, UNEXPLAINED", "not-run": "not run on either side",
              "absent": "run on one side only", "skipped": "not run (see steps)"}
STATUS = {"ok": "ok", "failed": "FAILED", "skipped": "skipped"}
LONG = 72


def short(value: Any, limit: int = LONG) -> str:
    """One line for a table cell: lists joined, long text cut with its length said."""
    if value is None or value == "":
        return "—"
    text = str(value)
    first = text.splitlines()[0] if text.strip() else text
    if len(first) > limit or first != text:
        return f"{first[:limit].rstrip()}… ({len(text):,} chars)"
    return text


def _ulp(e: Mapping[str, Any]) -> str:
    return ulp_text(e["max_ulp"], e["differing"], e.get("opposite_signs", 0))


def digest(state: str) -> str:
    """"ok <64 hex>" -> "ok 1a2b3c4d5e6f"; other states as they are."""
    if state.startswith("ok ") and len(state) == 67:
        return state[:15]
    return state


def g(x: Any) -> str:
    """A number in three significant digits ("inf"/"nan" strings as they are)."""
    return x if isinstance(x, str) else f"{x:.3g}"


def errors_text(w: Mapping[str, Any]) -> str:
    """A workload's magnitudes: exact max errors, else lower bounds from fingerprints."""
    if w["errors"]:
        return "; ".join(f"{e['output']}: max |Δ| {g(e['max_abs'])}, {_ulp(e)}, "
                         f"{e['differing']}/{e['total']} differ" for e in w["errors"])
    return "; ".join(f"{o}: max |Δ| >= {g(v)} (lower bound)" for o, v in
                     sorted((w.get("bounds") or {}).items()) if v is not None)


def _cell(text: Any, limit: int = LONG) -> str:
    """A table cell: ``short`` (``limit`` 0: whole), pipes escaped."""
    return (short(text, limit) if limit else str(text)).replace("|", "\\|")


def render_markdown(doc: Mapping[str, Any]) -> str:
    out: list[str] = []
    from samebits_app.audit.report_paper import paper_markdown

    for section in (_verdict, paper_markdown, _matrix, _steps, _environment, _drift,
                    _machines, _commands):
        out += section(doc)
    out.append(f"samebits {doc['samebits']}, audit format {doc['format']}.")
    return "\n".join(out) + "\n"


def not_checked(doc: Mapping[str, Any], section: str) -> str | None:
    """"Not checked: <why>." where the section's step did not run, else None."""
    c = (doc.get("checks") or {}).get(section)
    if c is None or c["checked"]:
        return None
    return f"Not checked: {c['why']}."


def reason_lines(reasons: Any) -> list[str]:
    """Each reason with its cause, the divergences it explains listed under it."""
    out = []
    for r in reasons:
        out.append(f"- {r['text']} *(cause: {CAUSES.get(r['cause'], r['cause'])})*")
        out += [f"  - {e}" for e in r.get("explains") or ()]
    return out


def _verdict(doc: Mapping[str, Any]) -> list[str]:
    v, inp = doc["verdict"], doc["inputs"]
    out = [f"# Paper audit: {v['title']}", "",
           f"**Verdict: `{v['level']}`** (exit {v['exit_code']}): {v['meaning']}.", ""]
    if v["reasons"]:
        out += ["Reasons:", "", *reason_lines(v["reasons"]), ""]
    if v["notes"]:
        out += ["Notes:", "", *[f"- {n}" for n in v["notes"]], ""]
    ran = (f"workloads run by `{inp['python']}` on `{inp['device']}`"
           if inp["python"] and inp["device"] else
           f"workloads not run ({why_text(doc, 'facts')})")
    src = inp.get("source")
    if src:
        out.append(f"- source: {source_line(src)}")
    return out + [
        f"- lockfile: `{inp['lockfile']['path']}` (sha256 `{inp['lockfile']['sha256']}`)",
        f"- attestation: `{inp['attestation']['path']}` "
        f"(sha256 `{inp['attestation']['sha256']}`)",
        f"- environment: `{inp['prefix']}` ({inp['platform']}), {ran} "
        f"(authors: `{inp['authors_device']}`)", ""]


def source_line(src: Mapping[str, Any]) -> str:
    """Where the audited paper came from, in words: its URL and commit (or sha256)."""
    what = (f"commit `{src['commit']}`" + (f" (from `--ref {src['ref']}`)" if src.get("ref")
                                           else "")
            if src.get("commit") else f"sha256 `{src.get('sha256')}`")
    return (f"`{src['url']}` at {what}"
            + (f", folder `{src['path']}`" if src.get("path") else ""))


def why_text(doc: Mapping[str, Any], section: str) -> str:
    c = (doc.get("checks") or {}).get(section) or {}
    return str(c.get("why") or "see the steps")


def counts_line(doc: Mapping[str, Any]) -> str | None:
    c = doc.get("counts")
    if not c:
        return None
    extra = [f"{c[k]} {k}" for k in ("unavailable", "error", "refused", "other") if c.get(k)]
    return (f"{c['both_ran']} of {plural(c['workloads'], 'workload')} ran on both sides: "
            f"{c['identical']} bit-identical, {c['explained']} explained, {c['differing']} "
            "differing" + (f"; no bits on a side: {', '.join(extra)}" if extra else "") + ".")


def _matrix(doc: Mapping[str, Any]) -> list[str]:
    skip = not_checked(doc, "workloads")
    if skip:
        return ["## Workloads × machines", "", skip, ""]
    out = ["## Workloads × machines", "", counts_line(doc) or "", "",
           "| workload | authors | reviewer | result | attributed to | max error |",
           "|---|---|---|---|---|---|"]
    for w in doc["workloads"]:
        errs = errors_text(w) or "—"
        why = "; ".join(w.get("why") or ()) or ", ".join(w["attributed_to"]) or "—"
        out.append(f"| {w['name']} | {digest(w['authors'])} | {digest(w['reviewer'])} | "
                   f"{CELL_WORDS[w['cell']]} | {_cell(why, 0)} | {errs} |")
    return out + ["", "*differs, explained*: attributed to a recorded fact that differs and "
                  "that the workload is known to be sensitive to; *DIFFERS, UNEXPLAINED*: no "
                  "such fact.", ""]


def _steps(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Steps", "", "| # | step | status | summary |", "|---|---|---|---|"]
    for i, s in enumerate(doc["steps"], 1):
        summary = " ".join(ln.strip() for ln in s["summary"].splitlines())
        out.append(f"| {i} | {s['name']} | {STATUS[s['status']]} | {_cell(summary, 0)} |")
    return out + [""]


def _environment(doc: Mapping[str, Any]) -> list[str]:
    env = doc["environment"]
    if not env["checked"]:
        return ["## Environment", "", not_checked(doc, "environment")
                or "Not checked (see the steps).", ""]
    out = ["## Environment", "",
           f"verify env: {'identical to the lock' if env['identical'] else 'DRIFT'}, "
           f"{plural(env['entries'], 'file')} ({env['prefix_kind']}).", "",
           "| digest | this machine | attested |", "|---|---|---|"]
    for k in ("environment", "packages"):
        mine, theirs = env["digests"].get(k), env["attested"].get(k)
        mark = " (equal)" if mine == theirs else ""
        out.append(f"| {k} | `{mine}`{mark} | `{theirs or '—'}` |")
    return out + [""]


def _drift(doc: Mapping[str, Any]) -> list[str]:
    d = doc["drift"]
    skip = not_checked(doc, "drift")
    if skip:
        return ["## Drift", "", skip, ""]
    if not d["findings"] and not d["unresolved"]:
        return ["## Drift", "", "None: every file is the one the lock's packages recorded.", ""]
    return ["## Drift", "", *[f"- `{f['line']}`" for f in d["findings"]],
            *[f"- `{u['file']}` needs `{u['needed']}`: resolves nowhere on this host"
              for u in d["unresolved"]], ""]


def _machines(doc: Mapping[str, Any]) -> list[str]:
    differ = [f["key"] for f in doc["facts"] if f["differs"]]
    if differ:
        head = (f"{plural(len(differ), 'fact')} {'differs' if len(differ) == 1 else 'differ'}: "
                f"{', '.join(differ)}.")
    elif not_checked(doc, "facts") is None and any(f["reviewer"] is not None
                                                    for f in doc["facts"]):
        head = "No recorded fact differs."
    else:
        head = ("Only the authors' facts: this machine's were not recorded "
                f"({why_text(doc, 'facts')}).")
    out = ["## Machines", "", head, "",
           "Facts marked ≠ differ; **class** facts may legitimately change bits (they define "
           "the equivalence class), the others may not; *unused*: facts these runs could not "
           "have used (a CUDA setting where no CUDA ran, a variable of a BLAS torch does not "
           "use), which explain nothing.", "",
           "| fact | class | authors | reviewer | |", "|---|---|---|---|---|"]
    for f in doc["facts"]:
        key = f"**{f['key']}**" if f["differs"] else f["key"]
        kind = "class" if f["class"] else "unused" if f.get("unused") else ""
        out.append(f"| {key} | {kind} | {_cell(f['authors'])} | "
                   f"{_cell(f['reviewer'])} | {'≠' if f['differs'] else ''} |")
    return out + [""]


def _commands(doc: Mapping[str, Any]) -> list[str]:
    out = ["## Reproduce", "", "```sh"]
    for c in doc["commands"]:
        out += [f"# {c['why']}", c["command"]]
    return out + ["```", ""]

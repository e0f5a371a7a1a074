"""The summary of ``samebits audit --many``: one row per paper, counts of each verdict. Pure.

    DIR/summary.json   {"format": 1, "kind": "samebits.audit-many", "samebits", "list_sha256",
                        "counts": {verdict or failure: n}, "accepted", "papers": [row, ...]}
    DIR/summary.md     the same as a Markdown table, links relative to DIR
    DIR/summary.html   the same, self-contained, each verdict in its colour
    DIR/times.json     each paper's seconds, host, Slurm job and load: kept apart, since they
                       change from run to run while the summary must not

A row (``papers.row``): name, url, commit or sha256, path, require, status (verdict, failed,
timeout, not run), level, accepted, the first reason (the verdict's first reason, or the
error that stopped the paper), its exit code, and the report and log, relative to DIR. The
summary holds no time, no host and no absolute path, and the rows follow the list's order, so
the same results give the same bytes whether the papers ran one at a time, two at a time or
under Slurm.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import atomic_write, canonical_json
from samebits.errors import plural
from samebits_app.audit.many import TIMES_FILE
from samebits_app.audit.verdict import LEVELS

SUMMARY_FORMAT = 1
SUMMARY_KIND = "samebits.audit-many"
ORDER = ("bit-identical", "within-tolerance", "explained", "environment-identical",
         "not-reproduced", "failed", "timeout", "not run")
FAILURE_COLOUR = "#6e4c9e"
NOT_RUN_COLOUR = "#757575"


def outcome(row: Mapping[str, Any]) -> str:
    """The row's one word: its verdict level, or failed / timeout / not run."""
    return str(row["level"]) if row["status"] == "verdict" else str(row["status"])


def summary_doc(rows: Sequence[Mapping[str, Any]], list_bytes: bytes) -> dict[str, Any]:
    counts = {k: 0 for k in ORDER}
    for r in rows:
        counts[outcome(r)] = counts.get(outcome(r), 0) + 1
    return {"format": SUMMARY_FORMAT, "kind": SUMMARY_KIND, "samebits": __version__,
            "list_sha256": hashlib.sha256(list_bytes).hexdigest(),
            "counts": {k: v for k, v in counts.items() if v},
            "accepted": sum(1 for r in rows if r["accepted"]), "papers": [dict(r) for r in rows]}


def counts_text(doc: Mapping[str, Any]) -> str:
    n = len(doc["papers"])
    parts = ", ".join(f"{v} {k}" for k, v in doc["counts"].items())
    return f"{plural(n, 'paper')}: {parts}; {doc['accepted']} of {n} accepted"


def _source(r: Mapping[str, Any]) -> str:
    what = f"commit {r['commit']}" if r.get("commit") else f"sha256 {r.get('sha256')}"
    return f"{r['url']} at {what}" + (f", folder {r['path']}" if r.get("path") else "")


def _md_cell(text: Any) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"# Audit of {plural(len(doc['papers']), 'paper')}", "",
             f"{counts_text(doc)}.", "",
             "| paper | verdict | accepted | first reason | report | source |",
             "|---|---|---|---|---|---|"]
    for r in doc["papers"]:
        links = " · ".join(f"[{label}]({href})" for label, href in (
            ("report", r["report"]), ("log", r["log"])) if href)
        req = f" (require {r['require']})" if r.get("require") else ""
        lines.append(f"| {_md_cell(r['name'])} | `{outcome(r)}` | "
                     f"{'yes' if r['accepted'] else 'no'}{req} | {_md_cell(r['reason'])} | "
                     f"{links} | {_md_cell(_source(r))} |")
    lines += ["", f"Each paper's time: [{TIMES_FILE}]({TIMES_FILE}). samebits "
              f"{doc['samebits']}, summary format {doc['format']}.", ""]
    return "\n".join(lines)


STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 12px}
table{border-collapse:collapse;margin:8px 0;font-size:13px;width:100%}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td.src{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;overflow-wrap:anywhere}
.level{color:#fff;border-radius:4px;padding:1px 6px;white-space:nowrap;font-weight:600}
.counts{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:6px 14px}
""".strip()


def _colour(word: str) -> str:
    if word in LEVELS:
        return LEVELS[word].colour
    return NOT_RUN_COLOUR if word == "not run" else FAILURE_COLOUR


def _badge(word: str) -> str:
    return f"<span class=\"level\" style=\"background:{_colour(word)}\">{escape(word)}</span>"


def render_html(doc: Mapping[str, Any]) -> str:
    e = escape
    rows = []
    for r in doc["papers"]:
        links = " · ".join(f"<a href=\"{e(href)}\">{label}</a>" for label, href in (
            ("report", r["report"]), ("log", r["log"])) if href)
        req = f" <small>(require {e(r['require'])})</small>" if r.get("require") else ""
        rows.append(f"<tr><td>{e(r['name'])}</td><td>{_badge(outcome(r))}</td>"
                    f"<td>{'yes' if r['accepted'] else 'no'}{req}</td><td>{e(r['reason'])}"
                    f"</td><td>{links}</td><td class=\"src\">{e(_source(r))}</td></tr>")
    counts = "".join(f"<li>{_badge(k)} {v}</li>" for k, v in doc["counts"].items())
    title = f"Audit of {plural(len(doc['papers']), 'paper')}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{e(title)}</title><style>{STYLE}</style></head><body><main>\n"
            f"<h1>{e(title)}</h1>\n<ul class=\"counts\">{counts}</ul>\n"
            f"<p>{doc['accepted']} of {len(doc['papers'])} accepted.</p>\n"
            "<table id=\"papers\"><tr><th>paper</th><th>verdict</th><th>accepted</th>"
            "<th>first reason</th><th>files</th><th>source</th></tr>\n"
            + "\n".join(rows) + "\n</table>\n"
            f"<p><small>each paper's time: <a href=\"{TIMES_FILE}\">{TIMES_FILE}</a>; "
            f"samebits {e(doc['samebits'])}, summary format {doc['format']}</small></p>\n"
            "</main></body></html>\n")


def write_summary(out: Path, doc: Mapping[str, Any],
                  times: Mapping[str, Any]) -> dict[str, str]:
    """DIR/summary.{json,md,html} and DIR/times.json, atomically; kind -> path."""
    files = {"json": (out / "summary.json", canonical_json(doc)),
             "markdown": (out / "summary.md", render_markdown(doc).encode()),
             "html": (out / "summary.html", render_html(doc).encode()),
             "times": (out / TIMES_FILE, canonical_json(times))}
    for path, data in files.values():
        atomic_write(path, data)
    return {k: str(p) for k, (p, _) in files.items()}


def read_times(out: Path, names: Sequence[str]) -> dict[str, Any]:
    """name -> DIR/NAME/times.json (what the last run of it took), for the papers that ran."""
    found: dict[str, Any] = {}
    for name in names:
        try:
            doc = json.loads((out / name / TIMES_FILE).read_text())
        except (OSError, ValueError):
            continue
        found[name] = doc
    return {"papers": found}

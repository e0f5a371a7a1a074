"""The paper's part of the reports: per command its level and outputs, the curves drawn.

``paper_html(document)`` is the ``#paper`` section of ``audit.html``: per command a heading
with its level (``data-level``), the command line, the differing facts, a table of its outputs
(level and summary, with numbers), then per output the details: every curve as an inline SVG
(``samebits_app.paper.svg``: the authors' solid, the reviewer's dashed, the first differing
step marked), the metrics side by side, the tensors that differ (where, by how much).
``paper_markdown(document)`` is the same in Markdown, the curves as their statistics. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from samebits_app.paper.judge import fmt, num
from samebits_app.paper.svg import curve_svg

LEVEL_COLOURS = {"bit-identical": "#cdeccf", "within-tolerance": "#c9ebe4", "not-run": "#e4e4e4",
                 "explained": "#ffe3a3", "diverged": "#f5a3a3", "failed": "#f5a3a3",
                 "beyond-tolerance": "#ffe3a3", "missing": "#f5a3a3", "unreadable": "#f5a3a3"}
MAX_TENSOR_ROWS = 25
TAIL_SHOWN = 8  # a failed command's last lines in the reports; audit.json has them all

PAPER_STYLE = """
#paper .command{border:1px solid #d0d7de;border-radius:8px;padding:10px 16px;margin:12px 0}
#paper h3{font-size:16px;margin:4px 0 6px}
#paper .level{display:inline-block;padding:1px 8px;border-radius:10px;font-size:13px;
 font-weight:600;color:#1f2328}
#paper figure{margin:10px 0}
#paper figcaption{font-size:13px;color:#57606a}
#paper svg.curve{max-width:100%;height:auto;border:1px solid #eaeef2;border-radius:6px}
""".strip()


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _badge(level: str) -> str:
    return (f'<span class="level" style="background:{LEVEL_COLOURS.get(level, "#e4e4e4")}">'
            f"{_e(level)}</span>")


def _applies(doc: Mapping[str, Any], section: str) -> Mapping[str, Any] | None:
    c = (doc.get("checks") or {}).get(section)
    return c if c is not None and c.get("applies") else None


def _files_lines(doc: Mapping[str, Any]) -> list[tuple[str, str, list[str], list[str]]]:
    """(step, status, summary lines, notes) of the code and inputs steps."""
    out = []
    for s in doc["steps"]:
        if s["name"] in ("code", "inputs"):
            out.append((s["name"], s["status"], [s["summary"], *s["reasons"]], s["notes"]))
    return out


def paper_html(doc: Mapping[str, Any]) -> str:
    paper = doc.get("paper")
    files = _files_lines(doc)
    head = ""
    if files:
        items = "".join(
            f"<li><b>{_e(name)}</b> {'(not checked)' if status == 'skipped' else ''}"
            f"{_e(lines[0])}" + "".join(f"<br>{_e(x)}" for x in lines[1:])
            + "".join(f"<br><small>{_e(n)}</small>" for n in notes) + "</li>"
            for name, status, lines, notes in files)
        head = f"<ul id=\"paper-files\">{items}</ul>\n"
    if not paper:
        c = _applies(doc, "paper")
        if c is None:
            return ""
        return ("<section id=\"paper\"><h2>The paper's commands</h2>\n" + head
                + f"<p>Not checked: {_e(c['why'])}.</p></section>\n")
    parts = ["<section id=\"paper\"><h2>The paper's commands"
             + (f": {_e(paper['title'])}" if paper.get("title") else "") + "</h2>\n", head,
             f"<p>Rerun from <code>{_e(paper.get('manifest'))}</code> in the audited "
             "environment under the attested settings; every output compared with the "
             "authors' as their attestation declares it.</p>\n"]
    for c in paper["commands"]:
        parts.append(f'<div class="command" data-command="{_e(c["name"])}" '
                     f'data-level="{_e(c["level"])}"><h3>{_e(c["name"])} {_badge(c["level"])}'
                     f"</h3><p><code>{_e(c['run'])}</code></p>")
        for ch in c.get("changes") or ():
            parts.append(f"<p><b>Differs from the attested command:</b> {_e(ch)}</p>")
        if c.get("tail"):
            shown = c["tail"][-TAIL_SHOWN:]
            more = len(c["tail"]) - len(shown)
            parts.append("<pre class=\"tail\">" + _e("\n".join(shown)) + "</pre>"
                         + (f"<p><small>{more} earlier lines in audit.json</small></p>"
                            if more else ""))
        if c["facts"]:
            parts.append(f"<p>Recorded facts that differ: <b>{_e(', '.join(c['facts']))}</b>"
                         "</p>")
        rows = "".join(
            f"<tr><th>{_e(o['output'])}</th><td>{_e(o['kind'])}</td>"
            f'<td style="background:{LEVEL_COLOURS.get(o["level"], "#fff")}">{_e(o["level"])}'
            f"</td><td>{_e(o['summary'])}</td></tr>" for o in c["outputs"])
        if rows:
            parts.append('<table class="outputs"><tr><th>output</th><th>kind</th><th>result'
                         f"</th><th>what differs</th></tr>{rows}</table>")
        if c["level"] == "not-run":
            parts += [f"<p>{_e(n)}</p>" for n in c["notes"]]
        for o in c["outputs"]:
            parts.append(_details_html(c["name"], o))
        for r in c["reasons"]:
            parts.append(f"<p><b>Reason:</b> {_e(r)}</p>")
        parts.append("</div>\n")
    return "".join(parts) + "</section>\n"


def _details_html(command: str, o: Mapping[str, Any]) -> str:
    out = []
    for name, curve in (o.get("curves") or {}).items():
        row: Mapping[str, Any] = next((r for r in o["rows"] if r.get("series") == name), {})
        caption = (f"{command}: {o['output']}: {name}. "
                   + (f"First differs at step {curve['first_diff']}; max |Δ| "
                      f"{fmt(row.get('max_dev'))} at step {row.get('max_dev_step')}; final "
                      f"|Δ| {fmt(row.get('final_dev'))} at step {row.get('final_step')}."
                      if curve.get("first_diff") is not None else "The same at every step.")
                   + (f" Beyond tolerance from step {curve['first_beyond']}."
                      if curve.get("first_beyond") is not None else ""))
        svg = curve_svg(f"{o['output']}: {name}", curve)
        out.append(f'<figure data-series="{_e(name)}">{svg}'
                   f"<figcaption>{_e(caption)}</figcaption></figure>")
    if o["kind"] == "metrics" and o["rows"]:
        body = "".join(
            f"<tr><th>{_e(r['name'])}</th><td>{_e(r.get('authors'))}</td>"
            f"<td>{_e(r.get('reviewer'))}</td><td>{_e(fmt(r.get('abs')))}</td>"
            f"<td>{_e(fmt(r.get('rel')))}</td><td>rtol {_e(fmt(r['rtol']))}, atol "
            f"{_e(fmt(r['atol']))}</td><td>{'yes' if r.get('within') else 'NO'}</td></tr>"
            for r in o["rows"])
        out.append('<table class="metrics"><tr><th>metric</th><th>authors</th><th>reviewer'
                   "</th><th>|Δ|</th><th>rel</th><th>tolerance</th><th>within</th></tr>"
                   f"{body}</table>")
    if o["kind"] == "tensors":
        diff = [r for r in o["rows"] if not r.get("same")]
        if diff:
            out.append('<table class="tensors"><tr><th>tensor</th><th>max |Δ|</th>'
                       "<th>at index</th><th>authors → reviewer</th><th>max rel</th>"
                       "<th>ulp</th><th>beyond tolerance</th></tr>"
                       + "".join(_tensor_row(r) for r in diff[:MAX_TENSOR_ROWS]) + "</table>"
                       + (f"<p>... and {len(diff) - MAX_TENSOR_ROWS} more tensors</p>"
                          if len(diff) > MAX_TENSOR_ROWS else ""))
    return "".join(out)


def _tensor_row(r: Mapping[str, Any]) -> str:
    name = r["name"] or "(the array)"
    if "mismatch" in r:
        return f"<tr><th>{_e(name)}</th><td colspan=\"6\">{_e(r['mismatch'])}</td></tr>"
    if "max_abs" not in r:
        return (f"<tr><th>{_e(name)}</th><td>&ge; {_e(fmt(num(r.get('max_abs_at_least'))))}"
                "</td><td colspan=\"5\">the authors' file was not shipped: a lower bound "
                "from the fingerprints</td></tr>")
    return (f"<tr><th>{_e(name)}</th><td>{_e(fmt(num(r['max_abs'])))}</td>"
            f"<td>{_e(r.get('index'))}</td><td>{_e(fmt(num(r.get('authors'))))} → "
            f"{_e(fmt(num(r.get('reviewer'))))}</td><td>{_e(fmt(num(r.get('max_rel'))))}</td>"
            f"<td>{_e(r.get('max_ulp'))}</td><td>{_e(r.get('beyond'))} of {_e(r['total'])}"
            "</td></tr>")


def paper_markdown(doc: Mapping[str, Any]) -> list[str]:
    paper = doc.get("paper")
    files: list[str] = []
    for name, status, lines, notes in _files_lines(doc):
        files.append(f"- {name}: {'not checked: ' if status == 'skipped' else ''}"
                     f"{lines[0].removeprefix('not checked: ')}")
        files += [f"  - {x}" for x in [*lines[1:], *notes]]
    if files:
        files.append("")
    if not paper:
        c = _applies(doc, "paper")
        if c is None:
            return []
        return ["## The paper's commands", "", *files, f"Not checked: {c['why']}.", ""]
    out = ["## The paper's commands" + (f": {paper['title']}" if paper.get("title") else ""),
           "", *files]
    for c in paper["commands"]:
        out += [f"### {c['name']}: `{c['level']}`", "", f"`{c['run']}`", ""]
        out += [f"- Differs from the attested command: {ch}" for ch in c.get("changes") or ()]
        if c.get("changes"):
            out.append("")
        if c.get("tail"):
            shown = c["tail"][-TAIL_SHOWN:]
            more = len(c["tail"]) - len(shown)
            out += ["```", *shown, "```", *([f"({more} earlier lines in audit.json)"]
                                            if more else []), ""]
        if c["facts"]:
            out += [f"Recorded facts that differ: {', '.join(c['facts'])}.", ""]
        if c["outputs"]:
            out += ["| output | kind | result | what differs |", "|---|---|---|---|"]
            out += [f"| {o['output']} | {o['kind']} | {o['level']} | "
                    f"{o['summary'].replace('|', chr(92) + '|')} |" for o in c["outputs"]]
            out.append("")
        out += [f"- {n}" for n in c["notes"] if c["level"] == "not-run"]
        out += [f"- Reason: {r}" for r in c["reasons"]]
        if c["reasons"]:
            out.append("")
    return out

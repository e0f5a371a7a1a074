"""The audit report as one self-contained HTML page: inline CSS, no script, no network.

``render_html(document) -> str`` is pure and byte-stable. Top to bottom: the verdict banner
(``#verdict``, coloured by level) with its reasons, the paper's commands (``#paper``: per
command its level, its outputs, and every curve as an inline SVG, the authors' against the
reviewer's with the first differing step marked; ``report_paper``), the colour legend and the
workloads x machines matrix (``#matrix``), the steps (``#steps``), the environment digests,
the drift list (``#drift``), the two machines' facts side by side with the differences highlighted
(``#facts``), and the commands to reproduce (``#commands``).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from samebits.errors import plural
from samebits_app.audit.report_md import (
    CELL_WORDS,
    counts_line,
    digest,
    errors_text,
    not_checked,
    short,
    why_text,
)
from samebits_app.audit.report_paper import PAPER_STYLE, paper_html
from samebits_app.audit.verdict import CAUSES, LEVELS

CELL_COLOURS = {"same": "#cdeccf", "explained": "#ffe3a3", "unexplained": "#f5a3a3",
                "not-run": "#e4e4e4", "absent": "#d9c8f0", "skipped": "#f0f0f0"}
STATUS_COLOURS = {"ok": "#2e7d32", "failed": "#c62828", "skipped": "#757575"}
DIFF_CLASS = "#ffe3a3"   # a class fact that differs: may change bits
DIFF_OTHER = "#fff6cc"   # another fact that differs: may not

STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;
 background:#fff}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 12px}
h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
#verdict{color:#fff;border-radius:8px;padding:16px 20px;margin:0 0 16px}
#verdict .level{font-size:26px;font-weight:700;margin:0}
#verdict .meaning{margin:4px 0 0;font-size:15px;opacity:.95}
#verdict ul{margin:10px 0 0;padding-left:22px}
#verdict code{background:rgba(255,255,255,.18);color:#fff}
.notes{background:#f6f8fa;border-left:4px solid #8c959f;padding:8px 14px;margin:8px 0}
.notes ul{margin:4px 0;padding-left:20px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}
td.mono,code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
code{background:#f6f8fa;padding:1px 4px;border-radius:4px;font-size:12px}
pre{background:#f6f8fa;padding:12px 14px;border-radius:6px;overflow-x:auto;font-size:13px}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:6px 0 10px;padding:0;list-style:none}
.legend li{display:flex;align-items:center;gap:6px;font-size:13px}
.swatch{display:inline-block;width:18px;height:14px;border:1px solid #8c959f;border-radius:3px}
.status{font-weight:700}
.inputs{font-size:13px;margin:0 0 8px;padding-left:20px}
.diff td:last-child{font-weight:700}
#matrix td.mono{white-space:nowrap}
#facts{width:100%;table-layout:fixed}
#facts th,#facts td{overflow-wrap:anywhere}
#facts col.key{width:30%}#facts col.cls{width:6%}#facts col.mark{width:3%}
""".strip() + "\n" + PAPER_STYLE


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def render_html(doc: Mapping[str, Any]) -> str:
    v = doc["verdict"]
    colour = LEVELS[v["level"]].colour
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>samebits audit: {_e(v['title'])}</title>"
        f"<style>{STYLE}</style></head><body><main>\n",
        "<h1>samebits paper audit</h1>\n",
        f"<section id=\"verdict\" data-level=\"{_e(v['level'])}\" "
        f"style=\"background:{colour}\">"
        f"<p class=\"level\">{_e(v['title'])}</p>"
        f"<p class=\"meaning\">verdict <code>{_e(v['level'])}</code>, exit {v['exit_code']}: "
        f"{_e(v['meaning'])}.</p>"
        + (f"<ul id=\"reasons\">{''.join(_reason(r) for r in v['reasons'])}</ul>"
           if v["reasons"] else "") + "</section>\n",
    ]
    if v["notes"]:
        parts.append("<div class=\"notes\"><b>Notes</b><ul>"
                     + "".join(f"<li>{_e(n)}</li>" for n in v["notes"]) + "</ul></div>\n")
    inp = doc["inputs"]
    src = inp.get("source")
    parts.append(
        "<ul class=\"inputs\">"
        + (f"<li>source {_source(src)}</li>" if src else "") +
        f"<li>lockfile <code>{_e(inp['lockfile']['path'])}</code> sha256 "
        f"<code>{_e(inp['lockfile']['sha256'])}</code></li>"
        f"<li>attestation <code>{_e(inp['attestation']['path'])}</code> sha256 "
        f"<code>{_e(inp['attestation']['sha256'])}</code></li>"
        f"<li>environment <code>{_e(inp['prefix'])}</code> ({_e(inp['platform'])}); "
        + (f"workloads run by <code>{_e(inp['python'])}</code> on <code>{_e(inp['device'])}"
           "</code>" if inp["python"] and inp["device"] else
           f"workloads not run ({_e(why_text(doc, 'facts'))})")
        + f" (the authors: <code>{_e(inp['authors_device'])}</code>)</li></ul>\n")
    parts += [paper_html(doc), _matrix(doc), _steps(doc), _environment(doc), _drift(doc),
              _facts(doc), _commands(doc),
              f"<p><small>samebits {_e(doc['samebits'])}, audit format {doc['format']}"
              "</small></p>\n</main></body></html>\n"]
    return "".join(parts)


def _source(src: Mapping[str, Any]) -> str:
    what = (f"commit <code>{_e(src['commit'])}</code>"
            + (f" (from <code>--ref {_e(src['ref'])}</code>)" if src.get("ref") else "")
            if src.get("commit") else f"sha256 <code>{_e(src.get('sha256'))}</code>")
    return (f"<code>{_e(src['url'])}</code> at {what}"
            + (f", folder <code>{_e(src['path'])}</code>" if src.get("path") else ""))


def _reason(r: Mapping[str, Any]) -> str:
    under = "".join(f"<li>{_e(x)}</li>" for x in r.get("explains") or ())
    return (f"<li>{_e(r['text'])} <small>(cause: {_e(CAUSES.get(r['cause'], r['cause']))})"
            "</small>" + (f"<ul>{under}</ul>" if under else "") + "</li>")


def _skip(doc: Mapping[str, Any], section: str) -> str | None:
    text = not_checked(doc, section)
    return f"<p class=\"not-checked\">{_e(text)}</p>\n" if text else None


def _legend(items: Mapping[str, str], colours: Mapping[str, str]) -> str:
    return ("<ul class=\"legend\">" + "".join(
        f"<li><span class=\"swatch\" style=\"background:{colours[k]}\"></span>{_e(text)}</li>"
        for k, text in items.items()) + "</ul>")


def _matrix(doc: Mapping[str, Any]) -> str:
    skip = _skip(doc, "workloads")
    if skip:
        return "<h2>Workloads &times; machines</h2>\n" + skip
    rows = []
    for w in doc["workloads"]:
        colour = CELL_COLOURS[w["cell"]]
        errs = errors_text(w)
        why = "; ".join(w.get("why") or ()) or ", ".join(w["attributed_to"])
        note = " — ".join(x for x in (CELL_WORDS[w["cell"]], why and f"attributed to {why}",
                                       errs) if x)
        left = CELL_COLOURS["skipped" if w["cell"] == "skipped" else "same"]
        rows.append(
            f"<tr class=\"{w['cell']}\"><th title=\"{_e(w['summary'])}\">{_e(w['name'])}</th>"
            + _state_cell(w["authors"], w["detail"]["authors"], left)
            + _state_cell(w["reviewer"], w["detail"]["reviewer"], colour)
            + f"<td>{_e(note)}</td></tr>")
    legend = {k: CELL_WORDS[k] for k in ("same", "explained", "unexplained", "not-run",
                                          "absent", "skipped")}
    counts = counts_line(doc)
    return ("<h2>Workloads &times; machines</h2>\n"
            + (f"<p id=\"counts\">{_e(counts)}</p>" if counts else "")
            + _legend(legend, CELL_COLOURS) +
            "<table id=\"matrix\"><tr><th>workload</th><th>authors</th><th>reviewer (this "
            "machine)</th><th>result</th></tr>\n" + "\n".join(rows) + "\n</table>\n")


def _state_cell(state: str, detail: str, colour: str) -> str:
    title = f"{state} {detail}".strip()
    return (f"<td class=\"mono\" style=\"background:{colour}\" title=\"{_e(title)}\">"
            f"{_e(digest(state))}</td>")


def _facts(doc: Mapping[str, Any]) -> str:
    rows = []
    for f in doc["facts"]:
        bg = (DIFF_CLASS if f["class"] else DIFF_OTHER) if f["differs"] else "transparent"
        cls = " class=\"diff\"" if f["differs"] else ""
        rows.append(f"<tr{cls} style=\"background:{bg}\"><th>{_e(f['key'])}</th>"
                    f"<td>{'class' if f['class'] else 'unused' if f.get('unused') else ''}</td>"
                    f"<td class=\"mono\" title=\"{_e(f['authors'])}\">{_e(short(f['authors']))}"
                    f"</td><td class=\"mono\" title=\"{_e(f['reviewer'])}\">"
                    f"{_e(short(f['reviewer']))}</td><td>{'≠' if f['differs'] else ''}</td>"
                    "</tr>")
    legend = _legend({"class": "differs, and may change bits (an equivalence-class fact)",
                      "other": "differs, and may not change bits"},
                     {"class": DIFF_CLASS, "other": DIFF_OTHER})
    differ = [f["key"] for f in doc["facts"] if f["differs"]]
    if differ:
        head = (f"<p>{plural(len(differ), 'fact')} {'differs' if len(differ) == 1 else 'differ'}"
                f": <b>{_e(', '.join(differ))}</b>.</p>")
    elif not_checked(doc, "facts") is None and any(f["reviewer"] is not None
                                                    for f in doc["facts"]):
        head = "<p>No recorded fact differs.</p>"
    else:
        head = (f"<p class=\"not-checked\">Only the authors' facts: this machine's were not "
                f"recorded ({_e(why_text(doc, 'facts'))}).</p>")
    return ("<h2>The two machines</h2>\n" + head + legend +
            "<table id=\"facts\"><colgroup><col class=\"key\"><col class=\"cls\"><col>"
            "<col><col class=\"mark\"></colgroup><tr><th>fact</th><th>class</th><th>authors</th>"
            "<th>reviewer (this machine)</th><th></th></tr>\n" + "\n".join(rows) +
            "\n</table>\n")


def _steps(doc: Mapping[str, Any]) -> str:
    rows = []
    for i, s in enumerate(doc["steps"], 1):
        extra = "".join(f"<br><small>{_e(n)}</small>" for n in s["notes"])
        rows.append(f"<tr><td>{i}</td><th>{_e(s['name'])}</th><td class=\"status\" "
                    f"style=\"color:{STATUS_COLOURS[s['status']]}\">{_e(s['status'])}</td>"
                    f"<td>{_e(s['summary'])}{extra}</td></tr>")
    return ("<h2>Steps</h2>\n<table id=\"steps\"><tr><th>#</th><th>step</th><th>status</th>"
            "<th>what it found</th></tr>\n" + "\n".join(rows) + "\n</table>\n")


def _environment(doc: Mapping[str, Any]) -> str:
    env = doc["environment"]
    if not env["checked"]:
        return "<h2>Environment</h2>\n" + (_skip(doc, "environment")
                                            or "<p>Not checked (see the steps).</p>\n")
    rows = []
    for k in ("environment", "packages"):
        mine, theirs = env["digests"].get(k), env["attested"].get(k)
        bg = "#cdeccf" if mine == theirs else DIFF_OTHER
        rows.append(f"<tr style=\"background:{bg}\"><th>{k}</th><td class=\"mono\">{_e(mine)}"
                    f"</td><td class=\"mono\">{_e(theirs or '-')}</td></tr>")
    state = "identical to the lock" if env["identical"] else "DRIFT"
    return (f"<h2>Environment</h2>\n<p>verify env: <b>{state}</b>, "
            f"{plural(env['entries'], 'file')} ({_e(env['prefix_kind'])}).</p>\n"
            "<table id=\"digests\"><tr><th>digest</th>"
            "<th>this machine</th><th>attested</th></tr>" + "".join(rows) + "</table>\n")


def _drift(doc: Mapping[str, Any]) -> str:
    d = doc["drift"]
    skip = _skip(doc, "drift")
    if skip:
        return "<h2>Drift</h2>\n" + skip
    items = [f"<li><code>{_e(f['line'])}</code></li>" for f in d["findings"]]
    items += [f"<li><code>{_e(u['file'])}</code> needs <code>{_e(u['needed'])}</code>: "
              "resolves nowhere on this host</li>" for u in d["unresolved"]]
    body = "".join(items) or "<li>none: every file is the one the lock's packages recorded</li>"
    return f"<h2>Drift</h2>\n<ul id=\"drift\">{body}</ul>\n"


def _commands(doc: Mapping[str, Any]) -> str:
    lines = []
    for c in doc["commands"]:
        lines += [f"# {c['why']}", c["command"]]
    return ("<h2>Reproduce</h2>\n<pre id=\"commands\">" + _e("\n".join(lines)) + "</pre>\n")

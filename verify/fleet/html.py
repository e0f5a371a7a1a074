"""The fleet report as one self-contained HTML page: ranks x workloads, coloured. Byte-stable."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from samebits.errors import plural
from verify.fleet.checkin import refusal_lines
from verify.fleet.nodes import node_lines
from verify.fleet.report import SUSPECT, CellStates

COLOURS = {"ok": "#cdeccf", "explained": "#ffe3a3", "suspect": "#f5a3a3",
           "undecided": "#d9c8f0", "not-run": "#e4e4e4"}
LEGEND = {"ok": "same bits as its class", "explained": "differs from the largest class; "
          "explained by recorded facts", "suspect": f"UNEXPLAINED: {SUSPECT}",
          "undecided": "class disagrees with no majority", "not-run": "unavailable, refused "
          "or failed"}

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}
th,td{border:1px solid #bbb;padding:3px 6px;text-align:left;
 font-family:ui-monospace,monospace;font-size:12px}
th{background:#f4f4f4}
.verdict{font-size:1.3em;font-weight:600}
""".strip()


def render_html(report: Mapping[str, Any]) -> str:
    e = escape
    rows = []
    cell_state = CellStates(report)
    for r in report["ranks"]:
        cells = []
        for w in report["workloads"]:
            state = cell_state(r["rank"], w)
            value = r["workloads"].get(w, "absent")
            short = value[:8] if len(value) == 64 else value
            cells.append(f'<td class="{state}" style="background:{COLOURS[state]}" '
                         f'title="{e(w)}: {e(value)} ({state})">{e(short)}</td>')
        rows.append(f"<tr><th>{r['rank']}</th><td>{e(str(r['host']))}</td>"
                    f"<td>{e(str(r['device']))}</td><td>{e(str(r['gpu_uuid'] or '-'))}</td>"
                    f"<td>{e(str(r['class'] or '-'))}</td>{''.join(cells)}</tr>")
    head = "".join(f"<th>{e(w)}</th>" for w in report["workloads"])
    classes = "".join(f"<li><b>{e(c['id'])}</b> (ranks {e(', '.join(map(str, c['ranks'])))}): "
                      f"{e(c['label'])}</li>" for c in report["classes"])
    suspects = "".join(
        f"<li>rank {s['rank']} on {e(str(s['host']))} ({e(str(s['device']))}, GPU "
        f"{e(str(s['gpu_uuid'] or '-'))}): {e(', '.join([*s['workloads'], *s['collectives']]))}"
        "</li>" for s in report["suspects"]) or "<li>none</li>"
    refused = "".join(f"<li>{e(line)}</li>" for line in refusal_lines(report))
    hosts = "".join(
        f"<li><b>{e(h['host'])}</b>: ranks {e(', '.join(map(str, h['ranks'])))}"
        + (f" &mdash; <b>odd</b>: its {e(' and '.join(h['odd']))} differ from the "
           f"{h['agreeing_hosts']} hosts that agree" if h["odd"] else "") + "</li>"
        for h in report.get("hosts") or ())
    legend = "".join(f'<li><span style="background:{COLOURS[k]}">&nbsp;&nbsp;&nbsp;&nbsp;</span>'
                     f" {e(k)}: {e(v)}</li>" for k, v in LEGEND.items())
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>samebits fleet report</title><style>{STYLE}</style></head><body>\n"
        f"<h1>samebits fleet report</h1>\n"
        f"<p class=\"verdict\" id=\"verdict\">verdict: {e(report['verdict'])}</p>\n"
        f"<p>{plural(report['world_size'], 'rank')}, backend {e(str(report['backend']))}, "
        f"report format {report['format']}</p>\n"
        f"<h2>Suspects</h2><ul id=\"suspects\">{suspects}</ul>\n"
        + (f"<h2>Refused or missing ranks</h2><ul id=\"refused\">{refused}</ul>\n"
           if refused else "")
        + (f"<h2>Hosts</h2><ul id=\"hosts\">{hosts}</ul>\n" if hosts else "")
        + (_nodes_html(report["nodes"]) if report.get("nodes") is not None else "") +
        f"<h2>Classes</h2><ul>{classes}</ul>\n"
        f"<h2>Ranks &times; workloads</h2><table id=\"matrix\"><tr><th>rank</th><th>host</th>"
        f"<th>device</th><th>GPU UUID</th><th>class</th>{head}</tr>\n" + "\n".join(rows) +
        f"\n</table>\n<ul>{legend}</ul>\n</body></html>\n")


def _nodes_html(doc: Mapping[str, Any]) -> str:
    """The node statements: suspects, unhealthy and rejected first, then one row per node."""
    e = escape
    items = node_lines(doc)[1:]
    rows = "".join(
        f"<tr><td>{e(n['host'])}</td><td>{'yes' if n['healthy'] else 'NO'}</td>"
        f"<td>{e(', '.join(n['reasons']) or '-')}</td>"
        f"<td>{e(str(n['env'].get('files')))} files, {n['env']['drift']} drift</td>"
        f"<td>{e('; '.join(str(c['class']) + ' ' + str(c['digest'])[:12] for c in n['canary']))}"
        f"</td><td>{e(', '.join(s[:12] for s in n['signed_by']) or '-')}</td></tr>\n"
        for n in doc["nodes"])
    return (f"<h2>Nodes</h2><p id=\"nodes-verdict\">{e(node_lines(doc)[0])}</p>"
            f"<ul id=\"nodes\">{''.join(f'<li>{e(i)}</li>' for i in items) or '<li>none</li>'}"
            "</ul>\n<table id=\"node-table\"><tr><th>host</th><th>healthy</th><th>reasons</th>"
            f"<th>environment</th><th>canary</th><th>signed by</th></tr>\n{rows}</table>\n")

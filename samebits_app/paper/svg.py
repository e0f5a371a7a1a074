"""A curve, the authors' against the reviewer's, as one inline SVG: no script, no fonts fetched.

    curve_svg(title, curve) -> str

``curve`` is ``judge``'s: ``{"authors": {"steps", "values"}, "reviewer": {...},
"first_diff": step | None, "first_beyond": step | None}``. Top panel: both series on one
linear scale, the authors' solid (``AUTHORS``), the reviewer's dashed (``REVIEWER``), a red
vertical line at the first step whose value differs (``FIRST_DIFF``) and a purple one where the
difference first leaves the tolerance. Bottom panel: |authors - reviewer| per step on a log
scale, so differences far below the line width are still seen. Pure and byte-stable:
coordinates rounded to 0.01, nothing from the clock or the machine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

AUTHORS = "#1f5fbf"
REVIEWER = "#f28e00"
FIRST_DIFF = "#d32f2f"
FIRST_BEYOND = "#7b1fa2"
WIDTH, TOP_H, BOTTOM_H = 760, 230, 110
LEFT, RIGHT, PAD = 70, 18, 26
MAX_POINTS = 2000


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _points(side: Mapping[str, Any]) -> list[tuple[float, float]]:
    pts = [(float(s), y) for s, v in zip(side["steps"], side["values"], strict=True)
           if (y := _num(v)) is not None]
    if len(pts) > MAX_POINTS:
        k = math.ceil(len(pts) / MAX_POINTS)
        pts = pts[::k] + ([pts[-1]] if (len(pts) - 1) % k else [])
    return pts


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    out, t = [], first
    while t <= hi + step * 1e-9:
        out.append(round(t, 12))
        t += step
    return out


def _label(v: float) -> str:
    if v == 0:
        return "0"
    return f"{v:.4g}" if 1e-3 <= abs(v) < 1e5 else f"{v:.1e}"


def _polyline(pts: Sequence[tuple[float, float]], cls: str, colour: str, extra: str = "") -> str:
    coords = " ".join(f"{x:.2f},{y:.2f}" for x, y in pts)
    return (f'<polyline class="{cls}" fill="none" stroke="{colour}" stroke-width="2"{extra} '
            f'points="{coords}"/>')


def curve_svg(title: str, curve: Mapping[str, Any]) -> str:
    a, b = _points(curve["authors"]), _points(curve["reviewer"])
    steps = [p[0] for p in a + b] or [0.0, 1.0]
    ys = [p[1] for p in a + b] or [0.0, 1.0]
    x0, x1 = min(steps), max(steps)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y0, y1 = y0 - 1, y1 + 1
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    plot_w = WIDTH - LEFT - RIGHT
    top0, top1 = PAD, TOP_H - PAD
    bot0, bot1 = TOP_H + 10, TOP_H + BOTTOM_H - PAD
    height = TOP_H + BOTTOM_H

    def sx(s: float) -> float:
        return LEFT + (s - x0) / (x1 - x0) * plot_w

    def sy(v: float) -> float:
        return top1 - (v - y0) / (y1 - y0) * (top1 - top0)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="curve" width="{WIDTH}" '
             f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
             f'font-family="system-ui,sans-serif" font-size="11">',
             f"<title>{escape(title)}: the authors' run (solid) against the reviewer's "
             "(dashed)</title>",
             f'<rect x="{LEFT}" y="{top0}" width="{plot_w}" height="{top1 - top0}" '
             'fill="#fff" stroke="#8c959f"/>']
    for t in nice_ticks(y0, y1):
        y = sy(t)
        parts.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.2f}" y2="{y:.2f}" '
                     f'stroke="#eaeef2"/><text x="{LEFT - 6}" y="{y + 4:.2f}" '
                     f'text-anchor="end">{_label(t)}</text>')
    for t in nice_ticks(x0, x1, 8):
        x = sx(t)
        parts.append(f'<text x="{x:.2f}" y="{bot1 + 16:.2f}" text-anchor="middle">'
                     f"{_label(t)}</text>")
    parts.append(_polyline([(sx(s), sy(v)) for s, v in a], "authors", AUTHORS))
    parts.append(_polyline([(sx(s), sy(v)) for s, v in b], "reviewer", REVIEWER,
                           ' stroke-dasharray="7 4"'))
    parts.append(_deviation(curve, sx, bot0, bot1, plot_w))
    for key, colour, word, dy in (("first_diff", FIRST_DIFF, "first differs", 12),
                                  ("first_beyond", FIRST_BEYOND, "beyond tolerance", 26)):
        step = curve.get(key)
        if step is None:
            continue
        x = float(round(sx(float(step))))  # whole pixels: a 2 px line covers two columns
        anchor = "start" if x < LEFT + plot_w * 0.7 else "end"
        dx = 4 if anchor == "start" else -4
        parts.append(f'<line class="{key.replace("_", "-")}" x1="{x:.2f}" x2="{x:.2f}" '
                     f'y1="{top0}" y2="{bot1}" stroke="{colour}" stroke-width="2" '
                     f'stroke-dasharray="4 3"/><text class="{key.replace("_", "-")}-label" '
                     f'x="{x + dx:.2f}" y="{top0 + dy}" text-anchor="{anchor}" fill="{colour}" '
                     'stroke="#fff" stroke-width="3" paint-order="stroke">'
                     f"{word}: step {escape(_label(float(step)))}</text>")
    parts.append(f'<line x1="{LEFT}" x2="{LEFT + 22}" y1="12" y2="12" stroke="{AUTHORS}" '
                 f'stroke-width="2"/><text x="{LEFT + 26}" y="16">authors</text>'
                 f'<line x1="{LEFT + 90}" x2="{LEFT + 112}" y1="12" y2="12" stroke="{REVIEWER}" '
                 f'stroke-width="2" stroke-dasharray="7 4"/><text x="{LEFT + 116}" y="16">'
                 f'reviewer</text><text x="{LEFT + plot_w}" y="16" text-anchor="end">'
                 f"{escape(title)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _deviation(curve: Mapping[str, Any], sx: Any, y_top: float, y_bot: float,
               plot_w: float) -> str:
    pa = {float(s): _num(v) for s, v in zip(curve["authors"]["steps"],
                                             curve["authors"]["values"], strict=True)}
    pb = {float(s): _num(v) for s, v in zip(curve["reviewer"]["steps"],
                                             curve["reviewer"]["values"], strict=True)}
    devs = [(s, abs(a - b)) for s in sorted(set(pa) & set(pb))
            if (a := pa[s]) is not None and (b := pb[s]) is not None and a != b]
    box = (f'<rect x="{LEFT}" y="{y_top}" width="{plot_w}" height="{y_bot - y_top:.2f}" '
           'fill="#fbfbfc" stroke="#8c959f"/>'
           f'<text x="{LEFT + 4}" y="{y_top + 12}" fill="#57606a">|authors - reviewer|'
           "</text>")
    if not devs:
        return box + (f'<text x="{LEFT + plot_w / 2:.2f}" y="{(y_top + y_bot) / 2 + 4:.2f}" '
                      'text-anchor="middle" fill="#57606a">no step differs</text>')
    logs = [math.log10(d) for _, d in devs]
    lo, hi = math.floor(min(logs)), math.ceil(max(logs))
    hi = hi if hi > lo else lo + 1

    def sy(d: float) -> float:
        return y_bot - (math.log10(d) - lo) / (hi - lo) * (y_bot - y_top)

    ticks = "".join(f'<text x="{LEFT - 6}" y="{sy(10.0 ** e) + 4:.2f}" text-anchor="end">'
                    f"1e{e}</text>" for e in sorted({lo, hi}))
    dots = "".join(f'<circle cx="{sx(s):.2f}" cy="{sy(d):.2f}" r="1.6" fill="{FIRST_DIFF}"/>'
                   for s, d in devs[:: max(1, math.ceil(len(devs) / MAX_POINTS))])
    return box + ticks + f'<g class="deviation">{dots}</g>'

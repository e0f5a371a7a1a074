"""Comparable values out of a paper's output files: metrics and curves. Pure: text in.

    metrics(text, fmt)      {name: number}: JSON and YAML documents flattened to dotted keys
                            ("eval.accuracy", "losses.0"); CSV: a header row, then the last
                            row's values (a results table's final line). Booleans and text
                            are not metrics; the file's sha256 still covers them.
    curve(text, spec)       {"steps": [...], "series": {name: [...]}}: JSON lines (one object
                            per line), CSV (a header row), or a regex over text lines (the
                            first group, or the group named by ``step``, is the step),
                            read with the ``regex`` package under a time limit
                            (``REGEX_SECONDS`` for all the lines of one output together).

A value that cannot be read is a ``ValueError`` whose message the caller puts after the
output's name. Steps must be numbers; a step seen twice keeps its last value (a resumed run
logs the step it resumed at again).
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Mapping
from typing import Any

import regex

from samebits_app.paper.manifest import REGEX_SECONDS, OutputSpec

MAX_POINTS = 1_000_000  # per series: beyond this a curve is not a log line, it is data


def _num(value: Any) -> float | None:
    """A number from JSON/YAML/CSV text, or None for what is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if isinstance(value, float) else value
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            pass
        try:
            f = float(s)
        except ValueError:
            return None
        return f if s.lower().lstrip("+-") in ("nan", "inf", "infinity") or math.isfinite(f) \
            else None
    return None


def _flatten(obj: Any, prefix: str, out: dict[str, float]) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out)
    else:
        n = _num(obj) if not isinstance(obj, str) else None
        if n is not None and prefix:
            out[prefix] = n


def metrics(text: str, fmt: str) -> dict[str, float]:
    if fmt == "json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
    elif fmt == "yaml":
        import yaml

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"not YAML: {str(exc).splitlines()[0]}") from None
    else:
        rows = [r for r in csv.reader(io.StringIO(text)) if r]
        if len(rows) < 2:
            raise ValueError("expected a CSV header row and at least one row of values")
        head, last = rows[0], rows[-1]
        doc = {h.strip(): v for h, v in zip(head, last, strict=False) if _num(v) is not None}
        return {k: n for k, v in doc.items() if (n := _num(v)) is not None}
    out: dict[str, float] = {}
    _flatten(doc, "", out)
    return out


def curve(text: str, spec: OutputSpec, *, regex_seconds: float = REGEX_SECONDS
          ) -> dict[str, Any]:
    points: dict[str, dict[float, float]] = {}
    if spec.fmt == "regex":
        _regex_points(text, spec, points, seconds=regex_seconds)
    elif spec.fmt == "csv":
        rows = csv.DictReader(io.StringIO(text))
        _row_points(((i + 2, r) for i, r in enumerate(rows)), spec, points)
    else:
        def objects() -> Any:
            for i, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    raise ValueError(f"line {i}: not a JSON object: {line[:60]!r}") from None
                if not isinstance(obj, Mapping):
                    raise ValueError(f"line {i}: not a JSON object: {line[:60]!r}")
                yield i, obj
        _row_points(objects(), spec, points)
    if not points or not any(points.values()):
        raise ValueError("no points: " + (f"no line matches the regex {spec.regex}" if spec.regex
                                          else f"no row has a numeric '{spec.step}'"))
    steps = sorted({s for series in points.values() for s in series})
    return {"steps": [_plain(s) for s in steps],
            "series": {name: [series.get(s) for s in steps]
                       for name, series in sorted(points.items())}}


def _plain(x: float) -> float | int:
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _add(points: dict[str, dict[float, float]], name: str, step: float, value: float) -> None:
    series = points.setdefault(name, {})
    if len(series) >= MAX_POINTS and step not in series:
        raise ValueError(f"series {name!r} has more than {MAX_POINTS:,} points")
    series[step] = value


def _row_points(rows: Any, spec: OutputSpec, points: dict[str, dict[float, float]]) -> None:
    for where, row in rows:
        step = _num(row.get(spec.step))
        if step is None:
            continue
        names = spec.series or [k for k in row if k != spec.step and _num(row[k]) is not None]
        for name in names:
            value = _num(row.get(name))
            if value is None and name in row and row[name] not in (None, ""):
                raise ValueError(f"line {where}: {name} = {str(row[name])[:40]!r} is not a "
                                 "number")
            if value is not None:
                _add(points, name, step, value)


def _regex_points(text: str, spec: OutputSpec, points: dict[str, dict[float, float]],
                  *, seconds: float) -> None:
    """The points of the lines ``spec.regex`` matches, all of its searches over ``text``
    together within ``seconds``: a pattern that backtracks without end (``((a|aa)+)+x$``)
    makes the output unreadable, named, instead of hanging samebits."""
    pattern = regex.compile(spec.regex or "")
    named = spec.step in pattern.groupindex
    deadline = time.monotonic() + seconds
    for i, line in enumerate(text.splitlines(), 1):
        try:
            m = pattern.search(line, timeout=max(deadline - time.monotonic(), 1e-6))
        except TimeoutError:
            raise ValueError(f"the regex {spec.regex!r} ran past its time limit of "
                             f"{seconds:g} s (at line {i}); a pattern that cannot backtrack "
                             "without end reads the same lines in microseconds") from None
        if m is None:
            continue
        step = _num(m.group(spec.step) if named else m.group(1))
        if step is None:
            raise ValueError(f"step {m.group(1)!r} is not a number in {line[:60]!r}")
        values = ([(n, m.group(n)) for n in spec.series] if named else
                  list(zip(spec.series, m.groups()[1:], strict=False)))
        for name, raw in values:
            value = _num(raw)
            if value is None:
                raise ValueError(f"{name} = {raw!r} is not a number in {line[:60]!r}")
            _add(points, name, step, value)

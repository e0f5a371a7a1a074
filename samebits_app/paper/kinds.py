"""Each output's kind, known from its content, for ``samebits paper init``. Pure: bytes in.

``kind_of(path, data, tensors)`` tries, in order, and takes the first that reads:

    tensors   the tensor reader attest uses (``python -m verify.gpu.errorstats``, its
              ``records``: ``.safetensors``, ``.npy``, ``.npz``, ``.pt``, ``.pth``, ``.ckpt``)
              read the file: ``tensors`` is that answer. A file of those suffixes it cannot
              read is a ``file`` with the reader's words; a torch.save zip or a NumPy array
              under another suffix (``pytorch_model.bin``) is a ``file`` too, saying so: the
              reader goes by the suffix
    curve     JSON lines (every line an object) or a CSV (a header row) with a step-like key
              (``STEP_KEYS``: global_step, step, iteration, iter, epoch; the first whose
              values are numbers, one per row), or text lines ``<step word> N ... <name>
              <number>`` (``propose_regex``)
    metrics   a JSON or YAML document, or a CSV of at most ``CSV_TABLE_ROWS`` rows (a results
              table, not data), with numbers among its leaves (``values.metrics``: the last
              CSV row)
    file      anything else (an image, a pickle, text without numbers): compared by bytes

Every curve and metrics choice is proved by reading the file with the very reader attest
will use (``values.curve``, ``values.metrics``) before it is chosen. ``stream_kind`` does the
same for stdout and stderr, which can only be curves.

``propose_regex`` reads lines such as ``epoch 3 loss 0.25 acc 0.9``, ``Epoch [3/10] loss:
0.25``, ``step=30 loss=0.25`` or ``global_step=44, episodic_return=[11.]``: a step word, its
integer, then ``name number`` pairs (the name a word, ``:``/``=``/space between, the number
maybe in a bracket). The commonest shape (the step word and the names, in
order) becomes a regex with named groups, the step's group named after its word, each value's
after its name (made a Python identifier), so the manifest needs no ``series``.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Any

from samebits_app.paper import values
from samebits_app.paper.manifest import OutputSpec

STEP_KEYS = ("global_step", "step", "iteration", "iter", "epoch")
CSV_TABLE_ROWS = 100  # more rows without a step column: data, compared by bytes
TENSOR_SUFFIXES = (".safetensors", ".npy", ".npz", ".pt", ".pth", ".ckpt")
NUM = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"
_STEP = re.compile(r"(?<![\w.])(global_step|iteration|epoch|step|iter)[\s:=#\[]*(\d+)(?![\w.])",
                   re.IGNORECASE)
# a name: one word, or two ("Train Loss: 0.5 Vali Loss: 0.6" has two series, not one "Loss")
# its value may sit in a bracket, as a one-element list or tensor prints: cleanrl's
# ``global_step=44, episodic_return=[11.]``
_PAIR = re.compile(r"(?<![\w.])([A-Za-z_][\w./-]*(?:[ \t]+[A-Za-z_][\w./-]*)?)"
                   r"(?:\s*[:=]\s*|\s+)[\[(]?(" + NUM + r")(?![\w.])")
# a value that measures time, not the computation: never a series of a proposed regex, and
# named as the usual cause when it differs between two alike runs (``noise.cause``)
TIMING = re.compile(r"time|sec|duration|elapsed|runtime|throughput|per_second|it_s|speed",
                    re.IGNORECASE)
MAGIC = ((b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
         (b"%PDF", "a PDF"), (b"\x1f\x8b", "gzip data"), (b"\x93NUMPY", "a NumPy array"),
         (b"\x80", "a pickle"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Kinded:
    spec: OutputSpec                          # tolerance zero: how it is read
    what: str                                 # how the content was recognised
    captures: tuple[tuple[str, str], ...] = ()  # a regex curve: the first matching line's
    line: str | None = None                   # that line


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    regex: str
    step: str
    series: tuple[str, ...]
    lines: int                                # lines of this shape
    captures: tuple[tuple[str, str], ...]
    line: str


def kind_of(path: str, data: bytes, tensors: Mapping[str, Any] | None = None) -> Kinded:
    """The kind of the output at ``path`` (relative to the command's cwd) with bytes
    ``data``; ``tensors``: the worker's answer for it (``{"tensors": ...}`` or
    ``{"error": ...}``), None when it was not asked (not a tensor suffix)."""
    suffix = PurePosixPath(path).suffix.lower()
    plain = OutputSpec(kind="file", path=path)
    if tensors is not None:
        if "tensors" in tensors:
            n = len(tensors["tensors"])
            return Kinded(spec=OutputSpec(kind="tensors", path=path),
                          what=f"{n} tensor{'s' if n != 1 else ''}, read by the tensor reader")
        return Kinded(spec=plain, what=f"not readable as tensors ({tensors.get('error')}): "
                      "compared by bytes")
    if data[:4] == b"PK\x03\x04" and b"data.pkl" in data[:4096]:
        return Kinded(spec=plain, what="a torch.save file, but the tensor reader reads only "
                      f"{', '.join(TENSOR_SUFFIXES)}: compared by bytes (save it as .pt to "
                      "compare tensor by tensor)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        what = next((w for magic, w in MAGIC if data.startswith(magic)), "binary data")
        return Kinded(spec=plain, what=f"{what}: compared by bytes")
    for found in (_json_like(path, text, suffix), _csv_like(path, text, suffix),
                  _yaml_like(path, text, suffix), _text_curve(path, text)):
        if found is not None:
            return found
    return Kinded(spec=plain, what="text with no numbers to compare: compared by bytes"
                  if text.strip() else "empty: compared by bytes")


def stream_kind(stream: str, text: str) -> Kinded | None:
    """stdout or stderr as a regex curve, or None when no line reads as one."""
    return _text_curve(None, text, stream=stream)


def _json_like(path: str, text: str, suffix: str) -> Kinded | None:
    try:
        json.loads(text)
    except ValueError:
        return _jsonl(path, text)
    return _metrics(path, text, "json", "JSON")


def _jsonl(path: str, text: str) -> Kinded | None:
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            return None
        if not isinstance(row, dict):
            return None
        rows.append(row)
    step = _step_key(rows)
    if not rows or step is None:
        return None
    return _curve(OutputSpec(kind="curve", path=path, fmt="jsonl", step=step), text,
                  f"JSON lines, step {step!r}")


def _csv_like(path: str, text: str, suffix: str) -> Kinded | None:
    if suffix != ".csv":
        return None
    rows = list(csv.DictReader(io.StringIO(text)))
    step = _step_key(rows)
    if step is not None:
        found = _curve(OutputSpec(kind="curve", path=path, fmt="csv", step=step), text,
                       f"CSV, step column {step!r}")
        if found is not None:
            return found
    if len(rows) > CSV_TABLE_ROWS:  # a data set, not a results table: its last row says little
        return Kinded(spec=OutputSpec(kind="file", path=path), what=f"CSV of {len(rows):,} rows "
                      "and no step column (data, not a results table): compared by bytes")
    return _metrics(path, text, "csv", "CSV (its last row)")


def _yaml_like(path: str, text: str, suffix: str) -> Kinded | None:
    return _metrics(path, text, "yaml", "YAML") if suffix in (".yaml", ".yml") else None


def _metrics(path: str, text: str, fmt: str, what: str) -> Kinded | None:
    try:
        found = values.metrics(text, fmt)
    except ValueError:
        return None
    if not found:
        return None
    return Kinded(spec=OutputSpec(kind="metrics", path=path, fmt=fmt),
                  what=f"{what}, {len(found)} number{'s' if len(found) != 1 else ''}")


def _curve(spec: OutputSpec, text: str, what: str, **kw: Any) -> Kinded | None:
    try:
        points = values.curve(text, spec)
    except ValueError:
        return None
    return Kinded(spec=spec, what=f"{what}, {len(points['series'])} series over "
                  f"{len(points['steps'])} steps", **kw)


def _step_key(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The first of ``STEP_KEYS`` every row holds as a number, no two rows alike."""
    for key in STEP_KEYS:
        seen = [_number(r.get(key)) for r in rows]
        if rows and all(s is not None for s in seen) and len(set(seen)) == len(seen):
            return key
    return None


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _text_curve(path: str | None, text: str, stream: str | None = None) -> Kinded | None:
    found = propose_regex(text)
    if found is None:
        return None
    spec = OutputSpec(kind="curve", path=path, stream=stream, fmt="regex", regex=found.regex,
                      step=found.step, series=found.series)
    kinded = _curve(spec, text, f"lines like {found.line.strip()[:60]!r} ({found.lines})",
                    captures=found.captures, line=found.line)
    if kinded is None:
        return None
    steps = len(values.curve(text, spec)["steps"])
    if found.lines > steps:  # an ensemble's second model, a resumed run: its step again
        n = found.lines - steps
        many = "1 line repeats" if n == 1 else f"{n} lines repeat"
        kinded = replace(kinded, what=f"{kinded.what}; {many} a step, and the last line of a "
                         "step is the one compared")
    return kinded


def _ident(name: str, taken: set[str]) -> str:
    out = re.sub(r"\W", "_", name) or "value"
    out = f"_{out}" if out[0].isdigit() else out
    while out in taken:
        out += "_"
    taken.add(out)
    return out


def _words(name: str) -> str:
    """A name of one or two words as a pattern (any spaces between them)."""
    return r"\s+".join(map(re.escape, name.split()))


def propose_regex(text: str) -> Proposal | None:
    """A regex for the commonest shape of log line in ``text`` (module doc), or None."""
    shapes: Counter[tuple[str, tuple[str, ...]]] = Counter()
    first: dict[tuple[str, tuple[str, ...]], str] = {}
    for line in text.splitlines():
        m = _STEP.search(line)
        if m is None:
            continue
        names = tuple(dict.fromkeys(
            " ".join(p.group(1).split()) for p in _PAIR.finditer(line, m.end())
            if p.group(1).lower() not in STEP_KEYS and not TIMING.search(p.group(1))))
        if names:
            shape = (m.group(1), names)
            shapes[shape] += 1
            first.setdefault(shape, line)
    if not shapes:
        return None
    # the commonest shape; of those as common, the one with the most names, then the first
    word, names = max(shapes, key=lambda s: (shapes[s], len(s[1])))
    count = shapes[(word, names)]
    taken: set[str] = set()
    step = _ident(word.lower(), taken)
    groups = [_ident(n, taken) for n in names]
    regex = (rf"\b{re.escape(word)}[\s:=#\[]*(?P<{step}>\d+)" + "".join(
        rf".*?\b{_words(n)}(?:\s*[:=]\s*|\s+)[\[(]?(?P<{g}>{NUM})(?![\w.])"
        for n, g in zip(names, groups, strict=True)))
    line = first[(word, names)]
    m = re.search(regex, line)
    if m is None:  # a name the pair pattern read differently in this line's context
        return None
    return Proposal(regex=regex, step=step, series=tuple(groups), lines=count,
                    captures=tuple((k, v) for k, v in m.groupdict().items() if v is not None),
                    line=line)


def with_series(spec: OutputSpec, series: tuple[str, ...]) -> OutputSpec:
    """``spec`` comparing only ``series`` (a curve's others left out)."""
    return replace(spec, series=series)

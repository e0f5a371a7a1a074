"""How far apart a command's runs are, and the tolerance each output gets: ``samebits paper
init``. Pure: the runs' records in, decisions out.

Each output is compared element by element (a metric, a curve's series, a tensor; a ``file``
is one element, its bytes), run 1 against run 2 (``alike``: both as attest runs the command)
and run 1 against run 3 (``perturbed``: OMP_NUM_THREADS and MKL_NUM_THREADS changed), by the
comparison the audit makes: ``judge.judge_output`` on the records ``runner.output_records``
writes, and for tensors the worker's element-by-element ``compare`` (the max |Δ|, the max
|Δ|/|a| and where). So the numbers are the ones an audit will hold against the tolerance.

The tolerance of an element is ``atol``: the largest perturbed |Δ| times ``margin`` (default
10), rounded up to one significant digit (``round_up``: 2.5e-04 x 10 -> 3e-03; in decimal, so
3e-04 x 10 is 3e-03, not 4e-03); 0 where all three runs give the same values; ``rtol`` is
left 0 (an element near zero would make any relative tolerance meaningless). A metrics output
lists each metric with its own tolerance (``[commands.outputs.metrics]``) unless it has more
than ``MAX_LISTED`` and none is left out (then one ``atol``, the largest); a curve and a
tensors output get one ``atol``, the largest of their series or tensors.

An element that differs between the two alike runs is not reproducible on one machine: it is
named with its first differing element and what usually causes it (``cause``), and left out
(a metric from the table, a series from ``series``; a tensors output or a file whole) unless
``accept`` (--accept-noise), where its tolerance covers the alike |Δ| too. What can have no
tolerance is always left out: a file whose bytes change, a step, series, metric or tensor in
one run only, NaN against a number. A file that differs only under the perturbation is kept
(by bytes) with a note: a reviewer whose thread count differs will see it differ, explained
by the recorded OMP_NUM_THREADS.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_CEILING, Decimal
from pathlib import Path
from typing import Any

from samebits_app.paper.judge import judge_output, num
from samebits_app.paper.kinds import TIMING, Kinded
from samebits_app.paper.manifest import OutputSpec, Tolerance

MAX_LISTED = 32
TEXT_MAX = 1 << 20  # bytes of a file read for a cause
# a date and time (ISO, a clock, a Unix time, a PDF's D:YYYYMMDDHHMMSS) in what differs
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T _]?\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|\b1[6-9]\d{8}\b"
                       r"|(?<!\d)(?:19|20)\d{2}[01]\d[0-3]\d[T_]?[0-2]\d[0-5]\d[0-5]\d(?!\d)")
PLOTS = (".pdf", ".svg", ".ps", ".eps")  # files a plotting library dates
CONTEXT = 16  # bytes either side of where two binary files first differ, shown
RANDOM_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-|\b[0-9a-f]{16,}\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """How one element differs between two runs: the largest |Δ| and |Δ|/|a| and where,
    and the first differing value."""

    abs: float = math.inf
    rel: float = math.inf
    first: str = ""           # "loss: 0.25 vs 0.26", "series loss at step 3: ..."
    worst: str = ""           # " at step 7", " at index [2, 1]"
    comparable: bool = True   # False: no tolerance can cover it


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    record: Mapping[str, Any]     # ``runner.output_records``' record of the output
    file: Path | None = None      # its bytes, for a file output (None: a stream)


@dataclass(frozen=True, slots=True, kw_only=True)
class Noisy:
    element: str
    first: str
    cause: str
    accepted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    label: str
    kinded: Kinded
    spec: OutputSpec | None                      # as written; None: left out
    alike: Gap | None                            # the output's largest (None: the same)
    perturbed: Gap | None
    noisy: tuple[Noisy, ...] = ()
    comments: tuple[tuple[str, str], ...] = ()   # "" (the output's atol) or a metric -> text
    notes: tuple[str, ...] = ()
    same_bytes: bool = False                     # all three runs wrote the same bytes


def round_up(x: float, margin: float) -> float:
    """``x * margin`` rounded up to one significant digit, in decimal (0 stays 0)."""
    if x <= 0:
        return 0.0
    d = Decimal(repr(float(x))) * Decimal(repr(float(margin)))
    e = d.adjusted()
    m = int((d.scaleb(-e)).to_integral_value(rounding=ROUND_CEILING))
    if m == 10:
        m, e = 1, e + 1
    return float(f"{m}e{e}")


def sci(x: float) -> str:
    return f"{x:.1e}" if math.isfinite(x) else str(x)


def _val(x: Any) -> str:
    f = num(x)
    return "-" if f is None else f"{f:.6g}"


def gaps(a: Side, b: Side, compared: Mapping[str, Any] | None = None) -> dict[str, Gap | None]:
    """Element -> how it differs between the runs of ``a`` and ``b`` (None: the same)."""
    ra, rb = a.record, b.record
    kind = str(ra.get("kind"))
    if rb.get("missing") or rb.get("error"):
        why = "not written" if rb.get("missing") else f"unreadable ({rb.get('error')})"
        return {"": Gap(first=f"{why} in that run", comparable=False)}
    verdict = judge_output(ra, rb, compared)
    if verdict.level == "bit-identical":
        return {e: None for e in _elements(ra)}
    if kind == "metrics":
        order = {n: i for i, n in enumerate(ra.get("values") or {})}
        out: dict[str, Gap | None] = {}
        for row in sorted(verdict.rows, key=lambda r: order.get(r["name"], len(order))):
            if row.get("missing"):
                out[row["name"]] = Gap(first=f"{row['name']}: in one run only",
                                       comparable=False)
            elif not row["same"]:
                d, r = float(row["abs"]), float(row["rel"])
                out[row["name"]] = Gap(abs=d, rel=r, comparable=math.isfinite(d),
                                       worst=f" in {row['name']}",
                                       first=f"{row['name']}: {_val(row['authors'])} vs "
                                       f"{_val(row['reviewer'])}")
            else:
                out[row["name"]] = None
        return out
    if kind == "curve":
        return {row["series"]: _series(row, ra, rb) for row in verdict.rows}
    if kind == "tensors":
        if compared is None or "error" in compared:
            return {"": Gap(first=str((compared or {}).get("error", "not compared")),
                            comparable=False)}
        out = {n: Gap(first=f"tensor {n}: only in one run", comparable=False)
               for n in [*compared.get("only_authors", ()), *compared.get("only_reviewer", ())]}
        for row in compared["tensors"]:
            out[row["name"]] = None if row.get("same") else _tensor(row)
        return out
    return {"": Gap(first=first_byte(a.file, b.file), comparable=False)}


def _elements(rec: Mapping[str, Any]) -> list[str]:
    kind = rec.get("kind")
    if kind == "metrics":
        return list(rec.get("values") or {})
    if kind == "curve":
        return list((rec.get("curve") or {}).get("series") or {})
    if kind == "tensors":
        return list(rec.get("tensors") or {})
    return [""]


def _series(row: Mapping[str, Any], ra: Mapping[str, Any], rb: Mapping[str, Any]) -> Gap | None:
    name = row["series"]
    if row.get("missing") or row.get("only_authors") or row.get("only_reviewer"):
        return Gap(first=f"series {name}: steps or the series in one run only",
                   comparable=False)
    if row.get("first_diff") is None:
        return None
    ca, cb = ra["curve"], rb["curve"]
    pa = dict(zip(ca["steps"], ca["series"][name], strict=True))
    pb = dict(zip(cb["steps"], cb["series"][name], strict=True))
    rel = 0.0
    for s, x in pa.items():
        fx, fy = num(x), num(pb.get(s))
        if fx is not None and fy is not None and fx != fy:
            rel = max(rel, abs(fx - fy) / abs(fx) if fx else math.inf)
    step = row["first_diff"]
    d = float(row["max_dev"])
    return Gap(abs=d, rel=rel, comparable=math.isfinite(d),
               worst=f" in series {name} at step {row['max_dev_step']}",
               first=f"series {name} at step {step}: {_val(pa.get(step))} vs {_val(pb.get(step))}")


def _tensor(row: Mapping[str, Any]) -> Gap:
    name = row["name"] or "(the array)"
    if "mismatch" in row:
        return Gap(first=f"tensor {name}: {row['mismatch']}", comparable=False)
    d, r = float(row["max_abs"]), float(row["max_rel"])
    at = f"{row['name']}{row['index']}" if row["name"] else f"index {row['index']}"
    return Gap(abs=d, rel=r, comparable=math.isfinite(d), worst=f" at {at}",
               first=f"tensor {name} at index {row['index']}: {_val(row['authors'])} vs "
               f"{_val(row['reviewer'])} (its largest |Δ|)")


def first_byte(a: Path | None, b: Path | None) -> str:
    """Where two files first differ: the byte offset and, for text, that line of each."""
    if a is None or b is None:
        return "the bytes differ"
    with open(a, "rb") as fa, open(b, "rb") as fb:
        offset = 0
        while True:
            x, y = fa.read(1 << 16), fb.read(1 << 16)
            if x != y:
                i = next((k for k, (p, q) in enumerate(zip(x, y, strict=False)) if p != q),
                         min(len(x), len(y)))
                at = offset + i
                break
            if not x:
                return "the bytes differ"
            offset += len(x)
    la, lb = _line_at(a, at), _line_at(b, at)
    if la is not None and lb is not None:
        return f"byte {at:,}: {la!r} vs {lb!r}"
    return f"byte {at:,}: {_bytes_at(a, at)!r} vs {_bytes_at(b, at)!r}"


def _bytes_at(path: Path, at: int) -> bytes:
    """The bytes around offset ``at`` of a binary file (a PDF's creation date, an id)."""
    with open(path, "rb") as f:
        f.seek(max(0, at - CONTEXT))
        return f.read(2 * CONTEXT)


def _line_at(path: Path, at: int) -> str | None:
    if path.stat().st_size > TEXT_MAX:
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start:end if end >= 0 else None][:80]


def cause(element: str, gap: Gap, a: Path | None = None, b: Path | None = None) -> str:
    """What usually makes ``element`` differ between two alike runs (a guess, said so)."""
    if TIMING.search(element):
        return "usually a time the command measured (wall-clock seconds, a speed)"
    if a is not None and b is not None:
        try:
            ta, tb = a.read_bytes()[:TEXT_MAX].decode(), b.read_bytes()[:TEXT_MAX].decode()
        except UnicodeDecodeError:
            ta = tb = ""
        if ta and sorted(ta.splitlines()) == sorted(tb.splitlines()):
            return ("usually dict/set or file-listing order, or threads racing: the same lines "
                    "in another order")
        if TIMESTAMP.search(gap.first):
            if a.suffix.lower() in PLOTS:
                return ("usually a timestamp written into the output: a plot's creation date "
                        "(matplotlib writes SOURCE_DATE_EPOCH's instead where it is set: "
                        "--env SOURCE_DATE_EPOCH=0, with --replace)")
            return "usually a timestamp written into the output"
        if RANDOM_ID.search(gap.first):
            return "usually a random id (uuid, a run name) written into the output"
    if gap.comparable and gap.rel < 1e-3:
        return ("usually threads racing or a non-deterministic kernel: floating-point sums "
                "whose order changes run to run")
    return ("usually unseeded randomness: a random number generator without a fixed seed "
            "(random.seed, numpy.random.seed, torch.manual_seed), or data read in another "
            "order")


def largest(found: Mapping[str, Gap | None]) -> Gap | None:
    present = [g for g in found.values() if g is not None]
    if not present:
        return None
    if not all(g.comparable for g in present):
        return next(g for g in present if not g.comparable)
    return max(present, key=lambda g: g.abs)


def decide(kinded: Kinded, sides: Sequence[Side], *, compared: Sequence[Mapping[str, Any] | None],
           margin: float, accept: bool, perturbation: str) -> Decision:
    """The declaration of one output from its three runs' records (``sides``: run 1, 2, 3)
    and the worker's tensor comparisons (run 1 against 2, 1 against 3)."""
    a, b, c = sides
    label = str(a.record.get("output"))
    alike = gaps(a, b, compared[0])
    perturbed = gaps(a, c, compared[1])
    same = a.record.get("sha256") == b.record.get("sha256") == c.record.get("sha256")
    base = dict(label=label, kinded=kinded, alike=largest(alike), perturbed=largest(perturbed),
                same_bytes=same)
    spec = kinded.spec
    if spec.kind == "file":
        if alike[""] is not None:
            noise = Noisy(element="", first=alike[""].first, cause=cause("", alike[""], a.file,
                                                                          b.file), accepted=False)
            return Decision(spec=None, noisy=(noise,), **base,  # type: ignore[arg-type]
                            notes=("a file compares by bytes: it cannot be declared when its "
                                   "bytes change run to run",))
        notes = () if perturbed[""] is None else (
            f"its bytes differ with {perturbation} ({perturbed[''].first}): a file compares "
            "by bytes, so a reviewer whose thread count differs sees it differ, explained by "
            "the recorded OMP_NUM_THREADS",)
        return Decision(spec=spec, notes=notes, **base)  # type: ignore[arg-type]
    noisy: list[Noisy] = []
    kept: dict[str, tuple[float, str, float]] = {}  # tolerance, comment, the |Δ|
    for name in dict.fromkeys([*alike, *perturbed]):
        g1, g2 = alike.get(name), perturbed.get(name)
        if g1 is not None:
            ok = accept and g1.comparable
            noisy.append(Noisy(element=name, first=g1.first, cause=cause(name, g1), accepted=ok))
            if not ok:
                continue
        if g2 is not None and not g2.comparable:
            noisy.append(Noisy(element=name, first=g2.first, accepted=False,
                               cause=f"it differs in kind with {perturbation}: no tolerance "
                               "can cover it"))
            continue
        size = max(g.abs for g in (g1, g2) if g is not None) if (g1 or g2) else 0.0
        kept[name] = (round_up(size, margin), _comment(g1, g2, margin, perturbation,
                                                        where=spec.kind != "metrics"), size)
    partial = len(kept) < len(set(alike) | set(perturbed))
    if not kept or (partial and spec.kind == "tensors"):  # a tensors output is one file
        return Decision(spec=None, noisy=tuple(noisy), **base)  # type: ignore[arg-type]
    top = max(t for t, _, _ in kept.values())
    listed = spec.kind == "metrics" and (partial or (top > 0 and len(kept) <= MAX_LISTED))
    if listed:
        declared = replace(spec, metrics=tuple((n, Tolerance(atol=t))
                                               for n, (t, _, _) in kept.items()))
        comments = tuple((n, text) for n, (_, text, _) in kept.items())
    else:
        if spec.kind == "curve" and partial:
            spec = replace(spec, series=tuple(kept))
        declared = replace(spec, tolerance=Tolerance(atol=top))
        worst = max(kept, key=lambda n: kept[n][2])
        text = kept[worst][1]
        if spec.kind == "metrics" and kept[worst][0]:
            text = f"{text} (the largest: {worst})"
        comments = (("", text),)
    return Decision(spec=declared, noisy=tuple(noisy), comments=comments,
                    **base)  # type: ignore[arg-type]


def _comment(g1: Gap | None, g2: Gap | None, margin: float, perturbation: str, *,
             where: bool) -> str:
    """What a tolerance was made from: the |Δ| measured (``where``: and where, for an output
    whose one tolerance is its largest element's)."""
    if g1 is None and g2 is None:
        return "the same in all three runs"
    parts = []
    if g1 is not None:
        parts.append(f"alike runs: max |Δ| {sci(g1.abs)} (rel {sci(g1.rel)}), accepted")
    parts.append(f"{perturbation}: " + (
        f"max |Δ| {sci(g2.abs)} (rel {sci(g2.rel)}){g2.worst if where else ''}"
        if g2 is not None else "the same"))
    return "; ".join(parts) + f"; x{margin:g}"

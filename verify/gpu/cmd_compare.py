"""``samebits verify compare A B``: same bits? If not, which recorded facts explain it?

Reads two attestations (and, when given, the raw outputs saved with ``--save-outputs``), asks
``verify.gpu.compare.compare`` for a ``Report`` and prints it. Exit 0 when every common workload
has the same bits, 1 when any differs (or when no workload gave bits on both sides: an
unavailable workload on both is not compared, nor counted as identical), 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError, plural
from samebits.ui import Output
from verify.gpu.attest import read_attestation
from verify.gpu.compare import FactDiff, Report, compare
from verify.gpu.errorstats import output_errors

VERDICT_LINE = {
    "identical": "IDENTICAL: every workload both ran gave the same bits",
    "unexplained": "UNEXPLAINED: suspect a hardware fault or undeclared drift (same class, "
                   "different bits)",
    "explained": "EXPLAINED: the runs are in different classes; each difference is attributed "
                 "to the facts that differ",
}


NOTHING_COMPARED = "NOTHING COMPARED: no workload gave bits on both sides"


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "compare", parents=parents, help="compare two attestations from `verify gpu`",
        description="Group each attestation's facts into an equivalence class (torch build, "
        "CUDA/cuDNN/cuBLAS, GPU model and SM count; or CPU ISA and thread count; plus settings "
        "and numerics environment variables). Same class but different bits: UNEXPLAINED. "
        "Different classes: each differing workload is attributed to the facts that differ.",
        epilog="exit codes: 0 same bits, 1 different bits (or no workload with bits on both "
        "sides), 2 bad input",
    )
    p.add_argument("a", type=Path, metavar="A.json")
    p.add_argument("b", type=Path, metavar="B.json")
    p.add_argument("--outputs-a", type=Path, metavar="DIR",
                   help="A's --save-outputs folder: adds max absolute error and ULP distance")
    p.add_argument("--outputs-b", type=Path, metavar="DIR", help="B's --save-outputs folder")
    p.set_defaults(func=run_compare)


def run_compare(args: argparse.Namespace, out: Output) -> int:
    if (args.outputs_a is None) != (args.outputs_b is None):
        raise UsageError("--outputs-a and --outputs-b go together")
    a, b = read_attestation(args.a), read_attestation(args.b)
    errors = None
    if args.outputs_a:
        with out.phase("measuring how far the saved outputs differ (torch)"):
            errors = output_errors(args.outputs_a, args.outputs_b)
    report = compare(a, b, errors=errors)
    out.emit(report.to_dict(), format_report(report))
    if not report.compared:  # no bits to compare is no evidence of sameness
        return EXIT_DIFFERENT
    return EXIT_OK if report.verdict == "identical" else EXIT_DIFFERENT


def _show(v: Any, limit: int = 60) -> str:
    if v is None:
        return "unset"
    text = v if isinstance(v, str) else repr(v)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _diff(d: FactDiff) -> str:
    if isinstance(d.a, list) and isinstance(d.b, list):
        gone = sorted(set(map(str, d.a)) - set(map(str, d.b)))
        new = sorted(set(map(str, d.b)) - set(map(str, d.a)))
        return f"{d.key} ({' '.join(['-' + x for x in gone] + ['+' + x for x in new])})"
    return f"{d.key} ({_show(d.a)} vs {_show(d.b)})"


def format_report(r: Report) -> str:
    lines = [f"a: {r.a.source}  device: {r.a.device}  class {r.a.class_id}  {r.a.label}",
             f"b: {r.b.source}  device: {r.b.device}  class {r.b.class_id}  {r.b.label}"]
    if r.same_class:
        lines.append("same class")
    else:
        lines.append("classes differ in: " + ", ".join(_diff(d) for d in r.class_differences))
    lines.append(f"{plural(r.compared, 'workload')} compared: {len(r.identical)} identical, "
                 f"{len(r.different)} different")
    c = r.counts()
    lines.append(f"  of {plural(c['workloads'], 'workload')} both attest: {c['both_ran']} ran on "
                 f"both sides ({c['identical']} identical, {c['explained']} explained, "
                 f"{c['differing']} differing), {c['unavailable']} unavailable, {c['error']} "
                 f"error, {c['refused']} refused")
    if r.not_run:
        lines.append(f"no bits on either side (the same status other than ok on both, not "
                     f"compared): {', '.join(r.not_run)}")
    width = max((len(w.name) for w in r.different), default=10)
    for w in r.different:
        shown = ", ".join(w.outputs[:3]) + (f", +{len(w.outputs) - 3} more"
                                            if len(w.outputs) > 3 else "")
        outs = (f" ({shown})" if w.outputs
                else f" ({w.a.split()[0]} vs {w.b.split()[0]})")
        why = ""
        if w.attributed_to:
            why = "  <- " + ", ".join(w.attributed_to)
            if not w.expected:
                why += " (none is a known sensitivity of this workload)"
        lines.append(f"  {w.name:<{width}}  different{outs}{why}")
        lines += [f"  {'':<{width}}    {reason}" for reason in w.why if w.expected]
        for e in w.errors:
            lines.append(f"  {'':<{width}}    {e.output}: max abs error {e.max_abs:.3g}, "
                         f"{e.ulp_text()}, {e.differing} of {e.total} elements differ")
    if r.only_in_a or r.only_in_b:
        lines.append(f"not compared: only in a: {', '.join(r.only_in_a) or 'none'}; "
                     f"only in b: {', '.join(r.only_in_b) or 'none'}")
    lines.append(VERDICT_LINE[r.verdict] if r.compared else NOTHING_COMPARED)
    if r.verdict == "identical" and not r.same_class:
        lines.append("  the facts that differ changed no workload's bits on this device")
    if r.verdict == "unexplained":
        leads = [d for d in r.other_differences if d.key != "torch.build_config"]
        lines.append("  facts outside the class that differ: "
                     + (", ".join(_diff(d) for d in leads) if leads else "none recorded"))
    return "\n".join(lines)

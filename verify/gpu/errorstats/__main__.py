"""``python -m verify.gpu.errorstats``: the worker that compares outputs where torch lives.

    python -m verify.gpu.errorstats DIR_A DIR_B
        {workload: [{output, max_abs, max_rel, max_ulp, index, differing, total}]} of two
        ``--save-outputs`` folders (the suite's outputs)

    python -m verify.gpu.errorstats --request REQUEST.json
        REQUEST: {"records": [FILE, ...],
                  "compare": [{"a": FILE, "b": FILE, "rtol": R, "atol": A}, ...],
                  "fingerprints": DIR | null}
        answer:  {"records": {FILE: {"tensors": {name: record}} | {"error": message}},
                  "compare": [{"tensors": [...], "only_authors": [...], ...} | {"error": ...}],
                  "fingerprints": {workload: {output: fingerprint}}}

One process answers a whole request, so torch is imported once. A file that cannot be read is
an ``error`` entry naming it, not a failed worker: one bad checkpoint must not hide the rest.
Canonical JSON on stdout; exit 2 with ``error: ...`` on stderr for a bad request.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from samebits._io import canonical_json, read_json
from samebits.errors import InputError, SamebitsError
from samebits.gcpause import exit_now


def answer(request: dict[str, Any]) -> dict[str, Any]:
    from verify.gpu.errorstats.tensorfiles import read_tensors
    from verify.gpu.errorstats.tensors import compare_files, record

    out: dict[str, Any] = {"records": {}, "compare": [], "fingerprints": {}}
    for path in request.get("records") or []:
        try:
            out["records"][path] = {"tensors": {n: record(t) for n, t in
                                                read_tensors(Path(path)).items()}}
        except InputError as exc:
            out["records"][path] = {"error": exc.message}
    for job in request.get("compare") or []:
        try:
            a, b = read_tensors(Path(job["a"])), read_tensors(Path(job["b"]))
            out["compare"].append(compare_files(a, b, rtol=float(job.get("rtol", 0.0)),
                                                atol=float(job.get("atol", 0.0))))
        except InputError as exc:
            out["compare"].append({"error": exc.message})
    if request.get("fingerprints"):
        out["fingerprints"] = fingerprints(Path(request["fingerprints"]))
    return out


def fingerprints(root: Path) -> dict[str, dict[str, Any]]:
    """The fingerprint of every output in a ``--save-outputs`` folder."""
    import torch

    from verify.gpu.errorstats import _load, _read_index
    from verify.gpu.errorstats.tensors import fingerprint

    out: dict[str, dict[str, Any]] = {}
    for name, outputs in sorted(_read_index(root).items()):
        out[name] = {o: fingerprint(_load(root / e["file"], getattr(torch, e["dtype"]))
                                    .reshape(e["shape"]))
                     for o, e in outputs.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    from verify.gpu.errorstats import output_errors
    from verify.gpu.errorstats.tensors import number

    args = sys.argv[1:] if argv is None else argv
    try:
        if len(args) == 2 and args[0] == "--request":
            doc = read_json(Path(args[1]), what="errorstats request")
            if not isinstance(doc, dict):
                raise InputError(f"{args[1]}: expected a JSON object")
            result = answer(doc)
        elif len(args) == 2:
            errors = output_errors(Path(args[0]), Path(args[1]))
            result = {name: [{**asdict(e), "max_abs": number(e.max_abs),
                              "max_rel": number(e.max_rel)} for e in errs]
                      for name, errs in errors.items()}
        else:
            sys.stderr.write("usage: python -m verify.gpu.errorstats DIR_A DIR_B\n"
                             "       python -m verify.gpu.errorstats --request REQUEST.json\n")
            return 2
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    sys.stdout.buffer.write(canonical_json(result))
    return 0


if __name__ == "__main__":
    exit_now(main())  # no teardown after the answer (samebits.gcpause)

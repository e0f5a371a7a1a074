"""``python -m verify.gpu.workloads``: run the suite in this fresh process, print JSON results.

The probe's worker (``verify.gpu.probe``), ``samebits attest|audit`` (which run the suite with
the audited environment's own interpreter) and the cross-process tests start it; users run
``samebits verify gpu``. Output: canonical JSON ``{"settings": {...}, "workloads": {...}}``,
plus ``"facts"`` (``verify.gpu.facts.detect()``) with ``--facts``. ``--only ""`` runs nothing.
It imports no more than ``verify.gpu.facts`` and ``verify.gpu.workloads`` need (the standard library
and torch 1.13 or later, Python 3.8 or later), so it runs in any environment with torch when
samebits is importable: ``verify.gpu.launch`` starts it from a folder that holds samebits'
in-environment modules (``IN_ENV``), in a clean environment (``samebits.childenv``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from samebits._io import canonical_json
from samebits.errors import SamebitsError
from samebits.gcpause import exit_now


def main(argv: list[str] | None = None) -> int:
    from verify.gpu.facts import detect
    from verify.gpu.workloads import run_suite
    from verify.gpu.workloads.settings import Settings

    p = argparse.ArgumentParser(prog="python -m verify.gpu.workloads")
    p.add_argument("--device", default="cpu")
    p.add_argument("--settings", required=True, help="a Settings object as JSON")
    p.add_argument("--only", action="append")
    p.add_argument("--facts", action="store_true", help="also print this machine's facts")
    p.add_argument("--save-outputs", type=Path, metavar="DIR", help="keep the raw outputs")
    args = p.parse_args(argv)
    import json

    try:
        settings = Settings.from_dict(json.loads(args.settings))
        facts = detect()
        suite = run_suite(facts, device=args.device, settings=settings, only=args.only,
                          save_outputs=args.save_outputs)
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    doc = {"settings": dict(suite.settings),
           "workloads": {n: r.to_dict() for n, r in suite.results.items()}}
    if args.facts:
        doc["facts"] = facts.to_dict()
    sys.stdout.buffer.write(canonical_json(doc))
    return 0


if __name__ == "__main__":
    exit_now(main())  # no teardown after the answer (samebits.gcpause)

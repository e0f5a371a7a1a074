"""``python -m verify.workloads``: run the suite in this fresh process, print JSON results.

The probe's worker (``verify.probe``) and the cross-process tests start it; users run
``samebits verify gpu``. Output: canonical JSON ``{"settings": {...}, "workloads": {...}}``.
"""

from __future__ import annotations

import argparse
import sys

from samebits._io import canonical_json
from samebits.errors import SamebitsError


def main(argv: list[str] | None = None) -> int:
    from verify.facts import detect
    from verify.workloads import run_suite
    from verify.workloads.settings import Settings

    p = argparse.ArgumentParser(prog="python -m verify.workloads")
    p.add_argument("--device", default="cpu")
    p.add_argument("--settings", required=True, help="a Settings object as JSON")
    p.add_argument("--only", action="append")
    args = p.parse_args(argv)
    import json

    try:
        settings = Settings.from_dict(json.loads(args.settings))
        suite = run_suite(detect(), device=args.device, settings=settings, only=args.only)
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    doc = {"settings": dict(suite.settings),
           "workloads": {n: r.to_dict() for n, r in suite.results.items()}}
    sys.stdout.buffer.write(canonical_json(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

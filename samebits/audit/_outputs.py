"""``python -m samebits.audit._outputs A B``: max errors between two saved-output folders.

Runs in the audited environment's interpreter (``samebits.audit.runtime``), which has torch;
prints ``{workload: [{output, max_abs, max_ulp, differing, total}]}`` as canonical JSON.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from samebits._io import canonical_json
from samebits.errors import SamebitsError


def main(argv: list[str] | None = None) -> int:
    from verify.compare import output_errors

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m samebits.audit._outputs DIR_A DIR_B\n")
        return 2
    try:
        errors = output_errors(Path(args[0]), Path(args[1]))
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    doc = {name: [asdict(e) for e in errs] for name, errs in errors.items()}
    sys.stdout.buffer.write(canonical_json(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

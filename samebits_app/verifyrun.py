"""``verify env`` in a fresh process, as a Containerfile runs it.

``samebits install`` runs the verifier in its own process instead, which gives the same
report; the image builder (given this by ``cmd_render``: the core never runs verify) and the
audit of another prefix use this.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from samebits.cli.options import lock_arg
from samebits.errors import InputError, ToolError

VERIFY_TIMEOUT = 1800.0
# ``python -m verify``, but without the current folder first on sys.path (which ``-m`` puts
# there): run from ``~`` beside a checkout of samebits in ``~/samebits``, ``import samebits``
# found that folder (a namespace package) before the installed package, and verify env ended
# in an ImportError (Python 3.11's ``-P`` does the same; 3.10 has no such flag)
RUN_VERIFY = ("import runpy, sys\n"
              "if sys.path[:1] == ['']:\n    del sys.path[0]\n"
              "runpy.run_module('verify', run_name='__main__', alter_sys=True)\n")


def run_verify_env(prefix: Path, lockfile: Path, platform: str, *,
                   read_flags: Sequence[str] = ()) -> dict[str, object]:
    """``python -m verify env L --prefix P --platform X --json``, as the
    Containerfile runs it; its JSON report (top-level ``identical`` and ``ok``, the verdict).
    ``read_flags`` are how a lock of another format was read (``--lock-env``,
    ``--lock-python``)."""
    args = ["env", lock_arg(Path(lockfile)), "--prefix", str(prefix), "--platform", platform,
            *read_flags, "--json"]
    cmd = [sys.executable, "-c", RUN_VERIFY, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=VERIFY_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ToolError(f"verify env did not finish within {VERIFY_TIMEOUT:g} s") from None
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        report = None
    if proc.returncode in (0, 1) and isinstance(report, dict) and "identical" in report:
        return report
    if proc.returncode == 2 and isinstance(report, dict) and "error" in report:
        err = report["error"]
        raise InputError(f"verify env: {err.get('message', err)}", hint=err.get("hint"))
    tail = (proc.stderr or proc.stdout).strip()[-2000:]
    raise ToolError(f"verify env failed (exit {proc.returncode}): {tail}",
                    hint="run it by hand: " + " ".join(["-m", "verify", *args]))

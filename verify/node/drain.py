"""``--drain``: tell Slurm to drain this node, bounded, and say what happened (never raise)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping

TIMEOUT = 20.0


def node_name(given: str | None, environ: Mapping[str, str] | None = None) -> str:
    """--node, else Slurm's name for the node a prolog or health check runs on
    (SLURMD_NODENAME), else ``hostname -s``."""
    environ = os.environ if environ is None else environ
    return given or environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def drain_command(node: str, code: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain",
            f"reason=samebits: {code}"]


def drain(node: str, code: str, *, timeout: float = TIMEOUT) -> tuple[bool, str]:
    """(drained?, what was run and its answer)."""
    cmd = drain_command(node, code)
    shown = " ".join(cmd[:-1]) + f' reason="{cmd[-1].split("=", 1)[1]}"'
    exe = shutil.which("scontrol")
    if exe is None:
        return False, f"{shown}: scontrol is not on PATH"
    try:
        proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, f"{shown}: no answer within {timeout:g} s"
    except OSError as exc:
        return False, f"{shown}: {exc.strerror or exc}"
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip() or "no message").splitlines()[-1]
        return False, f"{shown}: exit {proc.returncode}: {tail}"
    return True, shown

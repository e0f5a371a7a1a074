"""The gate's environment check: ``check_env`` trusting the install's seal by default (a stat
per hardlinked file, as ``verify env --trust-seal``), every byte hashed with ``--full`` or
on every N-th run (``--full-every N``: a counter per prefix in ``CACHE/node/state.json``).

``env_doc`` is the statement's ``env``: ``files``, ``proven_by_identity``, ``proven_by_hash``,
``drift`` (how many files differ), ``drifted`` (the first ``SHOWN``), ``proof`` ("seal" or
"hash") and ``why`` (which rule chose it). ``env_reasons`` turns the report's findings into
reason codes.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from verify.node.reasons import Reason, first_few

SHOWN = 20
UNREADABLE_KINDS = ("unreadable", "bad-record")
STATE_FORMAT = 1


def state_file(cache: Path) -> Path:
    return cache / "node" / "state.json"


def choose_proof(cache: Path, prefix: Path, *, full: bool, every: int | None
                 ) -> tuple[bool, str, dict[str, Any]]:
    """(hash every byte?, why, the state to write after the run). The counter counts runs
    since the last full hash, per prefix; a state file that cannot be read starts again."""
    path = state_file(cache)
    try:
        state = json.loads(path.read_text())
        runs = state["prefixes"] if state.get("format") == STATE_FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError):
        runs = {}
    key = str(prefix)
    since = int(runs.get(key, 0)) if isinstance(runs.get(key, 0), int) else 0
    if full:
        hashed, why = True, "--full: every byte hashed"
    elif every is not None and since + 1 >= every:
        hashed, why = True, f"--full-every {every}: run {since + 1} since the last full hash"
    else:
        hashed = False
        why = "the install's seal trusted: a stat per sealed file"
        if every is not None:
            why += f" (run {since + 1} of {every} before the next full hash)"
    runs = {**runs, key: 0 if hashed else since + 1}
    return hashed, why, {"format": STATE_FORMAT, "prefixes": runs}


def save_state(cache: Path, state: dict[str, Any]) -> None:
    from samebits._io import atomic_write

    # a read-only cache: the count starts again next run, whose "why" says so
    with contextlib.suppress(OSError):
        atomic_write(state_file(cache), json.dumps(state, sort_keys=True, indent=1) + "\n")


def env_reasons(report: Any) -> list[Reason]:
    files = [f for f in report.findings if f.path is not None
             and f.kind not in UNREADABLE_KINDS]
    unreadable = [f for f in report.findings if f.kind in UNREADABLE_KINDS]
    packages = [f for f in report.findings if f.path is None]
    out = []
    if files:
        shown = [f"{f.path} ({f.kind})" for f in files]
        out.append(Reason(code="env-drift", detail=f"{len(files)} file(s) differ: "
                          + first_few(shown)))
    if unreadable or report.not_runnable:
        shown = [f"{f.path or f.package} ({f.kind})" for f in unreadable]
        if report.not_runnable:
            shown.insert(0, report.not_runnable)
        out.append(Reason(code="env-unreadable", detail=first_few(shown)))
    if packages:
        shown = [f"{f.package} ({f.kind})" for f in packages]
        out.append(Reason(code="lock-mismatch", detail=f"{len(packages)} package(s): "
                          + first_few(shown)))
    return out


def env_doc(report: Any, *, prefix: Path, hashed: bool, why: str) -> dict[str, Any]:
    m = report.manifest
    drifted = [f for f in report.findings if f.path is not None]
    return {"prefix": os.fspath(prefix), "files": sum(1 for e in m.entries if e.type == "file"),
            "proven_by_identity": m.by_identity + m.by_memo, "proven_by_hash": m.by_hash,
            "drift": len({f.path for f in drifted}),
            "drifted": [{"kind": f.kind, "path": f.path} for f in drifted[:SHOWN]],
            "packages_differ": sum(1 for f in report.findings if f.path is None),
            "proof": "hash" if hashed else "seal", "why": why,
            "digests": dict(report.digests), "lockfile": report.lockfile}

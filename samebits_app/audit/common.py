"""What ``attest`` and ``audit`` share: the host's platform, the lock as an attestation names
it, the interpreter that computes, the Statement of one run and its outputs' fingerprints."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from samebits.lock.model import Lock, lock_digest
from samebits_app.audit import envcheck
from samebits_app.audit.runtime import Interpreter, Measured, Runtime
from verify.gpu.attest import LockInfo, build_statement
from verify.gpu.workloads.catalog import SUITE_VERSION
from verify.gpu.workloads.settings import Settings

REVIEWER_ATTESTATION = "reviewer.attestation.json"
OUTPUTS = "outputs"
RuntimeFactory = Callable[[str], Runtime]


def workers(keep: tuple[str, ...] = ()) -> RuntimeFactory:
    """The real runtime: ``Interpreter(python)``, keeping the start-up variables ``keep``
    (a paper manifest's ``keep-env``) of this process's environment."""
    return lambda python: Interpreter(python, keep=keep)


def lock_info(path: Path, lock: Lock) -> LockInfo:
    """The lockfile as an attestation names it (the same fields ``verify gpu`` records)."""
    return LockInfo(name=Path(path).name, sha256=lock_digest(path),
                    environment=lock.meta("environment"), generation=lock.meta("generation"),
                    cuda=lock.meta("__cuda") or None)


def unhashed(lock: Lock, platform: str) -> list[str]:
    return [f"{p.manager}:{p.name} {p.version}" for p in lock.packages_for(platform)
            if not p.sha256 and not p.md5 and not p.name.startswith("__")]


def interpreter_for(where: envcheck.Located, given: str | None) -> str:
    """``--python``, else the environment's own ``bin/python``, else this one."""
    if given:  # absolute: the workers run in another folder
        return str(Path(given).absolute()) if "/" in given else shutil.which(given) or given
    return sys.executable if where.running else str(where.prefix / "bin" / "python")


def statement_of(measured: Measured, *, device: str, environment: Mapping[str, str] | None,
                 lock: LockInfo | None, fingerprints: Mapping[str, Any] | None = None,
                 paper: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The in-toto Statement of one run (authors' and reviewers' alike); a paper's files and
    inputs are subjects too."""
    from samebits_app.paper.session import subjects

    return build_statement(facts=measured.facts, device=device, settings=measured.settings,
                           workloads=measured.workloads, suite_version=SUITE_VERSION,
                           environment=environment, lock=lock, fingerprints=fingerprints,
                           paper=paper, artifacts=subjects(paper))


def run_suite(runtime: Runtime, *, device: str, settings: Settings, names: tuple[str, ...],
              save: Path | None) -> tuple[Measured, dict[str, Any]]:
    """The suite and its outputs' fingerprints (saved to ``save``, else to a scratch folder
    that is removed)."""
    with tempfile.TemporaryDirectory(prefix="samebits-outputs.") as tmp:
        where = Path(save) if save is not None else Path(tmp)
        measured = runtime.run(device=device, settings=settings, names=names,
                               save_outputs=where)
        fingerprints = (runtime.errorstats({"fingerprints": str(where.absolute())})
                        ["fingerprints"] if (where / "outputs.json").is_file() else {})
    return measured, fingerprints


def suite_bounds(theirs: Mapping[str, Any] | None, mine: Mapping[str, Any]
                 ) -> dict[str, dict[str, Any]]:
    """workload -> output -> a lower bound of max |Δ| from both sides' fingerprints."""
    from samebits_app.paper.judge import fingerprint_bound

    out: dict[str, dict[str, Any]] = {}
    for name, outputs in (theirs or {}).items():
        for output, fp in (outputs or {}).items():
            other = (mine.get(name) or {}).get(output)
            if other is not None and fp != other:
                out.setdefault(name, {})[output] = fingerprint_bound(fp, other)
    return out

"""``samebits attest``: the authors' side, in order, cheapest failure first.

The lock's integrity; with a paper manifest, its ``[[inputs]]`` read or fetched and checked
against their sha256 (``samebits_app.paper.inputs``: one that is not refuses, before anything
runs); ``verify env`` (drift refuses: an attestation of an environment that is not its lock's
would not match what reviewers install); the preflight; the paper's commands
(``samebits_app.paper.session``, in a scratch copy holding exactly the paper's tree,
``samebits_app.paper.tree``: the first command that fails stops the rest and refuses, its
last lines shown as they were printed) before the suite, so a typo in the paper's code costs
seconds, not the suite; the suite, with its outputs' fingerprints; and the in-toto Statement,
built by ``verify.gpu.attest`` exactly as ``verify gpu`` builds it, plus ``fingerprints`` and
``paper`` (the commands, the tree, the inputs), each tree file and input a subject.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.errors import EXIT_DIFFERENT, LockfileError, SamebitsError, UsageError, plural
from samebits.host import host_platform
from samebits.lock.read import ReadOptions, read_lock
from samebits_app.audit import envcheck
from samebits_app.audit.common import (
    RuntimeFactory,
    interpreter_for,
    lock_info,
    run_suite,
    statement_of,
    unhashed,
    workers,
)
from samebits_app.audit.runtime import Measured
from samebits_app.paper.manifest import PaperManifest
from verify.gpu.attest import statement_bytes
from verify.gpu.facts import Facts
from verify.gpu.preflight import LockNeeds, PreflightError, check, resolve_device
from verify.gpu.workloads import select
from verify.gpu.workloads.settings import Settings


class AttestDriftError(SamebitsError):
    """``attest`` of an environment whose files are not its lock's."""

    exit_code = EXIT_DIFFERENT
    kind = "drift"


@dataclass(frozen=True, slots=True, kw_only=True)
class AttestRequest:
    out: Path
    lockfile: Path | None = None
    prefix: Path | None = None
    python: str | None = None  # --workload-python: what runs the workloads
    platform: str | None = None
    device: str = "auto"
    names: tuple[str, ...] = field(default_factory=lambda: select(None))
    settings: Settings
    save_outputs: Path | None = None
    paper: PaperManifest | None = None
    lock_env: str | None = None     # --lock-env: a pixi.lock's environment
    lock_python: str | None = None  # --lock-python: a universal Python lock's Python
    cache: Path | None = None       # where fetched [[inputs]] are kept (default: the cache)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attested:
    statement: dict[str, Any]
    data: bytes
    facts: Facts
    device: str
    measured: Measured
    env_report: Mapping[str, Any]
    python: str
    paper: Mapping[str, Any] | None = None  # the attestation's paper section


def run_attest(req: AttestRequest, *, runtime_for: RuntimeFactory | None = None,
               progress: Callable[[str], None] = lambda s: None) -> Attested:
    from samebits.staging import staged_dir
    from samebits_app.paper.runner import Host
    from samebits_app.paper.session import (
        COMMANDS,
        PaperRunError,
        attest_problems,
        run_commands,
        section,
    )

    platform = req.platform or host_platform()
    read = envcheck.read_options(req, platform)
    lock = read_lock(req.lockfile, read) if req.lockfile else None
    if lock is not None:
        if platform not in lock.platforms:
            raise UsageError(f"{req.lockfile}: no platform {platform} "
                             f"(it has {', '.join(lock.platforms)})", hint="pass --platform")
        missing = unhashed(lock, platform)
        if missing:
            raise LockfileError(f"{req.lockfile}: {plural(len(missing), 'package')} without a "
                                "hash: " + ", ".join(missing), hint="re-lock with `samebits lock`")
    where = envcheck.locate(req.prefix)
    states: tuple = ()
    tree = None
    if req.paper is not None:
        from samebits_app.paper import inputs as paper_inputs
        from samebits_app.paper.tree import tree_of

        progress("paper inputs")
        states = paper_inputs.check_inputs(req.paper, cache=req.cache)
        paper_inputs.raise_problems(req.paper, states)
        tree = tree_of(req.paper, skip=[req.out, where.prefix])
    progress("verify env")
    report = _attest_env(where, req.lockfile, platform, read)  # drift refuses first
    python = interpreter_for(where, req.python)
    keep = req.paper.keep_env if req.paper is not None else ()
    runtime = (runtime_for or workers(keep))(python)
    progress("preflight")
    facts = runtime.facts()
    device = resolve_device(facts, req.device)
    needs = LockNeeds.read(req.lockfile) if req.lockfile else None
    problems = check(facts, device=device, requested=req.device, lock=needs,
                     prefix=str(where.prefix))
    if problems:
        raise PreflightError(problems)
    paper = None
    if req.paper is not None:
        # Saved beside outputs/commands and renamed over it only when every command ran:
        # a refused attestation leaves the previous outputs as they were.
        assert tree is not None
        with staged_dir(req.paper.outputs / COMMANDS, replace=True) as stage:
            records = run_commands(
                req.paper, host=Host(bin=Path(python).parent, environ=dict(os.environ),
                                     keep=keep),
                settings=req.settings.to_dict(), runtime=runtime, save=stage,
                skip=[req.out, where.prefix], files=tree.paths, inputs=states,
                progress=progress)
            failures = attest_problems(records)
            if failures:
                raise PaperRunError(
                    f"{req.paper.file}: {len(failures)} problem(s) running the paper's "
                    "commands:\n  " + "\n  ".join(failures), hint="fix the command or the "
                    "manifest; no attestation was written and the suite did not run")
        paper = section(req.paper, records, tree=tree, inputs=states)
    progress("workloads")
    measured, fingerprints = run_suite(runtime, device=device, settings=req.settings,
                                       names=req.names, save=req.save_outputs)
    info = lock_info(req.lockfile, lock) if req.lockfile and lock else None
    statement = statement_of(measured, device=device, environment=report["digests"], lock=info,
                             fingerprints=fingerprints, paper=paper)
    return Attested(statement=statement, data=statement_bytes(statement), facts=measured.facts,
                    device=device, measured=measured, env_report=report, python=python,
                    paper=paper)


def _attest_env(where: envcheck.Located, lockfile: Path | None, platform: str,
                read: ReadOptions) -> Mapping[str, Any]:
    if lockfile is not None:
        report = envcheck.verify_env(where, lockfile, platform, read)
    else:
        from verify.env.check import check_env
        from verify.env.envreport import report_json

        report = report_json(check_env(where.prefix, linkage=False))
    step = envcheck.weigh(report, {}, against="the lock" if lockfile else
                          "its installers' records",
                          whole=envcheck.whole_list(where.prefix, lockfile, platform),
                          lock_python=envcheck.lock_python(lockfile, read))
    if step.reasons:
        raise AttestDriftError(
            f"{where.prefix} is not " + (f"the environment of {lockfile}" if lockfile else
                                         "what its installers recorded") + ":\n  "
            + "\n  ".join(step.reasons), hint="reinstall it (`samebits install LOCK --target "
            "ENV --replace`) and attest again")
    return report

"""The ordered steps of ``samebits attest`` (authors) and ``samebits audit`` (reviewers).

audit, in order (each step ends in a ``verdict.Step``; a failed step blocks the ones that
need it and every reason reaches the verdict, so one run reports every problem):

    signature    with ``--trust KEY.pub`` (or a signed attestation): the authors' DSSE
                 signature against the trusted key (``trust``)
    lockfile     parse (bad input: exit 2) and integrity: every package of the platform
                 hashed; the file's sha256 is the one the attestation names
    preflight    this machine against the lock (``verify.preflight.check``) with the facts of
                 the interpreter that will run the workloads; with ``--install`` that
                 interpreter exists only after the install, so there the preflight runs
                 right after it
    environment  locate (``--prefix``, or the running environment) or install (``--install``)
    verify-env   every file against the lock; digests against the attested ones
    workloads    the attestation's workload list under its own settings, on the same kind of
                 device as the authors' when this machine has one
    compare      ``verify.compare.compare`` with the authors' attestation (and
                 ``output_errors`` when both sides saved their outputs) -> the runtime level

attest: the lock's integrity, ``verify env`` (drift refuses, before anything runs: an
attestation of an environment that is not its lock's would not match what reviewers
install), the preflight, the suite, and the in-toto Statement, built by ``verify.attest``
exactly as ``verify gpu`` builds it.
"""

from __future__ import annotations

import platform as _platform
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits.app.audit import envcheck
from samebits.app.audit.runtime import Interpreter, Measured, Runtime, settings_of
from samebits.app.audit.trust import read_authors, signature_step
from samebits.app.audit.verdict import Level, Step, Verdict, decide, failed, judge_runtime, skipped
from samebits.dsse import PublicKey
from samebits.errors import EXIT_DIFFERENT, LockfileError, SamebitsError, UsageError
from samebits.lockfile import Lock, lock_digest
from samebits.lockread import ReadOptions, read_lock
from verify.attest import (
    Attestation,
    LockInfo,
    build_statement,
    parse_attestation,
    statement_bytes,
)
from verify.compare import Report, compare
from verify.facts import Facts
from verify.preflight import LockNeeds, PreflightError, check, resolve_device
from verify.workloads import select
from verify.workloads.catalog import BY_NAME, SUITE_VERSION
from verify.workloads.settings import Settings

REVIEWER_ATTESTATION = "reviewer.attestation.json"
OUTPUTS = "outputs"
HOST_PLATFORMS = {"x86_64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64"}
RuntimeFactory = Callable[[str], Runtime]


class AttestDriftError(SamebitsError):
    """``attest`` of an environment whose files are not its lock's."""

    exit_code = EXIT_DIFFERENT
    kind = "drift"


def host_platform() -> str:
    machine = _platform.machine()
    return HOST_PLATFORMS.get(machine, f"linux-{machine}")


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
                 lock: LockInfo | None) -> dict[str, Any]:
    """The in-toto Statement of one run (authors' and reviewers' alike)."""
    return build_statement(facts=measured.facts, device=device, settings=measured.settings,
                           workloads=measured.workloads, suite_version=SUITE_VERSION,
                           environment=environment, lock=lock)


# ------------------------------------------------------------------------------ attest

@dataclass(frozen=True, slots=True, kw_only=True)
class AttestRequest:
    out: Path
    lockfile: Path | None = None
    prefix: Path | None = None
    python: str | None = None
    platform: str | None = None
    device: str = "auto"
    names: tuple[str, ...] = field(default_factory=lambda: select(None))
    settings: Settings
    save_outputs: Path | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attested:
    statement: dict[str, Any]
    data: bytes
    facts: Facts
    device: str
    measured: Measured
    env_report: Mapping[str, Any]
    python: str


def run_attest(req: AttestRequest, *, runtime_for: RuntimeFactory = Interpreter,
               progress: Callable[[str], None] = lambda s: None) -> Attested:
    platform = req.platform or host_platform()
    lock = read_lock(req.lockfile, ReadOptions(platforms=(platform,))) if req.lockfile else None
    if lock is not None:
        if platform not in lock.platforms:
            raise UsageError(f"{req.lockfile}: no platform {platform} "
                             f"(it has {', '.join(lock.platforms)})", hint="pass --platform")
        missing = unhashed(lock, platform)
        if missing:
            raise LockfileError(f"{req.lockfile}: {len(missing)} package(s) without a hash: "
                                + ", ".join(missing), hint="re-lock with `samebits lock`")
    where = envcheck.locate(req.prefix)
    progress("verify env")
    report = _attest_env(where, req.lockfile, platform)  # drift refuses before anything runs
    python = interpreter_for(where, req.python)
    runtime = runtime_for(python)
    progress("preflight")
    facts = runtime.facts()
    device = resolve_device(facts, req.device)
    needs = LockNeeds.read(req.lockfile) if req.lockfile else None
    problems = check(facts, device=device, requested=req.device, lock=needs,
                     prefix=str(where.prefix))
    if problems:
        raise PreflightError(problems)
    progress("workloads")
    measured = runtime.run(device=device, settings=req.settings, names=req.names,
                           save_outputs=req.save_outputs)
    info = lock_info(req.lockfile, lock) if req.lockfile and lock else None
    statement = statement_of(measured, device=device, environment=report["digests"], lock=info)
    return Attested(statement=statement, data=statement_bytes(statement), facts=measured.facts,
                    device=device, measured=measured, env_report=report, python=python)


def _attest_env(where: envcheck.Located, lockfile: Path | None,
                platform: str) -> Mapping[str, Any]:
    if lockfile is not None:
        report = envcheck.verify_env(where, lockfile, platform)
    else:
        from verify.cmd_env import check_env
        from verify.envreport import report_json

        report = report_json(check_env(where.prefix, linkage=False))
    step = envcheck.weigh(report, {}, against="the lock" if lockfile else
                          "its installers' records")
    if step.reasons:
        raise AttestDriftError(
            f"{where.prefix} is not " + (f"the environment of {lockfile}" if lockfile else
                                         "what its installers recorded") + ":\n  "
            + "\n  ".join(step.reasons), hint="reinstall it (`samebits install LOCK --prefix "
            "ENV --replace`) and attest again")
    return report


# ------------------------------------------------------------------------------- audit

@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRequest:
    lockfile: Path
    attestation: Path
    out: Path
    prefix: Path | None = None
    install: Path | None = None
    python: str | None = None
    platform: str | None = None
    device: str = "auto"
    outputs: Path | None = None  # the authors' saved outputs
    workloads: bool = True
    cache: Path | None = None
    replace: bool = False
    trust: PublicKey | None = None  # --trust: the key the authors' signature must verify with


@dataclass(frozen=True, slots=True, kw_only=True)
class Audit:
    request: AuditRequest
    lock: Lock
    lock_sha256: str
    platform: str
    authors: Attestation
    steps: tuple[Step, ...]
    verdict: Verdict
    prefix: Path
    python: str | None = None
    device: str | None = None
    env_report: Mapping[str, Any] | None = None
    reviewer: Attestation | None = None
    reviewer_data: bytes | None = None
    comparison: Report | None = None


def run_audit(req: AuditRequest, *, runtime_for: RuntimeFactory = Interpreter,
              progress: Callable[[str], None] = lambda s: None) -> Audit:
    # Bad input fails before any step: exit 2, no report.
    if req.prefix is not None and req.install is not None:
        raise UsageError("--prefix and --install: pass one (an environment, or where to "
                         "install one)")
    authors = read_authors(req.attestation, req.trust)
    platform = req.platform or host_platform()
    lock = read_lock(req.lockfile, ReadOptions(platforms=(platform,)))
    digest = lock_digest(req.lockfile)
    if platform not in lock.platforms:
        raise UsageError(f"{req.lockfile}: no platform {platform} (it has "
                         f"{', '.join(lock.platforms)})", hint="pass --platform")
    if req.prefix is not None:
        from verify.manifest import prefix_kind

        prefix_kind(Path(req.prefix).absolute())  # InputError: not an environment
    if req.outputs is not None and not (Path(req.outputs) / "outputs.json").is_file():
        raise UsageError(f"--outputs {req.outputs}: no outputs.json there",
                         hint="the authors write it with `samebits attest --save-outputs DIR`")
    settings = settings_of(authors) if req.workloads else None
    signature = signature_step(authors, req.trust)
    steps: list[Step] = [signature] if signature is not None else []
    steps.append(lockfile_step(req.lockfile, lock, digest, platform, authors))
    needs = LockNeeds.read(req.lockfile)

    progress("environment")
    env_step, where = _environment(req, platform)
    python = interpreter_for(where, req.python) if where else None
    runtime = runtime_for(python) if python else None
    if req.install is not None:
        steps.append(env_step)
    progress("preflight")
    if not req.workloads:
        pre, device = skipped("preflight", "--no-workloads: nothing runs here"), None
    elif runtime is None:
        pre, device = skipped("preflight", "no environment to run in"), None
    else:
        pre, device = preflight_step(runtime, req.device, authors, needs,
                                     prefix=str(where.prefix) if where else None)
    steps.append(pre)
    if req.install is None:
        steps.append(env_step)

    progress("verify env")
    report = None
    if where is None:
        steps.append(skipped("verify-env", "no environment"))
    else:
        step, report = envcheck.verify_step(where, req.lockfile, platform,
                                            envcheck.subjects(authors))
        steps.append(step)

    reviewer = data = comparison = None
    level: Level | None = None
    if not req.workloads:
        steps += [skipped("workloads", "--no-workloads"), skipped("compare", "--no-workloads")]
    elif runtime is None or device is None:
        why = "the preflight failed" if runtime is not None else "no environment to run in"
        steps += [skipped("workloads", why), skipped("compare", why)]
    else:
        progress("workloads")
        assert settings is not None
        names = tuple(n for n in select(None) if n in authors.workloads)
        save = Path(req.out) / OUTPUTS if req.outputs is not None else None
        try:
            measured = runtime.run(device=device, settings=settings, names=names,
                                   save_outputs=save)
        except SamebitsError as exc:
            steps += [failed("workloads", f"workloads: {exc.message}",
                             notes=[exc.hint] if exc.hint else ()),
                      skipped("compare", "the workloads did not run")]
        else:
            steps.append(workloads_step(measured, device, authors))
            progress("compare")
            statement = statement_of(measured, device=device,
                                     environment=(report or {}).get("digests"),
                                     lock=lock_info(req.lockfile, lock))
            data = statement_bytes(statement)
            reviewer = parse_attestation(statement, source=REVIEWER_ATTESTATION)
            step, comparison, level = compare_step(authors, reviewer, runtime, req.outputs, save)
            steps.append(step)
    return Audit(request=req, lock=lock, lock_sha256=digest, platform=platform,
                 authors=authors, steps=tuple(steps), verdict=decide(steps, runtime=level),
                 prefix=where.prefix if where else Path(req.install or ".").absolute(),
                 python=python, device=device, env_report=report, reviewer=reviewer,
                 reviewer_data=data, comparison=comparison)


def lockfile_step(path: Path, lock: Lock, digest: str, platform: str,
                  authors: Attestation) -> Step:
    reasons: list[str] = []
    notes: list[str] = []
    missing = unhashed(lock, platform)
    if missing:
        reasons.append(f"{path}: {len(missing)} package(s) without a hash: {', '.join(missing)}")
    attested = (authors.lock or {}).get("sha256")
    if attested and attested != digest:
        reasons.append(f"{path} is not the lockfile the authors attested: sha256 {digest}, "
                       f"the attestation names {(authors.lock or {}).get('name')} with {attested}")
    elif not attested:
        notes.append("the attestation names no lockfile; only the packages digest ties it to "
                     "this lock")
    n = len(lock.packages_for(platform))
    summary = (f"{path}: {n} packages for {platform}, sha256 {digest[:12]}"
               + (", the one attested" if attested == digest else ""))
    return Step(name="lockfile", status="failed" if reasons else "ok", summary=summary,
                reasons=tuple(reasons), notes=tuple(notes))


def audit_device(facts: Facts, requested: str, authors: Attestation) -> str:
    """"auto": the authors' kind of device when this machine has one (a CPU always)."""
    if requested == "auto" and authors.device_type == "cpu":
        return "cpu"
    return resolve_device(facts, requested)


def preflight_step(runtime: Runtime, requested: str, authors: Attestation,
                   needs: LockNeeds, *, prefix: str | None = None) -> tuple[Step, str | None]:
    from verify.cmd_gpu import device_line

    try:
        facts = runtime.facts()
        device = audit_device(facts, requested, authors)
    except SamebitsError as exc:
        return failed("preflight", f"preflight: {exc.message}",
                      notes=[exc.hint] if exc.hint else ()), None
    on_purpose = "cpu" if device == "cpu" and authors.device_type == "cpu" else requested
    problems = check(facts, device=device, requested=on_purpose, lock=needs, prefix=prefix)
    if problems:
        return Step(name="preflight", status="failed", summary=device_line(facts, device),
                    reasons=tuple(f"preflight: {p.message}" for p in problems),
                    notes=tuple(dict.fromkeys(p.hint for p in problems if p.hint))), None
    notes = ()
    if device.split(":")[0] != authors.device_type:
        notes = (f"the authors ran on {authors.device}; this machine runs on {device}",)
    return Step(name="preflight", status="ok", summary=device_line(facts, device),
                notes=notes), device


def _environment(req: AuditRequest, platform: str
                 ) -> tuple[Step, envcheck.Located | None]:
    if req.install is None:
        where = envcheck.locate(req.prefix)
        return envcheck.located_step(where), where
    try:
        where, step = envcheck.install(req.lockfile, req.install, platform=platform,
                                       cache=req.cache, replace=req.replace)
    except UsageError:
        raise  # an existing folder without --replace: the user's to decide
    except SamebitsError as exc:
        return failed("environment", f"install into {req.install}: {exc.message}"), None
    return step, where


def workloads_step(measured: Measured, device: str, authors: Attestation) -> Step:
    counts: dict[str, int] = {}
    for rec in measured.workloads.values():
        counts[str(rec.get("status"))] = counts.get(str(rec.get("status")), 0) + 1
    what = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    unknown = [n for n in authors.workloads if n not in BY_NAME]
    notes = (f"not run (unknown to this samebits): {', '.join(unknown)}",) if unknown else ()
    return Step(name="workloads", status="ok", notes=notes,
                summary=f"{len(measured.workloads)} workloads on {device} under the authors' "
                f"settings ({authors.settings.get('profile')}): {what}")


def compare_step(authors: Attestation, reviewer: Attestation, runtime: Runtime,
                 outputs: Path | None, saved: Path | None
                 ) -> tuple[Step, Report | None, Level | None]:
    errors = None
    if outputs is not None and saved is not None:
        try:
            errors = runtime.output_errors(outputs, saved)
        except SamebitsError as exc:
            return failed("compare", f"saved outputs: {exc.message}"), None, None
    report = compare(authors, reviewer, errors=errors)
    level, reasons, notes = judge_runtime(report)
    same = len(report.identical)
    summary = (f"{same} of {same + len(report.different)} workloads bit-identical; "
               f"{'same' if report.same_class else 'different'} equivalence class "
               f"({report.a.class_id} vs {report.b.class_id})")
    return (Step(name="compare", status="failed" if reasons else "ok", summary=summary,
                 reasons=reasons, notes=notes), report, None if reasons else level)

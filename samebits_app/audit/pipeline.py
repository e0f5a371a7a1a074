"""The ordered steps of ``samebits audit`` (reviewers; ``attesting`` is the authors' side).

In order (each step ends in a ``verdict.Step``; a failed step blocks the ones that
need it and every reason reaches the verdict, so one run reports every problem):

    signature    with ``--trust KEY.pub`` (or a signed attestation): the authors' DSSE
                 signature against the trusted key (``trust``); one that fails stops the
                 audit here: nothing of the paper is installed or run (``_untrusted``)
    lockfile     parse (bad input: exit 2) and integrity: every package of the platform
                 hashed; the file's sha256 is the one the attestation names
    code         with a paper: the reviewer's files at the paths of the authors' tree, each
                 against its attested sha256 (``samebits_app.paper.tree``); only those are
                 given to the commands
    inputs       with a paper: every ``[[inputs]]`` file read or fetched, against the
                 attested sha256 (``samebits_app.paper.inputs``)
    preflight    this machine against the lock (``verify.gpu.preflight.check``) with the facts of
                 the interpreter that will run the workloads; with ``--target`` that
                 interpreter exists only after the install, so there the preflight runs
                 right after it
    environment  locate (``--prefix``, or the running environment) or install (``--target``)
    verify-env   every file against the lock; digests against the attested ones
    paper        with a paper manifest: its commands rerun under the attested settings, the
                 first that fails stopping the rest, each output compared with the authors'
                 (``samebits_app.paper``); judged after ``compare``, whose differing facts may
                 explain an output beyond its tolerance -> the paper's level
    workloads    the attestation's workload list under its own settings, on the same kind of
                 device as the authors' when this machine has one
    compare      ``verify.gpu.compare.compare`` with the authors' attestation (and
                 ``output_errors`` when both sides saved their outputs; lower bounds from the
                 two attestations' fingerprints otherwise) -> the runtime level; ``decide``
                 combines it with the paper's

A step that cannot run says "not checked" and why, so no report section claims what no step
checked; ``decide`` tells one story (``verdict.story``): the code, an input, a manifest
setting or an environment file that differs, with the divergences it explains under it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from samebits.dsse import PublicKey
from samebits.errors import SamebitsError, UsageError, plural
from samebits.host import host_platform
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.model import Lock, lock_digest
from samebits.lock.read import read_lock
from samebits_app.audit import envcheck
from samebits_app.audit.common import (
    OUTPUTS,
    REVIEWER_ATTESTATION,
    RuntimeFactory,
    interpreter_for,
    lock_info,
    run_suite,
    statement_of,
    suite_bounds,
    unhashed,
    workers,
)
from samebits_app.audit.runtime import Measured, Runtime, settings_of
from samebits_app.audit.trust import read_authors, signature_step
from samebits_app.audit.verdict import (
    Level,
    Reason,
    Step,
    StepName,
    Verdict,
    cause,
    decide,
    failed,
    judge_runtime,
    skipped,
)
from samebits_app.audit.verdict import step as make_step
from samebits_app.paper.judge import CommandVerdict
from samebits_app.paper.manifest import PaperManifest
from samebits_app.paper.session import check_paper, judge, not_rerun, rerun, section
from verify.gpu.attest import Attestation, parse_attestation, statement_bytes
from verify.gpu.compare import Report, compare
from verify.gpu.facts import Facts
from verify.gpu.preflight import LockNeeds, check, resolve_device
from verify.gpu.workloads import select
from verify.gpu.workloads.catalog import BY_NAME

__all__ = ["OUTPUTS", "REVIEWER_ATTESTATION", "Audit", "AuditRequest", "run_audit"]


# ------------------------------------------------------------------------------- audit

@dataclass(frozen=True, slots=True, kw_only=True)
class AuditRequest:
    lockfile: Path
    attestation: Path
    out: Path
    prefix: Path | None = None
    install: Path | None = None     # --target: where to install the lock first
    python: str | None = None       # --workload-python
    platform: str | None = None
    device: str = "auto"
    outputs: Path | None = None  # the authors' saved outputs
    workloads: bool = True
    cache: Path | None = None
    replace: bool = False
    paper: PaperManifest | None = None
    trust: PublicKey | None = None  # --trust: the key the authors' signature must verify with
    lock_env: str | None = None     # --lock-env: a pixi.lock's environment
    lock_python: str | None = None  # --lock-python: a universal Python lock's Python
    sources: Sources = NO_SOURCES   # --find-links, --mirror: where --target's install finds files
    source: Mapping[str, Any] | None = None  # audit URL: where the paper came from (``source``)


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
    bounds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    paper: tuple[CommandVerdict, ...] | None = None  # None: no paper audited


def run_audit(req: AuditRequest, *, runtime_for: RuntimeFactory | None = None,
              progress: Callable[[str], None] = lambda s: None) -> Audit:
    # Bad input fails before any step: exit 2, no report.
    if req.prefix is not None and req.install is not None:
        raise UsageError("--prefix and --target: pass one (an environment, or where to "
                         "install one)")
    authors = read_authors(req.attestation, req.trust)
    platform = req.platform or host_platform()
    lock = read_lock(req.lockfile, envcheck.read_options(req, platform))
    digest = lock_digest(req.lockfile)
    if platform not in lock.platforms:
        raise UsageError(f"{req.lockfile}: no platform {platform} (it has "
                         f"{', '.join(lock.platforms)})", hint="pass --platform")
    if req.prefix is not None:
        from verify.env.manifest import prefix_kind

        prefix_kind(Path(req.prefix).absolute())  # InputError: not an environment
    outputs, outputs_note = _authors_outputs(req.outputs)
    if authors.paper is not None:
        from samebits_app.paper.session import authors_commands

        authors_commands(authors.paper, source=str(req.attestation))  # InputError: malformed
    settings = settings_of(authors) if req.workloads else None
    signature = signature_step(authors, req.trust)
    steps: list[Step] = [signature] if signature is not None else []
    steps.append(lockfile_step(req.lockfile, lock, digest, platform, authors))
    if req.trust is not None and signature is not None and signature.status == "failed":
        return _untrusted(req, lock=lock, digest=digest, platform=platform, authors=authors,
                          steps=steps)
    needs = LockNeeds.read(req.lockfile)
    checked = None
    if req.paper is not None or authors.paper is not None:
        progress("code and inputs")  # the paper's own files first: a cause before its effects
        env = req.prefix or req.install or Path(sys.prefix)  # an environment is no code
        checked = check_paper(req.paper, authors.paper, cache=req.cache,
                              skip=[Path(req.out), Path(env)], roots=req.sources.local_roots)
        steps += [checked.code, checked.inputs]

    progress("environment")
    env_step, where = _environment(req, platform)
    python = interpreter_for(where, req.python) if where else None
    keep = req.paper.keep_env if req.paper is not None else ()
    runtime = (runtime_for or workers(keep))(python) if python else None
    if req.install is not None:
        steps.append(env_step)
    progress("preflight")
    if not req.workloads:
        pre, device = skipped("preflight", "not checked: --no-workloads: nothing runs here"), None
    elif runtime is None:
        pre, device = skipped("preflight", "not checked: no environment to run in"), None
    else:
        pre, device = preflight_step(runtime, req.device, authors, needs,
                                     prefix=str(where.prefix) if where else None)
    steps.append(with_kernel_coverage(pre, where.prefix if where else None, runtime, device))
    if req.install is None:
        steps.append(env_step)

    progress("verify env")
    report = None
    if where is None:
        steps.append(skipped("verify-env", "not checked: no environment"))
    else:
        step, report = envcheck.verify_step(where, req.lockfile, platform,
                                            envcheck.subjects(authors),
                                            envcheck.read_options(req, platform))
        steps.append(step)

    reviewer = data = comparison = None
    level: Level | None = None
    paper_level: Level | None = None
    bounds: dict[str, dict[str, Any]] = {}
    verdicts: tuple[CommandVerdict, ...] | None = None
    paper = req.paper is not None or authors.paper is not None
    if not req.workloads:
        steps += [skipped("workloads", "not run: --no-workloads"),
                  skipped("compare", "not checked: --no-workloads")]
        if paper:
            steps.insert(len(steps) - 2, not_rerun(req.paper, authors,
                                                   "--no-workloads: nothing runs here"))
        return _audit(req, lock, digest, platform, authors, steps, where, python, device,
                      report)
    if runtime is None or device is None:
        why = "the preflight failed" if runtime is not None else "no environment to run in"
        if paper:
            steps.append(not_rerun(req.paper, authors, why))
        steps += [skipped("workloads", f"not run: {why}"),
                  skipped("compare", f"not checked: {why}")]
        return _audit(req, lock, digest, platform, authors, steps, where, python, device,
                      report)
    assert settings is not None and python is not None
    # The paper's commands first: what the paper claims, before the suite that explains it.
    run = None
    if req.paper is not None and checked is not None:
        run = rerun(req.paper, authors, checked, runtime=runtime, python=python,
                    settings=settings.to_dict(), out=Path(req.out),
                    skip=[Path(req.out), *([where.prefix] if where else [])],
                    progress=progress)
    paper_at = len(steps)
    progress("workloads")
    names = tuple(n for n in select(None) if n in authors.workloads)
    save = Path(req.out) / OUTPUTS if outputs is not None else None
    measured = fingerprints = None
    try:
        measured, fingerprints = run_suite(runtime, device=device, settings=settings,
                                           names=names, save=save)
    except SamebitsError as exc:
        steps += [failed("workloads", f"workloads: {exc.message}",
                         notes=[exc.hint] if exc.hint else ()),
                  skipped("compare", "not checked: the workloads did not run")]
    else:
        steps.append(workloads_step(measured, device, authors))
        progress("compare")
        bounds = suite_bounds(authors.fingerprints, fingerprints)
        reviewer = parse_attestation(statement_of(
            measured, device=device, environment=(report or {}).get("digests"),
            lock=lock_info(req.lockfile, lock), fingerprints=fingerprints),
            source=REVIEWER_ATTESTATION)
        step, comparison, level = compare_step(authors, reviewer, runtime, outputs,
                                               save, bounds)
        if outputs_note is not None:
            step = replace(step, notes=(*step.notes, outputs_note))
        steps.append(step)
    records = None
    if run is not None:
        assert req.paper is not None
        pstep, verdicts, paper_level = judge(req.paper, authors, run, comparison=comparison)
        records = run.records
        steps.insert(paper_at, pstep)
    elif paper:
        steps.insert(paper_at, not_rerun(req.paper, authors, "no paper manifest"))
    if measured is not None:
        statement = statement_of(
            measured, device=device, environment=(report or {}).get("digests"),
            lock=lock_info(req.lockfile, lock), fingerprints=fingerprints,
            paper=section(req.paper, records, tree=checked.tree if checked else None,
                          inputs=checked.states if checked else None)
            if records is not None else None)
        if req.source is not None:  # what the reviewer audited: the URL and its commit
            statement["predicate"]["source"] = dict(req.source)
        data = statement_bytes(statement)
        reviewer = parse_attestation(statement, source=REVIEWER_ATTESTATION)
    return _audit(req, lock, digest, platform, authors, steps, where, python, device, report,
                  level=level, paper_level=paper_level, reviewer=reviewer, data=data,
                  comparison=comparison, bounds=bounds, verdicts=verdicts)


def _audit(req: AuditRequest, lock: Lock, digest: str, platform: str, authors: Attestation,
           steps: list[Step], where: envcheck.Located | None, python: str | None,
           device: str | None, report: Mapping[str, Any] | None, *, level: Level | None = None,
           paper_level: Level | None = None, reviewer: Attestation | None = None,
           data: bytes | None = None, comparison: Report | None = None,
           bounds: Mapping[str, Mapping[str, Any]] | None = None,
           verdicts: tuple[CommandVerdict, ...] | None = None) -> Audit:
    return Audit(request=req, lock=lock, lock_sha256=digest, platform=platform,
                 authors=authors, steps=tuple(steps),
                 verdict=with_source(decide(steps, runtime=level, paper=paper_level),
                                     req.source, authors),
                 prefix=where.prefix if where else Path(req.install or ".").absolute(),
                 python=python, device=device, env_report=report, reviewer=reviewer,
                 reviewer_data=data, comparison=comparison, bounds=dict(bounds or {}),
                 paper=verdicts)


UNTRUSTED = ("the authors' signature did not verify with --trust: nothing of the paper ran "
             "(no install, no environment, no workloads, no paper command)")


def _untrusted(req: AuditRequest, *, lock: Lock, digest: str, platform: str,
               authors: Attestation, steps: list[Step]) -> Audit:
    """The audit of an attestation whose signature failed ``--trust``: it stops there. The
    paper is untrusted code, so its lock is not installed and nothing of it runs; every later
    step is skipped, saying so, and the verdict is not-reproduced by the signature's reason."""
    names: list[StepName] = ["environment", "preflight", "verify-env", "workloads", "compare"]
    if req.paper is not None or authors.paper is not None:
        names[:0] = ["code", "inputs"]
        names.append("paper")
    steps = [*steps, *(skipped(n, UNTRUSTED) for n in names)]
    return Audit(request=req, lock=lock, lock_sha256=digest, platform=platform,
                 authors=authors, steps=tuple(steps),
                 verdict=with_source(decide(steps, runtime=None, paper=None), req.source,
                                     authors),
                 prefix=Path(req.install or req.prefix or ".").absolute())


TREE_COMMIT_NOTE = "the authors attested at git commit "  # paper.tree's own note


def with_source(verdict: Verdict, source: Mapping[str, Any] | None,
                authors: Attestation) -> Verdict:
    """The verdict of an audit from a URL, saying which commit of the code the authors
    attested when it is not the one audited (or when an archive names no commit): that note
    stands in for the code step's plainer one."""
    if source is None:
        return verdict
    git = ((authors.paper or {}).get("tree") or {}).get("git") or {}
    theirs = git.get("commit")
    if not theirs or theirs == source.get("commit"):
        return verdict
    url = source.get("url")
    audited = (f"commit {source['commit']} of {url}" if source.get("commit") else
               f"the archive {url} (sha256 {str(source.get('sha256'))[:12]}), which names no "
               "commit")
    changed = len(git.get("changes") or {})
    note = (f"the authors' attestation names another commit of the code: they attested git "
            f"commit {theirs}" + (f" with {plural(changed, 'uncommitted change')}"
                                  if changed else "")
            + f"; this audit is of {audited}: the files decide, each against the sha256 the "
            "authors recorded")
    notes = tuple(n for n in verdict.notes if not n.startswith(TREE_COMMIT_NOTE))
    return replace(verdict, notes=(note, *notes))


def lockfile_step(path: Path, lock: Lock, digest: str, platform: str,
                  authors: Attestation) -> Step:
    reasons: list[Reason] = []
    notes: list[str] = []
    missing = unhashed(lock, platform)
    if missing:
        reasons.append(cause("lockfile", f"{path}: {plural(len(missing), 'package')} without "
                             f"a hash: {', '.join(missing)}"))
    attested = (authors.lock or {}).get("sha256")
    if attested and attested != digest:
        reasons.append(cause("lockfile", f"{path} is not the lockfile the authors attested: "
                             f"sha256 {digest}, the attestation names "
                             f"{(authors.lock or {}).get('name')} with {attested}",
                             covers=("suite", "paper:*")))
    elif not attested:
        notes.append("the attestation names no lockfile; only the packages digest ties it to "
                     "this lock")
    n = len(lock.packages_for(platform))
    summary = (f"{path}: {plural(n, 'package')} for {platform}, sha256 {digest[:12]}"
               + (", the one attested" if attested == digest else ""))
    return make_step("lockfile", summary, reasons, notes=notes)


def audit_device(facts: Facts, requested: str, authors: Attestation) -> str:
    """"auto": the authors' kind of device when this machine has one (a CPU always)."""
    if requested == "auto" and authors.device_type == "cpu":
        return "cpu"
    return resolve_device(facts, requested)


def preflight_step(runtime: Runtime, requested: str, authors: Attestation,
                   needs: LockNeeds, *, prefix: str | None = None) -> tuple[Step, str | None]:
    from verify.gpu.cmd_gpu import device_line

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
    notes: tuple[str, ...] = ()
    if device.split(":")[0] != authors.device_type:
        notes = (f"the authors ran on {authors.device}; this machine runs on {device}",)
    return Step(name="preflight", status="ok", summary=device_line(facts, device),
                notes=notes), device


def with_kernel_coverage(step: Step, prefix: Path | None, runtime: Runtime | None,
                         device: str | None) -> Step:
    """The preflight's summary with "this lock runs on: ..." read from the environment's
    kernels (``verify.kernels.coverage``), and a reason when they do not run on the GPU in use."""
    if prefix is None:
        return step
    from dataclasses import replace

    from verify.kernels.report import runs_on_note

    gpu = runtime.facts().gpu(int(device.split(":")[1])) \
        if runtime is not None and device and device.startswith("cuda") else None
    note, reason = runs_on_note(prefix, gpu_cc=gpu.compute_capability if gpu else None)
    summary = f"{step.summary}; {note}"
    if reason is None:
        return replace(step, summary=summary)
    return replace(step, summary=summary, status="failed",
                   reasons=(*step.reasons, f"preflight: {reason}"))


def _environment(req: AuditRequest, platform: str
                 ) -> tuple[Step, envcheck.Located | None]:
    if req.install is None:
        where = envcheck.locate(req.prefix)
        return envcheck.located_step(where), where
    try:
        where, step = envcheck.install(req.lockfile, req.install, platform=platform,
                                       cache=req.cache, replace=req.replace,
                                       read=envcheck.read_options(req, platform),
                                       sources=req.sources)
    except UsageError:
        raise  # an existing folder without --replace: the user's to decide
    except SamebitsError as exc:
        notes = [f"hint: {exc.hint}"] if exc.hint else []
        return failed("environment", f"install into {req.install}: {exc.message}",
                      notes=notes), None
    return step, where


def workloads_step(measured: Measured, device: str, authors: Attestation) -> Step:
    counts: dict[str, int] = {}
    for rec in measured.workloads.values():
        counts[str(rec.get("status"))] = counts.get(str(rec.get("status")), 0) + 1
    what = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    unknown = [n for n in authors.workloads if n not in BY_NAME]
    notes = (f"not run (unknown to this samebits): {', '.join(unknown)}",) if unknown else ()
    return Step(name="workloads", status="ok", notes=notes,
                summary=f"{plural(len(measured.workloads), 'workload')} on {device} under the "
                f"authors' settings ({authors.settings.get('profile')}): {what}")


def _authors_outputs(given: Path | None) -> tuple[Path | None, str | None]:
    """(the authors' saved workload outputs, a note): ``--outputs DIR`` as attest saves a paper's
    outputs by default (``outputs/commands/...``, no ``outputs.json``) holds none of the
    workloads' tensors; it is said, and the workloads are compared without them."""
    if given is None:
        return None, None
    if not Path(given).is_dir():
        raise UsageError(f"--outputs {given}: no such folder",
                         hint="the authors' outputs folder: `samebits attest --save-outputs DIR` "
                         "writes the workloads' outputs there")
    if (Path(given) / "outputs.json").is_file():
        return Path(given), None
    return None, (f"--outputs {given} holds no workload outputs (no outputs.json: `samebits "
                  "attest --save-outputs DIR` writes them), so each workload's difference is "
                  "bounded by its fingerprints alone, not by the authors' tensors")


def compare_step(authors: Attestation, reviewer: Attestation, runtime: Runtime,
                 outputs: Path | None, saved: Path | None,
                 bounds: Mapping[str, Mapping[str, Any]] | None = None
                 ) -> tuple[Step, Report | None, Level | None]:
    errors = None
    if outputs is not None and saved is not None:
        try:
            errors = runtime.output_errors(outputs, saved)
        except SamebitsError as exc:
            return failed("compare", f"saved outputs: {exc.message}"), None, None
    report = compare(authors, reviewer, errors=errors)
    level, reasons, notes = judge_runtime(report, bounds)
    summary = (f"{counts_text(report)}; "
               f"{'same' if report.same_class else 'different'} equivalence class "
               f"({report.a.class_id} vs {report.b.class_id})")
    return (make_step("compare", summary, reasons, notes=notes), report,
            None if reasons else level)


def counts_text(report: Report) -> str:
    """What the comparison counted, each workload once, every number named."""
    c = report.counts()
    text = (f"{c['both_ran']} of {plural(c['workloads'], 'workload')} ran on both sides: "
            f"{c['identical']} bit-identical, {c['explained']} explained, "
            f"{c['differing']} differing")
    extra = [f"{c[k]} {k}" for k in ("unavailable", "error", "refused", "other") if c[k]]
    return text + (f"; {', '.join(extra)} (no bits on a side)" if extra else "")

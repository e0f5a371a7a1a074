"""The audit's verdict: four levels a reviewer understands, each with a documented exit code.

In the spirit of ACM's artifact badges, strongest first:

    level                  exit  meaning
    bit-identical          0     the environment is the lock's, file for file, and every workload
                                 (and every output of the paper's commands) gave the authors' bits
    within-tolerance       0     the environment is the lock's; every output of the paper's
                                 commands is the authors' bits or within the tolerance the
                                 manifest states; the suite's differences are all explained
    explained              0     the environment is the lock's; some workloads differ, each only
                                 where a recorded fact differs that it is known to be sensitive
                                 to (device, CPU ISA, thread count, library versions, settings);
                                 a paper output beyond its tolerance, where such facts differ;
                                 every difference with its magnitude
    environment-identical  0     the environment is the lock's, file for file; no workload's
                                 bits were compared (``--no-workloads``, or none gave bits on
                                 both sides: unavailable on both is no evidence)
    not-reproduced         1     at least one reason, every one listed: lockfile integrity,
                                 preflight, install, environment drift, a workload that differs
                                 where no recorded fact explains it, a paper command that fails,
                                 or diverges where no recorded fact differs
    (bad input or usage: exit 2, no verdict; see ``samebits.errors``)

``--require LEVEL`` turns any verdict weaker than LEVEL into exit 1.

With a paper manifest the paper's commands decide between the positive levels
(``decide``): all their outputs the same bits, and the suite too: bit-identical; all the same
or within tolerance (the suite identical or explained): within-tolerance; some output beyond
its tolerance where recorded facts differ: explained.

Each pipeline step ends in a ``Step`` (ok, failed or skipped) whose ``reasons`` say why the
audit cannot reach a positive level; ``decide`` is pure: any reason -> not-reproduced.

One story (``story``). Every reason has a cause (``CAUSES``: the signature, the lockfile, the
paper's code, its inputs, a manifest setting, this machine, the install, an environment file,
or none found). A step's reasons carry their cause (``Step.causes``; else the step's own,
``STEP_CAUSE``). A divergence (a workload or a paper command whose results differ, fail or
are missing: ``Reason.scope``) is listed under the first known cause that can explain it
(``Reason.covers``: the code and the inputs explain every paper command, a command's changed
declaration that command and the ones after it, a drifted environment file or another lock
everything), not beside it; only a divergence no cause explains is a reason of its own, "none
found".
``judge_runtime`` reads ``verify.gpu.compare``'s report: a difference is explained only when
every differing workload is attributed to a fact it is known to be sensitive to
(``expected``); ``compare``'s weaker "explained" (attributed to a fact outside the workload's
sensitivities) is a reason here, because a badge must not rest on a guess. A workload with no
bits on either side (``Report.not_run``: unavailable on both, say) is neither a difference nor
identical: it is named in a note, and when no workload is left to compare the level is
environment-identical, never bit-identical.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from samebits.errors import EXIT_DIFFERENT, EXIT_OK, plural

Level = Literal["bit-identical", "within-tolerance", "explained", "environment-identical",
                "not-reproduced"]
StepName = Literal["signature", "lockfile", "code", "inputs", "preflight", "environment",
                   "verify-env", "paper", "workloads", "compare"]
StepStatus = Literal["ok", "failed", "skipped"]
Cause = Literal["signature", "lockfile", "code", "input", "manifest", "machine", "install",
                "environment", "fact", "none"]
CAUSES: dict[Cause, str] = {
    "signature": "the authors' signature", "lockfile": "the lockfile",
    "code": "the paper's code", "input": "the paper's inputs",
    "manifest": "a manifest setting", "machine": "this machine (preflight)",
    "install": "the install", "environment": "an environment file",
    "fact": "a recorded fact", "none": "no cause found"}
STEP_CAUSE: dict[StepName, Cause] = {
    "signature": "signature", "lockfile": "lockfile", "code": "code", "inputs": "input",
    "preflight": "machine", "environment": "install", "verify-env": "environment",
    "paper": "none", "workloads": "none", "compare": "none"}
EVERYTHING = ("suite", "paper:*")  # what another environment can explain: every result


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelInfo:
    level: Level
    exit_code: int
    title: str
    meaning: str
    colour: str  # the HTML banner's background


LEVELS: dict[Level, LevelInfo] = {i.level: i for i in (
    LevelInfo(level="bit-identical", exit_code=EXIT_OK, colour="#2e7d32",
              title="Reproduced: runtime bit-identical",
              meaning="the environment is the lock's, file for file, and every workload gave "
              "the authors' bits"),
    LevelInfo(level="within-tolerance", exit_code=EXIT_OK, colour="#2f7d6d",
              title="Reproduced: the paper's results within its stated tolerances",
              meaning="the environment is the lock's; every output of the paper's commands is "
              "the authors' bits or within the tolerance its manifest states, and the suite "
              "differs only where recorded facts explain it"),
    LevelInfo(level="explained", exit_code=EXIT_OK, colour="#9a6700",
              title="Reproduced: runtime differs only where recorded facts explain it",
              meaning="the environment is the lock's; each differing workload is attributed to "
              "a recorded fact that differs and that it is known to be sensitive to"),
    LevelInfo(level="environment-identical", exit_code=EXIT_OK, colour="#1565c0",
              title="Environment identical (runtime not checked)",
              meaning="the environment is the lock's, file for file; no workload's bits were "
              "compared (not run, or none gave bits on both sides)"),
    LevelInfo(level="not-reproduced", exit_code=EXIT_DIFFERENT, colour="#c62828",
              title="Not reproduced",
              meaning="at least one check failed; every reason is listed"),
)}
ORDER: tuple[Level, ...] = ("not-reproduced", "environment-identical", "explained",
                            "within-tolerance", "bit-identical")  # weakest first


@dataclass(frozen=True, slots=True, kw_only=True)
class Reason:
    """A reason against a positive verdict: a cause, or a divergence (``scope`` set) that a
    cause may explain (``story``)."""

    cause: Cause
    text: str
    scope: str | None = None      # a divergence: "suite" or "paper:<command>"
    alone: str | None = None      # a divergence's words when no cause explains it
    covers: tuple[str, ...] = ()  # a cause: the scopes (fnmatch) of divergences it explains
    explains: tuple[str, ...] = ()  # after ``story``: the divergences listed under it

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "text": self.text, "explains": list(self.explains)}


def cause(kind: Cause, text: str, *, covers: Sequence[str] = ()) -> Reason:
    return Reason(cause=kind, text=text, covers=tuple(covers))


def divergence(text: str, *, scope: str, alone: str | None = None) -> Reason:
    return Reason(cause="none", text=text, scope=scope, alone=alone)


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One pipeline step: what it found, and the reasons (if any) it blocks a positive level.
    ``causes``: the reasons with their causes (``reasons`` are their words); without them
    each reason's cause is the step's own (``STEP_CAUSE``)."""

    name: StepName
    status: StepStatus
    summary: str
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    causes: tuple[Reason, ...] = ()

    def all_reasons(self) -> tuple[Reason, ...]:
        if self.causes:
            return self.causes
        kind = STEP_CAUSE[self.name]
        covers = EVERYTHING if kind in ("environment", "machine", "install") else ()
        return tuple(Reason(cause=kind, text=r, covers=covers) for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "summary": self.summary,
                "reasons": list(self.reasons), "notes": list(self.notes)}


def step(name: StepName, summary: str, causes: Sequence[Reason], *,
         notes: Sequence[str] = ()) -> Step:
    """A step from its reasons with their causes: failed when there is any."""
    return Step(name=name, status="failed" if causes else "ok", summary=summary,
                reasons=tuple(r.text for r in causes), notes=tuple(notes),
                causes=tuple(causes))


def failed(name: StepName, message: str, *, notes: Sequence[str] = ()) -> Step:
    return Step(name=name, status="failed", summary=message, reasons=(message,),
                notes=tuple(notes))


def skipped(name: StepName, why: str) -> Step:
    return Step(name=name, status="skipped", summary=why)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    level: Level
    reasons: tuple[Reason, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def info(self) -> LevelInfo:
        return LEVELS[self.level]

    def exit_code(self, require: Level | None = None) -> int:
        if require is not None and ORDER.index(self.level) < ORDER.index(require):
            return EXIT_DIFFERENT
        return self.info.exit_code

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "title": self.info.title, "meaning": self.info.meaning,
                "exit_code": self.info.exit_code,
                "reasons": [r.to_json() for r in self.reasons], "notes": list(self.notes)}


def story(reasons: Iterable[Reason]) -> tuple[Reason, ...]:
    """One story: each divergence under the first cause that explains it, in the order the
    steps ran; a divergence no cause explains stands alone, its cause "none"."""
    reasons = tuple(dict.fromkeys(reasons))
    causes = [r for r in reasons if r.scope is None]
    under: dict[int, list[str]] = {id(c): [] for c in causes}
    out: list[Reason] = []
    for r in reasons:
        if r.scope is None:
            out.append(r)
            continue
        c = next((c for c in causes if any(fnmatch.fnmatchcase(r.scope, p) for p in c.covers)),
                 None)
        if c is None:
            out.append(replace(r, text=r.alone or r.text, cause="none"))
        else:
            under[id(c)].append(r.text)
    return tuple(replace(r, explains=(*r.explains, *dict.fromkeys(under[id(r)])))
                 if r.scope is None else r for r in out)


def decide(steps: Iterable[Step], *, runtime: Level | None,
           paper: Level | None = None) -> Verdict:
    """The level: not-reproduced with every step's reasons; else, with a paper, the paper's
    level (bit-identical only when the suite is too, within-tolerance when the paper's outputs
    hold and the suite is explained); else ``runtime``'s (bit-identical or explained); else
    environment-identical when the workloads did not run."""
    steps = tuple(steps)
    reasons = story(r for s in steps for r in s.all_reasons())
    notes = tuple(dict.fromkeys(n for s in steps for n in s.notes))
    if reasons:
        return Verdict(level="not-reproduced", reasons=reasons, notes=notes)
    if paper is not None and runtime is not None:
        if paper == "explained":
            return Verdict(level="explained", notes=notes)
        if paper == "bit-identical" and runtime == "bit-identical":
            return Verdict(level="bit-identical", notes=notes)
        return Verdict(level="within-tolerance", notes=notes)
    return Verdict(level=runtime or "environment-identical", notes=notes)


def magnitude(d: Any, bounds: Mapping[str, Any] | None = None) -> str:
    """How large a workload's difference is: exact from saved outputs (``d.errors``), a lower
    bound from the attestations' fingerprints (``bounds``: output -> max |Δ| at least), or
    said to be unknown, never left out."""
    if d.errors:
        worst = max(d.errors, key=lambda e: e.max_abs)
        return (f"max |Δ| {worst.max_abs:.3g} in {worst.output}, {worst.ulp_text()}, "
                f"{worst.differing}/{worst.total} elements differ")
    known = {k: v for k, v in (bounds or {}).items() if v is not None}
    if known:
        out, v = max(known.items(), key=lambda kv: kv[1])
        if v == 0:
            return "max |Δ| > 0, below what the fingerprints resolve"
        return f"max |Δ| >= {v:.3g} in {out} (a lower bound from fingerprints)"
    return "magnitude unknown: no saved outputs or fingerprints on both sides"


def judge_runtime(report: Any, bounds: Mapping[str, Mapping[str, Any]] | None = None
                  ) -> tuple[Level, tuple[Reason, ...], tuple[str, ...]]:
    """(level, reasons, notes) from a ``verify.gpu.compare.Report`` (authors = a, reviewer = b);
    ``bounds``: workload -> output -> a lower bound of max |Δ| (from fingerprints). A
    differing workload is a divergence of the suite: a known cause (a drifted environment
    file, another lock) explains it."""
    reasons: list[Reason] = []
    notes: list[str] = []
    unexplained = [d for d in report.different if not d.expected]
    if report.same_class and report.different:
        names = ", ".join(d.name for d in report.different)
        reasons.append(divergence(
            f"different bits: {names}", scope="suite",
            alone=f"different bits with no recorded fact to explain them: {names} (same "
            "equivalence class as the authors' run: suspect a hardware fault or undeclared "
            "drift)"))
    elif unexplained:
        for d in unexplained:
            facts = ", ".join(d.attributed_to) or "none"
            reasons.append(divergence(
                f"{d.name} differs", scope="suite",
                alone=f"{d.name} differs, but none of the recorded facts that differ "
                f"({facts}) is one it is known to be sensitive to"))
    if report.only_in_a:
        reasons.append(cause("none", "the authors ran workloads this samebits does not know: "
                             + ", ".join(report.only_in_a) + " (another suite version?)"))
    if report.different and not reasons:
        notes.append(f"{plural(len(report.different), 'workload')} "
                     f"{'differs' if len(report.different) == 1 else 'differ'}, each explained "
                     "by recorded facts: " + "; ".join(
                         f"{d.name} ({'; '.join(getattr(d, 'why', ()) or d.attributed_to)}; "
                         f"{magnitude(d, (bounds or {}).get(d.name))})"
                         for d in report.different))
    not_run = tuple(getattr(report, "not_run", ()))
    if not_run:
        notes.append(f"{plural(len(not_run), 'workload')} gave no bits on either side (the "
                     "same status other than ok on both, e.g. unavailable on this torch), so "
                     "neither differs nor counts as identical: " + ", ".join(not_run))
    if reasons:
        return "not-reproduced", tuple(reasons), tuple(notes)
    if report.different:
        return "explained", (), tuple(notes)
    if not report.identical:
        notes.append("no workload gave bits on both sides: the runtime was not compared")
        return "environment-identical", (), tuple(notes)
    return "bit-identical", (), tuple(notes)

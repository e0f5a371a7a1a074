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
``judge_runtime`` reads ``verify.compare``'s report: a difference is explained only when
every differing workload is attributed to a fact it is known to be sensitive to
(``expected``); ``compare``'s weaker "explained" (attributed to a fact outside the workload's
sensitivities) is a reason here, because a badge must not rest on a guess. A workload with no
bits on either side (``Report.not_run``: unavailable on both, say) is neither a difference nor
identical: it is named in a note, and when no workload is left to compare the level is
environment-identical, never bit-identical.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from samebits.errors import EXIT_DIFFERENT, EXIT_OK, plural

Level = Literal["bit-identical", "within-tolerance", "explained", "environment-identical",
                "not-reproduced"]
StepName = Literal["signature", "lockfile", "preflight", "environment", "verify-env",
                   "workloads", "compare", "paper"]
StepStatus = Literal["ok", "failed", "skipped"]


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
class Step:
    """One pipeline step: what it found, and the reasons (if any) it blocks a positive level."""

    name: StepName
    status: StepStatus
    summary: str
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "summary": self.summary,
                "reasons": list(self.reasons), "notes": list(self.notes)}


def failed(name: StepName, message: str, *, notes: Sequence[str] = ()) -> Step:
    return Step(name=name, status="failed", summary=message, reasons=(message,),
                notes=tuple(notes))


def skipped(name: StepName, why: str) -> Step:
    return Step(name=name, status="skipped", summary=why)


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    level: Level
    reasons: tuple[str, ...] = ()
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
                "exit_code": self.info.exit_code, "reasons": list(self.reasons),
                "notes": list(self.notes)}


def decide(steps: Iterable[Step], *, runtime: Level | None,
           paper: Level | None = None) -> Verdict:
    """The level: not-reproduced with every step's reasons; else, with a paper, the paper's
    level (bit-identical only when the suite is too, within-tolerance when the paper's outputs
    hold and the suite is explained); else ``runtime``'s (bit-identical or explained); else
    environment-identical when the workloads did not run."""
    steps = tuple(steps)
    reasons = tuple(r for s in steps for r in s.reasons)
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
                  ) -> tuple[Level, tuple[str, ...], tuple[str, ...]]:
    """(level, reasons, notes) from a ``verify.compare.Report`` (authors = a, reviewer = b);
    ``bounds``: workload -> output -> a lower bound of max |Δ| (from fingerprints)."""
    reasons: list[str] = []
    notes: list[str] = []
    unexplained = [d for d in report.different if not d.expected]
    if report.same_class and report.different:
        names = ", ".join(d.name for d in report.different)
        reasons.append(f"different bits with no recorded fact to explain them: {names} (same "
                       "equivalence class as the authors' run: suspect a hardware fault or "
                       "undeclared drift)")
    elif unexplained:
        for d in unexplained:
            facts = ", ".join(d.attributed_to) or "none"
            reasons.append(f"{d.name} differs, but none of the recorded facts that differ "
                           f"({facts}) is one it is known to be sensitive to")
    if report.only_in_a:
        reasons.append("the authors ran workloads this samebits does not know: "
                       + ", ".join(report.only_in_a) + " (another suite version?)")
    if report.different and not reasons:
        notes.append(f"{plural(len(report.different), 'workload')} "
                     f"{'differs' if len(report.different) == 1 else 'differ'}, each explained "
                     "by recorded facts: " + "; ".join(
                         f"{d.name} ({', '.join(d.attributed_to)}: "
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

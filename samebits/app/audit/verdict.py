"""The audit's verdict: four levels a reviewer understands, each with a documented exit code.

In the spirit of ACM's artifact badges, strongest first:

    level                  exit  meaning
    bit-identical          0     the environment is the lock's, file for file, and every workload
                                 gave the authors' bits
    explained              0     the environment is the lock's; some workloads differ, each only
                                 where a recorded fact differs that it is known to be sensitive
                                 to (device, CPU ISA, thread count, library versions, settings)
    environment-identical  0     the environment is the lock's, file for file; the workloads
                                 were not run (``--no-workloads``)
    not-reproduced         1     at least one reason, every one listed: lockfile integrity,
                                 preflight, install, environment drift, a workload that differs
                                 where no recorded fact explains it
    (bad input or usage: exit 2, no verdict; see ``samebits.errors``)

``--require LEVEL`` turns any verdict weaker than LEVEL into exit 1.

Each pipeline step ends in a ``Step`` (ok, failed or skipped) whose ``reasons`` say why the
audit cannot reach a positive level; ``decide`` is pure: any reason -> not-reproduced.
``judge_runtime`` reads ``verify.compare``'s report: a difference is explained only when
every differing workload is attributed to a fact it is known to be sensitive to
(``expected``); ``compare``'s weaker "explained" (attributed to a fact outside the workload's
sensitivities) is a reason here, because a badge must not rest on a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from samebits.errors import EXIT_DIFFERENT, EXIT_OK

Level = Literal["bit-identical", "explained", "environment-identical", "not-reproduced"]
StepName = Literal["signature", "lockfile", "preflight", "environment", "verify-env",
                   "workloads", "compare"]
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
    LevelInfo(level="explained", exit_code=EXIT_OK, colour="#9a6700",
              title="Reproduced: runtime differs only where recorded facts explain it",
              meaning="the environment is the lock's; each differing workload is attributed to "
              "a recorded fact that differs and that it is known to be sensitive to"),
    LevelInfo(level="environment-identical", exit_code=EXIT_OK, colour="#1565c0",
              title="Environment identical (runtime not checked)",
              meaning="the environment is the lock's, file for file; the workloads were not run"),
    LevelInfo(level="not-reproduced", exit_code=EXIT_DIFFERENT, colour="#c62828",
              title="Not reproduced",
              meaning="at least one check failed; every reason is listed"),
)}
ORDER: tuple[Level, ...] = ("not-reproduced", "environment-identical", "explained",
                            "bit-identical")  # weakest first


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


def decide(steps: Iterable[Step], *, runtime: Level | None) -> Verdict:
    """The level: not-reproduced with every step's reasons, else ``runtime``'s (bit-identical
    or explained), else environment-identical when the workloads did not run."""
    steps = tuple(steps)
    reasons = tuple(r for s in steps for r in s.reasons)
    notes = tuple(dict.fromkeys(n for s in steps for n in s.notes))
    if reasons:
        return Verdict(level="not-reproduced", reasons=reasons, notes=notes)
    return Verdict(level=runtime or "environment-identical", notes=notes)


def judge_runtime(report: Any) -> tuple[Level, tuple[str, ...], tuple[str, ...]]:
    """(level, reasons, notes) from a ``verify.compare.Report`` (authors = a, reviewer = b)."""
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
        notes.append(f"{len(report.different)} workload(s) differ, each explained by recorded "
                     "facts: " + ", ".join(f"{d.name} ({', '.join(d.attributed_to)})"
                                           for d in report.different))
    if reasons:
        return "not-reproduced", tuple(reasons), tuple(notes)
    return ("explained" if report.different else "bit-identical"), (), tuple(notes)

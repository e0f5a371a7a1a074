"""Nondeterminism probe: which workloads give different bits in two fresh processes?

The suite runs ``replicas`` times under the deterministic profile and ``replicas`` times under
the default one, each time in a new interpreter (``python -m verify.gpu.workloads``). A workload is
``stable`` when every replica gave the same digest, ``unstable`` when they did not, or keeps a
non-``ok`` status (``refused``, ``unavailable``, ``error``). For each workload unstable under
the default profile, the probe then tries each single step toward determinism
(``settings.KNOBS``) and names the ones that make it stable.

Processes start through a ``Runner`` (settings, names) -> {name: record}: tests pass a fake;
``subprocess_runner`` is the real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

from samebits.errors import ToolError
from verify.gpu.launch import run_module
from verify.gpu.workloads.settings import DEFAULT, DETERMINISTIC, KNOBS, Settings, knob

Runner = Callable[[Settings, Sequence[str]], Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeEntry:
    name: str
    deterministic: str
    default: str
    stabilised_by: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReport:
    device: str
    replicas: int
    processes: int
    entries: tuple[ProbeEntry, ...]

    def unstable(self, profile: str) -> tuple[str, ...]:
        return tuple(e.name for e in self.entries if getattr(e, profile) == "unstable")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def subprocess_runner(*, device: str, python: str = sys.executable, timeout: float = 600,
                      environ: Mapping[str, str] | None = None) -> Runner:
    """Each call starts ``python -m verify.gpu.workloads`` (``verify.gpu.launch``: a clean
    environment, this samebits' packages) and reads its JSON."""
    def run(settings: Settings, names: Sequence[str]) -> Mapping[str, Mapping[str, Any]]:
        args = ["-m", "verify.gpu.workloads", "--device", device,
                "--settings", json.dumps(settings.to_dict()), "--only", ",".join(names)]
        try:
            proc = run_module(python, args, environ=environ, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ToolError(f"probe worker ({settings.profile}) ran past {timeout:g} s") from None
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["no message"]
            raise ToolError(f"probe worker ({settings.profile}) exited {proc.returncode}: "
                            f"{tail[0]}")
        return json.loads(proc.stdout)["workloads"]
    return run


def like(profile: Settings, precision_of: Settings) -> Settings:
    """``profile``'s determinism knobs with ``precision_of``'s precision choices."""
    return replace(profile, float32_matmul_precision=precision_of.float32_matmul_precision,
                   cudnn_allow_tf32=precision_of.cudnn_allow_tf32)


def _state(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "absent"
    return f"ok {record.get('sha256')}" if record.get("status") == "ok" else str(record["status"])


def classify(records: Sequence[Mapping[str, Any] | None]) -> str:
    """"stable", "unstable", or the one non-ok status every replica ended in."""
    states = {_state(r) for r in records}
    if len(states) > 1:
        return "unstable"
    (state,) = states
    return "stable" if state.startswith("ok ") else state


def probe(names: Sequence[str], *, device: str, runner: Runner,
          base: Settings = DETERMINISTIC, replicas: int = 2, parallel: int = 1,
          progress: Callable[[str], None] | None = None) -> ProbeReport:
    """Classify ``names`` under both profiles; ``parallel`` processes may run at once.

    On a GPU keep ``parallel=1`` so each process has the device to itself (benchmark mode
    times kernels). On the CPU several at once are fine: with a fixed thread count the bits do
    not depend on load, and if they did, that is nondeterminism the probe should report.
    """
    det, default = like(DETERMINISTIC, base), like(DEFAULT, base)
    processes = 0

    def runs(*jobs: tuple[Settings, Sequence[str]]) -> list[list[Mapping[str, Any]]]:
        """``replicas`` runs of each (settings, names) job, in job order."""
        nonlocal processes
        todo = [(s, which, i) for s, which in jobs for i in range(replicas)]

        def one(job: tuple[Settings, Sequence[str], int]) -> Mapping[str, Any]:
            s, which, i = job
            if progress is not None:
                progress(f"{s.profile} process {i + 1}/{replicas}")
            return runner(s, which)

        with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
            done = list(pool.map(one, todo))
        processes += len(todo)
        return [done[j * replicas:(j + 1) * replicas] for j in range(len(jobs))]

    det_runs, def_runs = runs((det, names), (default, names))
    verdicts = {n: (classify([r.get(n) for r in det_runs]), classify([r.get(n) for r in def_runs]))
                for n in names}
    shaky = [n for n in names if verdicts[n][1] == "unstable"]
    fixes: dict[str, list[str]] = {n: [] for n in shaky}
    if shaky:
        knob_runs = runs(*((knob(default, k), shaky) for k in KNOBS))
        for k, k_runs in zip(KNOBS, knob_runs, strict=True):
            for n in shaky:
                if classify([r.get(n) for r in k_runs]) == "stable":
                    fixes[n].append(k)
    entries = []
    for n in names:
        d, f = verdicts[n]
        by: tuple[str, ...] = ()
        if f == "unstable":
            by = tuple(fixes[n]) or (("all deterministic settings together",)
                                     if d == "stable" else ())
        entries.append(ProbeEntry(name=n, deterministic=d, default=f, stabilised_by=by))
    return ProbeReport(device=device, replicas=replicas, processes=processes,
                       entries=tuple(entries))


def format_probe(report: ProbeReport) -> str:
    lines = [f"probe: {report.processes} fresh processes on device: {report.device} "
             f"({report.replicas} per profile)"]
    width = max((len(e.name) for e in report.entries), default=10)
    for e in report.entries:
        fix = f"  stable with: {', '.join(e.stabilised_by)}" if e.stabilised_by else ""
        lines.append(f"  {e.name:<{width}}  deterministic {e.deterministic:<11}  "
                     f"default {e.default:<11}{fix}")
    det, dflt = report.unstable("deterministic"), report.unstable("default")
    lines.append(f"unstable under deterministic settings: {', '.join(det) or 'none'}")
    lines.append(f"unstable under default settings: {', '.join(dflt) or 'none'}")
    return "\n".join(lines)

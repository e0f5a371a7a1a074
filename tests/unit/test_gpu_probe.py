"""verify.gpu.probe: fresh-process replicas, stability verdicts, and the knob that fixes each."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest

from verify.gpu.probe import classify, format_probe, probe
from verify.gpu.workloads.settings import Settings


def ok(d: str) -> dict:
    return {"status": "ok", "sha256": d}


@pytest.mark.parametrize(("records", "verdict"), [
    ([ok("a"), ok("a")], "stable"),
    ([ok("a"), ok("b")], "unstable"),
    ([{"status": "refused"}, {"status": "refused"}], "refused"),
    ([ok("a"), {"status": "error"}], "unstable"),
    ([None, None], "absent"),
])
def test_classify(records: list, verdict: str) -> None:
    """Replicas agree (stable), disagree (unstable), or share one non-ok status."""
    assert classify(records) == verdict


class FakeRunner:
    """A machine whose index_add flips with atomics and whose conv flips with benchmark mode."""

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __call__(self, s: Settings, names: Sequence[str]) -> Mapping[str, Mapping[str, str]]:
        self.calls.append((s.profile, tuple(names)))
        n = next(self.counter)
        out = {}
        for name in names:
            shaky = (name == "index_add" and not s.deterministic_algorithms) or (
                name == "conv2d_fp32" and s.cudnn_benchmark)
            out[name] = ok(f"{name}-{n}" if shaky else name)
        return out


@pytest.mark.parametrize("parallel", [1, 4])
def test_probe_finds_unstable_and_the_fix(parallel: int) -> None:
    """Unstable under default settings, each workload names the single knob that fixes it."""
    runner = FakeRunner()
    report = probe(["gemm_fp32", "conv2d_fp32", "index_add"], device="cuda:0", runner=runner,
                   parallel=parallel)
    by = {e.name: e for e in report.entries}
    assert report.unstable("deterministic") == ()
    assert report.unstable("default") == ("conv2d_fp32", "index_add")
    assert by["index_add"].stabilised_by == ("use_deterministic_algorithms",)
    assert by["conv2d_fp32"].stabilised_by == ("cudnn.benchmark=False",)
    assert by["gemm_fp32"].stabilised_by == ()
    assert report.processes == len(runner.calls) == 4 + 2 * 4
    assert runner.calls.count(("default+use_deterministic_algorithms",
                               ("conv2d_fp32", "index_add"))) == 2
    assert "unstable under default settings: conv2d_fp32, index_add" in format_probe(report)


def test_probe_stable_machine_runs_four_processes() -> None:
    """When nothing is unstable, only the two profiles' replicas run."""
    runner = FakeRunner()
    report = probe(["gemm_fp32"], device="cpu", runner=runner)
    assert report.processes == 4
    assert [p for p, _ in runner.calls] == ["deterministic"] * 2 + ["default"] * 2


"""samebits_app.audit.verdict: the levels as data, decide, and the runtime judgement; pure."""

from __future__ import annotations

import pytest

from samebits.errors import InputError
from samebits_app.audit.runtime import settings_of
from samebits_app.audit.verdict import LEVELS, ORDER, Step, Verdict, decide, judge_runtime
from tests.fixtures.samples import sample_facts
from verify.gpu.attest import Attestation, build_statement, parse_attestation
from verify.gpu.compare import GROUP_WHY, compare
from verify.gpu.errorstats import OutputError

DET = {"profile": "deterministic", "deterministic_algorithms": True,
       "float32_matmul_precision": "highest", "cudnn_allow_tf32": False}


def ok(digest: str) -> dict:
    return {"status": "ok", "sha256": digest * 64,
            "outputs": [{"name": "out", "dtype": "float32", "shape": [4], "sha256": digest * 64}]}


BASE = {"gemm_fp32": ok("1"), "sum_fp32": ok("2"), "randn": ok("3")}
PARALLEL = GROUP_WHY["parallel"] + " (parallel)"


def att(*, changed: dict | None = None, settings: dict = DET, source: str = "a.json",
        **facts) -> Attestation:
    doc = build_statement(facts=sample_facts(**facts), device="cpu", settings=settings,
                          workloads={**BASE, **(changed or {})}, suite_version=1,
                          environment={"environment": "e" * 64}, samebits_version="0.0.0")
    return parse_attestation(doc, source=source)


@pytest.mark.parametrize(("level", "code", "title"), [
    ("bit-identical", 0, "Reproduced: runtime bit-identical"),
    ("within-tolerance", 0, "Reproduced: the paper's results within its stated tolerances"),
    ("explained", 0, "Reproduced: runtime differs only where recorded facts explain it"),
    ("environment-identical", 0, "Environment identical (runtime not checked)"),
    ("not-reproduced", 1, "Not reproduced"),
])
def test_levels_are_data(level: str, code: int, title: str) -> None:
    """Each level has its documented exit code and title."""
    assert (LEVELS[level].exit_code, LEVELS[level].title) == (code, title)
    assert level in ORDER


@pytest.mark.parametrize(("level", "require", "code"), [
    ("bit-identical", None, 0), ("explained", None, 0), ("environment-identical", None, 0),
    ("not-reproduced", None, 1), ("explained", "bit-identical", 1),
    ("explained", "explained", 0), ("environment-identical", "explained", 1),
    ("bit-identical", "environment-identical", 0), ("within-tolerance", "bit-identical", 1),
    ("within-tolerance", "within-tolerance", 0), ("explained", "within-tolerance", 1),
    ("within-tolerance", "explained", 0), ("bit-identical", "within-tolerance", 0),
])
def test_require(level: str, require: str | None, code: int) -> None:
    """--require LEVEL: any weaker verdict exits 1."""
    assert Verdict(level=level).exit_code(require) == code


STEP_OK = Step(name="lockfile", status="ok", summary="fine", notes=("a note",))
STEP_BAD = Step(name="verify-env", status="failed", summary="drift", reasons=("x", "y"),
                notes=("a note",))


@pytest.mark.parametrize(("steps", "runtime", "level", "reasons"), [
    ((STEP_OK,), "bit-identical", "bit-identical", ()),
    ((STEP_OK,), "explained", "explained", ()),
    ((STEP_OK,), None, "environment-identical", ()),
    ((STEP_OK, STEP_BAD), "bit-identical", "not-reproduced", ("x", "y")),
])
def test_decide(steps, runtime, level, reasons) -> None:
    """Any step's reason makes it not-reproduced; else the runtime's level, else environment."""
    v = decide(steps, runtime=runtime)
    assert (v.level, tuple(r.text for r in v.reasons), v.notes) == (level, reasons, ("a note",))


@pytest.mark.parametrize(("runtime", "paper", "level"), [
    ("bit-identical", "bit-identical", "bit-identical"),
    ("explained", "bit-identical", "within-tolerance"),
    ("bit-identical", "within-tolerance", "within-tolerance"),
    ("explained", "within-tolerance", "within-tolerance"),
    ("bit-identical", "explained", "explained"),
    ("explained", "explained", "explained"),
])
def test_decide_with_a_paper(runtime: str, paper: str, level: str) -> None:
    """A paper's outputs decide the positive level: all bits and the suite's bits ->
    bit-identical; held within tolerance (suite explained or identical) -> within-tolerance;
    beyond tolerance where facts differ -> explained."""
    assert decide((STEP_OK,), runtime=runtime, paper=paper).level == level


def test_judge_identical() -> None:
    """Equal bits: bit-identical, no reasons."""
    assert judge_runtime(compare(att(), att(source="b"))) == ("bit-identical", (), ())


def test_judge_thread_count_explains_sum() -> None:
    """sum_fp32 is sensitive to the thread count: explained, with a note naming the facts."""
    level, reasons, notes = judge_runtime(compare(
        att(), att(changed={"sum_fp32": ok("f")}, threads_intra_op=1)))
    assert (level, reasons) == ("explained", ())
    assert notes == ("1 workload differs, each explained by recorded facts: sum_fp32 "
                     f"(threads.intra_op 2 → 1: {PARALLEL}; magnitude unknown: no saved outputs "
                     "or fingerprints on both sides)",)


@pytest.mark.parametrize(("errors", "bounds", "text"), [
    ((OutputError(output="sum", max_abs=2.5e-7, max_ulp=2, differing=1, total=1),), None,
     "max |Δ| 2.5e-07 in sum, 2 ULP, 1/1 elements differ"),
    ((), {"sum": 3.0e-6, "other": None},
     "max |Δ| >= 3e-06 in sum (a lower bound from fingerprints)"),
    ((), {"sum": 0.0}, "max |Δ| > 0, below what the fingerprints resolve"),
    ((), {"sum": None}, "magnitude unknown: no saved outputs or fingerprints on both sides"),
])
def test_explained_differences_carry_magnitudes(errors: tuple, bounds: dict | None,
                                                text: str) -> None:
    """An explained difference says how large it is: exact from saved outputs, a lower bound
    from fingerprints, or says that it does not know: never silently explained."""
    report = compare(att(), att(changed={"sum_fp32": ok("f")}, threads_intra_op=1),
                     errors={"sum_fp32": errors} if errors else None)
    _, _, notes = judge_runtime(report, {"sum_fp32": bounds} if bounds else None)
    assert notes == ("1 workload differs, each explained by recorded facts: sum_fp32 "
                     f"(threads.intra_op 2 → 1: {PARALLEL}; {text})",)


def test_judge_thread_count_does_not_explain_randn() -> None:
    """randn is not sensitive to the thread count: a badge must not rest on that guess."""
    level, reasons, _ = judge_runtime(compare(
        att(), att(changed={"randn": ok("f")}, threads_intra_op=1)))
    assert level == "not-reproduced"
    assert [r.alone for r in reasons] == ["randn differs, but none of the recorded facts that "
                                          "differ (threads.intra_op) is one it is known to be "
                                          "sensitive to"]


def test_judge_same_class_is_unexplained() -> None:
    """Same class, different bits: suspect a fault or undeclared drift."""
    level, reasons, _ = judge_runtime(compare(att(), att(changed={"gemm_fp32": ok("f")})))
    assert level == "not-reproduced"
    assert (reasons[0].alone or "").startswith("different bits with no recorded fact to "
                                               "explain them: gemm_fp32")


def test_judge_unknown_workload() -> None:
    """A workload only the authors ran (unknown here) is a reason."""
    authors = att(changed={"gemm_fp64": ok("9")})
    _, reasons, _ = judge_runtime(compare(authors, att(source="b")))
    assert [r.text for r in reasons] == ["the authors ran workloads this samebits does not "
                                         "know: gemm_fp64 (another suite version?)"]


@pytest.mark.parametrize(("settings", "expected"), [
    (DET, ("deterministic", "highest", False)),
    ({**DET, "float32_matmul_precision": "high", "cudnn_allow_tf32": True},
     ("deterministic", "high", True)),
    ({"profile": "default", "float32_matmul_precision": "medium"}, ("default", "medium", False)),
    # torch 1.11 (simcse's): no precision to read back, its one TF32 switch instead
    ({**DET, "float32_matmul_precision": "unavailable (torch 1.11.0+cu102 has no "
      "torch.get_float32_matmul_precision)", "cuda_matmul_allow_tf32": False},
     ("deterministic", "highest", False)),
    ({**DET, "float32_matmul_precision": "unavailable (torch 1.11.0+cu102 has no "
      "torch.get_float32_matmul_precision)", "cuda_matmul_allow_tf32": True},
     ("deterministic", "high", False)),
])
def test_settings_of(settings: dict, expected: tuple) -> None:
    """The audit reruns the attestation's profile with its precision choices."""
    s = settings_of(att(settings=settings))
    assert (s.profile, s.float32_matmul_precision, s.cudnn_allow_tf32) == expected


def test_settings_of_unknown_profile() -> None:
    """A probe knob profile cannot be rerun by name: bad input, named."""
    with pytest.raises(InputError, match=r"a\.json: predicate\.settings\.profile = "
                                         r'"default\+cudnn\.deterministic"'):
        settings_of(att(settings={**DET, "profile": "default+cudnn.deterministic"}))


def test_compare_summary_counts() -> None:
    """The compare step's summary names what it counts: 2 unavailable on both sides are not
    counted as bit-identical."""
    from samebits_app.audit.pipeline import counts_text

    both = {"randn": {"status": "unavailable"}}
    report = compare(att(changed=both), att(changed={**both, "sum_fp32": ok("f")},
                                            threads_intra_op=1))
    assert counts_text(report) == ("2 of 3 workloads ran on both sides: 1 bit-identical, "
                                   "1 explained, 0 differing; 1 unavailable (no bits on a side)")


def test_story_one_reason_per_cause() -> None:
    """A known cause lists the divergences it can explain under it; a divergence no cause
    explains stands alone, worded as such; order is the steps' order."""
    from samebits_app.audit.verdict import cause, divergence, story

    seed = cause("manifest", "train: env SEED = '1' (attested: '0')",
                 covers=("paper:train", "paper:eval"))
    reasons = story([
        seed,
        divergence("train diverged: loss", scope="paper:train", alone="train diverged alone"),
        divergence("eval diverged: acc", scope="paper:eval"),
        divergence("sum_fp32 differs", scope="suite", alone="sum_fp32 differs, unexplained"),
    ])
    assert [(r.cause, r.text, r.explains) for r in reasons] == [
        ("manifest", seed.text, ("train diverged: loss", "eval diverged: acc")),
        ("none", "sum_fp32 differs, unexplained", ())]


def test_decide_tells_one_story() -> None:
    """The code step's cause explains the paper step's divergences: the verdict lists one
    reason, the code, with the divergence under it, never the divergence beside it."""
    from samebits_app.audit.verdict import cause, divergence, step

    code = step("code", "1 of 2 files differ", [cause("code", "code differs: train.py",
                                                      covers=("paper:*",))])
    paper = step("paper", "1 command", [divergence("train diverged: loss", scope="paper:train",
                                                   alone="train diverged with no recorded "
                                                   "fact to explain it")])
    v = decide((STEP_OK, code, paper), runtime="bit-identical", paper=None)
    assert [(r.cause, r.text, r.explains) for r in v.reasons] == [
        ("code", "code differs: train.py", ("train diverged: loss",))]
    assert v.to_json()["reasons"] == [{"cause": "code", "text": "code differs: train.py",
                                       "explains": ["train diverged: loss"]}]

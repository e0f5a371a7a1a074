"""samebits_app.paper.judge: the authors' record against the reviewer's, output by output;
pure. Every verdict that is not bit-identical carries its numbers."""

from __future__ import annotations

import copy

import pytest

from samebits_app.paper.judge import (
    fingerprint_bound,
    judge_command,
    judge_output,
    series_stats,
)
from samebits_app.paper.manifest import Tolerance

STEPS = [1, 2, 3, 4]


def metrics_out(values: dict, sha: str = "a", **decl) -> dict:
    return {"output": "m.json", "kind": "metrics", "path": "m.json", "stream": None,
            "rtol": 0.0, "atol": 0.0, "save": True, "format": "json", "metrics": {},
            "sha256": sha, "values": values, **decl}


def curve_out(loss: list, sha: str = "a", **decl) -> dict:
    return {"output": "log.jsonl", "kind": "curve", "path": "log.jsonl", "stream": None,
            "rtol": 0.0, "atol": 0.01, "save": True, "format": "jsonl", "regex": None,
            "step": "step", "series": ["loss"], "sha256": sha,
            "curve": {"steps": STEPS, "series": {"loss": loss}}, **decl}


def record(*outputs: dict, **changes) -> dict:
    rec = {"run": ["python", "train.py"], "cwd": ".", "python_hash_seed": 0, "threads": None,
           "deterministic": True, "settings": {"profile": "deterministic"}, "timeout": 60.0,
           "env": {"PATH": "$BIN:/usr/bin", "SEED": "0", "OMP_NUM_THREADS": "2"},
           "inherited": ["OMP_NUM_THREADS"], "status": "ok", "exit_code": 0,
           "torch_settings": None, "outputs": list(outputs)}
    rec.update(changes)
    return rec


LOSS = [2.0, 1.5, 1.0, 0.5]


@pytest.mark.parametrize(("a", "b", "tol", "stats"), [
    (LOSS, LOSS, Tolerance(atol=0.01), {"first_diff": None, "first_beyond": None,
                                         "max_dev": 0.0, "within": True}),
    (LOSS, [2.0, 1.5, 1.001, 0.5005], Tolerance(atol=0.01),
     {"first_diff": 3, "first_beyond": None, "max_dev": pytest.approx(0.001),
      "max_dev_step": 3, "final_dev": pytest.approx(0.0005), "final_step": 4, "within": True}),
    (LOSS, [2.0, 1.7, 1.0, 0.9], Tolerance(atol=0.01),
     {"first_diff": 2, "first_beyond": 2, "max_dev": pytest.approx(0.4), "max_dev_step": 4,
      "within": False}),
    (LOSS, [2.0, 1.5, 1.0, float("nan")], Tolerance(atol=1.0),
     {"first_diff": 4, "first_beyond": 4, "max_dev": float("inf"), "within": False}),
])
def test_series_stats(a: list, b: list, tol: Tolerance, stats: dict) -> None:
    """First differing step, first step beyond tolerance, max deviation and where, final."""
    got = series_stats(STEPS, a, STEPS, b, tol)
    assert {k: got[k] for k in stats} == stats


def test_missing_steps_are_not_within() -> None:
    """A reviewer's run that stopped early is not within tolerance, whatever the values."""
    got = series_stats(STEPS, LOSS, STEPS[:2], LOSS[:2], Tolerance(atol=1.0))
    assert (got["only_authors"], got["within"]) == (2, False)


@pytest.mark.parametrize(("b", "level", "summary"), [
    (metrics_out({"acc": 0.9, "loss": 0.25}), "bit-identical",
     "m.json: the same bytes (sha256 a)"),
    (metrics_out({"acc": 0.9, "loss": 0.2501}, sha="b"), "within-tolerance",
     "m.json: 2 metric(s) within tolerance; closest call loss: 0.2501 vs 0.25 (|Δ| 0.0001, rel "
     "0.0004; rtol 0.001, atol 0)"),
    (metrics_out({"acc": 0.8, "loss": 0.25}, sha="b"), "beyond-tolerance",
     "m.json: acc = 0.8, the authors' 0.9 (|Δ| 0.1, rel 0.111111; rtol 0.001, atol 0)"),
    (metrics_out({"loss": 0.25}, sha="b"), "beyond-tolerance",
     "m.json: acc is missing from the reviewer's file"),
    ({**metrics_out({}), "missing": True}, "missing",
     "m.json was not written by the reviewer's run"),
    ({**metrics_out({}, sha="b"), "error": "not JSON: x"}, "unreadable", "m.json: not JSON: x"),
])
def test_metric_verdicts(b: dict, level: str, summary: str) -> None:
    """Metrics: the attested tolerance decides; the metric beyond it is named with numbers."""
    a = metrics_out({"acc": 0.9, "loss": 0.25}, rtol=0.001)
    v = judge_output(a, b)
    assert (v.level, v.summary) == (level, summary)


def test_reviewer_cannot_loosen_the_tolerance() -> None:
    """The authors' declaration is the one used, and a changed one is a reason."""
    a = record(metrics_out({"acc": 0.9}, rtol=0.001))
    b = record(metrics_out({"acc": 0.5}, sha="b", rtol=1.0))
    v = judge_command("train", a, b, class_facts=())
    assert v.level == "diverged"
    # the one key that changed, as the manifest writes it (a raw dict of every key before)
    assert v.changes[0] == ("train: the command is not the one the authors ran: output "
                            "m.json: rtol = 1.0 (attested: 0.001)")
    assert "acc = 0.5, the authors' 0.9" in v.reasons[0]


def test_curve_names_the_step() -> None:
    """A curve beyond tolerance names the series, the first differing step and the step where
    it leaves the tolerance, with the deviations."""
    v = judge_output(curve_out(LOSS), curve_out([2.0, 1.5, 1.2, 0.7], sha="b"))
    assert v.level == "beyond-tolerance"
    assert v.summary == ("log.jsonl: loss: first differs at step 3, max |Δ| 0.2 at step 3, "
                         "final |Δ| 0.2 at step 4; beyond tolerance from step 3 (rtol 0, "
                         "atol 0.01)")
    assert v.curves["loss"]["first_diff"] == 3


@pytest.mark.parametrize(("facts", "level", "in_reasons"), [
    (("threads.intra_op",), "explained", False),
    ((), "diverged", True),
])
def test_explained_needs_a_differing_fact(facts: tuple, level: str, in_reasons: bool) -> None:
    """Beyond tolerance is explained only where a recorded fact differs, with the numbers in
    the note; in the same class it is a divergence, a reason."""
    a, b = record(curve_out(LOSS)), record(curve_out([2.0, 1.6, 1.0, 0.5], sha="b"))
    v = judge_command("train", a, b, class_facts=facts)
    assert v.level == level
    text = ("log.jsonl: loss: first differs at step 2, max |Δ| 0.1 at step 2, final |Δ| 0 at "
            "step 4; beyond tolerance from step 2 (rtol 0, atol 0.01)")
    assert any(text in r for r in (v.reasons if in_reasons else v.notes))


def test_inherited_thread_count_explains() -> None:
    """A numerics variable the command inherited (OMP_NUM_THREADS) is a fact that differs."""
    b = record(curve_out([2.0, 1.6, 1.0, 0.5], sha="b"),
               env={"PATH": "$BIN:/usr/bin", "SEED": "0", "OMP_NUM_THREADS": "1"})
    v = judge_command("train", record(curve_out(LOSS)), b, class_facts=())
    assert (v.level, v.facts, v.reasons) == ("explained", ("env.OMP_NUM_THREADS",), ())


def test_changed_seed_is_named() -> None:
    """A variable the manifest sets that differs from the attested one is a reason."""
    b = record(curve_out(LOSS), env={"PATH": "$BIN:/usr/bin", "SEED": "1",
                                     "OMP_NUM_THREADS": "2"})
    v = judge_command("train", record(curve_out(LOSS)), b, class_facts=())
    assert (v.changes, v.reasons) == (("train: the command is not the one the authors ran: "
                                       "env SEED = '1' (attested: '0')",), ())


TRACE = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
         "    main()", "ValueError: boom"]


@pytest.mark.parametrize(("status", "extra", "text"), [
    ("failed", {"exit_code": 3, "tail": TRACE},
     "train: `python train.py` failed (exit 3): ValueError: boom (4 lines of its output in "
     "audit.json)"),
    ("timed-out", {"exit_code": None, "tail": ["step 5"]},
     "train: `python train.py` ran past its timeout of 60 s: step 5"),
])
def test_failed_command(status: str, extra: dict, text: str) -> None:
    """A command that fails or times out is a reason quoting its last line short; its last
    lines are kept whole, each as printed (a traceback is not flattened onto one line)."""
    b = record(curve_out(LOSS), status=status, **extra)
    v = judge_command("train", record(curve_out(LOSS)), b, class_facts=())
    assert (v.level, v.reasons, v.tail) == ("failed", (text,), tuple(extra["tail"]))


def tensor_out(tensors: dict, sha: str) -> dict:
    return {"output": "model.pt", "kind": "tensors", "path": "model.pt", "stream": None,
            "rtol": 0.0, "atol": 1e-3, "save": True, "sha256": sha, "tensors": tensors}


FP = {"n": 4, "sum": 10.0, "abs_max": 4.0, "samples": [[0, 1.0], [1, 2.0], [2, 3.0], [3, 4.0]]}


def test_tensors_without_the_authors_file() -> None:
    """Without the authors' file the differing tensors are named from the digests, with a lower
    bound from the fingerprints, and the tolerance is said to be uncheckable."""
    fp_b = copy.deepcopy(FP)
    fp_b["samples"][2][1] = 3.5
    fp_b["sum"] = 10.5
    a = tensor_out({"w": {"sha256": "1", "fingerprint": FP}, "b": {"sha256": "2"}}, "x")
    b = tensor_out({"w": {"sha256": "9", "fingerprint": fp_b}, "b": {"sha256": "2"}}, "y")
    v = judge_output(a, b, None)
    assert (v.level, v.summary) == (
        "beyond-tolerance", "model.pt: 1 of 2 tensor(s) differ: w (|Δ| >= 0.5); the tolerance "
        "cannot be checked: the authors' file is not among the shipped outputs")


def test_tensors_with_the_worker_comparison() -> None:
    """With the worker's comparison: the worst tensor, its index and both values."""
    row = {"name": "head.weight", "dtype": "float32", "shape": [4, 8], "total": 32,
           "same": False, "differing": 1, "beyond": 1, "within": False, "max_abs": 0.5,
           "max_rel": 0.25, "max_ulp": 4194304, "index": [2, 5], "authors": 2.0,
           "reviewer": 2.5}
    same = {"name": "head.bias", "same": True, "within": True, "total": 4, "differing": 0,
            "beyond": 0}
    v = judge_output(tensor_out({}, "x"), tensor_out({}, "y"),
                     {"tensors": [same, row], "only_authors": [], "only_reviewer": []})
    # rel and ulp are the tensor's largest, not the element's: said so
    assert v.summary == ("model.pt: 2 tensor(s), 1 differ; largest |Δ| in head.weight at index "
                         "[2, 5]: 2 -> 2.5 (|Δ| 0.5; the tensor's largest: rel 0.25, 4194304 "
                         "ulp); beyond rtol 0, atol 0.001: head.weight (1 of 32 beyond)")


@pytest.mark.parametrize(("fb", "bound"), [
    ({**FP, "samples": [[0, 1.0], [1, 2.25], [2, 3.0], [3, 4.0]], "sum": 10.25}, 0.25),
    ({**FP, "sum": 14.0}, 1.0),           # the samples agree; the sum moved by 4 over 4
    ({**FP, "abs_max": 6.0}, 2.0),        # the largest magnitude moved by 2
    ({**FP, "n": 5}, None),               # another shape: no bound
])
def test_fingerprint_bound(fb: dict, bound: float | None) -> None:
    """The bound is the largest of the samples' differences, |Δsum|/n and |Δmax|x||."""
    assert fingerprint_bound(FP, fb) == bound


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(("a", "b", "tol", "within"), [
    (INF, 0.5, Tolerance(rtol=0.1), False),          # rtol * inf allowed anything
    (INF, -INF, Tolerance(rtol=0.1), False),
    (-INF, 3.0, Tolerance(rtol=1.0, atol=1.0), False),
    (0.5, INF, Tolerance(rtol=0.1, atol=1.0), False),
    (INF, INF, Tolerance(), True),
    (-INF, -INF, Tolerance(rtol=0.1), True),
    (NAN, NAN, Tolerance(rtol=0.1, atol=1.0), False),  # NaN is equal to nothing
    (NAN, 1.0, Tolerance(rtol=0.1, atol=1.0), False),
    (1.0, NAN, Tolerance(rtol=0.1, atol=1.0), False),
    (1.0, 1.05, Tolerance(rtol=0.1), True),
    (1.0, 1.05, Tolerance(atol=INF), False),          # a non-finite tolerance allows nothing
    (1.0, 1.05, Tolerance(rtol=NAN), False),
    (1.0, 1.0, Tolerance(atol=-1.0), False),
])
def test_tolerance_of_non_finite_values(a: float, b: float, tol: Tolerance,
                                        within: bool) -> None:
    """A non-finite value is within tolerance only of the same value, NaN of nothing."""
    assert tol.allows(a, b) is within


@pytest.mark.parametrize("reviewer", [0.5, "-inf", "nan"])
def test_infinite_authors_metric_is_beyond_tolerance(reviewer: object) -> None:
    """Authors' {"acc": Infinity} against any other reviewer value: beyond tolerance, for a
    metric and for a curve."""
    metric = judge_output(metrics_out({"acc": "inf"}, sha="a", rtol=0.1),
                          metrics_out({"acc": reviewer}, sha="b", rtol=0.1))
    assert metric.level == "beyond-tolerance", metric.summary
    curve = judge_output(curve_out([2.0, "inf", 1.0, 0.5], sha="a", rtol=0.1),
                         curve_out([2.0, reviewer, 1.0, 0.5], sha="b", rtol=0.1))
    assert curve.level == "beyond-tolerance", curve.summary
    assert "beyond tolerance from step 2" in curve.summary

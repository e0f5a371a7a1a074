"""samebits_app.paper.values: metrics and curves out of JSON, CSV, YAML and text; pure."""

from __future__ import annotations

import math

import pytest

from samebits_app.paper.manifest import OutputSpec
from samebits_app.paper.values import curve, metrics
from tests.fixtures.samples import EVIL, EVIL_LINE


@pytest.mark.parametrize(("text", "fmt", "expected"), [
    ('{"acc": 0.9, "eval": {"loss": 1.5, "n": 3, "ok": true, "name": "x"}, "l": [1, 2]}',
     "json", {"acc": 0.9, "eval.loss": 1.5, "eval.n": 3, "l.0": 1, "l.1": 2}),
    ("acc: 0.9\neval:\n  loss: 1.5e-3\n  tag: run\n", "yaml", {"acc": 0.9, "eval.loss": 1.5e-3}),
    ("epoch,acc,loss,note\n1,0.5,2.0,a\n2,0.75,1.25,b\n", "csv",
     {"epoch": 2, "acc": 0.75, "loss": 1.25}),
])
def test_metrics(text: str, fmt: str, expected: dict) -> None:
    """Numbers flattened to dotted names; booleans and text are not metrics; CSV: last row."""
    assert metrics(text, fmt) == expected


@pytest.mark.parametrize(("text", "fmt", "message"), [
    ("{", "json", "not JSON: "),
    ("a: [", "yaml", "not YAML: "),
    ("only,a,header\n", "csv", "expected a CSV header row and at least one row of values"),
])
def test_bad_metrics(text: str, fmt: str, message: str) -> None:
    """A metrics file that is not its format says so."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        metrics(text, fmt)


JSONL = OutputSpec(kind="curve", path="log.jsonl", fmt="jsonl", step="step")


@pytest.mark.parametrize(("text", "spec", "expected"), [
    ('{"step": 1, "loss": 2.0, "lr": 0.1}\n\n{"step": 2, "loss": 1.5, "lr": 0.1}\n', JSONL,
     {"steps": [1, 2], "series": {"loss": [2.0, 1.5], "lr": [0.1, 0.1]}}),
    ('{"step": 1, "loss": 2.0}\n{"step": 2, "acc": 0.5}\n{"step": 1, "loss": 1.9}\n',
     JSONL, {"steps": [1, 2], "series": {"acc": [None, 0.5], "loss": [1.9, None]}}),
    ("step,loss\n10,0.5\n20,0.25\n", OutputSpec(kind="curve", path="l.csv", fmt="csv"),
     {"steps": [10, 20], "series": {"loss": [0.5, 0.25]}}),
    ("warming up\nstep 1 loss 2.5 acc 0.1\nstep 2 loss nan acc 0.2\ndone\n",
     OutputSpec(kind="curve", stream="stdout", fmt="regex", series=("loss", "acc"),
                regex=r"step (\d+) loss (\S+) acc (\S+)"),
     {"steps": [1, 2], "series": {"acc": [0.1, 0.2], "loss": [2.5, math.nan]}}),
    ("it=3 l=0.5\nit=4 l=0.25\n",
     OutputSpec(kind="curve", stream="stdout", fmt="regex", step="it", series=("l",),
                regex=r"it=(?P<it>\d+) l=(?P<l>\S+)"),
     {"steps": [3, 4], "series": {"l": [0.5, 0.25]}}),
])
def test_curves(text: str, spec: OutputSpec, expected: dict) -> None:
    """JSON lines, CSV and a regex over text all give steps and aligned series; a step logged
    twice keeps its last value; a series missing at a step is None there."""
    got = curve(text, spec)
    assert got["steps"] == expected["steps"]
    for name, values in expected["series"].items():
        assert [("nan" if isinstance(v, float) and math.isnan(v) else v)
                for v in got["series"][name]] == [
            ("nan" if isinstance(v, float) and math.isnan(v) else v) for v in values]


@pytest.mark.parametrize(("text", "spec", "message"), [
    ("not json\n", JSONL, "line 1: not a JSON object: 'not json'"),
    ('{"loss": 1}\n', JSONL, "no points: no row has a numeric 'step'"),
    ("nothing here\n", OutputSpec(kind="curve", stream="stdout", fmt="regex",
                                  regex=r"step (\d+) (\S+)", series=("x",)),
     r"no points: no line matches the regex step (\d+) (\S+)"),
    ("step 1 loss abc\n", OutputSpec(kind="curve", stream="stdout", fmt="regex",
                                     regex=r"step (\d+) loss (\S+)", series=("loss",)),
     "loss = 'abc' is not a number in 'step 1 loss abc'"),
])
def test_bad_curves(text: str, spec: OutputSpec, message: str) -> None:
    """A curve with no points or a value that is not a number says which line."""
    with pytest.raises(ValueError) as info:
        curve(text, spec)
    assert str(info.value) == message


def test_a_backtracking_regex_is_cut_off() -> None:
    """A curve regex that backtracks without end is stopped at its time limit: the output is
    unreadable (a ValueError naming the regex and the line), not a hang."""
    import time

    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        curve(f"warming up\n{EVIL_LINE}\n", EVIL, regex_seconds=0.2)
    assert time.monotonic() - start < 30  # the 0.2 s limit ends it; the rest: a busy machine
    assert str(info.value) == (
        r"the regex '(\\d+) ((?:a|aa)+)+x$' ran past its time limit of 0.2 s (at line 2); a "
        "pattern that cannot backtrack without end reads the same lines in microseconds")

"""samebits_app.paper.svg and the attestation's optional keys: pure, byte-stable."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from samebits_app.paper.svg import curve_svg, nice_ticks
from tests.fixtures.samples import sample_facts
from verify.gpu.attest import build_statement, parse_attestation, statement_bytes

STEPS = list(range(1, 11))
A = [1.0 / s for s in STEPS]
B = A[:4] + [a + 1e-6 * i for i, a in enumerate(A[4:], 1)]


def curve(b: list, first_diff: int | None, first_beyond: int | None = None) -> dict:
    return {"authors": {"steps": STEPS, "values": A}, "reviewer": {"steps": STEPS, "values": b},
            "first_diff": first_diff, "first_beyond": first_beyond}


def test_svg_draws_both_and_marks_the_step() -> None:
    """Valid SVG: the authors' and reviewer's polylines (one point per step), the first
    differing step and the first beyond tolerance marked and labelled, the deviations."""
    svg = curve_svg("log: loss", curve(B, 5, 8))
    root = ET.fromstring(svg)
    ns = {"s": "http://www.w3.org/2000/svg"}
    lines = {p.get("class"): p.get("points").split() for p in root.iter(
        "{http://www.w3.org/2000/svg}polyline")}
    assert (len(lines["authors"]), len(lines["reviewer"])) == (10, 10)
    labels = [t.text for t in root.findall(".//s:text", ns)
              if (t.get("class") or "").endswith("-label")]
    assert labels == ["first differs: step 5", "beyond tolerance: step 8"]
    assert len(root.findall(".//s:g[@class='deviation']/s:circle", ns)) == 6
    assert "<script" not in svg


def test_svg_same_curves() -> None:
    """No difference: no marker, and the deviation panel says so."""
    svg = curve_svg("x", curve(A, None))
    assert "first-diff" not in svg and "no step differs" in svg


def test_svg_is_byte_stable() -> None:
    """The same curve gives the same bytes."""
    assert curve_svg("t", curve(B, 5)) == curve_svg("t", curve(list(B), 5))


def test_svg_survives_nan_and_one_point() -> None:
    """NaN values are left out of the drawing; a single step draws without dividing by 0."""
    nan = curve([*A[:9], float("nan")], 10)
    assert 'class="reviewer"' in curve_svg("t", nan)
    one = {"authors": {"steps": [1], "values": [2.0]}, "reviewer": {"steps": [1],
                                                                    "values": [2.0]},
           "first_diff": None, "first_beyond": None}
    assert re.search(r'class="authors"[^>]*points="[0-9.]+,[0-9.]+"', curve_svg("t", one))


@pytest.mark.parametrize(("lo", "hi", "ticks"), [
    (0.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (0.013, 0.048, [0.02, 0.03, 0.04]),
    (5.0, 5.0, [5.0]),
])
def test_nice_ticks(lo: float, hi: float, ticks: list) -> None:
    """Round values across the range."""
    assert nice_ticks(lo, hi) == pytest.approx(ticks)


def test_statement_keys_are_optional() -> None:
    """fingerprints and paper are written only when given (a statement without them keeps its
    bytes) and read back as they were."""
    common = {"facts": sample_facts(), "device": "cpu", "settings": {"profile": "x"},
              "workloads": {"sum_fp32": {"status": "ok", "sha256": "0" * 64}},
              "suite_version": 1, "environment": {"environment": "e" * 64},
              "samebits_version": "0.0.0"}
    plain = build_statement(**common)
    assert set(plain["predicate"]) == {"format", "samebits", "device", "suite_version", "lock",
                                       "facts", "settings", "workloads"}
    paper = {"format": 1, "commands": {"train": {"run": ["python"]}}}
    full = build_statement(**common, fingerprints={"sum_fp32": {"sum": {"n": 1}}}, paper=paper)
    att = parse_attestation(full, source="a.json")
    assert (att.paper, att.fingerprints) == (paper, {"sum_fp32": {"sum": {"n": 1}}})
    assert parse_attestation(plain, source="p.json").paper is None
    assert statement_bytes(plain) != statement_bytes(full)

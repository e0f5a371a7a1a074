"""Words for messages: quote, clip and plural, shared by every module that writes an error."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from samebits.errors import LockfileError, Problem, SpecError, clip, plural, quote

QUOTES = [
    ("a short string", "numpy>=>2", '"numpy>=>2"'),
    ("quotes and newlines escaped", 'a "b"\nc', '"a \\"b\\"\\nc"'),
    ("not a string", 12, "12"),
    ("a TOML date", dt.date(2026, 1, 1), "2026-01-01"),
    ("a TOML time", dt.datetime(2026, 1, 1, 12, 30), "2026-01-01T12:30:00"),
    ("a megabyte", "x" * 1_000_000, f'"{"x" * 75}..." (1,000,000 characters)'),
    ("cut at a word", "torch==2.13.0 " * 10,
     '"torch==2.13.0 torch==2.13.0 torch==2.13.0 torch==2.13.0 torch==2.13.0..." '
     "(140 characters)"),
    ("a big list", list(range(50)),
     "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20... "
     "(190 characters)"),
]


@pytest.mark.parametrize(("value", "expected"), [q[1:] for q in QUOTES],
                         ids=[q[0] for q in QUOTES])
def test_quote(value: object, expected: str) -> None:
    """A value as errors show it: whole when short, else ~80 characters and its length."""
    assert quote(value) == expected


CLIPS = [
    ("fits", "EFFICIENT_ATTENTION has no CPU kernel", 40,
     "EFFICIENT_ATTENTION has no CPU kernel"),
    ("cut at a space, never inside EFFICIENT_ATTENTION", "EFFICIENT_ATTENTION has no CPU kernel",
     30, "EFFICIENT_ATTENTION has no..."),
    ("one long word has no boundary", "EFFICIENT_ATTENTION has no CPU kernel", 16,
     "EFFICIENT_ATT..."),
    ("cut after punctuation", "no kernel for this device, dtype or settings", 30,
     "no kernel for this device..."),
]


@pytest.mark.parametrize(("text", "limit", "expected"), [c[1:] for c in CLIPS],
                         ids=[c[0] for c in CLIPS])
def test_clip(text: str, limit: int, expected: str) -> None:
    """Free text fits the limit, cut at a word boundary where there is one."""
    assert clip(text, limit) == expected
    assert len(clip(text, limit)) <= limit


@pytest.mark.parametrize(("n", "words", "expected"), [
    (0, ("package",), "0 packages"), (1, ("package",), "1 package"),
    (2, ("package",), "2 packages"), (1, ("class", "classes"), "1 class"),
    (3, ("class", "classes"), "3 classes"), (21026, ("file",), "21,026 files"),
])
def test_plural(n: int, words: tuple[str, ...], expected: str) -> None:
    """One package, two packages."""
    assert plural(n, *words) == expected


def test_problems_in_one_file_name_it_once() -> None:
    """A lockfile's problems name the file once; a spec's name each file (extends chains)."""
    problems = [Problem(file="x.yml", key="package[0] a (linux-64): hash.md5", value="zz",
                        message="not a md5"),
                Problem(file="x.yml", key="package[1] b (linux-64): url", value=None,
                        message="missing")]
    assert LockfileError(problems).message == (
        'x.yml: 2 problems:\n  package[0] a (linux-64): hash.md5 = "zz": not a md5\n'
        "  package[1] b (linux-64): url: missing")
    assert SpecError(problems).message == (
        '2 problems:\n  x.yml: package[0] a (linux-64): hash.md5 = "zz": not a md5\n'
        "  x.yml: package[1] b (linux-64): url: missing")


def test_problems_in_json_hold_any_value() -> None:
    """--json problems carry a value JSON cannot hold (a TOML date) as its text."""
    err = SpecError([Problem(file="x.toml", key="python", value=dt.date(2026, 1, 1),
                             message="must be a non-empty string")])
    assert err.message == "x.toml: python = 2026-01-01: must be a non-empty string"
    assert json.loads(json.dumps(err.to_json()))["problems"][0]["value"] == "2026-01-01"

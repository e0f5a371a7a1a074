"""RECORD's fast row reader is the csv module's, row for row, on every RECORD at hand and on
the corner cases (quotes, carriage returns, NULs, empty lines, other line breaks)."""

from __future__ import annotations

import csv
import io
import random
import sys
from pathlib import Path

import pytest

from verify.env.records import _record_rows

CORNERS = ["a,b,c\n", "a,,\n", "\n", "x\n\ny,1,2", '"a,b",c,d\ne,f,g\n', "a,b,c\r\nd,e,f\r\n",
           'a,b\n"q\nr",s\nt,u\n', "lonely", "a,b,c\n\n\nd", "a\rb,c\n", " a , b ,c\n",
           "a,b,c,d,e\n", "é,ü,\n", "a,b\x0bc\n", "a\x0cb\n", "a\x1cb,c\n", "a\u2028b,c\n",
           "a,b\x85c\n", "\r\n", "a,b\r", "a\x00b,c\n", "", ",\n", ",,,", "a\n\n", "\n\n\n"]


def _rows(reader, text: str):
    try:
        return list(reader(text))
    except csv.Error as exc:
        return f"csv.Error: {exc}"


def _both(text: str) -> None:
    assert _rows(_record_rows, text) == _rows(lambda t: csv.reader(io.StringIO(t)), text), text


@pytest.mark.parametrize("text", CORNERS)
def test_corner_cases(text: str) -> None:
    _both(text)


def test_random_texts() -> None:
    rng = random.Random(26)
    alphabet = ['a', 'b', ',', '\n', '"', '\r', ' ', '\x0b', '\u2028', '=', '/']
    for _ in range(5000):
        _both("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))))


def test_real_records() -> None:
    records = sorted(Path(sys.prefix).glob("lib/python*/site-packages/*.dist-info/RECORD"))
    assert records
    for path in records:
        _both(path.read_text(encoding="utf-8"))

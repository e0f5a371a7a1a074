"""``python -m tests.bench``: names checked before anything runs; the load waited out between
benchmarks, within a limit, and said."""

from __future__ import annotations

import os

import pytest

from tests.bench import __main__ as bench


def test_an_unknown_name_stops_before_any_benchmark_runs(capsys: pytest.CaptureFixture
                                                         ) -> None:
    assert bench.main(["lock", "no-such-bench"]) == 2
    out = capsys.readouterr()
    assert "== bench" not in out.out
    assert "unknown benchmark 'no-such-bench'" in out.err


def test_settle_returns_at_once_below_the_target(capsys: pytest.CaptureFixture) -> None:
    now = os.getloadavg()[0]
    assert bench.settle(limit=0, target=now + 100) <= now + 100
    assert capsys.readouterr().out == ""


def test_settle_gives_up_at_its_limit_and_says_so(capsys: pytest.CaptureFixture) -> None:
    bench.settle(limit=0, target=-1)  # no load average is below -1
    out = capsys.readouterr().out
    assert "waiting for the load average" in out and "starting anyway" in out


def test_settle_says_whose_load_it_waits_out(capsys: pytest.CaptureFixture) -> None:
    """``install`` waits out its own untimed fills (a copy of 4.7 GB leaves load 3) before its
    first timed round, with the same wait, naming them."""
    from tests.bench import settle

    settle(limit=0, target=-1, left_by="this bench's untimed fills'")
    assert "this bench's untimed fills'" in capsys.readouterr().out

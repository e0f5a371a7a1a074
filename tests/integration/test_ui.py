"""Output: where results, notes and progress go (terminal, pipe, --quiet, --json)."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import threading

import pytest

from samebits.ui import Output


# The same steps, run against every kind of Output below.
def _work(out: Output) -> None:
    with out.phase("reading 3 lockfiles"):
        with out.progress("hashing", total=3) as advance:
            for name in ("a", "b", "c"):
                advance(description=f"hashing {name}")
        out.info("a note")


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, "reading 3 lockfiles ...\nhashing ...\na note\n"),
    ({"quiet": True}, ""),
    ({"json_mode": True}, "a note\n"),
    ({"json_mode": True, "quiet": True}, ""),
])
def test_piped_output_is_one_line_per_step(kwargs: dict, expected: str) -> None:
    """Piped, each phase and bar is one line when it starts; --quiet and --json show none."""
    err = io.StringIO()
    _work(Output(stderr=err, live=False, **kwargs))
    assert err.getvalue() == expected


def test_live_output_draws_rows_and_clears_them() -> None:
    """On a terminal each open step is a row with its name; the rows are gone at the end."""
    err = io.StringIO()
    out = Output(stderr=err, live=True)
    _work(out)
    text = err.getvalue()
    assert "reading 3 lockfiles" in text and "a note" in text
    assert "\x1b[" in text  # drawn with cursor controls, not as plain lines
    assert "reading 3 lockfiles ..." not in text
    assert out._bar is None  # the display stopped with the last step


def test_advance_from_threads() -> None:
    """advance may be called from worker threads; the count adds up."""
    err = io.StringIO()
    out = Output(stderr=err, live=True)
    with out.progress("counting", total=4000) as advance:
        threads = [threading.Thread(target=lambda: [advance() for _ in range(1000)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        bar = out._bar
        assert bar is not None
        assert [t.completed for t in bar.tasks] == [4000]


def test_a_step_that_raises_still_clears_the_display() -> None:
    """An exception inside a step (a failed solve, ^C) leaves no display running."""
    out = Output(stderr=io.StringIO(), live=True)
    with pytest.raises(KeyboardInterrupt), out.phase("solving"):
        raise KeyboardInterrupt
    assert out._bar is None


SCRIPT = """
import time
from samebits.ui import Output
out = Output()
with out.phase("solving hopper"):
    time.sleep(0.5)
print("done")
"""


def _run_in_pty(argv: list[str]) -> str:
    """Run argv with stdout and stderr on a pseudo-terminal; return what it showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=30)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_a_real_terminal_gets_a_spinner_and_a_pipe_gets_a_line() -> None:
    """The same program: on a pty a redrawn spinner row, through a pipe one plain line."""
    shown = _run_in_pty([sys.executable, "-c", SCRIPT])
    assert "solving hopper" in shown and "\x1b[" in shown and "done" in shown
    assert "solving hopper ..." not in shown
    piped = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                           check=True)
    assert (piped.stdout, piped.stderr) == ("done\n", "solving hopper ...\n")


def test_steps_from_a_callback() -> None:
    """steps(): each callback call ends the previous step; piped, one line per step."""
    err = io.StringIO()
    out = Output(stderr=err, live=False)
    with out.steps("audit: ") as step:
        step("environment")
        step("verify env")
    assert err.getvalue() == "audit: environment ...\naudit: verify env ...\n"
    live = Output(stderr=io.StringIO(), live=True)
    with live.steps() as step:
        step("one")
        assert live._bar is not None and [t.description for t in live._bar.tasks] == ["one"]
        step("two")
        assert [t.description for t in live._bar.tasks] == ["two"]
    assert live._bar is None

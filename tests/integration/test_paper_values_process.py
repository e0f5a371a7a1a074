"""A curve regex that backtracks without end, read by a fresh samebits process through the
default time limit (README "The paper manifest"): the read ends by itself (the in-process
rules: tests/unit/test_paper_values.py)."""

from __future__ import annotations

import pytest

from tests.fixtures import ROOT


@pytest.mark.slow
def test_a_backtracking_regex_cannot_hang_samebits() -> None:
    """Through the default limit (docs/reference/paper-manifest.md): the read ends by itself."""
    import subprocess
    import sys

    code = ("from tests.fixtures.samples import EVIL, EVIL_LINE\n"
            "from samebits_app.paper.values import curve\n"
            "try:\n    curve(EVIL_LINE, EVIL)\nexcept ValueError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert "ran past its time limit of 10 s (at line 1)" in proc.stdout, proc.stderr

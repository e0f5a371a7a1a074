"""What an install learns of the interpreter that compiles its bytecode, kept and proved by a
stat (``samebits.install.interpreter.probe_known``): the probe and the sha256 of the binary are
taken from the memo only while the binary's stat is the remembered one, never for a shim."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from samebits.install import interpreter
from samebits.install.interpreter import FACTS, find_interpreter, probe_known


def _copied_venv(tmp_path: Path) -> str:
    """A venv whose bin/python is a copy of this interpreter's binary (a file of its own,
    whose stat the test may move)."""
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip",
                    str(tmp_path / "v")], check=True, timeout=120)
    return str(tmp_path / "v" / "bin" / "python")


def test_the_facts_are_kept_and_proved_by_the_binarys_stat(tmp_path: Path, monkeypatch) -> None:
    python = _copied_venv(tmp_path)
    facts = tmp_path / "facts"
    first = probe_known(python, facts, env={"PYTHONHASHSEED": "0"})
    assert not isinstance(first, str)
    found, identity = first
    assert found.line == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert identity == found.identity() and identity["binary_sha256"]
    assert len(list((facts / FACTS).glob("*.json"))) == 1

    monkeypatch.setattr(interpreter, "probe", lambda *a, **k: "probed again")
    assert probe_known(python, facts) == first  # nothing ran
    assert find_interpreter(found.line, python, facts=facts) == found  # --python, the same
    os.chmod(python, 0o755)  # the same mode: only the ctime moved
    assert probe_known(python, facts) == "probed again"
    assert probe_known(python, None) == "probed again"  # no folder: always probed


def test_a_shim_is_never_taken_for_the_interpreter_it_runs(tmp_path: Path) -> None:
    python = _copied_venv(tmp_path)
    shim = tmp_path / "python3-shim"
    shim.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    shim.chmod(0o755)
    facts = tmp_path / "facts"
    got = probe_known(str(shim), facts)
    assert not isinstance(got, str) and got[0].executable == python
    assert not (facts / FACTS).exists()  # what answered is not the file named: not kept

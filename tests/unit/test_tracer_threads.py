"""A thread started while a tracer is set (coverage in ``nox -s tests``, a debugger) survives
once samebits and everything it imports are loaded (conda-lock's modules too, which
samebits imports when it first reads a lock).

On CPython < 3.12 ``sys.settrace`` refuses to run while another thread is inside it ("Cannot
install a trace function while another trace function is being installed", python/cpython
#98257), and it raises the ``sys.settrace`` audit event inside that guard: a Python audit hook
lets the GIL pass to a thread whose bootstrap calls ``sys.settrace`` too, and that thread dies
before its target runs. filelock 3.30 to 4.0 (conda-lock imports it) add such a hook; CI lost a
ThreadPoolExecutor worker of ``samebits install`` to it under coverage, so the test extra keeps
filelock below 3.30 there (pyproject.toml). The probe starts many threads that set a tracer,
with the GIL handed over every microsecond; a control run with a Python audit hook of its own
proves the probe finds the race on this interpreter.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.unit.test_package import ROOT

pytestmark = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info >= (3, 12),
    reason="CPython >= 3.12 has no process-wide settrace guard to race")

PROBE = r"""
import importlib, sys, threading
from pathlib import Path
mode = sys.argv[1]
if mode == "samebits":  # every module of the three packages, so every dependency they import
    from tests.unit.test_package import PACKAGES, _modules
    for name in PACKAGES:
        for module in _modules(name):
            importlib.import_module(module)
    from samebits.lock.model import parse_lock, validate_lock  # conda-lock, imported when used
    validate_lock(parse_lock(Path(sys.argv[3])))
    assert "conda_lock" in sys.modules
    import coverage, hypothesis, pytest, virtualenv, xdist  # what a test worker loads besides
else:
    sys.addaudithook(lambda event, args: None)  # the control: a Python audit hook
died = []
sys.unraisablehook = lambda hook: died.append(repr(hook.exc_value))  # where _bootstrap reports
threading.excepthook = lambda hook: died.append(repr(hook.exc_value))
def tracer(frame, event, arg):
    return None
def work():
    for _ in range(50):
        sys.settrace(tracer)
sys.setswitchinterval(1e-6)
threading.settrace(tracer)
for _ in range(int(sys.argv[2])):
    threads = [threading.Thread(target=work) for _ in range(100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if died:
        break
print(len(died), sorted(set(died))[:1])
"""


def _died(mode: str, rounds: int) -> tuple[int, str]:
    """Threads that died in ``rounds`` rounds, and the first error; run from the checkout's
    root, so that the probe walks the modules with test_package's own walk."""
    lock = ROOT / "lockfiles" / "cpu.conda-lock.yml"
    count, first = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(rounds), str(lock)], cwd=ROOT,
        capture_output=True, text=True, timeout=300, check=True).stdout.split(" ", 1)
    return int(count), first.strip()


def test_the_probe_finds_the_race_a_python_audit_hook_opens() -> None:
    count, first = _died("control", 200)
    assert count > 0, "no thread died with a Python audit hook: the probe cannot see the race"
    assert "Cannot install a trace function" in first


def test_no_thread_dies_once_samebits_is_imported() -> None:
    count, first = _died("samebits", 10)
    assert count == 0, (f"{count} threads died starting under a tracer once samebits' imports "
                        f"were loaded: {first}; a dependency adds a Python audit hook (filelock "
                        "3.30-4.0 does; pyproject.toml's test extra keeps it below 3.30)")

"""``samebits.forked``: a function run in a forked child (or a fresh interpreter), its answer
read back; where no child can be started, or it raises, dies or is too slow, the caller runs
the function itself. The install's seal check and its re-seal fork; the verify's walk of a
venv's base interpreter spawns. Each case runs in a fresh interpreter: pytest's own threads
forbid a fork here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import json, os, sys, threading, time
from samebits.forked import answer, fork_call, spawn_call
here = os.getpid()
"""


def _run(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PRELUDE + code, *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_child_answers_with_what_the_function_returned() -> None:
    got = _run("""
big = {f"path/{i}": [i, "x" * 64] for i in range(20_000)}  # more than a pipe holds
child = fork_call(lambda: (os.getpid(), big))
answered, (pid, value) = child.wait(60)
print(json.dumps({"answered": answered, "in_child": pid == child.pid != here,
                  "same": value == big}))
""")
    assert got == {"answered": True, "in_child": True, "same": True}


def test_what_the_child_changes_in_memory_stays_in_the_child(tmp_path: Path) -> None:
    got = _run("""
seen = []
def work():
    seen.append(os.getpid())
    open(sys.argv[1], "w").write("by the child")  # what it writes to disk is written
    return len(seen)
n = answer(fork_call(work), work, 60)
print(json.dumps({"n": n, "seen": seen, "file": open(sys.argv[1]).read()}))
""", str(tmp_path / "written"))
    assert got == {"n": 1, "seen": [], "file": "by the child"}


def test_a_child_that_raises_is_answered_here_and_raises_here() -> None:
    got = _run("""
calls = []
def work():
    calls.append(os.getpid())
    raise ValueError("a corrupt entry")
child = fork_call(work)
try:
    answer(child, work, 60)
    said = None
except ValueError as exc:
    said = str(exc)
print(json.dumps({"forked": child is not None, "said": said, "here": calls == [here]}))
""")
    assert got == {"forked": True, "said": "a corrupt entry", "here": True}


def test_a_child_past_its_limit_is_killed_and_the_work_done_here() -> None:
    got = _run("""
def work():
    if os.getpid() != here:
        time.sleep(60)
    return os.getpid()
child = fork_call(work)
started = time.monotonic()
who = answer(child, work, 0.5)
took = time.monotonic() - started
try:
    os.waitpid(child.pid, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"here": who == here, "timed_out": child.timed_out, "quick": took < 30,
                  "reaped": reaped}))
""")
    assert got == {"here": True, "timed_out": True, "quick": True, "reaped": True}


def test_no_fork_while_another_thread_runs_and_a_stopped_child_is_reaped() -> None:
    got = _run("""
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()
none = fork_call(lambda: 1) is None
stop.set()
other.join()
from samebits.host import thread_count
deadline = time.monotonic() + 30
while thread_count() != 1 and time.monotonic() < deadline:
    time.sleep(0.01)  # a joined thread's task leaves /proc a moment after
child = fork_call(lambda: time.sleep(60))
child.stop()
try:
    os.waitpid(child.pid, os.WNOHANG)
    reaped = False
except ChildProcessError:
    reaped = True
print(json.dumps({"none": none, "here": answer(None, os.getpid, 60) == here,
                  "reaped": reaped}))
""")
    assert got == {"none": True, "here": True, "reaped": True}


def test_a_spawned_interpreter_answers_and_shares_nothing(tmp_path: Path) -> None:
    """``spawn_call``: the function, found by its module, runs in a fresh interpreter with
    this one's sys.path (a folder added to it at run time included); it sees none of this
    process's state; what it raises is raised here, by the call made here."""
    (tmp_path / "jobmod.py").write_text(
        "import os\nSTATE = ['fresh']\n"
        "def job(n):\n    return os.getpid(), n * 2, list(STATE)\n"
        "def bad():\n    raise ValueError('from ' + str(os.getpid()))\n")
    got = _run("""
sys.path.append(sys.argv[1])
import jobmod
jobmod.STATE.append("changed here")
child = spawn_call(jobmod.job, 21)
answered, (pid, doubled, state) = child.wait(60)
said = None
try:
    answer(spawn_call(jobmod.bad), jobmod.bad, 60)
except ValueError as exc:
    said = str(exc)
print(json.dumps({"answered": answered, "elsewhere": pid == child.pid != here,
                  "doubled": doubled, "state": state, "said": said == f"from {here}"}))
""", str(tmp_path))
    assert got == {"answered": True, "elsewhere": True, "doubled": 42, "state": ["fresh"],
                   "said": True}


def test_a_run_on_a_terminal_forks_as_a_piped_one_does() -> None:
    """The progress bars on a terminal refresh from a thread of their own; while a row is
    open ``fork_call`` stops that thread, forks, and starts it again (a fork beside a running
    thread could copy a lock it holds): the child answers, the bar goes on, and with the
    bar closed there is nothing to stop."""
    got = _run("""
import io
from samebits.host import thread_count
from samebits.ui import Output
out = Output(stderr=io.StringIO(), live=True)
with out.progress("checking", None):
    threads = thread_count()
    child = fork_call(lambda: os.getpid())
    answered, pid = child.wait(60)
    after = thread_count()
deadline = time.monotonic() + 30
while thread_count() != 1 and time.monotonic() < deadline:
    time.sleep(0.01)
stop = threading.Event()
other = threading.Thread(target=stop.wait)  # a thread that cannot stop: no fork
other.start()
refused = fork_call(lambda: 1) is None
stop.set()
other.join()
print(json.dumps({"threads": threads, "answered": answered, "in_child": pid == child.pid,
                  "after": after, "refused": refused}))
""")
    assert got == {"threads": 2, "answered": True, "in_child": True, "after": 2,
                   "refused": True}


def test_answered_says_whether_wait_would_wait(tmp_path: Path) -> None:
    """``answered`` is False while the child works (the install reads seals ahead then), True
    once its answer is written; ``wait`` then reads that answer."""
    got = _run("""
go = sys.argv[1]
def work():
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    return "done"
child = fork_call(work)
before = child.answered()
open(go, "w").close()
deadline = time.monotonic() + 60
while not child.answered() and time.monotonic() < deadline:
    time.sleep(0.01)
print(json.dumps({"before": before, "after": child.answered(), "wait": child.wait(60)}))
""", str(tmp_path / "go"))
    assert got == {"before": False, "after": True, "wait": [True, "done"]}

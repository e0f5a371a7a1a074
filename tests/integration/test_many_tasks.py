"""The scheduler of ``audit --many`` (samebits_app.audit.many) with real processes: a result
that stands is skipped, a failure or a timeout runs again, a crash that exits like a verdict
is no result, a timeout stops the task's whole process group, one task's failure stops no
other, the folders of a task removed unless kept."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from samebits_app.audit.many import Task, run_task, run_tasks, task_record


def sh(script: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", script)


def test_a_result_stands_until_its_key_changes(tmp_path: Path) -> None:
    """done once: skipped the next time (its seconds kept); another key, or force: run again."""
    marker = tmp_path / "runs"
    task = Task(name="a", argv=sh(f"echo run >> {marker}; echo said"), timeout=30,
                key={"commit": "1"})
    first = run_task(task, tmp_path / "out")
    assert (first.status, first.exit_code) == ("done", 0)
    assert (tmp_path / "out" / "a" / "log.txt").read_text().endswith("said\n")
    again = run_task(task, tmp_path / "out")
    assert again.status == "skipped" and again.seconds == first.seconds
    run_task(Task(name="a", argv=task.argv, timeout=30, key={"commit": "2"}), tmp_path / "out")
    run_task(task, tmp_path / "out", force=True)
    assert marker.read_text() == "run\n" * 3
    rec = task_record(tmp_path / "out" / "a")
    assert rec is not None and rec["key"] == {"commit": "1"} and rec["status"] == "done"
    assert "seconds" not in rec  # times apart, in times.json
    assert json.loads((tmp_path / "out" / "a" / "times.json").read_text())["seconds"] >= 0


def test_a_crash_is_no_result_and_runs_again(tmp_path: Path) -> None:
    """Exit 1 is a verdict only with its proof file: a Python traceback (exit 1, no report)
    is a failure, named in the log, run again next time."""
    proof = tmp_path / "out" / "b" / "report.json"
    task = Task(name="b", argv=(sys.executable, "-c", "raise FileNotFoundError('gone')"),
                timeout=60, key={}, complete=frozenset({0, 1}), proof=proof)
    res = run_task(task, tmp_path / "out")
    assert (res.status, res.exit_code) == ("failed", 1)
    assert "FileNotFoundError: gone" in (tmp_path / "out" / "b" / "log.txt").read_text()
    ok = Task(name="b", argv=sh(f"echo '{{}}' > {proof}; exit 1"), timeout=30, key={},
              complete=frozenset({0, 1}), proof=proof)
    assert run_task(ok, tmp_path / "out").status == "done"
    assert run_task(ok, tmp_path / "out").status == "skipped"


def test_a_timeout_stops_the_whole_group(tmp_path: Path) -> None:
    """A task past its timeout: TERM to its process group (its children too), status timeout,
    the log says so; the other task of the batch finishes; the environment is removed."""
    pidfile = tmp_path / "child.pid"
    env = tmp_path / "out" / "slow" / "env"
    slow = Task(name="slow", argv=sh(f"mkdir -p {env}; sleep 300 & echo $! > {pidfile}; wait"),
                timeout=2, key={}, remove=(env,))
    quick = Task(name="quick", argv=sh("exit 3"), timeout=30, key={})
    start = time.monotonic()
    results = run_tasks([slow, quick], tmp_path / "out", jobs=2)
    assert time.monotonic() - start < 30
    assert [(r.name, r.status) for r in results] == [("slow", "timeout"), ("quick", "failed")]
    assert "error: stopped after 2 s (its timeout)" in \
        (tmp_path / "out" / "slow" / "log.txt").read_text()
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 15
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists()  # the grandchild went with the group
    assert not env.exists()


def test_keep_keeps_the_environment(tmp_path: Path) -> None:
    env = tmp_path / "out" / "k" / "env"
    task = Task(name="k", argv=sh(f"mkdir -p {env} && chmod 555 {env}"), timeout=30, key={},
                remove=(env,))
    run_task(task, tmp_path / "out", keep=True)
    assert env.is_dir()
    run_task(task, tmp_path / "out", force=True)  # removed before (read-only) and after
    assert not env.exists()

"""Run many tasks, each a command with a folder of its own, here (``--jobs N``) or as one Slurm
job array; what ``samebits audit --many`` schedules (``papers``), usable by any batch of
commands (the paper corpus' runner, say):

    tasks = [Task(name="simcse", argv=(...), timeout=3600, key={...}), ...]
    results = run_tasks(tasks, Path("build/many"), jobs=2)          # here, two at a time
    jobs = submit_array(Path("build/many"), indices=[0, 2], task_command=[..., "{index}"],
                        gather_command=[...], max_running=8, sbatch=["-p", "gpu"])

One task writes ``OUT/NAME/``:

    log.txt      the command's stdout and stderr, in the order written
    task.json    its key, exit code and status (done / failed / timeout): byte-stable, no time
    times.json   seconds, host, Slurm job, load average at its start and end: what changes
                 from run to run, kept apart

A task whose ``task.json`` has the same key and status done is skipped (``force`` runs it
again), so a run that was interrupted resumes with the tasks it had not finished; a failed or
timed-out task always runs again. The command runs in a session of its own and is killed
(its whole process group, TERM then KILL) at its timeout or when this process is interrupted;
one task's failure is its own result and never stops the others. The folders in ``remove``
(an environment installed for it) are removed afterwards unless ``keep``.

Under Slurm (``submit_array``): one ``sbatch --array=I,J,...%M`` job whose tasks each run
``task_command`` with ``{index}`` replaced by ``$SLURM_ARRAY_TASK_ID``, then one gather job
``--dependency=afterany:<array>`` running ``gather_command``; the caller's sbatch options go
to both. The scripts are written to ``OUT/slurm/`` (where Slurm's own output files go too), so
what ran is there to read. Every sbatch call has a timeout; ``wait`` blocks until the gather
job has left the queue (``wait_for_job``: squeue, 1 s at first, then less often).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from samebits._io import atomic_write, canonical_json
from samebits.errors import InputError, SamebitsError, ToolError, UsageError
from samebits.net import public_url

TASK_FORMAT = 1
TASK_FILE = "task.json"
TIMES_FILE = "times.json"
LOG_FILE = "log.txt"
SLURM_FOLDER = "slurm"
KILL_GRACE = 10.0      # seconds between TERM and KILL
SBATCH_TIMEOUT = 120.0  # one sbatch submission
Status = Literal["done", "failed", "timeout", "skipped"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    name: str                          # its folder under OUT (checked by the caller)
    argv: tuple[str, ...]              # the command that does it
    timeout: float                     # seconds
    key: Mapping[str, Any]             # what its result depends on (JSON)
    complete: frozenset[int] = frozenset({0})  # exit codes that are a result to keep
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    remove: tuple[Path, ...] = ()      # removed after it ran, unless keep
    proof: Path | None = None          # a file it writes only when it has a result: without
                                       # it an exit code in ``complete`` is no result (a crash
                                       # of Python exits 1 too)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    name: str
    status: Status          # skipped: an earlier run's result (``exit_code`` is that run's)
    exit_code: int | None
    seconds: float | None   # this run's, or the earlier run's when skipped


def task_record(folder: Path) -> dict[str, Any] | None:
    """``OUT/NAME/task.json``, or None when absent or unreadable."""
    try:
        doc = json.loads((folder / TASK_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == TASK_FORMAT else None


def _times(folder: Path) -> dict[str, Any]:
    try:
        doc = json.loads((folder / TIMES_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def done_before(task: Task, out: Path) -> dict[str, Any] | None:
    """The record of an earlier run of ``task`` that stands: same key, status done."""
    rec = task_record(Path(out) / task.name)
    if rec is None or rec.get("status") != "done":
        return None
    return rec if rec.get("key") == json.loads(json.dumps(task.key)) else None


class _Running:
    """The processes this scheduler started that are still running, to stop on interrupt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            _kill(proc)


_RUNNING = _Running()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """TERM to the task's process group, KILL after ``KILL_GRACE`` seconds."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, KILL_GRACE)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def remove_tree(path: Path) -> None:
    """``path`` and everything under it, read-only folders included (an installed prefix):
    each folder is made writable before ``shutil.rmtree`` (no ``onerror``/``onexc`` callback,
    whose name changed in Python 3.12); what still cannot be deleted is left."""
    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    if not path.exists():
        return
    with contextlib.suppress(OSError):
        os.chmod(path, 0o755)
    for root, folders, _ in os.walk(path):  # top-down: a folder opened before it is listed
        for name in folders:
            sub = os.path.join(root, name)
            if not os.path.islink(sub):
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o755)
    shutil.rmtree(path, ignore_errors=True)


def run_task(task: Task, out: Path, *, force: bool = False, keep: bool = False,
             clear: Sequence[str] = ()) -> TaskResult:
    """Run one task (or skip it, see the module docstring); its folder's files written.
    ``clear``: names in its folder removed before it runs (an earlier run's reports)."""
    folder = Path(out) / task.name
    earlier = None if force else done_before(task, out)
    if earlier is not None:
        return TaskResult(name=task.name, status="skipped", exit_code=earlier.get("exit_code"),
                          seconds=_times(folder).get("seconds"))
    folder.mkdir(parents=True, exist_ok=True)
    for name in (TASK_FILE, TIMES_FILE, *clear):
        remove_tree(folder / name)
    for path in task.remove:
        remove_tree(path)
    start, load = time.monotonic(), _load()
    status: Status = "failed"
    code: int | None = None
    with open(folder / LOG_FILE, "wb") as log:
        shown = [public_url(w) if "://" in w else w for w in task.argv]  # no password
        log.write(f"$ {shlex.join(shown)}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(task.argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=dict(task.env) if task.env is not None else None,
                                    cwd=task.cwd)
        except OSError as exc:
            log.write(f"error: {task.argv[0]}: {exc.strerror or exc}\n".encode())
            proc = None
        if proc is not None:
            _RUNNING.add(proc)
            try:
                code = proc.wait(timeout=task.timeout)
                status = "done" if code in task.complete and (
                    task.proof is None or task.proof.is_file()) else "failed"
            except subprocess.TimeoutExpired:
                _kill(proc)
                code, status = proc.returncode, "timeout"
                log.write(f"\nerror: stopped after {task.timeout:g} s (its timeout)\n"
                          .encode())
            finally:
                _RUNNING.discard(proc)
    seconds = round(time.monotonic() - start, 1)
    if not keep:
        for path in task.remove:
            remove_tree(path)
    atomic_write(folder / TIMES_FILE, canonical_json({
        "seconds": seconds, "host": socket.gethostname(),
        "slurm_job": _slurm_job(), "load": {"start": load, "end": _load()}}))
    atomic_write(folder / TASK_FILE, canonical_json({
        "format": TASK_FORMAT, "name": task.name, "key": task.key, "exit_code": code,
        "status": status, "timeout": task.timeout}))
    return TaskResult(name=task.name, status=status, exit_code=code, seconds=seconds)


def _slurm_job() -> str | None:
    job, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{index}" if job and index else os.environ.get("SLURM_JOB_ID")


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_tasks(tasks: Sequence[Task], out: Path, *, jobs: int = 1, force: bool = False,
              keep: bool = False, clear: Sequence[str] = (),
              said: Callable[[int, TaskResult], None] = lambda i, r: None) -> list[TaskResult]:
    """Every task, ``jobs`` at a time, on this machine; the results in the tasks' order.
    ``said(index, result)`` as each ends. Interrupted (Ctrl-C), the running tasks are
    stopped and KeyboardInterrupt goes on: what finished is kept, a rerun resumes."""
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: expected 1 or more")
    results: list[TaskResult | None] = [None] * len(tasks)
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="samebits-task")
    try:
        futures = {pool.submit(run_task, t, out, force=force, keep=keep, clear=clear): i
                   for i, t in enumerate(tasks)}
        pending = set(futures)
        while pending:  # short waits, so that Ctrl-C reaches this thread
            for f in [f for f in pending if f.done()]:
                pending.discard(f)
                i = futures[f]
                results[i] = _result(f, tasks[i], out)
                said(i, results[i])  # type: ignore[arg-type]
            time.sleep(0.2)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        _RUNNING.stop_all()
        raise
    pool.shutdown(wait=True)
    return [r for r in results if r is not None]


def _result(f: Future[TaskResult], task: Task, out: Path) -> TaskResult:
    """A finished future's result; an error of this process around the task (a full disk,
    say) fails that task alone, said in its log."""
    try:
        return f.result()
    except (OSError, SamebitsError) as exc:
        with contextlib.suppress(OSError), open(Path(out) / task.name / LOG_FILE, "a") as log:
            log.write(f"\nerror: {exc}\n")
        return TaskResult(name=task.name, status="failed", exit_code=None, seconds=None)


# ------------------------------------------------------------------------------ Slurm

@dataclass(frozen=True, slots=True, kw_only=True)
class SlurmJobs:
    array: str | None         # the array's job id (None: nothing left to run)
    gather: str
    indices: tuple[int, ...]
    scripts: tuple[Path, ...] = field(default=())
    waited: bool = False


INDEX = "{index}"


def _script(path: Path, command: Sequence[str], what: str) -> Path:
    """A shell script that runs ``command`` (its ``{index}`` word: the array task's index)."""
    words = ['"$SLURM_ARRAY_TASK_ID"' if w == INDEX else shlex.quote(w) for w in command]
    atomic_write(path, "#!/bin/sh\n"
                 f"# written by samebits: {what}\n"
                 f"exec {' '.join(words)}\n", mode=0o755)
    return path


def sbatch(args: Sequence[str], *, env: Mapping[str, str] | None = None,
           timeout: float = SBATCH_TIMEOUT) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("sbatch")
    if exe is None:
        raise UsageError("--slurm: sbatch is not on PATH (Slurm's client tools)",
                         hint="run it on a login node of the cluster, or use --jobs N here")
    try:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout,
                              env=dict(env) if env is not None else None,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ToolError(f"sbatch did not answer in {timeout:g} s") from None
    return proc


def _job_id(proc: subprocess.CompletedProcess[str], what: str) -> str:
    if proc.returncode != 0:
        said = proc.stderr.strip().splitlines()
        raise ToolError(f"sbatch ({what}): exit {proc.returncode}: "
                        f"{said[-1] if said else 'no message'}",
                        hint="check the sbatch options after --")
    first = proc.stdout.strip().splitlines()
    job = first[0].split(";")[0].strip() if first else ""
    if not job.isdigit():
        raise ToolError(f"sbatch ({what}): no job id in its answer {proc.stdout.strip()!r}")
    return job


def submit_array(out: Path, *, indices: Sequence[int], task_command: Sequence[str],
                 gather_command: Sequence[str], max_running: int | None = None,
                 sbatch_options: Sequence[str] = (), wait: bool = False,
                 wait_timeout: float = 86_400.0, name: str = "samebits",
                 env: Mapping[str, str] | None = None) -> SlurmJobs:
    """One array job (``indices``; none: no array) and a gather job after it; see the module
    docstring. ``task_command`` holds ``{index}`` where the array task's index goes."""
    if INDEX not in task_command:
        raise SamebitsError("submit_array: task_command has no {index} word")
    if max_running is not None and max_running < 1:
        raise UsageError(f"--max-running {max_running}: expected 1 or more")
    folder = Path(out).absolute() / SLURM_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    task_sh = _script(folder / "task.sh", task_command,
                      "one array task: the entry numbered $SLURM_ARRAY_TASK_ID (from 0)")
    gather_sh = _script(folder / "gather.sh", gather_command,
                        "the gather job: the summary of every task's result")
    array = None
    if indices:
        spec = ",".join(str(i) for i in sorted(indices)) + (
            f"%{max_running}" if max_running else "")
        array = _job_id(sbatch(["--parsable", f"--array={spec}", f"--job-name={name}",
                                f"--output={folder}/task-%A_%a.out", *sbatch_options,
                                str(task_sh)], env=env), "the array")
    args = ["--parsable", f"--job-name={name}-gather", f"--output={folder}/gather-%j.out",
            *([f"--dependency=afterany:{array}"] if array else []), *sbatch_options]
    gather = _job_id(sbatch([*args, str(gather_sh)], env=env), "the gather job")
    jobs = SlurmJobs(array=array, gather=gather, indices=tuple(sorted(indices)),
                     scripts=(task_sh, gather_sh))
    if not wait:
        return jobs
    wait_for_job(gather, timeout=wait_timeout, env=env)
    return SlurmJobs(array=array, gather=gather, indices=jobs.indices, scripts=jobs.scripts,
                     waited=True)


POLL_MOST = 30.0  # seconds between two looks at a job, at most
DONE_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
                         "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


def wait_for_job(job: str, *, timeout: float, env: Mapping[str, str] | None = None) -> None:
    """Until ``job`` has left the queue (``squeue``; gone from it, or in a final state), looked
    at every 1 s plus 1 s per minute waited so far, at most every 30 s: the wait adds about
    2% to a long run and a second to a short one (``sbatch --wait`` added 13 s to a 30 s run
    of the tests' cluster); ToolError after ``timeout``."""
    exe = shutil.which("squeue")
    if exe is None:
        raise UsageError("--wait: squeue is not on PATH (Slurm's client tools)")
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        time.sleep(min(1.0 + (time.monotonic() - start) / 60.0, POLL_MOST))
        try:
            proc = subprocess.run([exe, "-h", "-j", job, "-o", "%T"], capture_output=True,
                                  text=True, timeout=SBATCH_TIMEOUT, stdin=subprocess.DEVNULL,
                                  env=dict(env) if env is not None else None)
        except subprocess.TimeoutExpired:
            continue  # a busy controller: look again
        state = proc.stdout.strip()
        if proc.returncode == 0 and (not state or state in DONE_STATES):
            return
        if proc.returncode != 0 and "invalid job id" in proc.stderr.lower():
            return  # ended and already purged from the controller's memory
    raise ToolError(f"job {job} still queued or running after {timeout:g} s",
                    hint=f"it goes on: squeue -j {job}")


def check_name(name: str, where: str) -> str:
    """A task's folder name: letters, digits, '.', '_', '-', not starting with '.'."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name) or name == SLURM_FOLDER:
        raise InputError(f"{where}: name = {json.dumps(name)}: a folder name of letters, "
                         "digits, '.', '_' and '-' (not 'slurm'), at most 100 characters")
    return name

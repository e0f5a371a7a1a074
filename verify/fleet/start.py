"""``samebits verify fleet --prefix ENV [options] -- LAUNCHER ARGS...``: start the ranks in the
environment under test, with nothing added to it.

The ranks run ``ENV/bin/python`` (``--workload-python`` for another interpreter), the
environment's own, which has torch and none of samebits' dependencies; samebits is not
installed there (``samebits verify node`` would rightly call that drift). What they run is one
file this process writes, ``rank.pyz`` (``rank_program``): a zip of the in-environment modules
(``verify.gpu.launch.IN_ENV``, the rank program ``verify.fleet.__main__`` among them) and a
``__main__.py`` that starts it. Python imports from a zip without writing bytecode anywhere,
and with ``PYTHONDONTWRITEBYTECODE=1`` the ranks write none into the environment either.

The launcher's command line gets the rank program appended (``rank_command``), so a user
writes the launcher and its own options, nothing else:

    -- torchrun ARGS              ENV/bin/python -m torch.distributed.run ARGS rank.pyz OPTS
                                  (torchrun starts each rank with its own sys.executable)
    -- python -m torch.distributed.run ARGS     the same, ENV's python in place of that one
    -- srun ARGS / mpiexec ARGS / mpirun ARGS / anything else
                                  srun ARGS ENV/bin/python rank.pyz OPTS

where OPTS are the rank options this command was given (``verify.fleet.rankopts``) and
``--handoff DIR``. The launcher runs in the caller's environment less the start-up variables
(``samebits.childenv``: no PYTHONPATH, no user site) with the dynamic loader's kept, since the
launcher itself may need them (each rank's preflight names an LD_LIBRARY_PATH outside the
environment), plus ``PYTHONDONTWRITEBYTECODE=1``; what reaches a rank is what its facts record.
Its output goes to stderr, so that ``--json`` keeps stdout one document.

The folder (``handoff``) is made beside ``--out`` and removed afterwards: under srun and
mpiexec every node reads ``rank.pyz`` from it and rank 0 writes to it, so ``--out`` must be on
a folder the nodes share. While the launcher runs, this process answers rank 0's check-ins
with the preflight (``verify.fleet.judge.preflight_judge``); after it exits it reads rank 0's
outcome. Under torchrun on several nodes each node runs this command; the one whose torchrun
holds rank 0 writes the report, the others say where it is.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from samebits.childenv import STARTUP, child_environ
from samebits.errors import InputError, ToolError, UsageError, quote
from verify.fleet import handoff
from verify.fleet.judge import preflight_judge
from verify.fleet.rankopts import no_torch_line
from verify.fleet.run import Outcome
from verify.gpu.launch import IN_ENV, module_file, package_dirs

if TYPE_CHECKING:
    from verify.fleet.run import Judge

TORCHRUN = ("-m", "torch.distributed.run")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same bytes every time
MAIN = ('"""The rank program of `samebits verify fleet` (verify.fleet.__main__)."""\n'
        "import sys\n\nfrom verify.fleet.__main__ import main\n\nsys.exit(main())\n")
# what the ranks are given beyond the caller's environment (and recorded where it can matter)
ADDED_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Started:
    """What came back: rank 0's outcome (None when it ran under another node's launcher:
    ``elsewhere`` names rank 0's host), the launcher's exit status and the command line."""

    outcome: Outcome | None
    returncode: int
    command: tuple[str, ...]
    elsewhere: str | None = None


def rank_program() -> bytes:
    """``rank.pyz``: the in-environment modules and a ``__main__.py``, as a stored zip whose
    bytes depend on those files alone."""
    dirs = package_dirs()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        files = {"__main__.py": MAIN.encode()}
        for name in IN_ENV:
            rel = module_file(name)
            files[rel.as_posix()] = dirs[rel.parts[0]].joinpath(*rel.parts[1:]).read_bytes()
        for arcname in sorted(files):
            info = zipfile.ZipInfo(arcname, date_time=ZIP_TIME)
            info.external_attr = 0o644 << 16
            z.writestr(info, files[arcname])
    return buf.getvalue()


def ranks_python(prefix: Path | None, workload_python: str | None, launcher: str) -> str:
    """The ranks' interpreter: ``--workload-python``, else ENV's ``bin/python``, else this
    one (samebits installed beside torch); it must exist and be able to import torch (else
    the rank's own line, naming ``launcher``, the launcher's program, says so)."""
    if workload_python is not None:
        python, flag = workload_python, f"--workload-python {workload_python}"
    elif prefix is not None:
        python, flag = str(prefix / "bin" / "python"), f"--prefix {prefix}"
        if not prefix.is_dir():
            raise UsageError(f"--prefix {prefix}: no such folder")
    else:
        python, flag = sys.executable, "this Python"
    path = Path(python).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UsageError(f"{flag}: {path} is not an interpreter (no such executable file)",
                         hint="--prefix names the environment the ranks run in (its "
                         "bin/python); --workload-python an interpreter")
    probe = subprocess.run(
        [str(path), "-I", "-c", "import importlib.util, sys; "
         "print('%d.%d' % sys.version_info[:2]); "
         "sys.exit(importlib.util.find_spec('torch') is None)"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env=child_environ(os.environ))
    version = probe.stdout.strip()
    if probe.returncode != 0 and not version:
        said = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise UsageError(f"{flag}: {path} does not run as Python: {said}")
    if probe.returncode != 0:
        raise UsageError(no_torch_line(f"{path}, Python {version}", launcher))
    return str(path.absolute())


def check_launcher(words: Sequence[str]) -> None:
    """A usage error unless ``words`` (what follows --) is a launcher and its options."""
    if not words:
        raise UsageError("verify fleet: nothing after --: the launcher and its options go "
                         "there", hint="samebits verify fleet --prefix ENV -- torchrun "
                         "--nproc-per-node 8 (or -- srun -N 4 --ntasks-per-node 8)")
    if "verify.fleet" in words or any(list(words[i:i + 2]) == ["verify", "fleet"]
                                      for i in range(len(words))):
        raise UsageError(f"verify fleet: {quote(' '.join(words))} runs a fleet itself: after "
                         "-- goes the launcher and its options only; samebits appends the rank "
                         "program", hint="samebits verify fleet --prefix ENV -- torchrun "
                         "--nproc-per-node 8")


def rank_command(words: Sequence[str], python: str, program: str,
                 rank_args: Sequence[str]) -> list[str]:
    """The launcher's command line with the rank program appended (module docstring)."""
    check_launcher(words)
    first = Path(words[0]).name
    if first == "torchrun":
        return [python, *TORCHRUN, *words[1:], program, *rank_args]
    if first.startswith("python") and tuple(words[1:3]) == TORCHRUN:
        return [python, *TORCHRUN, *words[3:], program, *rank_args]
    return [*words, python, program, *rank_args]


def launcher_word(words: Sequence[str]) -> str:
    """The launcher's program, as a user names it: torchrun, srun, mpiexec, ..."""
    if not words:
        return "srun"
    first = Path(words[0]).name
    return "torchrun" if first.startswith("python") and tuple(words[1:3]) == TORCHRUN else first


def launch_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The launcher's environment (module docstring): the dynamic loader's variables that
    the facts record (``samebits.childenv.STARTUP``) pass, the other start-up ones do not."""
    loader = [k for k in STARTUP if k.startswith("LD_")]
    return {**child_environ(environ, keep=loader), **ADDED_ENV}


def _answer(folder: Path, judge: Judge) -> bool:
    """Answer rank 0's check-ins when they are there; whether they were."""
    doc = handoff.read(folder, handoff.CHECKINS)
    if doc is None:
        return False
    checkins = doc.get("checkins")
    if not isinstance(checkins, list):
        raise InputError(f"{folder / handoff.CHECKINS}: checkins = {quote(checkins)}: "
                         "expected a list")
    problems = judge(checkins)
    handoff.put(folder, handoff.PREFLIGHT, {"problems": {str(r): list(p)
                                                         for r, p in sorted(problems.items())}})
    return True


def start(words: Sequence[str], *, python: str, rank_args: Sequence[str], out: Path,
          judge: Judge | None = None, environ: Mapping[str, str] | None = None,
          announce: Callable[[list[str]], None] | None = None,
          poll: float = handoff.POLL) -> Started:
    """Run the launcher, answer rank 0, return its outcome (module docstring); ``announce``
    is told the command line first."""
    judge = judge if judge is not None else preflight_judge(None)
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".samebits-fleet-", dir=out.parent))
    try:
        program = folder / handoff.PROGRAM
        program.write_bytes(rank_program())
        cmd = rank_command(words, python, str(program),
                           [*rank_args, "--handoff", str(folder)])
        if announce is not None:
            announce(cmd)
        sys.stderr.flush()
        try:
            proc = subprocess.Popen(cmd, env=launch_environ(os.environ if environ is None
                                                             else environ),
                                    stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno())
        except OSError as exc:
            raise UsageError(f"verify fleet: cannot run {quote(cmd[0])}: {exc.strerror}",
                             hint="after -- goes a launcher on PATH: torchrun, srun, mpiexec, "
                             "mpirun") from None
        try:
            answered = False
            while True:
                try:
                    code = proc.wait(timeout=poll)
                    break
                except subprocess.TimeoutExpired:
                    answered = answered or _answer(folder, judge)
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        outcome_doc = handoff.read(folder, handoff.OUTCOME)
        outcome = None if outcome_doc is None else Outcome.from_dict(
            outcome_doc, where=str(folder / handoff.OUTCOME))
        there = handoff.read(folder, handoff.ELSEWHERE)
        elsewhere = None if there is None else str(there.get("rank0_host"))
        if outcome is None and elsewhere is None:
            raise ToolError(f"{' '.join(words)} exited {code} and rank 0 wrote no outcome "
                            f"({handoff.OUTCOME}): the ranks' output above says why",
                            hint="a rank's `error:` line above names the problem; a rank "
                            "that never started shows in the launcher's own messages")
        return Started(outcome=outcome, returncode=code, command=tuple(cmd),
                       elsewhere=elsewhere)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

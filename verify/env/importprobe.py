"""The import probe: which ELF files does ``import X`` really map, in the environment's own
interpreter?

``run_probes(executable, modules, ...)`` starts one process per module, so that no module's
import can change another's (what one import loaded, patched or broke stays in its own
process; the outcome does not depend on the order the modules are named in). Each runs

    <env>/bin/python -I -B -c PROBE MODULE

``-I``: no PYTHON* variable, no user site, no script folder on sys.path (the environment's
site-packages and its ``.pth`` files still apply: that is what a user's ``import`` runs);
``-B``: no bytecode written into the environment. ``PROBE`` (standard library only, Python
3.8+, since it runs in the environment's interpreter) points fd 1 at fd 2 so that nothing the
module prints can pass for its answer, imports the module (an empty name imports nothing: what
start-up alone loads), reads ``/proc/self/maps`` after the import, and writes one JSON line to
the saved stdout: the module, whether the import raised (and what), and every file mapped.
Then it leaves with ``os._exit(0)``, so no atexit hook or teardown can hang or crash after it.

Bounds and isolation:

    timeout   each process is killed (its whole process group) after ``timeout`` seconds:
              outcome ``timeout``; a process killed by a signal (a segfault in an extension's
              init) or gone without its line is ``crashed``; neither says anything of what
              would load, so the caller keeps the static verdict
    sandbox   bubblewrap where it runs (``detect_sandbox``): ``--unshare-all`` (no network, a
              PID namespace of its own), the whole file system read-only (the environment
              cannot be written to), a private empty ``/tmp`` that is HOME and TMPDIR, the
              environment and its base interpreter bound back read-only when they lie under
              /tmp; ``SAMEBITS_SANDBOX=none``, or no working ``bwrap``: the process runs as
              the caller, in a fresh empty folder, and the record says why
    env       nothing of the caller's environment but the NVIDIA driver's folders of
              LD_LIBRARY_PATH (``samebits.childenv.driver_dirs``); the fixed variables are
              in ``probe_environ`` and in the report

Outcomes: ``imported``, ``failed`` (the import raised: ``error``, its type, and ``missing``,
the library named by ``...: cannot open shared object file`` in the error or in the errors it
was raised from, whose sentence is then the ``error`` quoted), ``timeout``, ``crashed``,
``not-run`` (the interpreter could not be started).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from samebits.childenv import driver_dirs

IMPORT_TIMEOUT = 60.0     # seconds for one module's import
SANDBOX_TIMEOUT = 20.0    # seconds for the `bwrap ... true` that tells whether bwrap runs here
SANDBOX_ENV = "SAMEBITS_SANDBOX"
MARK = "samebits-import-probe "
MAX_ERROR = 500           # characters of an import error kept
PRIVATE = "/tmp"          # HOME, TMPDIR and the working folder inside the sandbox
MISSING = re.compile(r"([^\s:'\"]+): cannot open shared object file")

Outcome = Literal["imported", "failed", "timeout", "crashed", "not-run"]

PROBE = r"""
import json, os, sys
out = os.dup(1)
os.dup2(2, 1)
name = sys.argv[1] if len(sys.argv) > 1 else ""
doc = {"module": name, "ok": True}
if name:
    try:
        __import__(name)
    except BaseException as exc:
        doc["ok"] = False
        doc["type"] = type(exc).__name__
        doc["error"] = str(exc)
        chain, seen = [], set()
        cause = exc.__cause__ or exc.__context__
        while cause is not None and id(cause) not in seen and len(chain) < 8:
            seen.add(id(cause))
            chain.append(str(cause))
            cause = cause.__cause__ or cause.__context__
        doc["chain"] = chain
maps = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.rstrip("\n").split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            maps.add(parts[5])
doc["maps"] = sorted(maps)
data = (MARK + json.dumps(doc, sort_keys=True) + "\n").encode("utf-8")
while data:
    data = data[os.write(out, data):]
os._exit(0)
""".replace("MARK", repr(MARK))


@dataclass(frozen=True, slots=True, kw_only=True)
class Sandbox:
    kind: Literal["bubblewrap", "none"]
    program: str | None = None
    why: str | None = None          # kind "none": why there is none

    def to_json(self) -> dict[str, Any]:
        if self.kind == "none":
            return {"kind": "none", "network": True, "why": self.why}
        return {"kind": "bubblewrap", "network": False,
                "writes": "nothing but a private, empty /tmp"}

    def argv(self, argv: Sequence[str], *, readable: Sequence[str]) -> list[str]:
        if self.kind == "none" or self.program is None:
            return list(argv)
        out = [self.program, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/",
               "--dev", "/dev", "--proc", "/proc", "--tmpfs", PRIVATE]
        for folder in dict.fromkeys(readable):
            out += ["--ro-bind-try", folder, folder]
        return [*out, "--chdir", PRIVATE, "--", *argv]


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    module: str                     # "" for start-up alone
    outcome: Outcome
    error: str | None = None        # the exception's text, or why it did not finish
    error_type: str | None = None
    missing: str | None = None      # the library a failed import could not open
    maps: frozenset[str] = field(default=frozenset())

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"module": self.module, "outcome": self.outcome}
        if self.error is not None:
            out["error"] = self.error
        if self.error_type is not None:
            out["type"] = self.error_type
        if self.missing is not None:
            out["missing"] = self.missing
        return out

    def says(self) -> str:
        """One phrase for the report: ``import numba: libfoo.so.1: cannot open ...``."""
        what = f"import {self.module}" if self.module else "the interpreter's start-up"
        if self.outcome == "failed" and self.missing:
            return f"{what}: {self.error}"
        if self.outcome == "failed":
            return f"{what}: {self.error_type}: {self.error}"
        if self.outcome == "timeout":
            return f"{what}: the probe did not finish ({self.error})"
        if self.outcome in ("crashed", "not-run"):
            return f"{what}: the probe did not finish ({self.outcome}: {self.error})"
        return f"{what}: imported"


def detect_sandbox(environ: Mapping[str, str]) -> Sandbox:
    """bubblewrap when it runs here, else none with the reason (read from ``environ``)."""
    if environ.get(SANDBOX_ENV, "").lower() == "none":
        return Sandbox(kind="none", why=f"{SANDBOX_ENV}=none")
    program = shutil.which("bwrap", path=environ.get("PATH"))
    if program is None:
        return Sandbox(kind="none", why="bwrap (bubblewrap) is not on PATH (Debian/Ubuntu: "
                       "apt-get install bubblewrap)")
    box = Sandbox(kind="bubblewrap", program=program)
    try:
        proc = subprocess.run(box.argv(["true"], readable=()), capture_output=True, text=True,
                              timeout=SANDBOX_TIMEOUT, stdin=subprocess.DEVNULL,
                              env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Sandbox(kind="none", why=f"{program} did not run: {exc}")
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return Sandbox(kind="none", why=f"{program} cannot make its namespaces here "
                       f"({why[:200]})")
    return box


def probe_environ(environ: Mapping[str, str], *, bin_dir: str, home: str) -> dict[str, str]:
    """The probe's whole environment: fixed values, the environment's bin/ first on PATH, and
    the driver's folders of the caller's LD_LIBRARY_PATH (where the container runtime puts
    libcuda)."""
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home,
           "LC_ALL": "C.UTF-8"}  # no PYTHON* variable: -I ignores them all
    drivers = driver_dirs(environ.get("LD_LIBRARY_PATH", ""))
    if drivers:
        env["LD_LIBRARY_PATH"] = drivers
    return env


def run_probes(executable: str, modules: Sequence[str], *, sandbox: Sandbox,
               readable: Sequence[str], environ: Mapping[str, str],
               timeout: float = IMPORT_TIMEOUT, jobs: int = 2) -> dict[str, Probe]:
    """Each module imported in a process of its own (two at a time): module -> Probe."""
    names = sorted(set(modules))
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(names)))) as pool:
        done = pool.map(lambda m: run_probe(executable, m, sandbox=sandbox, readable=readable,
                                            environ=environ, timeout=timeout), names)
        return dict(zip(names, done, strict=True))


def run_probe(executable: str, module: str, *, sandbox: Sandbox, readable: Sequence[str],
              environ: Mapping[str, str], timeout: float = IMPORT_TIMEOUT) -> Probe:
    bin_dir = os.path.dirname(executable)
    with tempfile.TemporaryDirectory(prefix="samebits-import-") as scratch:
        home = PRIVATE if sandbox.kind == "bubblewrap" else scratch
        argv = sandbox.argv([executable, "-I", "-B", "-c", PROBE, module], readable=readable)
        # stderr to a file: a process the import left behind holds no pipe we wait on
        with open(os.path.join(scratch, ".stderr"), "w+b") as errors:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=errors, cwd=scratch, start_new_session=True,
                                        env=probe_environ(environ, bin_dir=bin_dir, home=home))
            except OSError as exc:
                return Probe(module=module, outcome="not-run", error=str(exc))
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(proc)
                return Probe(module=module, outcome="timeout",
                             error=f"killed after {timeout:g} s")
            errors.seek(max(0, os.fstat(errors.fileno()).st_size - 4096))
            err = errors.read()
    return _read(module, proc.returncode, out, err, sandboxed=sandbox.kind == "bubblewrap")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.communicate()


def _read(module: str, rc: int, out: bytes, err: bytes, *, sandboxed: bool) -> Probe:
    line = next((ln for ln in reversed(out.decode("utf-8", "replace").splitlines())
                 if ln.startswith(MARK)), None)
    doc: Any = None
    if rc == 0 and line is not None:
        try:
            doc = json.loads(line[len(MARK):])
        except ValueError:
            doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("maps"), list):
        return Probe(module=module, outcome="crashed", error=_ended(rc, err, sandboxed))
    maps = frozenset(m for m in doc["maps"] if isinstance(m, str))
    if doc.get("ok") is True:
        return Probe(module=module, outcome="imported", maps=maps)
    error = str(doc.get("error"))
    chain = doc.get("chain")
    found = None
    for text in (error, *(str(c) for c in (chain if isinstance(chain, list) else ()))):
        found = MISSING.search(text)
        if found:  # what ld.so said (numpy re-raises it inside a page of advice)
            end = text.find("\n", found.end())
            error = text[found.start():end if end >= 0 else len(text)]
            break
    return Probe(module=module, outcome="failed", error=" ".join(error.split())[:MAX_ERROR],
                 error_type=str(doc.get("type")), missing=found[1] if found else None,
                 maps=maps)


def _ended(rc: int, err: bytes, sandboxed: bool) -> str:
    """How a process that gave no answer ended: the signal that killed it, else its exit
    status and the last line it wrote to stderr (bubblewrap reports a child killed by signal
    N as exit 128 + N)."""
    number = -rc if rc < 0 else rc - 128 if sandboxed and rc > 128 else None
    if number is not None:
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    last = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:MAX_ERROR]
    return f"exit {rc} without an answer" + (f": {last}" if last else "")

"""The sandbox a paper's commands run in: writes only inside the scratch copy, a private
/tmp, no network unless the manifest asks (``network = true``).

    bubblewrap   bwrap --die-with-parent --unshare-all [--share-net] --ro-bind / /
                 --dev /dev [--dev-bind /dev/nvidia* (the GPUs) ...] --proc /proc
                 --tmpfs /tmp --bind WORK WORK --bind PRIVATE PRIVATE --chdir CWD -- ARGV
                 The whole file system is there to read (the environment's interpreter,
                 wherever it lives: a venv's base Python under ~/.pyenv), nothing of it to
                 write but the scratch copy and samebits' own folder for the command (the
                 settings hook and its readback); /tmp is an empty one of its own, gone with
                 the command; the command and everything it started are killed with it (a
                 PID namespace of its own).
    none         no ``bwrap`` on PATH, bwrap cannot make namespaces here (a container that
                 forbids them), or ``SAMEBITS_SANDBOX=none``: the commands run with the
                 caller's rights, and the record carries the warning saying so

``detect`` probes this machine once (running ``bwrap ... true``); ``Sandbox.argv`` wraps one
command; ``Sandbox.record`` is what the attestation and the audit report say of it
(docs/reference/paper-manifest.md).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

SANDBOX_ENV = "SAMEBITS_SANDBOX"
PROBE_TIMEOUT = 20.0
# the GPUs' device files, bound into the sandbox's own /dev (which has null, zero, random,
# urandom, tty, pts and a /dev/shm of its own)
DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sandbox:
    kind: Literal["bubblewrap", "none"]
    program: str | None = None       # bwrap's absolute path
    version: str | None = None
    warning: str | None = None       # kind "none": why, and what it means
    devices: tuple[str, ...] = ()

    def argv(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
             writable: Sequence[Path], network: bool,
             readable: Sequence[Path] = ()) -> list[str]:
        """The command line that runs ``argv`` in ``cwd`` in this sandbox; ``readable``:
        folders to show read-only even where they lie under the host's /tmp (the
        environment, its base interpreter: ``readable_for``). The program is looked up
        first, on ``env``'s PATH, so one that does not exist (or cannot run) is the
        ``OSError`` a plain start would raise: the command did not start."""
        _resolve(argv[0], cwd=cwd, path=env.get("PATH", ""))
        if self.kind == "none" or self.program is None:
            return list(argv)
        out = [self.program, "--die-with-parent", "--unshare-all"]
        if network:
            out.append("--share-net")
        out += ["--ro-bind", "/", "/", "--dev", "/dev"]
        for dev in self.devices:
            out += ["--dev-bind", dev, dev]
        out += ["--proc", "/proc", "--tmpfs", "/tmp"]
        for folder in dict.fromkeys(readable):
            out += ["--ro-bind-try", str(folder), str(folder)]
        for folder in writable:
            out += ["--bind", str(folder), str(folder)]
        out += ["--chdir", str(cwd), "--", *argv]
        return out

    def record(self, *, network: bool) -> dict[str, Any]:
        """What the attestation and the audit report say of a command run in it."""
        if self.kind == "none":
            return {"kind": "none", "network": True, "warning": self.warning}
        return {"kind": "bubblewrap", "version": self.version, "network": network,
                "writes": "the scratch copy only; a private /tmp"}


def readable_for(bin_dir: Path) -> tuple[Path, ...]:
    """What a command needs to see of the environment whose interpreters are in
    ``bin_dir``: the environment itself and, for a venv, the installation its ``python``
    links to (``~/.pyenv/versions/3.11.7``, a base that may lie under /tmp too)."""
    prefix = Path(bin_dir).absolute().parent
    out = [prefix]
    for name in ("python", "python3"):
        real = Path(os.path.realpath(Path(bin_dir) / name))
        if real.is_file():
            out.append(real.parent.parent)
    try:
        for line in (prefix / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                out.append(Path(value.strip()).parent)
    except OSError:
        pass
    return tuple(dict.fromkeys(out))


def _resolve(program: str, *, cwd: Path, path: str) -> str:
    def runnable(p: Path) -> bool:
        return p.is_file() and os.access(p, os.X_OK)

    if not cwd.is_dir():
        raise FileNotFoundError(2, "No such file or directory", str(cwd))
    if "/" in program:
        p = Path(program) if Path(program).is_absolute() else cwd / program
        if not p.exists():
            raise FileNotFoundError(2, "No such file or directory", program)
        if not runnable(p):
            raise PermissionError(13, "Permission denied", program)
        return str(p)
    found = shutil.which(program, path=path)
    if found is None:
        raise FileNotFoundError(2, "No such file or directory", program)
    return found


def unsandboxed(why: str) -> Sandbox:
    return Sandbox(kind="none", warning=f"no sandbox: {why}; the paper's commands ran with "
                   "the caller's rights (they could write outside the scratch copy and "
                   "reach the network)")


def detect(environ: Mapping[str, str] | None = None) -> Sandbox:
    """This machine's sandbox for paper commands: bubblewrap when it runs here, else none
    with the reason."""
    environ = os.environ if environ is None else environ
    if environ.get(SANDBOX_ENV, "").lower() == "none":
        return unsandboxed(f"{SANDBOX_ENV}=none")
    program = shutil.which("bwrap", path=environ.get("PATH"))
    if program is None:
        return unsandboxed("bwrap (bubblewrap) is not on PATH (Debian/Ubuntu: apt-get "
                           "install bubblewrap)")
    devices = tuple(sorted(p for pattern in DEVICES for p in glob.glob(pattern)))
    probe = Sandbox(kind="bubblewrap", program=program, devices=devices)
    try:
        version = subprocess.run([program, "--version"], capture_output=True, text=True,
                                 timeout=PROBE_TIMEOUT).stdout.split()
        proc = subprocess.run(probe.argv(["true"], cwd=Path("/"), env={"PATH": "/usr/bin:/bin"},
                                         writable=(), network=False),
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return unsandboxed(f"{program} did not run: {exc}")
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return unsandboxed(f"{program} cannot make its namespaces here ({why[:200]})")
    return Sandbox(kind="bubblewrap", program=program, devices=devices,
                   version=version[-1] if version else None)

"""What a build backend asks for beyond ``[build-system] requires`` (PEP 517's dynamic ones).

PEP 517 lets a backend name more build requirements from its ``get_requires_for_build_wheel``
hook, run in an environment holding the static ones; a frontend installs those too before it
calls ``build_wheel``. setuptools' ``build_meta`` before 70.1 returns ``["wheel"]`` there (its
``bdist_wheel`` lived in the ``wheel`` project): lit 16.0.6 and 18.1.1, triton 2.0's dependency,
say ``requires = ["setuptools"]`` and cannot build without ``wheel``. uv and pypa/build run the
hook; so does ``samebits lock``, before it resolves the build environment it records:

    venv     a fresh venv (``uv venv``, no seed packages) on the Python the build runs on, and
             into it, with ``uv pip install --no-deps --require-hashes --offline`` from a
             folder of links to the proved wheels, exactly the locked static environment
    hook     ``get_requires_for_build_wheel`` through ``pyproject_hooks`` (the library pypa/build
             calls backends with: its ``_in_process`` script runs on the venv's Python, in the
             source tree), in the build's environment (``build.build_environment``, with its
             ``SOURCE_DATE_EPOCH``) and offline as far as variables can say it: pip and uv told
             so (``PIP_NO_INDEX``, ``UV_OFFLINE``), every proxy variable pointing at a closed
             local port (``NO_NETWORK``), so a backend that reaches out fails at once;
             its own process group, killed after ``timeout`` seconds
    answer   the requirement strings it returned, in its order, each one a PEP 508 requirement
             (the UserWarnings pyproject_hooks passes on from the backend are dropped: they
             change nothing, and the quiet ``uv build`` does not show the backend's output
             either)

A failed or overdue hook, or an answer that is not a list of requirement strings, is a
``BuildFailed`` (exit 5, as for a failed build) quoting the backend's last lines of output.
``samebits.solve.sdist`` resolves the static and the dynamic requirements together into the
recorded build environment, and keeps each answer in ``CACHE/builds/requires/`` under the
sha256 of its inputs (``hook_key``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from samebits.errors import clip
from samebits.install.build import (
    BuildFailed,
    BuildSystem,
    Requirements,
    build_environment,
    build_venv,
    last_lines,
)
from samebits.install.buildclock import clock_environment
from samebits.lock.builds import BuildRequirement

HOOK = "get_requires_for_build_wheel"
HOOK_TIMEOUT = 300.0
NO_NETWORK = "http://127.0.0.1:9"   # the discard port: closed on a machine that builds
_PROXIES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
            "ALL_PROXY")


def hook_key(system: BuildSystem, *, sdist: str, python: str, epoch: int,
             requires: Sequence[BuildRequirement]) -> dict[str, Any]:
    """Everything the hook's answer is a function of, as ``samebits.lock.builds`` records
    inputs: the sdist, the Python line, the epoch, the backend and its environment."""
    return {"hook": HOOK, "sdist": sdist, "python": python, "source-date-epoch": epoch,
            "backend": system.backend, "backend-path": list(system.backend_path),
            "requires": [[r.name, r.version, r.url, r.sha256] for r in requires]}


def hook_environment(epoch: int) -> dict[str, str]:
    """The build's environment, offline: what the hook runs in."""
    env = {k: v for k, v in build_environment().items()
           if k.lower() not in ("no_proxy", *map(str.lower, _PROXIES))}
    env.update({p: NO_NETWORK for p in _PROXIES})
    env.update(SOURCE_DATE_EPOCH=str(epoch), PIP_NO_INDEX="1", UV_OFFLINE="1")
    return env


def dynamic_requires(tree: Path, system: BuildSystem, *, python: str,
                     requires: Requirements, epoch: int, work: Path,
                     timeout: float = HOOK_TIMEOUT) -> tuple[str, ...]:
    """What ``system``'s backend asks for from ``get_requires_for_build_wheel``, run on
    ``tree`` in a venv (under ``work``, a new empty folder) of exactly ``requires``."""
    venv = build_venv(work, python=python, requires=requires, timeout=HOOK_TIMEOUT)
    return run_hook(tree, system, python=str(venv / "bin" / "python"), epoch=epoch,
                    timeout=timeout, clock=clock_environment(work))


def run_hook(tree: Path, system: BuildSystem, *, python: str, epoch: int,
             timeout: float = HOOK_TIMEOUT,
             clock: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """``get_requires_for_build_wheel`` of ``system``'s backend on ``tree``, run by
    ``python`` (whose environment holds the backend)."""
    from pyproject_hooks import BackendUnavailable, BuildBackendHookCaller, BuildBackendWarning

    what = f"{system.backend}'s {HOOK} of {tree.name}"
    caller = BuildBackendHookCaller(
        str(tree), system.backend, backend_path=list(system.backend_path) or None,
        runner=_runner(what, {**hook_environment(epoch), **(clock or {})}, timeout),
        python_executable=python)
    try:
        with warnings.catch_warnings():  # the backend's own, re-raised here: not ours to show
            warnings.simplefilter("ignore", BuildBackendWarning)
            answer = caller.get_requires_for_build_wheel()
    except BackendUnavailable as exc:
        raise BuildFailed(f"{what}: the backend did not import:\n  "
                          + last_lines(exc.traceback or str(exc)),
                          hint=f"its [build-system] requires ({', '.join(system.requires)}) "
                          "should hold it") from None
    except (OSError, ValueError) as exc:  # the hook's output.json missing or not JSON
        raise BuildFailed(f"{what}: no answer ({type(exc).__name__}: {exc})") from None
    return checked(answer, what)


def checked(answer: object, what: str) -> tuple[str, ...]:
    """The hook's answer as requirement strings; a BuildFailed quoting anything else."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        raise BuildFailed(f"{what} returned {clip(repr(answer), 300)}: not a list of "
                          "requirement strings")
    for a in answer:
        try:
            Requirement(a)
        except InvalidRequirement as exc:
            raise BuildFailed(f"{what} returned {a!r}: not a requirement ({exc})") from None
    return tuple(answer)


Runner = Callable[..., None]


def _runner(what: str, env: Mapping[str, str], timeout: float) -> Runner:
    """A pyproject_hooks runner: the hook in its own process group, its output captured
    (quoted when it fails), killed with its children after ``timeout`` seconds."""

    def run(cmd: Sequence[str], cwd: str | None = None,
            extra_environ: Mapping[str, str] | None = None) -> None:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env={**env, **(extra_environ or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True, umask=0o022)
        try:
            said, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            said, _ = proc.communicate()
            raise BuildFailed(f"{what} ran past {timeout:g} s" + (
                ":\n  " + last_lines(said) if said.strip() else ""),
                hint="a backend that asks the network or waits for input cannot be locked; "
                "pin a version with a wheel") from None
        if proc.returncode != 0:
            raise BuildFailed(f"{what} failed (exit {proc.returncode}):\n  " + last_lines(said),
                              hint="it ran offline, in a venv of exactly the locked "
                              "[build-system] requires; pin a version with a wheel")

    return run

"""The environment of every process samebits starts: the caller's, less what decides which code
and which libraries load before the process runs its own first line.

    dropped   PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, PYTHONUSERBASE, PYTHONSAFEPATH, ... :
              every ``PYTHON*`` variable but those in ``PASSED`` (a ``sitecustomize.py`` on
              the caller's PYTHONPATH would otherwise run first in the facts probe, the
              workload worker and a paper's commands); every ``LD_*`` variable of the
              dynamic loader (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...)
    set       PYTHONNOUSERSITE=1: no user site-packages (``~/.local/lib/pythonX.Y``)
    kept      LD_LIBRARY_PATH's folders of ``DRIVER_LIB_DIRS`` (where the NVIDIA container
              runtime mounts the driver's libcuda: no CUDA runtime of its own there)

A paper manifest may ask to keep some of them (``keep-env = ["LD_LIBRARY_PATH"]``): those
pass as the caller has them (or stay unset, when the caller has none; ``PYTHONNOUSERSITE``
kept: the caller's user site as it is). Whatever is kept is in the child's environment, where
the facts probe records it (``verify.gpu.facts.model.NUMERIC_ENV_NAMES``) and ``audit`` compares it.

``child_environ`` is pure: the caller's mapping in, a new dict out. Standard library only,
Python 3.8 or later: the workload worker imports it in the audited environment
(``verify.gpu.launch.IN_ENV``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The start-up variables that matter most; every other PYTHON* and LD_* variable is dropped
# too (``is_dropped``), these are the ones the facts record when a manifest keeps them.
STARTUP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "LD_PRELOAD",
           "LD_LIBRARY_PATH", "LD_AUDIT")
# PYTHON* variables that pass: recorded (PYTHONHASHSEED is a numerics fact) or harmless.
PASSED = ("PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONFAULTHANDLER")
NO_USER_SITE = "PYTHONNOUSERSITE"
# Where the NVIDIA container runtime mounts the driver's user-space libraries: on
# LD_LIBRARY_PATH in every CUDA image, and holding no CUDA runtime of its own.
DRIVER_LIB_DIRS = ("/usr/local/nvidia/lib", "/usr/local/nvidia/lib64")


def is_dropped(name: str) -> bool:
    """Whether ``child_environ`` leaves ``name`` out (unless kept)."""
    return (name.startswith("PYTHON") and name not in PASSED) or name.startswith("LD_")


def keepable(name: str) -> bool:
    """Whether a manifest's ``keep-env`` may name ``name``: a variable samebits drops or sets."""
    return is_dropped(name)


def driver_dirs(value: str) -> str:
    """The folders of an LD_LIBRARY_PATH value that are the driver's (``DRIVER_LIB_DIRS``)."""
    return ":".join(d for d in value.split(":") if d and d.rstrip("/") in DRIVER_LIB_DIRS)


def child_environ(environ: Mapping[str, str], *, keep: Iterable[str] = ()) -> dict[str, str]:
    """The environment for a child of a caller whose environment is ``environ``; ``keep``:
    names (``keepable``) that pass as the caller has them."""
    kept = set(keep)
    env = {k: v for k, v in environ.items() if k in kept or not is_dropped(k)}
    if NO_USER_SITE not in kept:
        env[NO_USER_SITE] = "1"
    if "LD_LIBRARY_PATH" not in kept:
        drivers = driver_dirs(environ.get("LD_LIBRARY_PATH", ""))
        if drivers:
            env["LD_LIBRARY_PATH"] = drivers
    return env

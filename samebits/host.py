"""This machine, as every command asks about it: its conda platform and samebits' cache folder.

    host_platform()     linux-64 on x86_64, linux-aarch64 on aarch64/arm64, else linux-<machine>
    cache_dir()         $XDG_CACHE_HOME/samebits, else ~/.cache/samebits

One definition each: ``--platform``'s default "this machine's" and ``--cache-dir``'s default
are these, in every command (``samebits.cli.options``) and in the library code below them.
Standard library only.
"""

from __future__ import annotations

import os
import platform as _platform
from pathlib import Path

# ``uname -m`` -> the conda platform of a Linux machine of that architecture
HOST_PLATFORMS = {"x86_64": "linux-64", "aarch64": "linux-aarch64", "arm64": "linux-aarch64"}

CACHE_DIR_TEXT = "$XDG_CACHE_HOME/samebits, else ~/.cache/samebits"


def platform_of_machine(machine: str) -> str:
    """The conda platform of a Linux machine whose ``uname -m`` is ``machine``."""
    return HOST_PLATFORMS.get(machine, f"linux-{machine}")


def host_platform() -> str:
    """This machine's conda platform."""
    return platform_of_machine(_platform.machine())


def cache_dir() -> Path:
    """samebits' cache folder: archives, unpacked packages, bytecode, PyPI answers, inputs."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "samebits"


def cores() -> int:
    """The CPU cores this process may run on (its affinity, as a batch job's cgroup or
    ``taskset`` narrows it), at least 1: how many workers are worth starting."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def thread_count() -> int:
    """The threads of this process as the kernel counts them (a C library's too): whether it
    may fork safely (a thread holding a lock would leave it held in the child)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def installed_version(module: str, dist: str) -> str:
    """The version of the distribution ``dist`` that provides the importable ``module``, read
    from the ``<module>-<version>.dist-info`` folder beside it (where an installer puts it),
    without importing either or ``importlib.metadata`` (whose import alone is 9 ms of a warm
    install). Anything else (an editable install, two such folders) asks
    ``importlib.metadata``, which raises ``PackageNotFoundError`` (a ``ModuleNotFoundError``)
    when it is not installed."""
    from importlib.util import find_spec

    try:
        spec = find_spec(module)
    except (ImportError, ValueError):  # ValueError: a module in sys.modules with no spec
        spec = None
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))
        head = f"{module}-"
        try:
            found = [n for n in os.listdir(site) if n.startswith(head) and n.endswith(".dist-info")]
        except OSError:
            found = []
        if len(found) == 1:
            return found[0][len(head):-len(".dist-info")]
    from importlib.metadata import version

    return version(dist)

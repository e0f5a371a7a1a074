"""The benchmarks of ``nox -s bench`` (``python -m tests.bench NAME``), and what they share."""

from __future__ import annotations

import os
import time
from pathlib import Path

SETTLED = 0.5          # 1-minute load average a benchmark may start at
SETTLE_LIMIT = 240.0   # seconds waited for it at most


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def settle(limit: float = SETTLE_LIMIT, target: float = SETTLED,
           left_by: str = "the previous benchmark's") -> float:
    """Wait, at most ``limit`` seconds, for the load average to fall to ``target``; said
    either way (``left_by``: whose load it is). The load it ended at."""
    now = load()
    if now <= target:
        return now
    print(f"waiting for the load average ({now:.2f}, {left_by}) to fall to {target} (at most "
          f"{limit:.0f} s) ...", flush=True)
    deadline = time.monotonic() + limit
    while now > target and time.monotonic() < deadline:
        time.sleep(5)
        now = load()
    print(f"  load {now:.2f}" + ("" if now <= target else
                                 f" after {limit:.0f} s: starting anyway"), flush=True)
    return now


def background_note(background: float, cores: int) -> str:
    """A bench's last line: whether the machine was idle when it began (``background``, the
    load average then). The bench's own processes raise the load while it runs (a 2-core
    install or verify keeps 2 to 4 runnable, copies waiting on the disk count too), so only the
    load before it began says whether other work was running."""
    if background > 1.0:
        return (f"  note: the load average was {background:.1f} before the bench began, on "
                f"{cores} cores: other work was running, these are not figures (the goals are "
                "for an idle machine)")
    return (f"  load before the bench {background:.2f} (idle); the loads beside each run are "
            "the highest of before and after it, the bench's own processes included")


def stat_walk(root: str) -> list[tuple[str, os.stat_result]]:
    """(path, lstat) of everything below ``root`` but folders: one scandir per folder and one
    stat per entry, nothing else (the walk every verify makes, as the floors time it)."""
    out: list[tuple[str, os.stat_result]] = []
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for d in it:
                if d.is_dir(follow_symlinks=False):
                    stack.append(d.path)
                else:
                    out.append((d.path, d.stat(follow_symlinks=False)))
    return out


PACKAGES = ("samebits", "samebits_app", "verify")


def compile_checkout(root: Path) -> None:
    """Write the bytecode of ``root``'s samebits (untimed, before any run): an installed
    samebits has its pycs (pip writes them as it installs the wheel), a checkout has them
    only where an import wrote them, and never under ``PYTHONDONTWRITEBYTECODE`` (set on this
    project's machines), where every timed run compiled each module changed since its pyc was
    last written (20 modules, 0.04 s of a warm install, the day it was found)."""
    import compileall
    import io
    from contextlib import redirect_stdout

    with redirect_stdout(io.StringIO()):
        for pkg in PACKAGES:
            if (root / pkg).is_dir():
                compileall.compile_dir(str(root / pkg), quiet=2)

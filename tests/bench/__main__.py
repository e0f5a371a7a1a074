"""``python -m tests.bench [NAME ...] [OPTIONS]``: run benchmarks, each beside its baseline.

Each benchmark is a module ``tests/bench/<name>.py`` (dashes become underscores) with
``main(argv) -> int`` that prints its figures and the ratios against its baseline. Options go
to every benchmark named: ``--ranks=8`` or ``--ranks 8`` (a word that is no benchmark's name,
right after an option without ``=``, is that option's value).

Between two benchmarks the load their predecessor left is waited out: the 1-minute load
average decays for minutes after a 2-core install, and a benchmark started at once would
begin above load 1 and call its own figures void. The wait ends when the load falls to
``SETTLED`` or after ``SETTLE_LIMIT`` seconds, and says which.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path

from tests.bench import compile_checkout, load

SETTLED = 0.5          # 1-minute load average a benchmark may start at
SETTLE_LIMIT = 240.0   # seconds waited for it at most


def available() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules([str(here)])
                  if not m.name.startswith("_"))


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(benchmark names, options): a word that is no benchmark's name right after an option
    without ``=`` is that option's value (``--ranks 8`` as ``--ranks=8``)."""
    names, opts = [], []
    known = available()
    for a in argv:
        if a.startswith("-"):
            opts.append(a)
        elif a not in known and opts and "=" not in opts[-1]:
            opts[-1] = f"{opts[-1]}={a}"
        else:
            names.append(a)
    return names, opts


def main(argv: list[str]) -> int:
    names, opts = split(argv)
    rc = 0
    known = available()
    todo = names or known
    for name in todo:
        if name not in known:
            print(f"error: unknown benchmark '{name}' (known: {', '.join(known)})",
                  file=sys.stderr)
            return 2
    compile_checkout(Path(__file__).resolve().parents[2])
    print("bytecode of this checkout written (untimed): an installed samebits has its pycs",
          flush=True)
    for i, name in enumerate(todo):
        if i:
            settle()
        print(f"== bench {name}", flush=True)
        module = importlib.import_module(f"tests.bench.{name.replace('-', '_')}")
        rc = max(rc, module.main(opts))
    return rc


def settle(limit: float = SETTLE_LIMIT, target: float = SETTLED) -> float:
    """Wait, at most ``limit`` seconds, for the load average to fall to ``target``; said
    either way. The load it ended at."""
    now = load()
    if now <= target:
        return now
    print(f"waiting for the load average ({now:.2f}, the previous benchmark's) to fall to "
          f"{target} (at most {limit:.0f} s) ...", flush=True)
    deadline = time.monotonic() + limit
    while now > target and time.monotonic() < deadline:
        time.sleep(5)
        now = load()
    print(f"  load {now:.2f}" + ("" if now <= target else
                                 f" after {limit:.0f} s: starting anyway"), flush=True)
    return now


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

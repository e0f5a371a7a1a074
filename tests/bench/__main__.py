"""``python -m tests.bench [NAME ...] [OPTIONS]``: run benchmarks, each beside its baseline.

Each benchmark is a module ``tests/bench/<name>.py`` (dashes become underscores) with
``main(argv) -> int`` that prints its figures and the ratios against its baseline. Options go
to every benchmark named: ``--ranks=8`` or ``--ranks 8`` (a word that is no benchmark's name,
right after an option without ``=``, is that option's value).

Between two benchmarks the load their predecessor left is waited out: the 1-minute load
average decays for minutes after a 2-core install, and a benchmark started at once would
begin above load 1 and call its own figures void. The wait ends when the load falls to
``tests.bench.SETTLED`` or after ``tests.bench.SETTLE_LIMIT`` seconds, and says which.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

from tests.bench import compile_checkout, settle


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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

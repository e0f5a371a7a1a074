"""``python -m tests.bench [NAME ...] [OPTIONS]``: run benchmarks, each beside its baseline.

Each benchmark is a module ``tests/bench/<name>.py`` (dashes become underscores) with
``main(argv) -> int`` that prints its figures and the ratios against its baseline. Options go
to every benchmark named: ``--ranks=8`` or ``--ranks 8`` (a word that is no benchmark's name,
right after an option without ``=``, is that option's value).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


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
    for name in names or available():
        if name not in available():
            print(f"error: unknown benchmark '{name}' (known: {', '.join(available())})",
                  file=sys.stderr)
            return 2
        print(f"== bench {name}", flush=True)
        module = importlib.import_module(f"tests.bench.{name.replace('-', '_')}")
        rc = max(rc, module.main(opts))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

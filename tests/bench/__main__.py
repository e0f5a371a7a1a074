"""``python -m tests.bench [NAME ...]``: run benchmarks, each beside its baseline.

Each benchmark is a module ``tests/bench/<name>.py`` (dashes become underscores) with
``main(argv) -> int`` that prints its figures and the ratios against its baseline.
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


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")] or available()
    rc = 0
    for name in names:
        if name not in available():
            print(f"error: unknown benchmark '{name}' (known: {', '.join(available())})",
                  file=sys.stderr)
            return 2
        print(f"== bench {name}", flush=True)
        module = importlib.import_module(f"tests.bench.{name.replace('-', '_')}")
        rc = max(rc, module.main([a for a in argv if a.startswith("-")]))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

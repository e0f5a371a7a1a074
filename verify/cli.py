"""``samebits verify ...`` and ``python -m verify ...``.

Each subcommand lives in its own module (``verify/cmd_<name>.py``) with
``add_parser(sub, parents)`` that registers it and sets ``func(args, out) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS = ("env", "gpu", "compare", "fleet")


def _modules() -> list:
    out = []
    for name in SUBCOMMANDS:
        modname = f"verify.cmd_{name}"
        try:
            out.append(importlib.import_module(modname))
        except ModuleNotFoundError as exc:
            if exc.name != modname:
                raise
    return out


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser("verify", help="verify an environment, a machine, or compare attestations",
                       description="Verify installed files against a lock (env), run the "
                       "deterministic workloads and attest (gpu), compare attestations (compare).")
    vsub = p.add_subparsers(dest="verify_command", metavar="SUBCOMMAND", required=True)
    for module in _modules():
        module.add_parser(vsub, parents)


def main(argv: Sequence[str] | None = None) -> int:
    from samebits.cli import main as samebits_main

    return samebits_main(["verify", *(sys.argv[1:] if argv is None else argv)])

"""``samebits verify ...`` and ``python -m verify ...``.

Each subcommand lives in its own module, ``verify/<area>/cmd_<name>.py`` (``SUBCOMMANDS``),
with ``add_parser(sub, parents)`` that registers it and sets ``func(args, out) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from samebits.cli.docpages import add_doc_epilogs, verify_pages
from samebits.cli.options import Parser, common
from samebits.ui import run_cli

# subcommand -> the area folder its module is in
SUBCOMMANDS = {"env": "env", "gpu": "gpu", "compare": "gpu", "fleet": "fleet", "nix": "env",
               "attestation": "gpu", "node": "node"}
# each command word a module registers -> that module's SUBCOMMANDS entry
WORDS = {"env": "env", "gpu": "gpu", "compare": "compare", "fleet": "fleet",
         "fleet-report": "fleet", "nix-store": "nix", "attestation": "attestation",
         "node": "node"}


def _modules(words: Sequence[str] = ()) -> list:
    """The subcommands' modules; with ``words`` (a command line after ``verify``) only the
    one whose command its first word is, when it is one (each module imports what its command
    needs, most of a command's start-up), else all of them."""
    first = next(iter(words), "")
    names = [WORDS[first]] if first in WORDS else list(SUBCOMMANDS)
    return [importlib.import_module(f"verify.{SUBCOMMANDS[name]}.cmd_{name}") for name in names]


def add_parser(sub: argparse._SubParsersAction, parents: list,
               words: Sequence[str] = ()) -> None:
    """``samebits verify ...``; ``words``: the command line after ``verify`` (``_modules``)."""
    p = sub.add_parser("verify", help="verify an environment, a machine, or compare attestations",
                       description="Verify installed files against a lock (env), run the "
                       "deterministic workloads and attest (gpu), compare attestations (compare).")
    vsub = p.add_subparsers(dest="verify_command", metavar="SUBCOMMAND", required=True)
    for module in _modules(words):
        module.add_parser(vsub, parents)


def build_parser(words: Sequence[str] = ()) -> argparse.ArgumentParser:
    """``python -m verify``'s own parser: the verify subcommands alone, nothing of the
    composition layer (``samebits_app``), so it runs wherever samebits' core does. Its help
    ends with the docs lines of ``samebits verify ...`` (``samebits.cli.docpages``). With
    ``words`` (the command line), only the subcommand they name, when they name one: the
    same parser for that command, without importing the others."""
    parser = Parser(
        prog="python -m verify",
        description="Verify an environment (env), a machine's numerics (gpu), compare "
        "attestations (compare), check a fleet (fleet). The same as `samebits verify ...`.",
        epilog="exit codes: 0 ok, 1 difference found, 2 bad input, 5 tool failed.")
    sub = parser.add_subparsers(dest="verify_command", metavar="SUBCOMMAND", required=True)
    for module in _modules(words):
        module.add_parser(sub, [common()])
    return add_doc_epilogs(parser, verify_pages(), under=("verify",))


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    return run_cli(build_parser(words), words)

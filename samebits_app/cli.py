"""The ``samebits`` command: every subcommand wired into one parser.

Errors become messages and exit codes at one edge, ``samebits.ui.run_cli`` (shared with
``python -m verify``).

Exit codes: 0 success; 1 a check found a difference (stale lock, drift, different bits);
2 bad input or usage; 3 unsatisfiable; 4 a channel or index unreachable; 5 an external tool
failed; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from samebits import __version__
from samebits.cli.options import Parser, common
from samebits.ui import run_cli
from samebits_app.docpages import add_doc_epilogs

# command -> its module, which has ``add_parser(sub, parents)`` and registers that command
# (and any hidden old name of it, OLD_NAMES); the order is the order of ``samebits --help``
COMMANDS = {"init": "samebits_app.cmd_init", "lock": "samebits_app.cmd_lock",
            "freeze": "samebits_app.cmd_freeze", "verify": "verify.cli",
            "render": "samebits_app.cmd_render", "install": "samebits_app.cmd_install",
            "cache": "samebits_app.cmd_cache", "bundle": "samebits_app.cmd_bundle",
            "paper": "samebits_app.cmd_paper",
            "attest": "samebits_app.cmd_attest", "audit": "samebits_app.cmd_audit",
            "check": "samebits_app.cmd_check", "keygen": "samebits_app.cmd_keygen"}
OLD_NAMES = {"lock-diff": "lock"}


def build_parser(words: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command's parser; with ``words`` (a command line), only the command its first
    word names when it names one. That parser is the same for that command (its help, its
    errors, its defaults) without importing the other commands' modules and all they import,
    which was most of a command's start-up (``samebits --help`` and a word that names no
    command get every command)."""
    parser = Parser(
        prog="samebits",
        description="Reproducible GPU environments: spec -> lock -> render -> verify.",
        epilog="exit codes: 0 ok, 1 difference found, 2 bad input, 3 unsatisfiable, "
        "4 unreachable, 5 tool failed. See README.md.",
    )
    parser.add_argument("--version", action="version", version=f"samebits {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    first = next(iter(words), None)
    first = OLD_NAMES.get(first, first) if first is not None else None
    for name in [first] if first in COMMANDS else COMMANDS:
        module = importlib.import_module(COMMANDS[name])
        if name == "verify":
            module.add_parser(sub, [common()], list(words)[1:] if first == "verify" else ())
        else:
            module.add_parser(sub, [common()])
    return add_doc_epilogs(parser)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    return run_cli(build_parser(words), words)


def entry() -> None:
    """The ``samebits`` program: ``main``, then the process ends (``gcpause.exit_now``)."""
    from samebits.gcpause import exit_now

    exit_now(main())


if __name__ == "__main__":
    entry()

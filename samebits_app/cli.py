"""The ``samebits`` command: every subcommand wired into one parser.

Errors become messages and exit codes at one edge, ``samebits.ui.run_cli`` (shared with
``python -m verify``).

Exit codes: 0 success; 1 a check found a difference (stale lock, drift, different bits);
2 bad input or usage; 3 unsatisfiable; 4 a channel or index unreachable; 5 an external tool
failed; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import verify.cli
from samebits import __version__
from samebits.cli.options import Parser, common
from samebits.ui import run_cli
from samebits_app import (
    cmd_attest,
    cmd_audit,
    cmd_bundle,
    cmd_cache,
    cmd_check,
    cmd_freeze,
    cmd_init,
    cmd_install,
    cmd_keygen,
    cmd_lock,
    cmd_render,
)
from samebits_app.docpages import add_doc_epilogs

# Each has ``add_parser(sub, parents)``; the order is the order of ``samebits --help``.
COMMANDS = (cmd_init, cmd_lock, cmd_freeze, verify.cli, cmd_render, cmd_install, cmd_cache,
            cmd_bundle, cmd_attest, cmd_audit, cmd_check, cmd_keygen)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="samebits",
        description="Reproducible GPU environments: spec -> lock -> render -> verify.",
        epilog="exit codes: 0 ok, 1 difference found, 2 bad input, 3 unsatisfiable, "
        "4 unreachable, 5 tool failed. See README.md.",
    )
    parser.add_argument("--version", action="version", version=f"samebits {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.add_parser(sub, [common()])
    return add_doc_epilogs(parser)


def main(argv: Sequence[str] | None = None) -> int:
    return run_cli(build_parser(), list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())

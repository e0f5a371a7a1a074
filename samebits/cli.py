"""The ``samebits`` command: the one edge where errors become messages and exit codes.

Exit codes: 0 success; 1 a check found a difference (stale lock, drift, different bits);
2 bad input or usage; 3 unsatisfiable; 4 a channel or index unreachable; 5 an external tool
failed; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from samebits import __version__
from samebits.errors import EXIT_BAD_INPUT, SamebitsError
from samebits.ui import Output


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of text")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress or notes")
    parser = argparse.ArgumentParser(
        prog="samebits",
        description="Reproducible GPU environments: spec -> lock -> render -> verify.",
        epilog="exit codes: 0 ok, 1 difference found, 2 bad input, 3 unsatisfiable, "
        "4 unreachable, 5 tool failed. See README.md.",
    )
    parser.add_argument("--version", action="version", version=f"samebits {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from samebits import cmd_lock

    cmd_lock.add_parser(sub, [common])
    for module in _plugin_modules():
        module.add_parser(sub, [common])
    return parser


def _plugin_modules() -> list:
    """Command modules beyond lock; each has ``add_parser(sub, parents)``."""
    import importlib

    out = []
    for name in ("verify.cli", "samebits.cmd_render", "samebits.cmd_audit"):
        try:
            out.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name not in (name, name.rsplit(".", 1)[0]):
                raise
    return out


def _rewrite(argv: list[str]) -> list[str]:
    # `samebits lock diff A B` is a sub-subcommand in the user's eyes.
    for i, arg in enumerate(argv):
        if not arg.startswith("-"):
            if arg == "lock" and i + 1 < len(argv) and argv[i + 1] == "diff":
                return [*argv[:i], "lock-diff", *argv[i + 2:]]
            break
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    argv = _rewrite(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Output(json_mode=getattr(args, "json", False), quiet=getattr(args, "quiet", False))
    try:
        return int(args.func(args, out))
    except SamebitsError as exc:
        out.error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

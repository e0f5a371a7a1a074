"""Terminal output: one JSON document on stdout with --json, else text; progress on stderr.

Every command returns a payload (a JSON-able dict) and a human text; ``Output.emit`` picks one.
Progress bars appear only when stderr is a terminal and --json is off.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from samebits.errors import EXIT_BAD_INPUT, SamebitsError


class Output:
    def __init__(self, *, json_mode: bool = False, quiet: bool = False) -> None:
        self.json = json_mode
        self.quiet = quiet

    def emit(self, payload: dict[str, Any], text: str) -> None:
        if self.json:
            sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        elif text:
            sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()

    def info(self, text: str) -> None:
        """A side note for humans: stderr, never in --json output."""
        if not self.quiet:
            sys.stderr.write(text.rstrip("\n") + "\n")

    def error(self, exc: SamebitsError) -> None:
        if self.json:
            sys.stdout.write(json.dumps({"error": exc.to_json(), "exit_code": exc.exit_code},
                                        indent=2, sort_keys=True) + "\n")
            return
        sys.stderr.write(f"error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"hint: {exc.hint}\n")

    @contextlib.contextmanager
    def progress(self, description: str, total: float | None) -> Iterator[Callable[..., None]]:
        """Yield ``advance(n=1, description=None)``; a rich bar on a terminal, else nothing."""
        if self.json or self.quiet or not sys.stderr.isatty():
            yield lambda n=1, description=None: None
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn()]
        with Progress(*columns, transient=True, console=_stderr_console()) as bar:
            task = bar.add_task(description, total=total)

            def advance(n: float = 1, description: str | None = None) -> None:
                kw = {"description": description} if description else {}
                bar.update(task, advance=n, **kw)

            yield advance


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def run_cli(parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Parse ``argv`` and run the chosen command's ``func(args, out)``: the one edge where
    ``SamebitsError`` becomes ``error: ...`` (or ``{"error": ...}`` with --json) and an exit
    code. ``samebits`` and ``python -m verify`` both end here."""
    args = parser.parse_args(list(argv))
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


def common_options() -> argparse.ArgumentParser:
    """The options every command takes (``--json``, ``--quiet``), as an argparse parent."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of text")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress or notes")
    return common

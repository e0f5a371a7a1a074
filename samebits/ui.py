"""Terminal output: one JSON document on stdout with --json, else text; progress on stderr.

Every command returns a payload (a JSON-able dict) and a human text; ``Output.emit`` picks one.
Progress bars appear only when stderr is a terminal and --json is off.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from samebits.errors import SamebitsError


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

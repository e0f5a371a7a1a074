"""Terminal output: one JSON document on stdout with --json, else text; progress on stderr.

Every command returns a payload (a JSON-able dict) and a human text; ``Output.emit`` picks one.
Long work is wrapped in ``Output.phase`` (a named step) or ``Output.progress`` (a step with a
count). Where the feedback goes:

    stderr is a terminal   a rich spinner or bar per open step, cleared when it ends
    stderr is piped        one line per step, ``NAME ...``, written when the step starts
    --quiet or --json      nothing (stdout holds only the result; errors still print)

Core code that runs long work takes an ``Output`` (``Output(quiet=True)`` when the caller has
none) or a ``ProgressFactory`` such as ``out.progress``; it never looks at the terminal itself.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from samebits.errors import EXIT_BAD_INPUT, SamebitsError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

Advance = Callable[..., None]
"""``advance(n=1, description=None)``: count ``n`` more done; optionally rename the step."""


class ProgressFactory(Protocol):
    """What ``Output.progress`` is, for code that takes it as an argument."""

    def __call__(self, description: str, total: float | None) -> AbstractContextManager[Advance]:
        ...


def _nothing(n: float = 1, description: str | None = None) -> None:
    return None


class Output:
    """Where a command's result, notes, errors and progress go.

    ``stderr`` and ``live`` exist so that tests can watch one ``Output`` without a terminal;
    commands leave them unset: progress then goes to ``sys.stderr``, animated exactly when it
    is a terminal.
    """

    def __init__(self, *, json_mode: bool = False, quiet: bool = False,
                 stderr: TextIO | None = None, live: bool | None = None) -> None:
        self.json = json_mode
        self.quiet = quiet
        self._stderr = stderr
        self._live = live
        self._lock = threading.Lock()
        self._bar: Progress | None = None
        self._open = 0
        self._unpause: Callable[[], None] = lambda: None

    # -- results and notes -------------------------------------------------------------
    def emit(self, payload: dict[str, Any], text: str) -> None:
        if self.json:
            sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
        elif text:
            sys.stdout.write(text.rstrip("\n") + "\n")
        sys.stdout.flush()

    def info(self, text: str) -> None:
        """A side note for humans: stderr, never with --quiet and never in --json output.
        While a bar is on screen the note is printed above it."""
        if self.quiet:
            return
        bar = self._bar
        if bar is not None:
            bar.console.print(text.rstrip("\n"), markup=False, highlight=False)
        else:
            self._write(text)

    def error(self, exc: SamebitsError) -> None:
        if self.json:
            sys.stdout.write(json.dumps({"error": exc.to_json(), "exit_code": exc.exit_code},
                                        indent=2, sort_keys=True) + "\n")
            return
        sys.stderr.write(f"error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"hint: {exc.hint}\n")

    # -- feedback on long work ---------------------------------------------------------
    @property
    def shows_progress(self) -> bool:
        """Whether ``phase`` and ``progress`` print anything (not with --json or --quiet)."""
        return not (self.json or self.quiet)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """One named step of a long command, for work whose size is not known in advance.

        ``with out.phase("fetching 42 archives"): ...`` shows a spinner with ``name`` and the
        elapsed time on a terminal (gone when the block ends), or writes the line
        ``fetching 42 archives ...`` to stderr when piped, when the block starts. Nothing with
        --quiet or --json. Phases and progress bars nest: each open one is a row on screen.
        Write ``name`` as a short lowercase clause naming the work and its object.
        """
        with self.progress(name, None):
            yield

    @contextlib.contextmanager
    def steps(self, prefix: str = "") -> Iterator[Callable[[str], None]]:
        """For code that reports its steps through a callback, ``progress("verify env")``,
        and never says when one ends: yield such a callback. Each call ends the step before
        and starts a ``phase(prefix + name)``; the block's end ends the last one.

            with out.steps("attest: ") as step:
                run_attest(req, progress=step)
        """
        with contextlib.ExitStack() as current:
            def step(name: str) -> None:
                current.close()
                current.enter_context(self.phase(prefix + name))

            yield step

    @contextlib.contextmanager
    def progress(self, description: str, total: float | None) -> Iterator[Advance]:
        """A step with a count: yield ``advance(n=1, description=None)``.

        ``total`` is what the step counts to (items, or megabytes: any unit; None when
        unknown). Call ``advance()`` as work completes; ``advance(description="hopper")``
        also renames the row. On a terminal: a rich bar (spinner, description, bar, done/total,
        elapsed), cleared when the block ends. Piped: the line ``DESCRIPTION ...`` on stderr
        when the block starts, and nothing per ``advance`` (a log stays one line per step).
        Nothing with --quiet or --json. ``advance`` may be called from any thread.
        """
        if not self.shows_progress:
            yield _nothing
            return
        if not self._is_live():
            self._write(f"{description} ...")
            yield _nothing
            return
        bar, task = self._open_row(description, total)
        try:
            def advance(n: float = 1, description: str | None = None) -> None:
                if description:
                    bar.update(task, advance=n, description=description)
                else:
                    bar.update(task, advance=n)

            yield advance
        finally:
            self._close_row(task)

    # -- internals ---------------------------------------------------------------------
    def _stream(self) -> TextIO:
        return self._stderr if self._stderr is not None else sys.stderr

    def _write(self, text: str) -> None:
        stream = self._stream()
        stream.write(text.rstrip("\n") + "\n")
        stream.flush()

    def _is_live(self) -> bool:
        if self._live is not None:
            return self._live
        try:
            return self._stream().isatty()
        except (AttributeError, ValueError):  # a closed or unusual stream
            return False

    def _open_row(self, description: str, total: float | None) -> tuple[Progress, TaskID]:
        with self._lock:
            if self._bar is None:
                from samebits.forked import pausing

                self._bar = _new_bar(self._stream())
                self._bar.start()
                self._unpause = pausing(self._paused)
            self._open += 1
            return self._bar, self._bar.add_task(description, total=total)

    def _close_row(self, task: TaskID) -> None:
        with self._lock:
            bar = self._bar
            if bar is None:
                return
            bar.remove_task(task)
            self._open -= 1
            if self._open == 0:
                bar.stop()
                self._bar = None
                self._unpause()

    @contextlib.contextmanager
    def _paused(self) -> Iterator[None]:
        """The bar's refresh thread stopped, for ``samebits.forked.fork_call`` (the rows stay;
        the bar is drawn again as it starts)."""
        with self._lock:
            bar = self._bar
            if bar is not None:
                bar.stop()
            try:
                yield
            finally:
                if bar is not None:
                    bar.start()


def _new_bar(stream: TextIO) -> Progress:
    """A transient rich display on ``stream``. Stray writes to ``sys.stderr`` print above
    it; stdout is never redirected (it may be a pipe while stderr is the terminal)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class IfCounted(ProgressColumn):
        """Another column, shown only for rows with a total (a phase has none)."""

        def __init__(self, inner: ProgressColumn) -> None:
            super().__init__()
            self.inner = inner

        def render(self, task: Task) -> Any:
            return self.inner.render(task) if task.total is not None else Text("")

    console = Console(file=stream, force_terminal=True)
    return Progress(SpinnerColumn(), TextColumn("{task.description}"),
                    IfCounted(BarColumn()), IfCounted(MofNCompleteColumn()),
                    TimeElapsedColumn(), console=console, transient=True,
                    redirect_stdout=False, redirect_stderr=stream is sys.stderr)


def run_cli(parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Parse ``argv`` and run the chosen command's ``func(args, out)``: the one edge where
    ``SamebitsError`` becomes ``error: ...`` (or ``{"error": ...}`` with --json) and an exit
    code. ``samebits`` and ``python -m verify`` both end here.

    A usage error (``samebits.cli.options.Parser`` raises it) is argparse's usage line and
    ``PROG: error: ...`` on stderr, or with --json anywhere on the command line the same JSON
    error document as any other error, on stdout; exit 2 either way."""
    try:
        args = parser.parse_args(list(argv))
    except SamebitsError as exc:
        if asks_json(argv):
            Output(json_mode=True).error(exc)
        elif hasattr(exc, "print_text"):
            exc.print_text()
        else:
            Output().error(exc)
        return exc.exit_code
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
    except OSError as exc:
        said = system_error(exc)
        if said is None:
            raise
        out.error(said)
        return said.exit_code


# What the machine refuses, whichever command met it: said as an error with its fix, never a
# traceback (a full disk ended `samebits check` in one, exit 1, which means "does not run").
SYSTEM_HINTS = {
    errno.ENOSPC: "the disk is full: free space, or give the command a folder on a disk with "
                  "room (--cache-dir for the archives, --target or --out for what it writes), "
                  "and run it again",
    errno.EDQUOT: "the disk quota is used up: free space, or give the command a folder on a "
                  "disk with room (--cache-dir, --target, --out), and run it again",
    errno.EACCES: "no permission there: run as a user who may, or give the command a folder "
                  "you own (--cache-dir, --target, --out, --lockfiles)",
    errno.EPERM: "not permitted there: run as a user who may, or give the command a folder you "
                 "own (--cache-dir, --target, --out, --lockfiles)",
    errno.EROFS: "a read-only file system: give the command a writable folder (--cache-dir, "
                 "--target, --out, --lockfiles)",
}


def system_error(exc: OSError) -> SamebitsError | None:
    """``exc`` as the error a user reads, when it is the machine refusing (``SYSTEM_HINTS``);
    None for anything else, which stays a bug to see whole."""
    from samebits.errors import InputError

    hint = SYSTEM_HINTS.get(exc.errno or 0)
    if hint is None:
        return None
    where = exc.filename or "a file"
    return InputError(f"{where}: {exc.strerror or exc}", hint=hint)


def asks_json(argv: Sequence[str]) -> bool:
    """Whether a command line asks for --json (before any ``--``): how a usage error, found
    before there are parsed arguments, knows which form to take."""
    args = list(argv)
    return "--json" in (args[:args.index("--")] if "--" in args else args)

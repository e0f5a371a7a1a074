"""Every failure a user can see, as one exception tree.

The CLI (``samebits_app.cli``) is the one edge that turns these into ``error: ...`` plus an
optional ``hint: ...`` and an exit code; nothing below it prints or exits.

    SamebitsError                 exit 2 unless a subclass says otherwise
    ├── UsageError                bad arguments, unknown environment name
    ├── SpecError                 environments/*.toml: every problem found, not the first
    ├── LockfileError             a lockfile that does not parse or is not ours
    ├── InputError                any other bad input file (manifest, attestation, layout)
    │   └── SourceError           an author's requirements.txt / environment.yml /
    │                             pyproject.toml that cannot become a spec (every entry)
    ├── NoWheelError              no wheel of a pinned release for the Python asked or found
    ├── SolveError                exit 3: the solver ran and said no
    │   └── UnsatisfiableError    exit 3: no set of packages satisfies the spec
    ├── UnreachableError          exit 4: a channel or index did not answer in time
    └── ToolError                 exit 5: an external tool (uv, skopeo, ...) failed unexpectedly

Exit codes (docs/reference/exit-codes.md): 0 success, 1 a check found a difference (stale lock,
drift, different bits), 2 bad input or usage, 3 unsatisfiable, 4 unreachable, 5 tool failure.

Words for messages, shared by every module that writes one: ``quote(value)`` shows a value
the way errors quote it (at most ``QUOTE_LIMIT`` characters, however large the value),
``clip(text, limit)`` shortens free text at a word boundary with an ellipsis, and
``plural(n, "package")`` writes "1 package" / "2 packages". Standard library only: the
workload worker imports this module.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

from samebits._compat import dataclass

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2
EXIT_UNSATISFIABLE = 3
EXIT_UNREACHABLE = 4
EXIT_TOOL = 5


QUOTE_LIMIT = 80
KEY_LIMIT = 160  # a key names where a value is: "package[12] <name> (<platform>): hash.md5"
ELLIPSIS = "..."


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``value`` as an error message quotes it: a string in double quotes with newlines and
    quotes escaped, a date or time as TOML writes it, anything else as ``repr``. Longer than
    ``limit`` characters, it is cut at a word boundary where one is near and its full length
    is said: a megabyte of input gives one short line, never a megabyte of output."""
    if isinstance(value, (dt.date, dt.time)):  # as TOML and YAML write them: 2026-11-29
        return value.isoformat()
    if isinstance(value, str):
        if len(value) + 2 <= limit:
            return json.dumps(value, ensure_ascii=False)
        head = clip(value, max(limit - 2, len(ELLIPSIS) + 1))
        return json.dumps(head, ensure_ascii=False) + f" ({len(value):,} characters)"
    text = repr(value)
    if len(text) <= limit:
        return text
    return clip(text, limit) + f" ({len(text):,} characters)"


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: whole when it fits, else cut at the last
    space in its second half (else at punctuation, mid-word only when there is neither) and
    ended with "..."."""
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 1)
    span = range(room, room // 2, -1)
    cut = next((i for i in span if text[i].isspace()), None) or next(
        (i for i in span if not (_in_word(text[i]) and _in_word(text[i - 1]))), room)
    return text[:cut].rstrip(" \t\n,;:") + ELLIPSIS


def _in_word(c: str) -> bool:
    return c.isalnum() or c == "_"


def plural(n: int, word: str, words: str | None = None) -> str:
    """"1 package", "2 packages", "0 packages"; ``words`` for an irregular plural."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


class SamebitsError(Exception):
    """Root of every expected failure; ``hint`` is the next thing the user can try."""

    exit_code = EXIT_BAD_INPUT
    kind = "error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind, "message": self.message}
        if self.hint:
            out["hint"] = self.hint
        return out


class UsageError(SamebitsError):
    kind = "usage"


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing wrong with one value in one file."""

    file: str
    key: str
    value: object
    message: str

    def __str__(self) -> str:
        return self.text()

    def text(self, *, file: bool = True) -> str:
        """``file: key = "value": message``; without the file when ``file`` is false."""
        where = ": ".join(x for x in (self.file if file else "", clip(self.key, KEY_LIMIT))
                          if x)
        if self.value is None:
            return f"{where}: {self.message}" if where else self.message
        return f"{where} = {quote(self.value)}: {self.message}"


def problems_message(problems: Sequence[Problem], *, one_file: bool = False,
                     head: str = "") -> str:
    """One problem as its line; several as "N problems:" and one indented line each. With
    ``one_file``, when they all are in one file, that file is named once, first, followed by
    ``head`` if given ("x.yml: not a conda-lock file: 2 problems: ...")."""
    files = {p.file for p in problems}
    if one_file and len(files) == 1 and problems:
        (file,) = files
        lead = f"{file}: {head}: " if head else f"{file}: "
        if len(problems) == 1:
            return lead + problems[0].text(file=False)
        return lead + f"{len(problems)} problems:\n  " + "\n  ".join(
            p.text(file=False) for p in problems)
    lines = [str(p) for p in problems]
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:\n  " + "\n  ".join(lines)


class SpecError(SamebitsError):
    """An environment spec with one or more problems; all of them are listed."""

    kind = "spec"

    def __init__(self, problems: Sequence[Problem], *, hint: str | None = None) -> None:
        self.problems = tuple(problems)
        super().__init__(problems_message(self.problems), hint=hint)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = problems_json(self.problems)
        return out


def problems_json(problems: Sequence[Problem]) -> list[dict[str, object]]:
    """Problems for --json. A value JSON cannot hold (a TOML or YAML date) or one longer than
    a message would quote becomes its quoted text."""
    return [{"file": p.file, "key": p.key, "message": p.message, "value": _json_value(p.value)}
            for p in problems]


def _json_value(value: object) -> object:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):  # a date or a time from TOML or YAML
        return quote(value)
    return value if len(text) <= 4 * QUOTE_LIMIT else quote(value)


class LockfileError(SamebitsError):
    """A lockfile that cannot be read; ``problems`` lists each bad entry when there are any."""

    kind = "lockfile"

    def __init__(self, message: str | Sequence[Problem], *, hint: str | None = None,
                 head: str = "") -> None:
        self.problems = () if isinstance(message, str) else tuple(message)
        super().__init__(message if isinstance(message, str) else
                         problems_message(self.problems, one_file=True, head=head), hint=hint)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        if self.problems:
            out["problems"] = problems_json(self.problems)
        return out


class InputError(SamebitsError):
    kind = "input"


class SourceError(InputError):
    """``samebits init``'s input: every entry that cannot become part of a spec, each with the
    file, where in it and the text."""

    kind = "source"

    def __init__(self, message: str | Sequence[Problem], *, hint: str | None = None) -> None:
        self.problems = () if isinstance(message, str) else tuple(message)
        super().__init__(message if isinstance(message, str) else
                         problems_message(self.problems, one_file=True), hint=hint)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        if self.problems:
            out["problems"] = problems_json(self.problems)
        return out


class NoWheelError(SamebitsError):
    """Pinned releases without a wheel for the Python a spec would run: each package named with
    the Pythons that do have wheels."""

    kind = "no-wheel"


class SolveError(SamebitsError):
    exit_code = EXIT_UNSATISFIABLE
    kind = "solve"


class UnsatisfiableError(SolveError):
    kind = "unsatisfiable"


class UnreachableError(SamebitsError):
    exit_code = EXIT_UNREACHABLE
    kind = "unreachable"


class ToolError(SamebitsError):
    exit_code = EXIT_TOOL
    kind = "tool"

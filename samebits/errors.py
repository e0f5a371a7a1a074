"""Every failure a user can see, as one exception tree.

The CLI (``samebits.app.cli``) is the one edge that turns these into ``error: ...`` plus an
optional ``hint: ...`` and an exit code; nothing below it prints or exits.

    SamebitsError                 exit 2 unless a subclass says otherwise
    ├── UsageError                bad arguments, unknown environment name
    ├── SpecError                 environments/*.toml: every problem found, not the first
    ├── LockfileError             a lockfile that does not parse or is not ours
    ├── InputError                any other bad input file (manifest, attestation, layout)
    ├── SolveError                exit 3: the solver ran and said no
    │   └── UnsatisfiableError    exit 3: no set of packages satisfies the spec
    ├── UnreachableError          exit 4: a channel or index did not answer in time
    └── ToolError                 exit 5: an external tool (uv, skopeo, ...) failed unexpectedly

Exit codes (README "Exit codes"): 0 success, 1 a check found a difference (stale lock,
drift, different bits), 2 bad input or usage, 3 unsatisfiable, 4 unreachable, 5 tool failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_BAD_INPUT = 2
EXIT_UNSATISFIABLE = 3
EXIT_UNREACHABLE = 4
EXIT_TOOL = 5


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
        value = self.value if isinstance(self.value, str) else repr(self.value)
        if isinstance(self.value, str):
            value = f'"{self.value}"'
        where = f"{self.file}: {self.key}" if self.key else self.file
        if self.value is None:
            return f"{where}: {self.message}"
        return f"{where} = {value}: {self.message}"


class SpecError(SamebitsError):
    """An environment spec with one or more problems; all of them are listed."""

    kind = "spec"

    def __init__(self, problems: Sequence[Problem], *, hint: str | None = None) -> None:
        self.problems = tuple(problems)
        lines = [str(p) for p in self.problems]
        head = lines[0] if len(lines) == 1 else f"{len(lines)} problems:\n  " + "\n  ".join(lines)
        super().__init__(head, hint=hint)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = [
            {"file": p.file, "key": p.key, "value": p.value, "message": p.message}
            for p in self.problems
        ]
        return out


class LockfileError(SamebitsError):
    kind = "lockfile"


class InputError(SamebitsError):
    kind = "input"


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

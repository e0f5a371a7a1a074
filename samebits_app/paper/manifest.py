"""``samebits-paper.toml``: what a paper runs, what it writes, and how each output compares.

    format = 1
    title = "Tiny CNN on generated stripes"
    lockfile = "conda-lock.yml"                    # relative to this file (the default)
    attestation = "reference.attestation.json"     # the default
    outputs = "outputs"                            # attest saves commands' outputs here
    keep-env = ["LD_LIBRARY_PATH"]                 # start-up variables to keep (default none)

    [run]                                          # defaults for every command
    python-hash-seed = 0                           # PYTHONHASHSEED (default 0)
    threads = 4                                    # OMP/MKL_NUM_THREADS; unset: inherited
    deterministic = true                           # the attested torch settings (default)
    timeout = 600                                  # seconds (default 600)
    network = false                                # the sandbox's network (default off)
    env = { SEED = "0" }

    [[inputs]]                                     # data the commands read, pinned
    path = "data/train.csv"                        # relative to this file
    sha256 = "..."                                 # checked before any command runs
    url = "https://..."                            # optional: fetched (and cached) into path

    [[commands]]
    name = "train"
    run = "python train.py --steps 200"            # split like a shell would; no shell runs
    cwd = "."                                      # relative to this file (the default)

    [[commands.outputs]]
    path = "out/metrics.json"                      # relative to cwd
    kind = "metrics"                               # file | tensors | metrics | curve
    metrics = { test_accuracy = { atol = 0.01 } }

A curve's ``regex`` is read with the ``regex`` package under a time limit (``REGEX_SECONDS``
for all of one output's lines together; past it the output is unreadable), so no pattern can
hang samebits. ``rtol`` and ``atol`` are finite numbers >= 0; a non-finite value compares
equal only to the same value (NaN to nothing). Commands run in a sandbox
(``samebits_app.paper.sandbox``): writes only inside the scratch copy, a private /tmp, the
network only with ``network = true``.

``read_manifest`` is the I/O edge; ``PaperManifest.from_mapping`` validates, pure
(``manifestcheck``), and lists every problem (``ManifestError``: file, key, value) before
anything runs. docs/reference/paper-manifest.md documents every key.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import read_regular
from samebits.errors import Problem, SamebitsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST_NAME = "samebits-paper.toml"
MANIFEST_FORMAT = 1
KINDS = ("file", "tensors", "metrics", "curve")
METRIC_FORMATS = {".json": "json", ".csv": "csv", ".yaml": "yaml", ".yml": "yaml"}
CURVE_FORMATS = ("jsonl", "csv", "regex")
STREAMS = ("stdout", "stderr")
DEFAULT_TIMEOUT = 600.0
# A curve's regex runs in samebits' own process, after the command: all of its searches over
# one output get this many seconds together (docs/reference/paper-manifest.md), past which the
# output is unreadable, so a pattern that backtracks without end cannot hang attest or audit.
REGEX_SECONDS = 10.0
TOP_KEYS = ("format", "title", "lockfile", "attestation", "outputs", "keep-env", "run",
            "commands", "inputs")
INPUT_KEYS = ("path", "sha256", "url")
INPUT_SCHEMES = ("https", "http", "file")
RUN_KEYS = ("python-hash-seed", "threads", "deterministic", "timeout", "network", "env")
COMMAND_KEYS = ("name", "run", "cwd", *RUN_KEYS, "outputs")
OUTPUT_KEYS = ("path", "stream", "kind", "rtol", "atol", "save", "format", "metrics", "regex",
               "step", "series")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by samebits for every command (docs/reference/paper-manifest.md): not the manifest's to set.
RESERVED_ENV = ("PATH", "PYTHONHASHSEED", "HOME")


class ManifestError(SamebitsError):
    """A paper manifest with one or more problems; all of them are listed."""

    kind = "manifest"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        lines = [str(p) for p in self.problems]
        head = lines[0] if len(lines) == 1 else f"{len(lines)} problems:\n  " + "\n  ".join(lines)
        super().__init__(head, hint="fix the manifest (docs/reference/paper-manifest.md)")

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = [{"file": p.file, "key": p.key, "value": p.value,
                            "message": p.message} for p in self.problems]
        return out


def usable(x: object) -> bool:
    """A tolerance's rtol or atol: a finite number >= 0 (not a bool)."""
    return (isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
            and x >= 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tolerance:
    """``|a - b| <= atol + rtol * |a|``, ``a`` the authors' value (numpy's ``isclose``), for
    finite values. A non-finite value is within tolerance only of the same value (``inf`` of
    ``inf``, ``-inf`` of ``-inf``) and NaN of nothing: ``rtol * inf`` would otherwise allow
    any reviewer value. A tolerance that is itself not a finite number >= 0 (the manifest
    refuses one; a hand-written attestation may carry one) allows nothing."""

    rtol: float = 0.0
    atol: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        if not usable(self.rtol) or not usable(self.atol):
            return False
        if not (math.isfinite(a) and math.isfinite(b)):
            return a == b  # inf of inf, -inf of -inf; NaN is never equal
        return a == b or abs(a - b) <= self.atol + self.rtol * abs(a)

    def to_json(self) -> dict[str, float]:
        return {"rtol": self.rtol, "atol": self.atol}


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSpec:
    kind: str
    path: str | None = None    # relative to the command's cwd
    stream: str | None = None  # "stdout" | "stderr" (curves)
    tolerance: Tolerance = Tolerance()
    save: bool = True
    fmt: str | None = None     # metrics: json|csv|yaml; curve: jsonl|csv|regex
    metrics: tuple[tuple[str, Tolerance], ...] = ()  # per-metric tolerances; () = every number
    regex: str | None = None
    step: str = "step"
    series: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.path if self.path is not None else f"<{self.stream}>"

    def to_json(self) -> dict[str, Any]:
        """The declaration as the attestation records it (what the comparison will use)."""
        out: dict[str, Any] = {"kind": self.kind, "path": self.path, "stream": self.stream,
                               **self.tolerance.to_json(), "save": self.save}
        if self.kind == "metrics":
            out.update(format=self.fmt, metrics={k: t.to_json() for k, t in self.metrics})
        if self.kind == "curve":
            out.update(format=self.fmt, regex=self.regex, step=self.step,
                       series=list(self.series))
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandSpec:
    name: str
    argv: tuple[str, ...]
    cwd: str = "."
    env: tuple[tuple[str, str], ...] = ()
    threads: int | None = None
    deterministic: bool = True
    hash_seed: int = 0
    timeout: float = DEFAULT_TIMEOUT
    network: bool = False      # the sandbox shares the network only when the manifest asks
    outputs: tuple[OutputSpec, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InputSpec:
    """``[[inputs]]``: a file the commands read, pinned by its sha256 (``samebits_app.paper.
    inputs``): in the paper folder at ``path``, or fetched from ``url`` and put there in the
    scratch copy."""

    path: str   # relative to the paper folder
    sha256: str
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "url": self.url}


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperManifest:
    file: Path      # the manifest, as the user named it
    folder: Path    # the paper folder (the manifest's)
    title: str
    lockfile: Path
    attestation: Path
    outputs: Path
    commands: tuple[CommandSpec, ...]
    # Start-up variables (samebits.childenv: PYTHONPATH, LD_LIBRARY_PATH, ...) that every
    # process samebits starts for this paper (the facts probe, the workload worker, the
    # commands) takes from the caller instead of dropping; recorded, and compared by audit.
    keep_env: tuple[str, ...] = ()
    inputs: tuple[InputSpec, ...] = ()  # [[inputs]]: data pinned by sha256

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, file: Path) -> PaperManifest:
        """Validate ``data`` (the manifest at ``file``); every problem in one ManifestError."""
        from samebits_app.paper.manifestcheck import validate

        return validate(data, file=file)


def manifest_path(given: Path) -> Path:
    """The manifest a PAPER argument names: the file, or the folder's samebits-paper.toml."""
    return given / MANIFEST_NAME if given.is_dir() else given


def read_manifest(given: Path) -> PaperManifest:
    """Read and validate the manifest at ``given`` (a file, or a folder that holds one)."""
    path = manifest_path(Path(given))
    where = str(path)
    try:
        data = tomllib.loads(read_regular(path).decode("utf-8"))
    except FileNotFoundError:
        raise ManifestError([Problem(file=where, key="", value=None, message="no such file")]
                            ) from None
    except UnicodeDecodeError as exc:
        raise ManifestError([Problem(file=where, key="", value=None,
                                     message=f"not UTF-8 text (byte {exc.start})")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError([Problem(file=where, key="", value=None,
                                     message=f"not valid TOML: {exc}")]) from None
    except IsADirectoryError:
        raise ManifestError([Problem(file=where, key="", value=None,
                                     message="is a folder, not a manifest")]) from None
    except OSError as exc:  # a FIFO, a device: refused unread (``read_regular``)
        raise ManifestError([Problem(file=where, key="", value=None,
                                     message=f"cannot read: {exc.strerror}")]) from None
    return PaperManifest.from_mapping(data, file=path)

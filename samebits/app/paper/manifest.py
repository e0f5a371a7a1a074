"""``samebits-paper.toml``: what a paper runs, what it writes, and how each output compares.

    format = 1
    title = "Tiny CNN on generated stripes"
    lockfile = "conda-lock.yml"                    # relative to this file (the default)
    attestation = "reference.attestation.json"     # the default
    outputs = "outputs"                            # attest saves commands' outputs here

    [run]                                          # defaults for every command
    python-hash-seed = 0                           # PYTHONHASHSEED (default 0)
    threads = 4                                    # OMP/MKL_NUM_THREADS; unset: inherited
    deterministic = true                           # the attested torch settings (default)
    timeout = 600                                  # seconds (default 600)
    env = { SEED = "0" }

    [[commands]]
    name = "train"
    run = "python train.py --steps 200"            # split like a shell would; no shell runs
    cwd = "."                                      # relative to this file (the default)

    [[commands.outputs]]
    path = "out/metrics.json"                      # relative to cwd
    kind = "metrics"                               # file | tensors | metrics | curve
    metrics = { test_accuracy = { atol = 0.01 } }

``read_manifest`` is the I/O edge; ``PaperManifest.from_mapping`` validates, pure, and lists
every problem (``ManifestError``: file, key, value) before anything runs. README "The paper
manifest" documents every key.
"""

from __future__ import annotations

import difflib
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

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
TOP_KEYS = ("format", "title", "lockfile", "attestation", "outputs", "run", "commands")
RUN_KEYS = ("python-hash-seed", "threads", "deterministic", "timeout", "env")
COMMAND_KEYS = ("name", "run", "cwd", *RUN_KEYS, "outputs")
OUTPUT_KEYS = ("path", "stream", "kind", "rtol", "atol", "save", "format", "metrics", "regex",
               "step", "series")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Set by samebits for every command (README "The paper manifest"): not the manifest's to set.
RESERVED_ENV = ("PATH", "PYTHONHASHSEED", "HOME")


class ManifestError(SamebitsError):
    """A paper manifest with one or more problems; all of them are listed."""

    kind = "manifest"

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        lines = [str(p) for p in self.problems]
        head = lines[0] if len(lines) == 1 else f"{len(lines)} problems:\n  " + "\n  ".join(lines)
        super().__init__(head, hint="fix the manifest (README \"The paper manifest\")")

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = [{"file": p.file, "key": p.key, "value": p.value,
                            "message": p.message} for p in self.problems]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Tolerance:
    """``|a - b| <= atol + rtol * |a|``, ``a`` the authors' value (numpy's ``isclose``)."""

    rtol: float = 0.0
    atol: float = 0.0

    def allows(self, a: float, b: float) -> bool:
        if a == b or (a != a and b != b):  # equal, or both NaN
            return True
        return abs(a - b) <= self.atol + self.rtol * abs(a)

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
    outputs: tuple[OutputSpec, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperManifest:
    file: Path      # the manifest, as the user named it
    folder: Path    # the paper folder (the manifest's)
    title: str
    lockfile: Path
    attestation: Path
    outputs: Path
    commands: tuple[CommandSpec, ...]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, file: Path) -> PaperManifest:
        v = _Validator(str(file))
        folder = file.parent
        fmt = data.get("format")
        if fmt != MANIFEST_FORMAT:
            v.add("format", fmt, f"this samebits reads format {MANIFEST_FORMAT}"
                  if fmt is not None else f"missing: write format = {MANIFEST_FORMAT}")
        v.keys(data, TOP_KEYS, "")
        title = v.string(data, "title", "title", default="") or ""
        paths = {k: v.relpath(data, k, k, default=d) for k, d in (
            ("lockfile", "conda-lock.yml"), ("attestation", "reference.attestation.json"),
            ("outputs", "outputs"))}
        run = data.get("run", {})
        if not isinstance(run, Mapping):
            v.add("run", run, "expected a table")
            run = {}
        v.keys(run, RUN_KEYS, "run")
        defaults = _run_settings(v, run, "run", {})
        commands = data.get("commands")
        out: list[CommandSpec] = []
        if not isinstance(commands, list) or not commands:
            v.add("commands", commands, "expected at least one [[commands]] table")
            commands = []
        seen: set[str] = set()
        for i, cmd in enumerate(commands):
            spec = _command(v, cmd, f"commands[{i}]", defaults)
            if spec is None:
                continue
            if spec.name in seen:
                v.add(f"commands[{i}].name", spec.name, "another command has this name")
            seen.add(spec.name)
            out.append(spec)
        v.raise_if_any()
        return cls(file=file, folder=folder, title=title,
                   lockfile=folder / (paths["lockfile"] or "conda-lock.yml"),
                   attestation=folder / (paths["attestation"] or "reference.attestation.json"),
                   outputs=folder / (paths["outputs"] or "outputs"), commands=tuple(out))


class _Validator:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def add(self, key: str, value: object, message: str) -> None:
        if isinstance(value, str) and len(value) > 80:
            value = value[:77] + "..."
        self.problems.append(Problem(file=self.file, key=key, value=value, message=message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise ManifestError(self.problems)

    def keys(self, data: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(allowed)}"
                self.add(f"{where}.{key}" if where else key, data[key], f"unknown key; {hint}")

    def string(self, data: Mapping[str, Any], key: str, where: str, *,
               default: str | None = None) -> str | None:
        value = data.get(key, default)
        if value is not None and not isinstance(value, str):
            self.add(where, value, "expected a string")
            return None
        return value

    def relpath(self, data: Mapping[str, Any], key: str, where: str, *,
                default: str | None = None) -> str | None:
        """A relative path that stays inside its folder."""
        value = self.string(data, key, where, default=default)
        if value is None:
            return None
        p = PurePosixPath(value)
        if not value or p.is_absolute() or ".." in p.parts or "\\" in value:
            self.add(where, value, "expected a relative path inside the paper folder "
                     "(no '..', not absolute)")
            return None
        return value

    def number(self, data: Mapping[str, Any], key: str, where: str, default: float) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (
                value != value):
            self.add(where, value, "expected a number >= 0")
            return default
        return float(value)


def _run_settings(v: _Validator, data: Mapping[str, Any], where: str,
                  base: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings of ``data`` over ``base`` (the [run] table's, for a command)."""
    out = dict(base) or {"hash_seed": 0, "threads": None, "deterministic": True,
                         "timeout": DEFAULT_TIMEOUT, "env": {}}
    if "python-hash-seed" in data:
        seed = data["python-hash-seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 4294967295:
            v.add(f"{where}.python-hash-seed", seed, "expected an integer 0..4294967295 "
                  "(a fixed seed: 'random' would make str hashes differ run to run)")
        else:
            out["hash_seed"] = seed
    if "threads" in data:
        n = data["threads"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            v.add(f"{where}.threads", n, "expected an integer >= 1")
        else:
            out["threads"] = n
    if "deterministic" in data:
        if not isinstance(data["deterministic"], bool):
            v.add(f"{where}.deterministic", data["deterministic"], "expected true or false")
        else:
            out["deterministic"] = data["deterministic"]
    if "timeout" in data:
        t = v.number(data, "timeout", f"{where}.timeout", DEFAULT_TIMEOUT)
        if t == 0:
            v.add(f"{where}.timeout", data["timeout"], "expected a number of seconds > 0")
        out["timeout"] = t or DEFAULT_TIMEOUT
    env = data.get("env", {})
    if not isinstance(env, Mapping):
        v.add(f"{where}.env", env, "expected a table of NAME = \"value\"")
        env = {}
    merged = dict(out["env"])
    for k, val in env.items():
        key = f"{where}.env.{k}"
        if not ENV_NAME.match(k):
            v.add(key, val, "not an environment variable name")
        elif k in RESERVED_ENV:
            v.add(key, val, "samebits sets this one (README \"The paper manifest\"); "
                  + ("use python-hash-seed" if k == "PYTHONHASHSEED" else "remove it"))
        elif not isinstance(val, str):
            v.add(key, val, "expected a string (environment values are text)")
        else:
            merged[k] = val
    out["env"] = merged
    return out


def _command(v: _Validator, data: Any, where: str,
             defaults: Mapping[str, Any]) -> CommandSpec | None:
    if not isinstance(data, Mapping):
        v.add(where, data, "expected a table")
        return None
    v.keys(data, COMMAND_KEYS, where)
    name = v.string(data, "name", f"{where}.name")
    if name is None or not NAME.match(name):
        v.add(f"{where}.name", name, "expected a name of letters, digits, '.', '_' or '-'"
              if name is not None else "missing: every command needs a name")
        name = None
    run = data.get("run")
    argv: tuple[str, ...] = ()
    if isinstance(run, str):
        try:
            argv = tuple(shlex.split(run))
        except ValueError as exc:
            v.add(f"{where}.run", run, f"cannot split into words: {exc}")
    elif isinstance(run, list) and all(isinstance(a, str) for a in run):
        argv = tuple(run)
    else:
        v.add(f"{where}.run", run, "expected a command line (a string or a list of strings)"
              if run is not None else "missing: the command line to run")
    if isinstance(run, str | list) and not argv and not any(
            p.key == f"{where}.run" for p in v.problems):
        v.add(f"{where}.run", run, "empty command")
    cwd = v.relpath(data, "cwd", f"{where}.cwd", default=".") or "."
    settings = _run_settings(v, data, where, defaults)
    outputs = data.get("outputs", [])
    if not isinstance(outputs, list):
        v.add(f"{where}.outputs", outputs, "expected [[commands.outputs]] tables")
        outputs = []
    specs = [s for i, o in enumerate(outputs)
             if (s := _output(v, o, f"{where}.outputs[{i}]")) is not None]
    labels = [s.label for s in specs]
    for dup in sorted({x for x in labels if labels.count(x) > 1}):
        v.add(f"{where}.outputs", dup, "declared twice")
    if name is None or not argv:
        return None
    return CommandSpec(name=name, argv=argv, cwd=str(PurePosixPath(cwd)),
                       env=tuple(sorted(settings["env"].items())), threads=settings["threads"],
                       deterministic=settings["deterministic"], hash_seed=settings["hash_seed"],
                       timeout=settings["timeout"], outputs=tuple(specs))


def _output(v: _Validator, data: Any, where: str) -> OutputSpec | None:
    if not isinstance(data, Mapping):
        v.add(where, data, "expected a table")
        return None
    v.keys(data, OUTPUT_KEYS, where)
    kind = data.get("kind")
    if kind not in KINDS:
        v.add(f"{where}.kind", kind, f"expected one of {', '.join(KINDS)}"
              if kind is not None else f"missing: one of {', '.join(KINDS)}")
        return None
    path = v.relpath(data, "path", f"{where}.path") if "path" in data else None
    stream = data.get("stream")
    if stream is not None and (stream not in STREAMS or kind != "curve"):
        v.add(f"{where}.stream", stream, "expected stdout or stderr (curves only)"
              if kind == "curve" else "only a curve reads a stream; give a path")
        stream = None
    if ("path" in data) == ("stream" in data):
        v.add(where, None, "give exactly one of path and stream")
    tol = Tolerance(rtol=v.number(data, "rtol", f"{where}.rtol", 0.0),
                    atol=v.number(data, "atol", f"{where}.atol", 0.0))
    if kind == "file" and ("rtol" in data or "atol" in data):
        v.add(f"{where}.rtol" if "rtol" in data else f"{where}.atol",
              data.get("rtol", data.get("atol")), "a file compares by bytes: no tolerance")
    save = data.get("save", True)
    if not isinstance(save, bool):
        v.add(f"{where}.save", save, "expected true or false")
        save = True
    extra = {k for k in ("format", "metrics", "regex", "step", "series") if k in data}
    allowed = {"metrics": {"format", "metrics"}, "curve": {"format", "regex", "step", "series"}}
    for k in sorted(extra - allowed.get(kind, set())):
        v.add(f"{where}.{k}", data[k], f"not a key of a {kind} output")
    spec = OutputSpec(kind=kind, path=path, stream=stream, tolerance=tol, save=save)
    if kind == "metrics":
        return _metrics(v, data, where, spec)
    if kind == "curve":
        return _curve(v, data, where, spec)
    return spec


def _metrics(v: _Validator, data: Mapping[str, Any], where: str, spec: OutputSpec) -> OutputSpec:
    fmt = data.get("format") or METRIC_FORMATS.get(PurePosixPath(spec.path or "").suffix.lower())
    if fmt not in METRIC_FORMATS.values():
        v.add(f"{where}.format", data.get("format", spec.path),
              "expected json, csv or yaml (or a .json/.csv/.yaml path)")
    table = data.get("metrics", {})
    per: list[tuple[str, Tolerance]] = []
    if not isinstance(table, Mapping):
        v.add(f"{where}.metrics", table, "expected a table of name = { rtol, atol }")
        table = {}
    for name, t in table.items():
        key = f"{where}.metrics.{name}"
        if not isinstance(t, Mapping) or set(t) - {"rtol", "atol"}:
            v.add(key, t, "expected { rtol = ..., atol = ... }")
            continue
        per.append((name, Tolerance(rtol=v.number(t, "rtol", f"{key}.rtol", spec.tolerance.rtol),
                                    atol=v.number(t, "atol", f"{key}.atol",
                                                  spec.tolerance.atol))))
    return OutputSpec(kind="metrics", path=spec.path, stream=None, tolerance=spec.tolerance,
                      save=spec.save, fmt=fmt, metrics=tuple(sorted(per)))


def _curve(v: _Validator, data: Mapping[str, Any], where: str, spec: OutputSpec) -> OutputSpec:
    regex = v.string(data, "regex", f"{where}.regex")
    suffix = PurePosixPath(spec.path or "").suffix.lower()
    fmt = data.get("format") or ("regex" if regex or spec.stream else
                                 "csv" if suffix == ".csv" else "jsonl")
    if fmt not in CURVE_FORMATS:
        v.add(f"{where}.format", fmt, f"expected {', '.join(CURVE_FORMATS)}")
    if fmt == "regex" and not regex:
        v.add(f"{where}.regex", None, "missing: a stream (or format = \"regex\") needs a regex "
              "whose first group is the step")
    step = v.string(data, "step", f"{where}.step", default="step") or "step"
    series = data.get("series", [])
    if not isinstance(series, list) or not all(isinstance(s, str) and s for s in series):
        v.add(f"{where}.series", series, "expected a list of names")
        series = []
    if regex:
        try:
            groups = re.compile(regex)
        except re.error as exc:
            v.add(f"{where}.regex", regex, f"not a regular expression: {exc}")
        else:
            named = [n for n in groups.groupindex if n != step]
            if groups.groups < 2:
                v.add(f"{where}.regex", regex, "needs two groups or more: the step, then values")
            elif not named and len(series) != groups.groups - 1:
                v.add(f"{where}.series", series, f"name the regex's {groups.groups - 1} value "
                      "group(s), in order (or use named groups)")
            elif named and not series:
                series = named
    return OutputSpec(kind="curve", path=spec.path, stream=spec.stream,
                      tolerance=spec.tolerance, save=spec.save, fmt=fmt, regex=regex,
                      step=step, series=tuple(series))


def manifest_path(given: Path) -> Path:
    """The manifest a PAPER argument names: the file, or the folder's samebits-paper.toml."""
    return given / MANIFEST_NAME if given.is_dir() else given


def read_manifest(given: Path) -> PaperManifest:
    """Read and validate the manifest at ``given`` (a file, or a folder that holds one)."""
    path = manifest_path(Path(given))
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
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
    return PaperManifest.from_mapping(data, file=path)

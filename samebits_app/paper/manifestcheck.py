"""Validating a paper manifest, key by key, collecting every problem (``ManifestError``).

``validate`` is what ``PaperManifest.from_mapping`` calls: each reader returns the value (or a
default) and records a ``Problem`` naming the file, the dotted key
(``commands[0].outputs[1].kind``) and the value. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import regex as _regex

from samebits.errors import Problem
from samebits_app.paper.manifest import (
    COMMAND_KEYS,
    CURVE_FORMATS,
    DEFAULT_TIMEOUT,
    ENV_NAME,
    INPUT_KEYS,
    INPUT_SCHEMES,
    KINDS,
    MANIFEST_FORMAT,
    METRIC_FORMATS,
    NAME,
    OUTPUT_KEYS,
    RESERVED_ENV,
    RUN_KEYS,
    STREAMS,
    TOP_KEYS,
    CommandSpec,
    InputSpec,
    ManifestError,
    OutputSpec,
    PaperManifest,
    Tolerance,
    usable,
)


def validate(data: Mapping[str, Any], *, file: Path) -> PaperManifest:
    """The manifest ``data`` (read from ``file``) means, or every problem with it."""
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
    keep_env = _keep_env(v, data.get("keep-env", []))
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
    inputs = _inputs(v, data.get("inputs", []), {**paths, "manifest": file.name}, out)
    v.raise_if_any()
    return PaperManifest(
        file=file, folder=folder, title=title,
        lockfile=folder / (paths["lockfile"] or "conda-lock.yml"),
        attestation=folder / (paths["attestation"] or "reference.attestation.json"),
        outputs=folder / (paths["outputs"] or "outputs"), commands=tuple(out),
        keep_env=keep_env, inputs=inputs)


SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _inputs(v: _Validator, value: Any, paths: Mapping[str, str | None],
            commands: list[CommandSpec]) -> tuple[InputSpec, ...]:
    """``[[inputs]]``: path (inside the paper folder, not an output), sha256, optional url."""
    from urllib.parse import urlsplit

    if not isinstance(value, list):
        v.add("inputs", value, "expected [[inputs]] tables")
        return ()
    outputs = PurePosixPath(paths.get("outputs") or "outputs")
    taken = {str(PurePosixPath(c.cwd) / o.path) for c in commands for o in c.outputs if o.path}
    special = {str(PurePosixPath(p)) for k, p in paths.items() if k != "outputs" and p}
    out: list[InputSpec] = []
    for i, item in enumerate(value):
        where = f"inputs[{i}]"
        if not isinstance(item, Mapping):
            v.add(where, item, "expected a table")
            continue
        v.keys(item, INPUT_KEYS, where)
        path = v.relpath(item, "path", f"{where}.path")
        if "path" not in item:
            v.add(f"{where}.path", None, "missing: where the commands read it, relative to "
                  "the paper folder")
        sha = v.string(item, "sha256", f"{where}.sha256")
        if sha is None or not SHA256.match(sha):
            v.add(f"{where}.sha256", sha, "expected the file's sha256: 64 lowercase hex digits "
                  "(sha256sum FILE)" if sha is not None else "missing: the file's sha256 "
                  "(sha256sum FILE)")
            sha = None
        url = v.string(item, "url", f"{where}.url")
        if url is not None and (urlsplit(url).scheme not in INPUT_SCHEMES
                                or not urlsplit(url).path):
            v.add(f"{where}.url", url, f"expected a {', '.join(INPUT_SCHEMES)} URL")
            url = None
        if path is None or sha is None:
            continue
        norm = str(PurePosixPath(path))
        if norm in special:
            v.add(f"{where}.path", path, "the manifest, its lockfile or its attestation, not "
                  "an input")
        elif PurePosixPath(norm) == outputs or outputs in PurePosixPath(norm).parents:
            v.add(f"{where}.path", path, f"inside the outputs folder ({outputs}): attest "
                  "rewrites it")
        elif norm in taken:
            v.add(f"{where}.path", path, "a declared output: a command writes it")
        elif norm in (s.path for s in out):
            v.add(f"{where}.path", path, "declared twice")
        else:
            out.append(InputSpec(path=norm, sha256=sha, url=url))
    return tuple(out)


def _keep_env(v: _Validator, value: Any) -> tuple[str, ...]:
    """``keep-env``: names of variables samebits drops from (or sets in) what it starts."""
    from samebits.childenv import keepable

    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        v.add("keep-env", value, "expected a list of environment variable names")
        return ()
    for i, name in enumerate(value):
        if not ENV_NAME.match(name):
            v.add(f"keep-env[{i}]", name, "not an environment variable name")
        elif not keepable(name):
            v.add(f"keep-env[{i}]", name, "samebits passes this variable already: keep-env "
                  "names start-up variables it drops (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, "
                  "PYTHONUSERBASE, PYTHONNOUSERSITE, LD_PRELOAD, LD_LIBRARY_PATH, any other "
                  "PYTHON* or LD_*)")
        elif name in value[:i]:
            v.add(f"keep-env[{i}]", name, "named twice")
    return tuple(sorted(set(value)))


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
        if not usable(value):
            infinite = isinstance(value, float) and not math.isfinite(value)
            self.add(where, value, "expected a finite number >= 0" + (
                " (inf and nan are not tolerances: nothing would be beyond them)"
                if infinite and key in ("rtol", "atol") else ""))
            return default
        return float(value)


def _run_settings(v: _Validator, data: Mapping[str, Any], where: str,
                  base: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings of ``data`` over ``base`` (the [run] table's, for a command)."""
    out = dict(base) or {"hash_seed": 0, "threads": None, "deterministic": True,
                         "timeout": DEFAULT_TIMEOUT, "network": False, "env": {}}
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
    if "network" in data:
        if not isinstance(data["network"], bool):
            v.add(f"{where}.network", data["network"], "expected true or false")
        else:
            out["network"] = data["network"]
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
            v.add(key, val, "samebits sets this one (docs/reference/paper-manifest.md); "
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
                       timeout=settings["timeout"], network=settings["network"],
                       outputs=tuple(specs))


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
            groups = _regex.compile(regex)
        except (_regex.error, ValueError, OverflowError) as exc:
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

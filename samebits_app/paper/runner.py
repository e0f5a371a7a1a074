"""Run a paper's commands in its environment and record what they wrote.

The commands run in a scratch copy of the paper folder (``prepare_workdir``: everything but
the saved outputs, the attestation and the declared outputs, so a stale file can never pass
for a fresh one, and the paper folder itself is never written), one after another, each:

    argv       the manifest's, no shell; ``python`` is the environment's (its bin/ is first
               on PATH)
    cwd        the manifest's ``cwd`` inside the scratch copy
    env        built from nothing (``command_env``): PATH = $BIN:/usr/local/bin:/usr/bin:/bin,
               HOME, the locale and TZ and every numerics variable (OMP_*, MKL_*, CUDA_*, ...)
               of the caller's clean environment (``samebits.childenv``: no PYTHONPATH,
               LD_PRELOAD, LD_LIBRARY_PATH, ... of the caller's unless the manifest's
               ``keep-env`` names them), PYTHONNOUSERSITE=1, PYTHONHASHSEED,
               PYTHONUNBUFFERED=1, OMP/MKL_NUM_THREADS when the manifest says threads,
               CUBLAS_WORKSPACE_CONFIG and the settings hook on PYTHONPATH when it says
               deterministic (``hook``; before a kept PYTHONPATH), then the manifest's env
    stdin      /dev/null; stdout and stderr to files; killed (its whole process group) at
               the timeout; the last ``TAIL`` lines kept for the reason when it fails
    sandbox    bubblewrap where it runs here (``sandbox``): writes only inside the scratch
               copy, a private /tmp, no network unless the manifest says ``network = true``;
               elsewhere none, and the record's ``sandbox`` says so with a warning

The record (``CommandRecord`` as JSON, what the attestation's ``paper`` key holds per
command) says everything that can change a result: the command, its cwd relative to the paper
folder, every variable it was given (host paths written as $BIN, $HOME and $HOOK), which of
them came from the caller, the settings and torch's readback of them, and per output its
sha256 and comparable values (``values``; tensors through the worker,
``python -m verify.gpu.errorstats``). No timings: equal results give equal bytes.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import read_json
from samebits.childenv import NO_USER_SITE, child_environ
from samebits_app.paper import confine, hook, values
from samebits_app.paper.manifest import CommandSpec, OutputSpec, PaperManifest
from samebits_app.paper.sandbox import Sandbox, readable_for
from samebits_app.paper.sandbox import detect as detect_sandbox
from verify.gpu.facts.model import is_numeric_env

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PASSED = ("HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ")
TAIL = 20
TRACEBACK = "Traceback (most recent call last):"
TRACEBACK_MAX = 200
TensorRecords = Callable[[Sequence[Path]], Mapping[str, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """Where the commands run: the environment's interpreter folder, the caller's env and the
    start-up variables of it the manifest keeps (``keep-env``)."""

    bin: Path
    environ: Mapping[str, str]
    keep: tuple[str, ...] = ()


def command_env(spec: CommandSpec, *, host: Host, hook_dir: Path | None,
                settings: Mapping[str, Any] | None) -> tuple[dict[str, str], dict[str, str],
                                                               list[str]]:
    """(the process's environment, the same as recorded, the names taken from the caller)."""
    caller = host.environ
    clean = child_environ(caller, keep=host.keep)
    env: dict[str, str] = {}
    inherited = [k for k in sorted(clean) if k in caller and (
        k in PASSED or k in host.keep or (is_numeric_env(k) and k != "PYTHONHASHSEED"))]
    env.update({k: clean[k] for k in inherited})
    if NO_USER_SITE in clean and NO_USER_SITE not in env:
        env[NO_USER_SITE] = clean[NO_USER_SITE]
    env["PATH"] = f"{host.bin}:{SYSTEM_PATH}"
    env["PYTHONHASHSEED"] = str(spec.hash_seed)
    env["PYTHONUNBUFFERED"] = "1"
    if spec.threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(spec.threads)
    if settings is not None and hook_dir is not None:
        workspace = settings.get("cublas_workspace_config")
        if workspace:
            env["CUBLAS_WORKSPACE_CONFIG"] = workspace
    if hook_dir is not None:  # the settings hook, or paper init's recorder of opens alone
        env["PYTHONPATH"] = ":".join([str(hook_dir), *([env["PYTHONPATH"]]
                                                        if env.get("PYTHONPATH") else [])])
    for k, v in spec.env:
        env[k] = f"{env['PYTHONPATH']}:{v}" if k == "PYTHONPATH" and "PYTHONPATH" in env else v
    hooked = f"{hook_dir}:{clean.get('PYTHONPATH')}"  # the hook before a kept PYTHONPATH
    inherited = [k for k in inherited if env.get(k) == clean.get(k)
                 or (k == "PYTHONPATH" and hook_dir is not None and env.get(k) == hooked)]
    recorded = {k: _placeholders(v, host=host, hook_dir=hook_dir) for k, v in env.items()}
    return env, recorded, inherited


def _placeholders(value: str, *, host: Host, hook_dir: Path | None) -> str:
    out = value.replace(str(host.bin), "$BIN")
    if hook_dir is not None:
        out = out.replace(str(hook_dir), "$HOOK")
    home = host.environ.get("HOME")
    if home and home != "/":
        out = out.replace(home, "$HOME")
    return out


def prepare_workdir(manifest: PaperManifest, dest: Path, *, skip: Sequence[Path] = ()) -> None:
    """Copy the paper folder to ``dest``, without what must not be an input to the run: the
    declared outputs are left out by their place in the folder (not where a link there
    points), and a declared output or command folder that is still a link in the copy is
    refused (``confine.UnsafeOutput``) before anything runs."""
    folder = manifest.folder.resolve()
    leave = {p.resolve() for p in skip}
    leave.update(Path(os.path.normpath(folder / p.relative_to(manifest.folder)))
                 for p in (manifest.outputs, manifest.attestation))
    for cmd in manifest.commands:
        leave.update(Path(os.path.normpath(folder / cmd.cwd / o.path))
                     for o in cmd.outputs if o.path)

    def ignore(where: str, names: list[str]) -> list[str]:
        base = Path(where)
        return [n for n in names if n == "__pycache__" or (base / n) in leave
                or (base / n).resolve() in leave]

    shutil.copytree(folder, dest, symlinks=True, ignore=ignore, dirs_exist_ok=True)
    confine.check_outputs(dest, [c.cwd for c in manifest.commands] + [
        f"{c.cwd}/{o.path}" for c in manifest.commands for o in c.outputs if o.path])


def _tail(*texts: str) -> list[str]:
    """The last ``TAIL`` lines of the first text that has any, or, where those end a Python
    traceback, that whole traceback (up to ``TRACEBACK_MAX`` lines), each line as printed."""
    for text in texts:
        lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
        if lines:
            starts = [i for i, ln in enumerate(lines) if ln.startswith(TRACEBACK)]
            if starts and len(lines) - starts[-1] > TAIL:
                return lines[max(starts[-1], len(lines) - TRACEBACK_MAX):]
            return lines[-TAIL:]
    return []


def run_command(spec: CommandSpec, *, workdir: Path, host: Host,
                settings: Mapping[str, Any] | None, tensor_records: TensorRecords,
                save: Path | None = None, save_all: bool = False,
                sandbox: Sandbox | None = None, trace: Path | None = None) -> dict[str, Any]:
    """Run ``spec`` in ``workdir`` (a prepared copy of the paper folder) and record it;
    ``save``: copy its outputs there (``saved_path``), all of them with ``save_all``, else
    those declared with ``save = true``. ``sandbox``: where it runs (``sandbox.detect()``
    when not given), recorded as the record's ``sandbox``. ``trace`` (``samebits paper
    init``): a folder that receives the command's ``stdout``, ``stderr`` and ``opens.jsonl``,
    every file its Python processes opened (``hook``, ``opens``)."""
    sandbox = sandbox if sandbox is not None else detect_sandbox()
    cwd = workdir / spec.cwd
    record: dict[str, Any] = {
        "run": list(spec.argv), "cwd": spec.cwd, "python_hash_seed": spec.hash_seed,
        "threads": spec.threads, "deterministic": spec.deterministic,
        "settings": dict(settings) if settings is not None and spec.deterministic else None,
        "timeout": spec.timeout, "sandbox": sandbox.record(network=spec.network)}
    with tempfile.TemporaryDirectory(prefix="samebits-paper.") as tmp:
        applied = settings if spec.deterministic else None
        opens = Path(tmp) / "opens.jsonl" if trace is not None else None
        hook_dir = Path(tmp) / "hook" if applied is not None or opens else None
        readback = Path(tmp) / hook.READBACK
        if hook_dir is not None:
            hook_dir.mkdir()
            (hook_dir / "sitecustomize.py").write_text(hook.source(
                applied, str(readback), opens=str(opens) if opens else None))
        env, recorded, inherited = command_env(spec, host=host, hook_dir=hook_dir,
                                               settings=applied)
        record.update(env=recorded, inherited=inherited)
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        argv = functools.partial(sandbox.argv, spec.argv, cwd=cwd, env=env,
                                 writable=(workdir, Path(tmp)), network=spec.network,
                                 readable=readable_for(host.bin))
        status, code = _execute(spec, cwd=cwd, env=env, stdout=out_path, stderr=err_path,
                                argv=argv)
        stdout = out_path.read_text(errors="replace")
        stderr = err_path.read_text(errors="replace")
        if trace is not None:
            _keep_trace(trace, out_path, err_path, opens)
        record["status"], record["exit_code"] = status, code
        record["torch_settings"] = (read_json(readback) if hook_dir is not None
                                    and readback.is_file() else None)
        if status != "ok":
            record["tail"] = [_unplaced(t, workdir) for t in (
                _tail(stderr, stdout) if status != "not-started" else [stderr])]
            record["outputs"] = [_declared(o) for o in spec.outputs]
            return record
        streams = {"stdout": stdout, "stderr": stderr}
        record["outputs"] = output_records(spec, root=workdir, streams=streams,
                                           tensor_records=tensor_records)
        if save is not None:
            _save(spec, root=workdir, streams=streams, dest=save, every=save_all)
    return record


def output_records(spec: CommandSpec, *, root: Path, streams: Mapping[str, str],
                   tensor_records: TensorRecords) -> list[dict[str, Any]]:
    """The record of each output ``spec`` declares, read from the scratch copy ``root`` the
    command ran in (``streams``: its stdout and stderr), the tensors files through
    ``tensor_records`` (the worker) in one request."""
    files = [f for o in spec.outputs if o.path and o.kind == "tensors"
             and (f := _plain(root, f"{spec.cwd}/{o.path}")) is not None]
    tensors = tensor_records(files) if files else {}
    return [_output(o, root=root, cwd=spec.cwd, streams=streams, tensors=tensors)
            for o in spec.outputs]


def _keep_trace(trace: Path, stdout: Path, stderr: Path, opens: Path | None) -> None:
    trace.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(stdout, trace / "stdout")
    shutil.copyfile(stderr, trace / "stderr")
    if opens is not None and opens.is_file():
        shutil.copyfile(opens, trace / "opens.jsonl")
    else:
        (trace / "opens.jsonl").write_bytes(b"")


def _unplaced(line: str, workdir: Path) -> str:
    """A line of output with the scratch copy's path written as ``$PAPER``: the record must
    not depend on where the copy was made."""
    for where in dict.fromkeys((str(workdir.resolve()), str(workdir))):
        line = line.replace(where, "$PAPER")
    return line


def _execute(spec: CommandSpec, *, cwd: Path, env: Mapping[str, str], stdout: Path,
             stderr: Path, argv: Callable[[], list[str]] | None = None
             ) -> tuple[str, int | None]:
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        try:
            command = argv() if argv is not None else list(spec.argv)
            proc = subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=out,
                                    stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:  # no such program, no such cwd, not executable
            err.write(f"{spec.argv[0]}: {exc.strerror} (cwd {spec.cwd})".encode())
            return "not-started", None
        try:
            return ("ok" if proc.wait(timeout=spec.timeout) == 0 else "failed"), proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "timed-out", None
        except BaseException:  # interrupted: take the command's process group down with us
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise


def _declared(o: OutputSpec) -> dict[str, Any]:
    return {"output": o.label, **o.to_json()}


def _plain(root: Path, rel: str) -> Path | None:
    try:
        return confine.plain_output(root, rel)
    except confine.UnsafeOutput:
        return None


def _output(o: OutputSpec, *, root: Path, cwd: str, streams: Mapping[str, str],
            tensors: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The record of one output, read from the scratch copy ``root`` without following a
    link (``confine``): a link there is the output's ``error``, never its bytes."""
    rec = _declared(o)
    if o.stream is not None:
        data = streams[o.stream].encode()
    else:
        try:
            read = confine.read_output(root, f"{cwd}/{o.path}")
        except confine.UnsafeOutput as exc:
            return {**rec, "error": exc.message}
        if read is None:
            return {**rec, "missing": True}
        data = read
    rec.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    try:
        if o.kind == "metrics":
            rec["values"] = jsonable(values.metrics(data.decode(), o.fmt or "json"))
        elif o.kind == "curve":
            rec["curve"] = jsonable(values.curve(data.decode(errors="replace"), o))
        elif o.kind == "tensors":
            got = tensors.get(str(root / cwd / (o.path or "")), {"error": "not read"})
            if "error" in got:
                raise ValueError(got["error"])
            rec["tensors"] = got["tensors"]
    except (ValueError, UnicodeDecodeError) as exc:
        rec["error"] = str(exc)
    return rec


def jsonable(obj: Any) -> Any:
    """Non-finite floats as "nan", "inf", "-inf": the attestation is strict JSON."""
    if isinstance(obj, float) and obj != obj:
        return "nan"
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return "inf" if obj > 0 else "-inf"
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [jsonable(v) for v in obj]
    return obj


def saved_path(root: Path, command: CommandSpec | str, cwd: str, o: OutputSpec | Mapping) -> Path:
    """Where an output is saved under ``root`` (the manifest's outputs/commands folder)."""
    name = command if isinstance(command, str) else command.name
    path = o.path if isinstance(o, OutputSpec) else o.get("path")
    stream = o.stream if isinstance(o, OutputSpec) else o.get("stream")
    if path is None:
        return root / name / f"{stream}.txt"
    return root / name / "files" / cwd / path


def _save(spec: CommandSpec, *, root: Path, streams: Mapping[str, str], dest: Path,
          every: bool) -> None:
    for o in spec.outputs:
        if not (o.save or every):
            continue
        target = saved_path(dest, spec, spec.cwd, o)
        if o.stream is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(streams[o.stream])
            continue
        try:  # the bytes as recorded: never through a link (``confine``)
            data = confine.read_output(root, f"{spec.cwd}/{o.path}")
        except confine.UnsafeOutput:
            continue
        if data is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

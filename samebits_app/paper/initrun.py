"""``samebits paper init``'s pipeline, once ``cmd_paper`` has read the arguments: the manifest
as it will be, the three runs, the measurements, the text written, and the report.

    provisional   the existing manifest's document (or a new one: format 1 and the lock) with
                  this command (its name and argv, no outputs) in its place or after the
                  others and the ``--input`` files pinned, read by the real validator
                  (``PaperManifest.from_mapping``): the command gets the ``[run]`` defaults
                  exactly as attest will, and the copies leave out what attest's leaves out
    inputs        the manifest's pinned ``[[inputs]]`` read or fetched and checked
                  (``inputs.check_inputs``: one that is missing or not its sha256 refuses, as
                  attest refuses it)
    runs          ``trials.run_three`` with the environment's interpreter (``--prefix``'s
                  ``bin/python``, or ``--workload-python``), the deterministic profile's
                  settings, this machine's sandbox
    measures      ``survey.survey``; the tensors through the worker in that interpreter
    written       ``manifestwrite``: the block composed into the old text, proved, renamed over

``render`` makes the table (output, kind, alike noise, perturbed noise, tolerance) and the
``--json`` document (the same facts, one document).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import sha256_file
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits_app.paper import manifestwrite as mw
from samebits_app.paper.manifest import PaperManifest
from samebits_app.paper.noise import Decision, Gap, sci
from samebits_app.paper.survey import Survey

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MAX_NAMED = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    paper: Path
    file: Path                            # PAPER/samebits-paper.toml
    name: str
    argv: tuple[str, ...]
    lockfile: str                         # relative to the paper folder
    by_hand: tuple[tuple[str, str], ...]  # --input: (path, sha256)
    env: tuple[tuple[str, str], ...] = ()  # --env, written into the command's block
    timeout: float | None = None          # --timeout, likewise
    prefix: Path | None
    python: str | None
    margin: float
    accept: bool
    existing: PaperManifest | None
    notes: tuple[str, ...] = ()           # said before the run (no lock yet)


@dataclass(frozen=True, slots=True, kw_only=True)
class Done:
    req: Request
    survey: Survey
    perturbation: str                     # run 3's variables
    runs: tuple[tuple[str, float], ...]   # (label, seconds)
    inputs: tuple[tuple[str, str, str], ...]  # pinned now: (path, sha256, why)
    sha256: str                           # of the manifest written
    python: str
    sandbox: str


def provisional(req: Request, old: Mapping[str, Any] | None) -> PaperManifest:
    """The manifest with this command in it, no outputs declared (module doc)."""
    raw: dict[str, Any] = (dict(old) if old is not None else
                           {"format": 1, "lockfile": req.lockfile})
    command: dict[str, Any] = {"name": req.name, "run": list(req.argv)}
    if req.timeout is not None:
        command["timeout"] = req.timeout
    if req.env:
        command["env"] = dict(req.env)
    commands = [c for c in raw.get("commands") or [] if isinstance(c, Mapping)]
    names = [c.get("name") for c in commands]
    if req.name in names:
        commands[names.index(req.name)] = command
    else:
        commands.append(command)
    raw["commands"] = commands
    pinned = [i for i in raw.get("inputs") or []]
    known = {i.get("path") for i in pinned if isinstance(i, Mapping)}
    raw["inputs"] = [*pinned, *({"path": p, "sha256": s} for p, s in req.by_hand
                                if p not in known)]
    return PaperManifest.from_mapping(raw, file=req.file)


def initialize(req: Request, *, progress: Callable[[str], None],
               info: Callable[[str], None]) -> Done:
    """Run, measure and write (module doc)."""
    from samebits_app.audit.common import interpreter_for
    from samebits_app.audit.envcheck import locate
    from samebits_app.audit.runtime import Interpreter
    from samebits_app.paper import inputs as inputs_mod
    from samebits_app.paper.runner import Host
    from samebits_app.paper.sandbox import detect
    from samebits_app.paper.survey import survey
    from samebits_app.paper.trials import Plan, perturb, run_three
    from verify.gpu.workloads.settings import PROFILES

    old_text = req.file.read_text(encoding="utf-8") if req.existing is not None else None
    old = tomllib.loads(old_text) if old_text is not None else None
    manifest = provisional(req, old)
    states = inputs_mod.check_inputs(manifest)
    inputs_mod.raise_problems(manifest, states)
    where = locate(req.prefix)
    python = interpreter_for(where, req.python)
    if not Path(python).is_file():
        raise UsageError(f"{python}: no such interpreter", hint="--prefix ENV (an environment "
                         "with bin/python) or --workload-python PATH")
    spec = next(c for c in manifest.commands if c.name == req.name)
    perturbed, words = perturb(spec, os.environ)
    box = detect()
    if box.warning:
        info(f"paper init: {box.warning}")
    host = Host(bin=Path(python).parent, environ=dict(os.environ), keep=manifest.keep_env)
    plan = Plan(manifest=manifest, spec=spec, perturbed=perturbed, host=host,
                settings=PROFILES["deterministic"].to_dict(), sandbox=box, inputs=states,
                skip=(where.prefix,))
    runtime = Interpreter(python, keep=manifest.keep_env)
    with tempfile.TemporaryDirectory(prefix="samebits-paper-init.") as tmp:
        runs = run_three(plan, Path(tmp), progress=progress, info=info, words=words)
        progress("measuring the outputs")
        found = survey(runs, manifest=manifest, errorstats=runtime.errorstats,
                       margin=req.margin, accept=req.accept,
                       perturbation=short(words, spec, os.environ),
                       environment=host.bin, pinned=[i.path for i in manifest.inputs])
    known = {i.path for i in req.existing.inputs} if req.existing is not None else set()
    pinned = tuple([*((p, s, "given with --input") for p, s in req.by_hand if p not in known),
                    *((p, s, f"read by {req.name}") for p, s in found.inputs)])
    block = mw.command_block(mw.Measured(name=req.name, argv=req.argv, perturbation=words,
                                         env=req.env, timeout=req.timeout,
                                         margin=req.margin, decisions=found.decisions))
    text = mw.compose(old_text, lockfile=req.lockfile, name=req.name, block=block,
                      inputs=mw.inputs_block(pinned))
    mw.check_text(text, mw.expected(old, lockfile=req.lockfile, block=block, inputs=pinned),
                  where=req.file)
    mw.write(req.file, text)
    return Done(req=req, survey=found, perturbation=words, python=python,
                runs=tuple((r.label, r.seconds) for r in runs), inputs=pinned,
                sha256=sha256_file(req.file),
                sandbox=str(box.warning or f"bubblewrap {box.version or ''}".strip()))


def short(words: str, spec: Any, environ: Mapping[str, str]) -> str:
    """Run 3 against runs 1 and 2, for the comments: "OMP=1 vs 2" (the caller's or the
    command's thread count), "OMP=1 vs default" (none set: the library's own choice)."""
    now = str(spec.threads) if spec.threads is not None else environ.get("OMP_NUM_THREADS")
    return f"OMP={words.split()[0].split('=', 1)[1]} vs {now or 'default'}"


def _gap(g: Gap | None) -> str:
    if g is None:
        return "0"
    if not g.comparable:
        return "differs"
    return f"{sci(g.abs)} (rel {sci(g.rel)})"


def _gap_json(g: Gap | None) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"max_abs": g.abs if g.comparable else None,
            "max_rel": g.rel if g.comparable else None, "first": g.first,
            "comparable": g.comparable}


def _tolerance(d: Decision) -> str:
    if d.spec is None:
        return "left out"
    if d.spec.kind == "file":
        return "bytes"
    if d.spec.metrics:
        top = max(t.atol for _, t in d.spec.metrics)
        return f"per metric, atol up to {top:g}" if top else "0 (per metric)"
    return f"atol {d.spec.tolerance.atol:g}" if d.spec.tolerance.atol else "0"


def render(done: Done, *, seconds: float) -> tuple[dict[str, Any], str]:
    """The ``--json`` document and the text (module doc)."""
    req, found = done.req, done.survey
    noisy = [(d.label, n) for d in found.decisions for n in d.noisy]
    code = EXIT_DIFFERENT if any(not n.accepted for _, n in noisy) else EXIT_OK
    rows = [("output", "kind", "alike noise", "perturbed noise", "tolerance")] + [
        (d.label, d.kinded.spec.kind, _gap(d.alike), _gap(d.perturbed), _tolerance(d))
        for d in found.decisions]
    widths = [max(len(r[k]) for r in rows) for k in range(5)]
    first = dict(done.runs).get("1/3", 0.0)
    lines = [f"paper init {req.name}: `{' '.join(req.argv)}` ran 3 times in {seconds:.1f} s "
             f"(run 1: {first:.1f} s; run 3 with {done.perturbation}; {done.sandbox})"]
    for k, r in enumerate(rows):
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
                     .rstrip())
        if k == 0:
            continue
        d = found.decisions[k - 1]
        lines.append(f"      {d.kinded.what}")
        if d.spec is not None and d.spec.regex:
            lines.append(f"      regex: {d.spec.regex}")
            lines.append("      captures: " + " ".join(f"{a}={b}" for a, b in d.kinded.captures)
                         + f" (of {d.kinded.line!r})")
        lines += [f"      note: {n}" for n in d.notes]
    if noisy:
        lines.append("not reproducible on one machine (two alike runs differ):")
        lines += [f"  {label}: {n.first}; {n.cause}" + (
            " (accepted: its tolerance covers it)" if n.accepted else "; left out")
                  for label, n in noisy]
    if found.left_out:
        lines.append(f"not outputs ({len(found.left_out)}): " + "; ".join(
            f"{p}: {why}" for p, why in found.left_out[:MAX_NAMED])
            + ("; ..." if len(found.left_out) > MAX_NAMED else ""))
    lines += [f"input pinned: {p} (sha256 {s[:12]}, {why})" for p, s, why in done.inputs]
    if found.reads.outside:
        lines.append("read from outside the paper folder (not pinned: not the paper's): "
                     + ", ".join(found.reads.outside[:MAX_NAMED])
                     + (", ..." if len(found.reads.outside) > MAX_NAMED else ""))
    lines += [f"note: {n}" for n in (*req.notes, *found.reads.notes, *found.notes)]
    lines.append(f"manifest: {req.file} (sha256 {done.sha256[:16]}): {req.name} declares "
                 f"{sum(d.spec is not None for d in found.decisions)} output(s)")
    lines.append("result: " + ("every output reproducible (exit 0)" if code == EXIT_OK else
                               "written without what two alike runs disagree on (exit 1): fix "
                               "its cause and run again with --replace, or declare it with "
                               "--accept-noise --replace"))
    payload = {
        "manifest": {"path": str(req.file), "sha256": done.sha256},
        "command": {"name": req.name, "run": list(req.argv), "lockfile": req.lockfile},
        "runs": [{"run": label, "seconds": round(s, 3)} for label, s in done.runs],
        "perturbation": done.perturbation, "margin": req.margin, "python": done.python,
        "sandbox": done.sandbox, "seconds": round(seconds, 3),
        "outputs": [{"output": d.label, "kind": d.kinded.spec.kind, "what": d.kinded.what,
                     "declared": d.spec is not None, "alike": _gap_json(d.alike),
                     "perturbed": _gap_json(d.perturbed), "tolerance": _tolerance(d),
                     "atol": d.spec.tolerance.atol if d.spec is not None else None,
                     "metrics": {n: t.atol for n, t in d.spec.metrics} if d.spec else {},
                     "regex": d.spec.regex if d.spec is not None else None,
                     "captures": dict(d.kinded.captures), "notes": list(d.notes),
                     "not_reproducible": [{"element": n.element, "first": n.first,
                                           "cause": n.cause, "accepted": n.accepted}
                                          for n in d.noisy]}
                    for d in found.decisions],
        "not_outputs": [{"path": p, "why": w} for p, w in found.left_out],
        "inputs": [{"path": p, "sha256": s, "why": w} for p, s, w in done.inputs],
        "outside": list(found.reads.outside),
        "notes": [*req.notes, *found.reads.notes, *found.notes], "exit_code": code}
    return payload, "\n".join(lines)

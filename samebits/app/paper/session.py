"""The paper's part of ``samebits attest`` and ``samebits audit``.

    attest   ``run_commands`` after the suite, with the suite's settings; any command that
             fails, or an output that is missing or unreadable, refuses the attestation
             (``PaperRunError``, exit 1): nothing is written; the records become the
             attestation's ``paper`` key (``section``) and the outputs are saved to the
             manifest's ``outputs`` folder (``outputs/commands/<command>/...``)
    audit    ``run_commands`` again, under the attested settings, every output saved under
             ``--out``; the tensors whose bits differ are compared tensor by tensor with the
             authors' shipped files (one worker request); ``judge.judge_command`` per command;
             ``paper_step`` turns it all into the audit's ``paper`` step and the paper's level

Everything that reaches the verdict carries its numbers (``judge``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits._io import sha256_file
from samebits.app.audit.verdict import Level, Step
from samebits.app.paper.judge import CommandVerdict, judge_command
from samebits.app.paper.manifest import PaperManifest
from samebits.app.paper.runner import Host, prepare_workdir, run_command, saved_path
from samebits.errors import EXIT_DIFFERENT, InputError, SamebitsError

SECTION_FORMAT = 1
COMMANDS = "commands"  # under an outputs folder: commands/<name>/files/<cwd>/<path>


class PaperRunError(SamebitsError):
    """``attest`` refuses: a paper command failed, or did not write what it declares."""

    exit_code = EXIT_DIFFERENT
    kind = "paper"


@dataclass(frozen=True, slots=True, kw_only=True)
class PaperResult:
    step: Step
    level: Level | None
    commands: tuple[CommandVerdict, ...]
    records: Mapping[str, Mapping[str, Any]]  # the reviewer's, as the attestation holds them


def run_commands(manifest: PaperManifest, *, host: Host, settings: Mapping[str, Any],
                 runtime: Any, save: Path | None, save_all: bool = False,
                 skip: Sequence[Path] = (),
                 progress: Callable[[str], None] = lambda s: None) -> dict[str, dict[str, Any]]:
    """Every command, in order, in one scratch copy of the paper folder; name -> record."""

    def tensor_records(files: Sequence[Path]) -> Mapping[str, Mapping[str, Any]]:
        return runtime.errorstats({"records": [str(f) for f in files]})["records"]

    records: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="samebits-paper-run.") as tmp:
        work = Path(tmp) / "paper"
        prepare_workdir(manifest, work, skip=skip)
        for cmd in manifest.commands:
            progress(f"paper: {cmd.name}: {' '.join(cmd.argv)}")
            records[cmd.name] = run_command(
                cmd, workdir=work, host=host, settings=settings,
                tensor_records=tensor_records, save=save, save_all=save_all)
    return records


def section(manifest: PaperManifest | None, records: Mapping[str, Any]) -> dict[str, Any]:
    """The attestation's ``paper`` value."""
    if manifest is None:
        return {"format": SECTION_FORMAT, "commands": dict(records)}
    out = {"format": SECTION_FORMAT, "title": manifest.title, "manifest": manifest.file.name,
           "commands": dict(records)}
    if manifest.keep_env:  # what the processes kept of the caller's start-up variables
        out["keep_env"] = list(manifest.keep_env)
    return out


def keep_env_reason(manifest: PaperManifest, paper: Mapping[str, Any] | None) -> str | None:
    """Why the reviewer's processes do not start as the authors' did, if they do not: the
    manifest keeps other start-up variables (``keep-env``) than the attestation records."""
    attested = tuple((paper or {}).get("keep_env") or ())
    if tuple(manifest.keep_env) == attested:
        return None
    return (f"{manifest.file}: keep-env = {list(manifest.keep_env)}, the attestation records "
            f"keep-env = {list(attested)}: the paper's processes would not start as the "
            "authors' did")


def attest_problems(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    out = []
    for name, rec in records.items():
        if rec.get("status") != "ok":
            tail = " | ".join(rec.get("tail") or ()) or "no output"
            out.append(f"{name}: `{' '.join(rec['run'])}` {rec.get('status')} "
                       f"(exit {rec.get('exit_code')}): {tail}")
            continue
        for o in rec.get("outputs") or ():
            if o.get("missing"):
                out.append(f"{name}: {o['output']} was not written")
            elif o.get("error"):
                out.append(f"{name}: {o['output']}: {o['error']}")
    return out


def authors_commands(paper: Mapping[str, Any] | None, *, source: str
                     ) -> Mapping[str, Mapping[str, Any]] | None:
    """The attested commands, or None when the attestation has no paper; bad input named."""
    if paper is None:
        return None
    if paper.get("format") != SECTION_FORMAT:
        raise InputError(f"{source}: predicate.paper.format = {paper.get('format')!r}: this "
                         f"samebits reads format {SECTION_FORMAT}")
    commands = paper.get("commands")
    if not isinstance(commands, Mapping) or not all(
            isinstance(c, Mapping) and isinstance(c.get("outputs", []), list)
            for c in commands.values()):
        raise InputError(f"{source}: predicate.paper.commands: expected {{name: {{run, env, "
                         "outputs, ...}}}}")
    return commands



def tensor_jobs(manifest: PaperManifest, authors: Mapping[str, Mapping[str, Any]],
                mine: Mapping[str, Mapping[str, Any]], reviewer_root: Path
                ) -> tuple[list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """(worker compare jobs, and the outputs that cannot be compared: their reason) for every
    tensors output whose bits differ; keys (command, output label)."""
    jobs: list[dict[str, Any]] = []
    cannot: dict[tuple[str, str], dict[str, Any]] = {}
    shipped = manifest.outputs / COMMANDS
    for name, rec in authors.items():
        theirs = {o.get("output"): o for o in (mine.get(name) or {}).get("outputs") or ()}
        for o in rec.get("outputs") or ():
            b = theirs.get(o.get("output"))
            if o.get("kind") != "tensors" or b is None or not b.get("sha256") or (
                    b.get("sha256") == o.get("sha256")):
                continue
            key = (name, str(o["output"]))
            a_file = saved_path(shipped, name, str(rec.get("cwd", ".")), o)
            if not a_file.is_file():
                continue  # judged from the digests and fingerprints alone
            if sha256_file(a_file) != o.get("sha256"):
                cannot[key] = {"error": f"{a_file} is not the file the authors attested "
                               f"(sha256 {sha256_file(a_file)[:12]}, attested "
                               f"{str(o.get('sha256'))[:12]})"}
                continue
            jobs.append({"a": str(a_file.absolute()),
                         "b": str(saved_path(reviewer_root, name, str(rec.get("cwd", ".")), o)
                                  .absolute()),
                         "rtol": o.get("rtol", 0.0), "atol": o.get("atol", 0.0), "key": key})
    return jobs, cannot


def paper_step(manifest: PaperManifest | None, authors: Mapping[str, Mapping[str, Any]] | None,
               mine: Mapping[str, Mapping[str, Any]], *, class_facts: Sequence[str],
               compared: Mapping[tuple[str, str], Mapping[str, Any]], attestation: str
               ) -> PaperResult:
    """The audit's ``paper`` step from both sides' records."""
    if authors is None:
        return PaperResult(step=Step(
            name="paper", status="failed", summary="the attestation records no paper commands",
            reasons=(f"{attestation} records no paper commands: the authors attest them with "
                     "`samebits attest PAPER`",)), level=None, commands=(), records=mine)
    reasons: list[str] = []
    names = list(authors)
    if manifest is not None:
        declared = [c.name for c in manifest.commands]
        reasons += [f"{n}: in the manifest, not in the attestation" for n in declared
                    if n not in authors]
        reasons += [f"{n}: attested, not in the manifest ({manifest.file})" for n in names
                    if n not in declared]
        names = [n for n in names if n in declared]
    verdicts = tuple(judge_command(
        n, authors[n], mine[n], class_facts=class_facts,
        compared={label: c for (cmd, label), c in compared.items() if cmd == n})
        for n in names if n in mine)
    reasons += [r for v in verdicts for r in v.reasons]
    notes = [n for v in verdicts for n in v.notes]
    levels = {v.level for v in verdicts}
    level: Level | None
    if reasons:
        level = None
    elif "explained" in levels:
        level = "explained"
    elif "within-tolerance" in levels:
        level = "within-tolerance"
    else:
        level = "bit-identical"
    summary = f"{len(verdicts)} command(s): " + "; ".join(
        f"{v.name} {v.level} ({_counts(v)})" for v in verdicts)
    return PaperResult(step=Step(name="paper", status="failed" if reasons else "ok",
                                 summary=summary, reasons=tuple(reasons), notes=tuple(notes)),
                       level=level, commands=verdicts, records=mine)


def _counts(v: CommandVerdict) -> str:
    counts: dict[str, int] = {}
    for o in v.outputs:
        counts[o.level] = counts.get(o.level, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no outputs"


def audit_paper(manifest: PaperManifest | None, authors: Any, *, runtime: Any, python: str,
                settings: Mapping[str, Any], comparison: Any, out: Path,
                skip: Sequence[Path] = (), progress: Callable[[str], None] = lambda s: None
                ) -> tuple[Step, tuple[CommandVerdict, ...] | None,
                           dict[str, Any] | None, Level | None]:
    """The audit's paper step: (step, verdicts, the reviewer's records, the paper's level).
    ``authors``: the authors' ``Attestation``; ``comparison``: the suite's ``Report``, whose
    differing class facts may explain a paper output beyond its tolerance."""
    theirs = authors_commands(authors.paper, source=str(authors.source))
    if manifest is None:
        assert theirs is not None
        return (Step(name="paper", status="skipped",
                     summary="no paper manifest given: the paper's commands were not run",
                     notes=(f"the attestation records the paper's commands ({', '.join(theirs)});"
                            " audit the paper folder (samebits-paper.toml) to rerun them",)),
                None, None, None)
    from samebits.render.publish import staged_dir

    root = out / "outputs" / COMMANDS
    try:
        with staged_dir(root, replace=True) as stage:  # no file of an earlier audit remains
            records = run_commands(manifest, host=Host(bin=Path(python).parent,
                                                       environ=dict(os.environ),
                                                       keep=manifest.keep_env),
                                   settings=settings, runtime=runtime, save=stage,
                                   save_all=True, skip=skip, progress=progress)
        compared: dict[tuple[str, str], dict[str, Any]] = {}
        if theirs is not None:
            jobs, compared = tensor_jobs(manifest, theirs, records, root)
            if jobs:
                progress("paper: tensors")
                answers = runtime.errorstats({"compare": jobs})["compare"]
                compared.update({tuple(j["key"]): a for j, a in zip(jobs, answers,
                                                                     strict=True)})
    except SamebitsError as exc:
        return (Step(name="paper", status="failed", summary=f"paper: {exc.message}",
                     reasons=(f"paper: {exc.message}",)), None, None, None)
    facts = [d.key for d in comparison.class_differences] if comparison else []
    result = paper_step(manifest, theirs, records, class_facts=facts, compared=compared,
                        attestation=str(authors.source))
    step, level = result.step, result.level
    kept = keep_env_reason(manifest, authors.paper) if theirs is not None else None
    if kept is not None:
        step = replace(step, status="failed", reasons=(*step.reasons, kept))
        level = None
    return step, result.commands, records, level

"""The paper's part of ``samebits attest`` and ``samebits audit``.

    attest   the inputs checked (``inputs``), then ``run_commands`` before the suite, with the
             suite's settings, in a scratch copy holding exactly the paper's tree (``tree``);
             the first command that fails stops the rest, and it, or an output that is missing
             or unreadable, refuses the attestation (``PaperRunError``, exit 1, its last lines
             as they were printed): nothing is written; the records, the tree and the inputs
             become the attestation's ``paper`` key (``section``) and the outputs are saved to
             the manifest's ``outputs`` folder (``outputs/commands/<command>/...``)
    audit    ``code_step`` and ``inputs_step`` first (the reviewer's files against the
             attested tree and inputs); ``rerun`` runs the commands again, before the suite,
             under the attested settings, in a copy holding the reviewer's files at the
             authors' paths, every output saved under ``--out``, and compares the tensors
             whose bits differ tensor by tensor with the authors' shipped files (one worker
             request); after the suite, ``judge`` (``judge.judge_command`` per command,
             ``paper_step``) makes the audit's ``paper`` step and the paper's level: a
             command whose declaration differs is a cause its divergences are listed under

Everything that reaches the verdict carries its numbers (``judge``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from samebits._io import sha256_file
from samebits.errors import EXIT_DIFFERENT, InputError, SamebitsError, plural
from samebits_app.audit.verdict import Level, Reason, Step, cause, divergence, skipped
from samebits_app.audit.verdict import step as make_step
from samebits_app.paper import inputs as inputs_mod
from samebits_app.paper import tree as tree_mod
from samebits_app.paper.failures import failure_hint
from samebits_app.paper.judge import CommandVerdict, judge_command
from samebits_app.paper.manifest import PaperManifest
from samebits_app.paper.runner import Host, prepare_workdir, run_command, saved_path
from samebits_app.paper.sandbox import Sandbox
from samebits_app.paper.sandbox import detect as detect_sandbox

SECTION_FORMAT = 1
CHANGED = "the command is not the one the authors ran: "  # judge.judge_command's words
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
                 skip: Sequence[Path] = (), files: Collection[str] | None = None,
                 inputs: Sequence[inputs_mod.InputState] = (), sandbox: Sandbox | None = None,
                 progress: Callable[[str], None] = lambda s: None) -> dict[str, dict[str, Any]]:
    """The commands, in order, in one scratch copy of the paper folder, each in ``sandbox``
    (this machine's, ``sandbox.detect()``, when not given); name -> record. The copy holds
    ``files`` (the tree; with the manifest, its lockfile and the inputs) when given, and every
    fetched input at its path. The first command that fails stops the rest: a later one may
    need what it did not write."""

    def tensor_records(paths: Sequence[Path]) -> Mapping[str, Mapping[str, Any]]:
        return runtime.errorstats({"records": [str(f) for f in paths]})["records"]

    leave = list(skip)
    if files is not None:
        folder = manifest.folder
        keep = {*files, *(i.path for i in manifest.inputs if i.url is None),
                *(_relative(p, folder) for p in (manifest.file, manifest.lockfile))}
        leave += tree_mod.left_out(folder, {k for k in keep if k is not None})
    records: dict[str, dict[str, Any]] = {}
    box = sandbox if sandbox is not None else detect_sandbox()  # probed once per paper
    if box.warning:
        progress(f"paper: {box.warning}")
    with tempfile.TemporaryDirectory(prefix="samebits-paper-run.") as tmp:
        work = Path(tmp) / "paper"
        prepare_workdir(manifest, work, skip=leave)
        inputs_mod.place(inputs, work)
        for cmd in manifest.commands:
            progress(f"paper: {cmd.name}: {' '.join(cmd.argv)}")
            records[cmd.name] = run_command(
                cmd, workdir=work, host=host, settings=settings,
                tensor_records=tensor_records, save=save, save_all=save_all, sandbox=box)
            if records[cmd.name].get("status") != "ok":
                break
    return records


def _relative(path: Path, folder: Path) -> str | None:
    try:
        return Path(os.path.normpath(path.absolute())).relative_to(
            Path(os.path.normpath(folder.absolute()))).as_posix()
    except ValueError:
        return None


def section(manifest: PaperManifest | None, records: Mapping[str, Any], *,
            tree: tree_mod.Tree | None = None,
            inputs: Sequence[inputs_mod.InputState] | None = None) -> dict[str, Any]:
    """The attestation's ``paper`` value: the commands' records, the tree they ran in and the
    inputs they read."""
    if manifest is None:
        return {"format": SECTION_FORMAT, "commands": dict(records)}
    out = {"format": SECTION_FORMAT, "title": manifest.title, "manifest": manifest.file.name,
           "commands": dict(records)}
    if manifest.keep_env:  # what the processes kept of the caller's start-up variables
        out["keep_env"] = list(manifest.keep_env)
    if tree is not None:
        out["tree"] = tree.to_json()
    if inputs is not None:
        out["inputs"] = [s.record() for s in inputs]
    return out


def subjects(paper: Mapping[str, Any] | None) -> dict[str, str]:
    """The in-toto subjects a paper section adds: ``paper/<path>`` and ``input/<path>``."""
    if not paper:
        return {}
    tree = tree_mod.parse_tree(paper.get("tree"))
    out = tree.subjects() if tree is not None else {}
    out.update(inputs_mod.subjects(paper.get("inputs") or ()))
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
    """What refuses an attestation, one entry per problem; a failed command's last lines
    follow it, each on its own line (a traceback reads as one)."""
    out = []
    for name, rec in records.items():
        if rec.get("status") != "ok":
            tail = [str(t) for t in rec.get("tail") or ()] or ["no output"]
            hint = failure_hint(tail)
            out.append(f"{name}: `{' '.join(rec['run'])}` {rec.get('status')} "
                       f"(exit {rec.get('exit_code')}); its last lines:\n"
                       + "\n".join(f"    {t}" for t in tail)
                       + (f"\n  hint: {hint}" if hint else ""))
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
               compared: Mapping[tuple[str, str], Mapping[str, Any]], attestation: str,
               why: Mapping[str, str] | None = None, facts_known: bool = True) -> PaperResult:
    """The audit's ``paper`` step from both sides' records: a command's changed declaration
    is a cause that explains its divergences and those of the commands after it."""
    if authors is None:
        text = (f"{attestation} records no paper commands: the authors attest them with "
                "`samebits attest PAPER`")
        return PaperResult(step=make_step("paper", "the attestation records no paper commands",
                                          [cause("manifest", text)]),
                           level=None, commands=(), records=mine)
    causes: list[Reason] = []
    names = list(authors)
    if manifest is not None:
        declared = [c.name for c in manifest.commands]
        causes += [cause("manifest", f"{n}: in the manifest, not in the attestation")
                   for n in declared if n not in authors]
        causes += [cause("manifest", f"{n}: attested, not in the manifest ({manifest.file})")
                   for n in names if n not in declared]
        names = [n for n in declared if n in authors]  # the order they run in
    verdicts: list[CommandVerdict] = []
    stopped = None
    changed: dict[str, list[int]] = {}  # a changed declaration -> the commands it is in
    for i, n in enumerate(names):
        if n not in mine:
            verdicts.append(CommandVerdict(
                name=n, level="not-run", run=" ".join(authors[n].get("run") or ()),
                notes=(f"{n}: not run: {stopped or 'the commands stopped'} failed before it",)))
            continue
        v = judge_command(n, authors[n], mine[n], class_facts=class_facts, why=why,
                          facts_known=facts_known,
                          compared={label: c for (cmd, label), c in compared.items()
                                    if cmd == n})
        verdicts.append(v)
        for c in v.changes:
            changed.setdefault(c.removeprefix(f"{n}: {CHANGED}"), []).append(i)
        causes += [divergence(r, scope=f"paper:{n}", alone=a)
                   for r, a in zip(v.reasons, v.alone or v.reasons, strict=True)]
        if v.level == "failed" and stopped is None:
            stopped = n
    # One cause per changed declaration (a [run] env set for every command is one change),
    # explaining the commands it is in and every one after the first of them.
    causes[:0] = [cause("manifest", f"{', '.join(names[i] for i in where)}: "
                        + (CHANGED if len(where) == 1 else
                           "the commands are not the ones the authors ran: ") + change,
                        covers=tuple(f"paper:{m}" for m in names[where[0]:]))
                  for change, where in changed.items()]
    notes = [n for v in verdicts for n in v.notes] + sandbox_notes(authors, mine)
    levels = {v.level for v in verdicts}
    level: Level | None
    if causes:
        level = None
    elif "explained" in levels:
        level = "explained"
    elif "within-tolerance" in levels:
        level = "within-tolerance"
    else:
        level = "bit-identical"
    summary = f"{plural(len(verdicts), 'command')}: " + "; ".join(
        f"{v.name} {v.level} ({_counts(v)})" for v in verdicts)
    return PaperResult(step=make_step("paper", summary, causes, notes=notes), level=level,
                       commands=tuple(verdicts), records=mine)


def sandbox_text(rec: Mapping[str, Any] | None) -> str:
    """How one record says its command ran: "bubblewrap 0.8.0 (network off)", or the
    warning of a run without a sandbox; "not recorded" for records older than the key."""
    box = (rec or {}).get("sandbox")
    if not isinstance(box, Mapping):
        return "not recorded"
    if box.get("kind") == "bubblewrap":
        return (f"bubblewrap {box.get('version') or ''}".rstrip() + " (writes only inside the "
                f"scratch copy, network {'on' if box.get('network') else 'off'})")
    return str(box.get("warning") or "no sandbox")


def sandbox_notes(authors: Mapping[str, Mapping[str, Any]],
                  mine: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The sandbox of each side's commands, once per distinct way they ran."""
    out = []
    for whose, records in (("this audit", mine), ("the authors", authors)):
        ways = sorted({sandbox_text(r) for r in records.values()})
        if ways:
            out.append(f"paper commands of {whose} ran in: {'; '.join(ways)}")
    return out


def _counts(v: CommandVerdict) -> str:
    counts: dict[str, int] = {}
    for o in v.outputs:
        counts[o.level] = counts.get(o.level, 0) + 1
    if v.level in ("failed", "not-run") and not v.outputs:
        return "no outputs compared"
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "no outputs"


# ------------------------------------------------------------------------------ the audit

@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """The paper's tree and inputs as the audit found them, before anything runs."""

    code: Step
    inputs: Step
    files: tuple[str, ...] | None = None          # what the run is given (None: the folder)
    tree: tree_mod.Tree | None = None             # the reviewer's record of it
    states: tuple[inputs_mod.InputState, ...] = ()


def check_paper(manifest: PaperManifest | None, paper: Mapping[str, Any] | None, *,
                skip: Sequence[Path] = (), cache: Path | None = None,
                fetch: inputs_mod.Fetch | None = None, roots: Sequence[Path] = ()) -> Checked:
    """The audit's ``code`` and ``inputs`` steps: the reviewer's files against the attested
    tree and inputs; what the commands will be given."""
    if manifest is None:
        why = "no paper manifest: the paper's commands are not rerun"
        return Checked(code=skipped("code", f"not checked: {why}"),
                       inputs=skipped("inputs", f"not checked: {why}"))
    attested = tree_mod.parse_tree((paper or {}).get("tree"))
    if attested is None:
        mine = tree_mod.tree_of(manifest, skip)
        why = ("the attestation records no paper" if paper is None else
               "the attestation records no paper tree (made by a samebits from before trees)")
        code = skipped("code", f"not checked: {why}; the commands are given this folder's "
                       f"{plural(len(mine.files), 'file')} ({mine.rule})")
        files: tuple[str, ...] = mine.paths
    else:
        check = tree_mod.check(attested, manifest, skip)
        mine = check.tree
        files = mine.paths
        n = len(attested.files)
        rule = attested.rule if attested.rule == mine.rule else \
            f"the authors' tree: {attested.rule}; this folder's: {mine.rule}"
        summary = (f"{len(check.differences)} of {plural(n, 'file')} of the authors' tree "
                   "differ" if check.differences else
                   f"{plural(n, 'file')}, each the authors' sha256 ({rule})")
        code = make_step("code", summary,
                         [cause("code", d, covers=("paper:*",)) for d in check.differences],
                         notes=check.notes)
    states = inputs_mod.check_inputs(manifest, cache=cache, fetch=fetch, roots=roots)
    if paper is None or (not manifest.inputs and "inputs" not in paper):
        inputs = skipped("inputs", "not checked: no [[inputs]] declared (data read from the "
                         "paper folder is part of its code tree)" if paper is not None else
                         "not checked: the attestation records no paper")
    else:
        attested_inputs = paper.get("inputs") or []
        reasons = inputs_mod.against_attested(states, attested_inputs)
        n = len(attested_inputs)
        summary = (f"{len(reasons)} problem(s) with the inputs" if reasons else
                   f"{plural(n, 'input')}, each the authors' sha256: "
                   + ", ".join(s.spec.path for s in states) if n else "no inputs, as attested")
        inputs = make_step("inputs", summary,
                           [cause("input", r, covers=("paper:*",)) for r in reasons])
    return Checked(code=code, inputs=inputs, files=files, tree=mine, states=states)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rerun:
    records: dict[str, Any] | None = None
    compared: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    error: str | None = None


def rerun(manifest: PaperManifest, authors: Any, checked: Checked, *, runtime: Any,
          python: str, settings: Mapping[str, Any], out: Path, skip: Sequence[Path] = (),
          progress: Callable[[str], None] = lambda s: None) -> Rerun:
    """The paper's commands rerun in the audited environment, and their tensors compared."""
    from samebits.staging import staged_dir

    theirs = authors_commands(authors.paper, source=str(authors.source))
    root = out / "outputs" / COMMANDS
    try:
        with staged_dir(root, replace=True) as stage:  # no file of an earlier audit remains
            records = run_commands(manifest, host=Host(bin=Path(python).parent,
                                                       environ=dict(os.environ),
                                                       keep=manifest.keep_env),
                                   settings=settings, runtime=runtime, save=stage,
                                   save_all=True, skip=skip, files=checked.files,
                                   inputs=checked.states, progress=progress)
        compared: dict[tuple[str, str], dict[str, Any]] = {}
        if theirs is not None:
            jobs, compared = tensor_jobs(manifest, theirs, records, root)
            if jobs:
                progress("paper: tensors")
                answers = runtime.errorstats({"compare": jobs})["compare"]
                compared.update({tuple(j["key"]): a for j, a in zip(jobs, answers,
                                                                     strict=True)})
    except SamebitsError as exc:
        return Rerun(error=exc.message)
    return Rerun(records=records, compared=compared)


def judge(manifest: PaperManifest, authors: Any, run: Rerun, *, comparison: Any
          ) -> tuple[Step, tuple[CommandVerdict, ...] | None, Level | None]:
    """The audit's paper step from the rerun and the suite's comparison, whose differing
    class facts may explain a paper output beyond its tolerance."""
    if run.records is None:
        text = f"paper: {run.error}"
        return make_step("paper", text, [cause("none", text)]), None, None
    theirs = authors_commands(authors.paper, source=str(authors.source))
    facts, why = paper_facts(comparison)
    result = paper_step(manifest, theirs, run.records, class_facts=facts, why=why,
                        compared=run.compared, attestation=str(authors.source),
                        facts_known=comparison is not None)
    step, level = result.step, result.level
    kept = keep_env_reason(manifest, authors.paper) if theirs is not None else None
    if kept is not None:
        causes = (*step.all_reasons(), cause("manifest", kept, covers=("paper:*",)))
        step = replace(step, status="failed", reasons=tuple(r.text for r in causes),
                       causes=causes)
        level = None
    return step, result.commands, level


def paper_facts(comparison: Any) -> tuple[list[str], dict[str, str]]:
    """The suite's differing class facts (already those the runs could use) and why each may
    move a paper command's results."""
    from verify.gpu.compare import fact_why

    if comparison is None:
        return [], {}
    diffs = list(comparison.class_differences)
    return [d.key for d in diffs], {d.key: fact_why(d) for d in diffs}


def not_rerun(manifest: PaperManifest | None, authors: Any, why: str) -> Step:
    """The paper step where the commands could not run: not checked, and why."""
    if manifest is None and authors.paper is not None:
        theirs = authors_commands(authors.paper, source=str(authors.source)) or {}
        return Step(name="paper", status="skipped",
                    summary="not checked: no paper manifest given: the paper's commands were "
                    "not run",
                    notes=(f"the attestation records the paper's commands ({', '.join(theirs)});"
                           " audit the paper folder (samebits-paper.toml) to rerun them",))
    return skipped("paper", f"not checked: {why}")

"""``samebits audit --many PAPERS.toml --out DIR``: the command around ``papers`` (the list and
its tasks), ``many`` (where they run) and ``summary`` (what the committee reads).

    --jobs N                 N papers at once on this machine (default 1)
    --slurm [-- SBATCH...]   one Slurm job array (--max-running M: at most M at once) and a
                             gather job after it; --wait blocks until the summary is written
    --task I                 run the list's entry I alone (what each array task runs)
    --gather                 write the summary from DIR's results (what the gather job runs)

Exit codes: 0 every paper's verdict accepted (at least its ``require``, and a verdict at all);
1 a paper not reproduced, weaker than required, failed, timed out or not run (each row says
why); 2 a bad list or bad options (nothing run). With --slurm and no --wait: 0 once both jobs
are submitted.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from samebits.cli import options
from samebits.errors import EXIT_DIFFERENT, EXIT_OK, UsageError
from samebits.ui import Output
from samebits_app.audit.many import (
    INDEX,
    TaskResult,
    done_before,
    run_task,
    run_tasks,
    submit_array,
)
from samebits_app.audit.papers import (
    REPORT,
    Entry,
    paper_task,
    read_papers,
    row,
    samebits_command,
)
from samebits_app.audit.summary import (
    counts_text,
    outcome,
    read_times,
    summary_doc,
    write_summary,
)

# audit's options that name one paper or one environment: not with --many
ONE_PAPER = (("paper", "a PAPER or URL"), ("commit", "--commit"), ("ref", "--ref"),
             ("sha256", "--sha256"), ("path", "--path"), ("attestation", "--attestation"),
             ("outputs", "--outputs"), ("prefix", "--prefix"), ("target", "--target"),
             ("trust", "--trust (give each paper's key as trust = in the list)"),
             ("lockfile", "--lockfile"))


def _abs(value: str) -> str:
    return str(Path(value).expanduser().absolute()) if "/" in value else value


def shared_options(args: argparse.Namespace) -> list[str]:
    """The audit options every paper of the list gets, as words (paths made absolute: the
    papers' audits run in other folders and on other nodes)."""
    words: list[str] = []
    if args.workload_python:
        words += ["--workload-python", _abs(args.workload_python)]
    if args.device != "auto":
        words += ["--device", args.device]
    if args.no_workloads:
        words.append("--no-workloads")
    if args.platform:
        words += ["--platform", args.platform]
    for d in args.find_links:
        words += ["--find-links", _abs(str(d))]
    for m in args.mirror:
        words += ["--mirror", m]
    if args.sign:
        words += ["--sign", _abs(str(args.sign))]
    return words


def check_many_args(args: argparse.Namespace) -> None:
    given = [what for dest, what in ONE_PAPER if getattr(args, dest, None) is not None]
    if given:
        raise UsageError(f"--many: {', '.join(given)} name one paper; the list names each "
                         "paper (url, commit or sha256, path, trust)",
                         hint="samebits audit --many PAPERS.toml --out DIR")
    if args.out is None:
        raise UsageError("--many needs --out DIR (each paper's folder and the summary)")
    if args.task is not None and (args.gather or args.slurm):
        raise UsageError("--task runs one entry here: not with --gather or --slurm")
    if not args.slurm and (args.max_running is not None or args.wait or args.sbatch):
        raise UsageError("--max-running, --wait and sbatch options after -- go with --slurm")


def run_batch(args: argparse.Namespace, out: Output) -> int:
    check_many_args(args)
    entries = read_papers(args.many)
    if args.require is not None:  # the default for entries without their own
        from dataclasses import replace

        entries = tuple(replace(e, require=e.require or args.require) for e in entries)
    dest = Path(args.out).absolute()
    cache = options.cache_of(args)
    shared = shared_options(args)
    tasks = [paper_task(e, dest, shared, cache=cache) for e in entries]
    clear = (REPORT,)
    if args.task is not None:
        if not 0 <= args.task < len(entries):
            raise UsageError(f"--task {args.task}: the list has entries 0 to "
                             f"{len(entries) - 1}")
        res = run_task(tasks[args.task], dest, force=args.force, keep=args.keep, clear=clear)
        r = row(entries[args.task], dest, shared)
        out.emit({"paper": r, "status": res.status, "seconds": res.seconds},
                 _line(r, res))
        return EXIT_OK if r["accepted"] else EXIT_DIFFERENT
    if args.gather:
        return _gather(entries, dest, shared, args.many, out)
    if args.slurm:
        return _slurm(args, entries, dest, shared, cache, tasks, out)
    n = len(tasks)

    def said(i: int, res: TaskResult) -> None:
        out.info(f"[{i + 1}/{n}] {_line(row(entries[i], dest, shared), res)}")

    run_tasks(tasks, dest, jobs=args.jobs, force=args.force, keep=args.keep, clear=clear,
              said=said)
    return _gather(entries, dest, shared, args.many, out)


def _line(r: dict[str, Any], res: TaskResult) -> str:
    took = f"{res.seconds:g} s" if res.seconds is not None else "time unknown"
    if res.status == "skipped":
        return (f"{r['name']}: {outcome(r)}: skipped, the result of an earlier run for the "
                "same commit and samebits (--force runs it again)")
    reason = f": {r['reason']}" if r["reason"] else ""
    return f"{r['name']}: {outcome(r)} ({took}){reason}"


def _gather(entries: Sequence[Entry], dest: Path, shared: Sequence[str], listed: Path,
            out: Output) -> int:
    rows = [row(e, dest, shared) for e in entries]
    doc = summary_doc(rows, Path(listed).read_bytes())
    files = write_summary(dest, doc, read_times(dest, [e.name for e in entries]))
    width = max(len(r["name"]) for r in rows)
    lines = [f"summary: {counts_text(doc)}"]
    for r in rows:
        lines.append(f"  {r['name']:<{width}}  {outcome(r):<22} "
                     f"{'accepted' if r['accepted'] else 'NOT accepted'}"
                     + (f": {r['reason']}" if r["reason"] else ""))
    lines.append("report: " + ", ".join(files[k] for k in ("html", "markdown", "json")))
    code = EXIT_OK if all(r["accepted"] for r in rows) else EXIT_DIFFERENT
    out.emit({**doc, "files": files, "exit_code": code}, "\n".join(lines))
    return code


def _slurm(args: argparse.Namespace, entries: Sequence[Entry], dest: Path,
           shared: Sequence[str], cache: Path, tasks: Sequence[Any], out: Output) -> int:
    pending = [e.index for e, t in zip(entries, tasks, strict=True)
               if args.force or done_before(t, dest) is None]
    listed = str(Path(args.many).absolute())
    common = ["--out", str(dest), "--cache-dir", str(cache), *shared,
              *(["--require", args.require] if args.require else [])]
    task_command = [*samebits_command(), "audit", "--many", listed, "--task", INDEX, *common,
                    *(["--force"] if args.force else []), *(["--keep"] if args.keep else [])]
    gather_command = [*samebits_command(), "audit", "--many", listed, "--gather", *common]
    skipped = len(entries) - len(pending)
    out.info(f"submitting {len(pending)} of {len(entries)} papers as one Slurm array"
             + (f" ({skipped} skipped: their results stand; --force runs them again)"
                if skipped else "") + ", then the gather job")
    jobs = submit_array(dest, indices=pending, task_command=task_command,
                        gather_command=gather_command, max_running=args.max_running,
                        sbatch_options=args.sbatch or (), wait=args.wait,
                        wait_timeout=sum(t.timeout for t in tasks) + 3600.0,
                        name="samebits-audit")
    said = (f"array job {jobs.array} ({len(jobs.indices)} papers"
            + (f", at most {args.max_running} at once" if args.max_running else "") + ")"
            if jobs.array else "no array job (every paper's result stands)")
    out.info(f"{said}; gather job {jobs.gather} after it; scripts and Slurm's output in "
             f"{dest / 'slurm'}")
    if jobs.waited:
        return _gather(entries, dest, shared, args.many, out)
    payload = {"array": jobs.array, "gather": jobs.gather, "indices": list(jobs.indices),
               "summary": str(dest / "summary.html"), "exit_code": EXIT_OK}
    out.emit(payload, f"submitted: {said}; gather job {jobs.gather}; the summary will be "
             f"{dest / 'summary.html'}")
    return EXIT_OK

"""The corpus runner (``nox -s papers``, ``python -m tests.papers.corpus``): the papers of a
corpus file as tasks of ``samebits_app.audit.many``, the scheduler of ``samebits audit
--many``; tests/papers/corpus.py is one paper's steps and the tables.

Each paper runs in a process of its own (``NAME --task-result FILE``: its steps, then its row
written to FILE as JSON), ``--jobs N`` at once (default 1: each brings 2-3 GB of torch), each
stopped (its whole process group) after the sum of its steps' limits plus ``MARGIN``. The
scheduler's folder for a paper is ``OUT/runs/NAME/`` (its work stays in ``OUT/NAME/``, where
the steps write their own log.txt):

    log.txt      what the paper's process printed (its steps; a traceback)
    task.json    its key (samebits version, mode, corpus entry), exit code and status
    times.json   its seconds, host and load average
    result.json  its row (``RESULT_FORMAT``), written when it ends

A paper whose result stands (the same samebits version, mode, ``--cold`` and corpus entry) is
not run again (``--force`` runs it), so an interrupted run resumes; a crash or a timeout is
that paper's reason, a line under the table, and stops no other. Its environments (and with
``--cold`` its caches) are removed after it whatever became of it, unless ``--keep``. The
table (RESULTS.md, PAPER_INIT.md with ``--paper-init``) is rendered from the result files in
the corpus' order, so its bytes do not depend on ``--jobs``; it is rewritten as each paper
ends.

``--slurm [--max-running M] [--wait] [--sbatch=OPTION ...]`` submits the papers still to run
as one Slurm job array (``submit_array``: each array task runs ``--task I``, the I-th paper
chosen) and a gather job (``--gather``: the table from the result files) after it; scripts
and Slurm's output in ``OUT/runs/slurm/``. The nodes need this checkout and OUT at the same
paths (a shared file system) and the index's network.

Exit codes: 0 every paper has both verdicts accepted (bit-identical, within-tolerance,
explained); 1 one has not, or has no result; 2 bad options or a bad corpus file (nothing run);
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import atomic_write, canonical_json
from samebits.errors import InputError, SamebitsError
from samebits_app.audit.many import (
    INDEX,
    LOG_FILE,
    SLURM_FOLDER,
    Task,
    TaskResult,
    check_name,
    done_before,
    run_task,
    run_tasks,
    submit_array,
    task_record,
)
from tests.papers import corpus
from tests.papers.corpus import (
    HERE,
    INIT_STEPS,
    LIMITS,
    STEPS,
    InitResult,
    Paper,
    Result,
    init_table,
    one,
    one_init,
    table,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = HERE.parent.parent  # the checkout: where ``python -m tests.papers.corpus`` runs
CORPUS = HERE / "corpus.toml"
MARGIN = 600  # seconds of a paper beyond its steps' limits: copying it, removing environments
RUNS = "runs"  # OUT/runs/NAME: the scheduler's folder of each paper
RESULT = "result.json"
RESULT_FORMAT = 1
RESULTS_MD, PAPER_INIT_MD = "RESULTS.md", "PAPER_INIT.md"
ACCEPTED = ("bit-identical", "within-tolerance", "explained")


# ------------------------------------------------------------------------------ the corpus file

def read_corpus(path: Path) -> list[Paper]:
    """The ``[[paper]]`` entries of a corpus file, each with a name (a folder beside the file),
    repo, commit, from and torch; InputError naming the file, entry and key otherwise."""
    shown = _shown(path)
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise InputError(f"{shown}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{shown}: not TOML: {exc}") from None
    papers = doc.get("paper")
    if not isinstance(papers, list) or not papers or not all(
            isinstance(p, dict) for p in papers):
        raise InputError(f"{shown}: expected [[paper]] tables, one per paper")
    seen: set[str] = set()
    for i, paper in enumerate(papers):
        where = f"{shown}: [[paper]] {i + 1}"
        for key in ("name", "repo", "commit", "from", "torch"):
            if not isinstance(paper.get(key), str):
                raise InputError(f"{where}: {key} = {json.dumps(paper.get(key))}: "
                                 "expected a string")
        name = check_name(paper["name"], where)
        if name in (RUNS, RESULTS_MD, PAPER_INIT_MD) or name in seen:
            raise InputError(f"{where}: name = {json.dumps(name)}: "
                             + ("a second paper of that name" if name in seen else
                                "the runner's own name in OUT; choose another"))
        if not (Path(path).parent / name).is_dir():
            raise InputError(f"{where}: name = {json.dumps(name)}: no folder "
                             f"{_shown(Path(path).parent / name)}")
        seen.add(name)
    return papers


def _shown(path: Path) -> str:
    try:
        return str(Path(path).absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ------------------------------------------------------------------------------ result files

def mode(paper_init: bool) -> str:
    return "paper-init" if paper_init else "default"


def paper_key(paper: Paper, *, paper_init: bool, cold: bool) -> dict[str, Any]:
    """What an earlier result of ``paper`` must have been run with to stand: this samebits
    version, the same mode and the same corpus entry."""
    return {"samebits": __version__, "mode": mode(paper_init), "cold": cold, "paper": paper}


def paper_timeout(paper: Paper, *, paper_init: bool) -> float:
    """The paper's seconds: the sum of its steps' limits (``paper init`` once per call of its
    ``paper_init``) and ``MARGIN``."""
    if not paper_init:
        return float(sum(LIMITS[s] for s in STEPS) + MARGIN)
    calls = len(paper.get("paper_init") or [])
    return float(sum(LIMITS[s] for s in INIT_STEPS if s != "paper-init")
                 + LIMITS["paper-init"] * calls + MARGIN)


def write_result(path: Path, result: Result | InitResult, *, paper_init: bool) -> None:
    """One paper's row, as its process leaves it (canonical JSON: the same result, the same
    bytes)."""
    atomic_write(path, canonical_json({"format": RESULT_FORMAT, "mode": mode(paper_init),
                                       "result": asdict(result)}))


def read_result(path: Path, *, paper_init: bool) -> Result | InitResult | None:
    """A paper's result.json; None when absent, unreadable, or of another format or mode."""
    try:
        doc = json.loads(path.read_text())
        if doc.get("format") != RESULT_FORMAT or doc.get("mode") != mode(paper_init):
            return None
        got = dict(doc["result"])
        got["steps"] = {k: (int(v[0]), float(v[1])) for k, v in got["steps"].items()}
        if paper_init:
            got["rows"] = [tuple(r) for r in got["rows"]]
            return InitResult(**got)
        return Result(**got)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        return None


def reason(rec: dict[str, Any] | None, key: dict[str, Any], folder: Path) -> str:
    """Why the paper of ``folder`` (OUT/runs/NAME) has no result to show ("" when it has
    one), from its task.json and the end of its log."""
    log = f"{RUNS}/{folder.name}/{LOG_FILE}"
    if rec is None:
        return "no result yet (not run, or still running)"
    if rec.get("key") != json.loads(json.dumps(key)):
        return ("no result for this samebits version, mode and corpus entry yet (an "
                "earlier run's is there)")
    status = rec.get("status")
    if status == "done":
        return ""
    step, said = _log_end(folder / LOG_FILE, folder.name)
    where = f", in {step}" if step else ""
    if status == "timeout":
        return (f"stopped after {float(rec.get('timeout') or 0):g} s (its timeout){where}: "
                f"see {log}")
    return f"failed (exit {rec.get('exit_code')}){where}{': ' + said if said else ''}: see {log}"


def _log_end(log: Path, name: str) -> tuple[str | None, str | None]:
    """The last step a paper's log started (run_step's ``  STEP  samebits ...`` line) and
    its last line of its own (a traceback's exception; not a step, a step's exit, or the
    scheduler's ``$ command``)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None, None
    step = said = None
    for line in lines:
        words = line.split()
        if line.startswith("  ") and len(words) > 1 and words[1] == "samebits":
            step = words[0]
        elif line.strip() and not line.startswith((" ", "$ ", f"{name} (")):
            said = line.strip().removeprefix("error: ")
    return step, said


def rows(papers: Sequence[Paper], out: Path, *, paper_init: bool, cold: bool
         ) -> list[tuple[Result | InitResult, str]]:
    """Each paper's row from ``OUT/runs/NAME``: its result, or an empty row and the reason it
    has none; in the order of ``papers``."""
    got: list[tuple[Result | InitResult, str]] = []
    for paper in papers:
        folder = out / RUNS / paper["name"]
        why = reason(task_record(folder), paper_key(paper, paper_init=paper_init, cold=cold),
                     folder)
        result = None if why else read_result(folder / RESULT, paper_init=paper_init)
        if result is None and not why:
            why = f"its result is unreadable: {RUNS}/{paper['name']}/{RESULT}"
        if result is None:
            result = InitResult(name=paper["name"]) if paper_init else Result(
                name=paper["name"], torch=paper["torch"], source=paper["from"])
        got.append((result, why))
    return got


def render(papers: Sequence[Paper], out: Path, *, paper_init: bool, cold: bool
           ) -> tuple[str, bool]:
    """RESULTS.md (PAPER_INIT.md with ``paper_init``) from the result files, and whether every
    paper has a result whose two verdicts are accepted."""
    got = rows(papers, out, paper_init=paper_init, cold=cold)
    if paper_init:
        inits: list[InitResult] = []
        for r, why in got:
            assert isinstance(r, InitResult)
            inits.append(r)
            if why:
                r.notes.append(why)
        return init_table(inits), all(not r.missing and not r.notes and all(
            r.verdicts.get(s) in ACCEPTED for s in ("audit", "omp1")) for r in inits)
    results = [r for r, _ in got if isinstance(r, Result)]
    reasons = {r.name: why for r, why in got if why}
    return table(results, reasons), all(not reasons and all(
        r.verdicts.get(s) in ACCEPTED for s in ("audit", "omp1")) for r in results)


# ------------------------------------------------------------------------------ scheduling

def child_options(args: argparse.Namespace) -> list[str]:
    """The options every paper's process and every Slurm job gets (paths absolute)."""
    return ["--out", str(args.out.resolve()), "--corpus", str(args.corpus.resolve()),
            "--min-free-gb", f"{args.min_free_gb:g}", *(["--keep"] if args.keep else []),
            *(["--cold"] if args.cold else []),
            *(["--paper-init"] if args.paper_init else [])]


def paper_task(paper: Paper, args: argparse.Namespace) -> Task:
    """One paper as the scheduler's task: its own process writing ``OUT/runs/NAME/result.json``
    (the proof that it has a result), its timeout and key; its environments (and with
    ``--cold`` its caches) removed afterwards unless ``--keep``, whatever became of it."""
    out = args.out.resolve()
    name = paper["name"]
    work, result = out / name, out / RUNS / name / RESULT
    return Task(name=name,
                argv=(sys.executable, "-m", "tests.papers.corpus", name, *child_options(args),
                      "--task-result", str(result)),
                timeout=paper_timeout(paper, paper_init=args.paper_init),
                key=paper_key(paper, paper_init=args.paper_init, cold=args.cold),
                cwd=ROOT, proof=result,
                remove=(work / "env", work / "env-review",
                        *((work / "cache",) if args.cold else ())))


def line(paper: Paper, res: TaskResult, out: Path, args: argparse.Namespace) -> str:
    """What one line says of a paper that ended."""
    name = paper["name"]
    if res.status == "skipped":
        return (f"{name}: skipped, its result stands (the same samebits version, mode and "
                "corpus entry; --force runs it again)")
    [(result, why)] = rows([paper], out, paper_init=args.paper_init, cold=args.cold)
    took = f" in {res.seconds:g} s" if res.seconds is not None else ""
    said = why or "; ".join([*result.notes, ", ".join(
        f"{s} {result.verdicts.get(s, '-')}" for s in ("audit", "omp1"))])
    return f"{name}: {res.status}{took}: {said}"


def table_file(args: argparse.Namespace) -> Path:
    return Path(args.out) / (PAPER_INIT_MD if args.paper_init else RESULTS_MD)


def gather(papers: Sequence[Paper], args: argparse.Namespace) -> int:
    """The table from the result files, written and printed; 0 when every paper has both
    verdicts accepted."""
    text, ok = render(papers, args.out.resolve(), paper_init=args.paper_init, cold=args.cold)
    atomic_write(table_file(args), text)
    if args.paper_init:
        print(f"\n{text}")
    else:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\n{text}\nload average at the end: {load}")
    return 0 if ok else 1


def run_here(papers: Sequence[Paper], args: argparse.Namespace) -> int:
    """Every paper, ``--jobs`` at a time on this machine; the table rewritten as each ends
    (the papers ended so far, in corpus order), then written whole."""
    out = args.out.resolve()
    tasks = [paper_task(p, args) for p in papers]
    ended: set[int] = set()
    print(f"{len(tasks)} papers, {args.jobs} at a time; each one's progress in "
          f"{out / RUNS}/NAME/{LOG_FILE}", flush=True)

    def said(i: int, res: TaskResult) -> None:
        ended.add(i)
        text, _ = render([papers[j] for j in sorted(ended)], out, paper_init=args.paper_init,
                         cold=args.cold)
        atomic_write(table_file(args), text)
        print(f"[{len(ended)}/{len(tasks)}] {line(papers[i], res, out, args)}", flush=True)

    try:
        run_tasks(tasks, out / RUNS, jobs=args.jobs, force=args.force, keep=args.keep,
                  clear=(RESULT,), said=said)
    except KeyboardInterrupt:
        print("interrupted: the papers that ended are kept; the same command goes on with "
              "the others", file=sys.stderr)
        return 130
    return gather(papers, args)


def run_index(papers: Sequence[Paper], args: argparse.Namespace) -> int:
    """``--task I``: the I-th paper chosen, through the scheduler (what each array task runs)."""
    if not 0 <= args.task < len(papers):
        raise InputError(f"--task {args.task}: the papers chosen are 0 to {len(papers) - 1}")
    paper = papers[args.task]
    res = run_task(paper_task(paper, args), args.out.resolve() / RUNS, force=args.force,
                   keep=args.keep, clear=(RESULT,))
    print(line(paper, res, args.out.resolve(), args), flush=True)
    return 0 if res.status in ("done", "skipped") else 1


def run_slurm(papers: Sequence[Paper], args: argparse.Namespace) -> int:
    """The papers still to run as one Slurm array, a gather job after it."""
    out = args.out.resolve()
    tasks = [paper_task(p, args) for p in papers]
    pending = [i for i, t in enumerate(tasks)
               if args.force or done_before(t, out / RUNS) is None]
    here = [sys.executable, "-m", "tests.papers.corpus", *(p["name"] for p in papers),
            *child_options(args)]
    jobs = submit_array(out / RUNS, indices=pending,
                        task_command=[*here, "--task", INDEX,
                                      *(["--force"] if args.force else [])],
                        gather_command=[*here, "--gather"], max_running=args.max_running,
                        sbatch_options=[f"--chdir={ROOT}", *args.sbatch], wait=args.wait,
                        wait_timeout=sum(t.timeout for t in tasks) + 3600.0,
                        name="samebits-papers")
    skipped = len(tasks) - len(pending)
    print(f"array job {jobs.array or '(none: every result stands)'}: {len(pending)} of "
          f"{len(tasks)} papers" + (f" ({skipped} skipped: their results stand)"
                                    if skipped else "")
          + f"; gather job {jobs.gather} after it; scripts and Slurm's output in "
          f"{out / RUNS / SLURM_FOLDER}", flush=True)
    return gather(papers, args) if jobs.waited else 0


def run_paper(paper: Paper, args: argparse.Namespace) -> int:
    """``NAME --task-result FILE``: one paper's steps here, its row written to FILE (exit 0
    with a row, whatever its steps said; a crash leaves no row)."""
    out, source = args.out.resolve(), args.corpus.resolve().parent
    result: Result | InitResult
    if args.paper_init:
        result = one_init(paper, out, keep=args.keep, min_free_gb=args.min_free_gb,
                          cold=args.cold, source=source)
    else:
        result = one(paper, out, keep=args.keep, min_free_gb=args.min_free_gb,
                     cold=args.cold, source=source)
    write_result(args.task_result, result, paper_init=args.paper_init)
    return 0


# ------------------------------------------------------------------------------ command line

def parser() -> argparse.ArgumentParser:
    doc = (corpus.__doc__ or "").split("\n")[0]
    p = argparse.ArgumentParser(prog="nox -s papers --", description=doc)
    p.add_argument("names", nargs="*", help="papers of corpus.toml (default: all)")
    p.add_argument("--out", type=Path, default=Path("build/papers"),
                   help="each paper's folder, the table, and the runner's own runs/ "
                   "(default: build/papers)")
    p.add_argument("--keep", action="store_true", help="keep the environments")
    p.add_argument("--min-free-gb", type=float, default=25.0)
    p.add_argument("--cold", action="store_true",
                   help="each paper from empty caches of its own (XDG_CACHE_HOME under its "
                   "folder, removed after it): archives, index answers and sdist build "
                   "records fetched and built again, as on a fresh machine")
    p.add_argument("--paper-init", action="store_true",
                   help="samebits paper init on each paper without its hand-written "
                   "manifest, with corpus.toml's paper_init commands; then attest and "
                   "audit under the generated manifest, and the hand-written against the "
                   "generated tolerances (PAPER_INIT.md)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="N papers at once, each in a process of its own (default 1: each "
                   "brings 2-3 GB of torch)")
    p.add_argument("--force", action="store_true",
                   help="run papers again whose result stands (the same samebits version, "
                   "mode and corpus entry)")
    p.add_argument("--corpus", type=Path, default=CORPUS, metavar="FILE",
                   help="the corpus file; each paper's folder beside it (default: "
                   "tests/papers/corpus.toml)")
    p.add_argument("--slurm", action="store_true",
                   help="submit the papers still to run as one Slurm job array and a gather "
                   "job that writes the table")
    p.add_argument("--max-running", type=int, metavar="M", help="--slurm: at most M at once")
    p.add_argument("--wait", action="store_true",
                   help="--slurm: wait for the gather job, then print the table")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="--slurm: an sbatch option for both jobs, as --sbatch=--partition=cpu "
                   "(repeatable)")
    p.add_argument("--task-result", type=Path, metavar="FILE",
                   help="run the one paper NAME here and write its row to FILE as JSON (what "
                   "each paper's process runs)")
    p.add_argument("--task", type=int, metavar="I",
                   help="run the I-th paper chosen (from 0) through the scheduler (what each "
                   "Slurm array task runs)")
    p.add_argument("--gather", action="store_true",
                   help="write the table from OUT/runs' result files alone (what the Slurm "
                   "gather job runs)")
    return p


def check_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.jobs < 1:
        p.error(f"--jobs {args.jobs}: expected 1 or more")
    if args.max_running is not None and args.max_running < 1:
        p.error(f"--max-running {args.max_running}: expected 1 or more")
    if not args.slurm and (args.max_running is not None or args.wait or args.sbatch):
        p.error("--max-running, --wait and --sbatch go with --slurm")
    ways = [w for w, on in (("--slurm", args.slurm), ("--task", args.task is not None),
                            ("--gather", args.gather),
                            ("--task-result", args.task_result is not None)) if on]
    if len(ways) > 1:
        p.error(f"{' and '.join(ways)}: one at a time")
    if args.task_result is not None and len(args.names) != 1:
        p.error("--task-result runs one paper: give its NAME alone")


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    check_options(p, args)
    try:
        papers = read_corpus(args.corpus)
        unknown = set(args.names) - {p["name"] for p in papers}
        if unknown:
            raise InputError(f"not in {_shown(args.corpus)}: {', '.join(sorted(unknown))}")
        chosen = [p for p in papers if not args.names or p["name"] in args.names]
        args.out.mkdir(parents=True, exist_ok=True)
        if args.task_result is not None:
            return run_paper(chosen[0], args)
        if args.task is not None:
            return run_index(chosen, args)
        if args.gather:
            return gather(chosen, args)
        if args.slurm:
            return run_slurm(chosen, args)
        return run_here(chosen, args)
    except SamebitsError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())

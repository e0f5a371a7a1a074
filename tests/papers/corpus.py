"""``nox -s papers``: every paper of the corpus from its authors' own files to an audit verdict.

For each paper of ``tests/papers/corpus.toml``, in a fresh folder under ``build/papers/NAME``,
with the installed ``samebits`` console script and nothing edited by hand:

    init     samebits init NAME --from <the authors' requirements.txt or pyproject.toml>
             --generation cpu    (the corpus runs on CPUs; a CUDA build of torch runs there)
    lock     samebits lock NAME                    (real uv against the index)
    install  samebits install LOCK --prefix env    (the lock's archives, hash-checked)
    verify   samebits verify env --prefix env --lockfile LOCK
    attest   samebits attest PAPER --prefix env    (the authors' side: reference + outputs)
    audit    samebits audit PAPER --install env-review --replace    (a reviewer's install)
    omp1     OMP_NUM_THREADS=1 samebits audit PAPER --prefix env-review

then the table: paper, torch, Python, each step's exit code and seconds, the two verdicts. Each
paper's environments are removed after it (old torch from PyPI is a CUDA build of 2-3 GB);
with less than ``--min-free-gb`` left, the lock's archives are removed from the cache too.

    python -m tests.papers.corpus [NAME ...] [--out build/papers] [--keep] [--cold]
                                  [--jobs N] [--force] [--slurm] [--corpus FILE]

Each paper runs in a process of its own, scheduled as ``samebits audit --many`` schedules
papers (``--jobs N`` at once, resumed, one's crash or timeout its own): tests/papers/
corpus_runs.py, the command line. This module is one paper's steps and the tables.

``--cold`` gives each paper empty caches of its own (a fresh machine: every archive
downloaded, every sdist built again, no index answer remembered); RESULTS.md is a cold run.

``--paper-init`` (issue 42) asks instead whether ``samebits paper init`` writes what the
authors' hand-written manifest says, for each paper with a ``paper_init`` key in corpus.toml
(each entry: the arguments of one ``samebits paper init PAPER --prefix env ...`` call, in
order). After init, lock, install and verify as above, in a copy of the paper folder without
``samebits-paper.toml`` (``paper-init/paper``):

    paper-init  samebits paper init COPY --prefix env ARGS...   (each entry; exit 1, an output
                the alike runs disagree on, is reported, not a stop)
    outputs     every output of the hand-written manifest is one of the generated one's
    attest      samebits attest COPY --prefix env
    audit       samebits audit COPY --prefix env                (the same machine)
    omp1        OMP_NUM_THREADS=1 samebits audit COPY --prefix env

then the hand-written against the generated tolerances, side by side, per output (per metric
where either lists them): printed and written to ``PAPER_INIT.md`` beside RESULTS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE: Path = Path(__file__).resolve().parent
STEPS = ("init", "lock", "install", "verify", "attest", "audit", "omp1")
LIMITS = {"init": 300, "lock": 600, "install": 1800, "verify": 900, "attest": 1800,
          "audit": 3600, "omp1": 1800, "paper-init": 3600}
INIT_STEPS = ("init", "lock", "install", "verify", "paper-init", "attest", "audit", "omp1")
Paper = dict[str, Any]  # one [[paper]] of corpus.toml


@dataclass
class Result:
    name: str
    torch: str
    source: str
    python: str = "?"
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def samebits() -> list[str]:
    script = Path(sys.executable).with_name("samebits")
    return [str(script)] if script.exists() else [sys.executable, "-m", "samebits"]


def run_step(result: Result, step: str, args: list[str], *, log: Path,
             env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run one step, its output appended to ``log``; (exit code, seconds) into the result."""
    print(f"  {step:8} samebits {' '.join(args)}", flush=True)
    start = time.monotonic()
    with open(log, "a") as out:
        out.write(f"\n$ samebits {' '.join(args)}\n")
        out.flush()
        try:
            code = subprocess.run([*samebits(), *args], stdout=out, stderr=subprocess.STDOUT,
                                  env=env, cwd=cwd, timeout=LIMITS[step]).returncode
        except subprocess.TimeoutExpired:
            out.write(f"\n(stopped after {LIMITS[step]} s)\n")
            code = 124
    took = time.monotonic() - start
    result.steps[step] = (code, took)
    print(f"           exit {code} in {took:.0f} s", flush=True)
    return code


def prepare(paper: Paper, work: Path, source: Path = HERE) -> Path:
    """The paper folder as reviewers get it: the authors' files, the manifest and driver, and
    the corpus' shared generator (``source/common``) where the manifest runs it."""
    if work.exists():
        shutil.rmtree(work)
    folder = work / "paper"
    shutil.copytree(source / paper["name"], folder)
    manifest = (folder / "samebits-paper.toml").read_text()
    shared = source / "common"
    for common in shared.iterdir() if shared.is_dir() else ():
        if common.name in manifest:
            shutil.copy2(common, folder / common.name)
    return folder


def verdict(report: Path) -> str:
    try:
        return str(json.loads(report.read_text())["verdict"]["level"])
    except (OSError, ValueError, KeyError, TypeError):
        return "-"


def one(paper: Paper, out: Path, *, keep: bool, min_free_gb: float, cold: bool = False,
        source: Path = HERE) -> Result:
    name = paper["name"]
    result = Result(name=name, torch=paper["torch"], source=paper["from"])
    work = out / name
    folder = prepare(paper, work, source)
    project = work / "project"
    log = work / "log.txt"
    lock = folder / "conda-lock.yml"
    env, review = work / "env", work / "env-review"
    print(f"{name} ({paper['repo']} @ {paper['commit'][:7]}): from {paper['from']}", flush=True)
    steps = [
        ("init", ["init", name, "--from", str(folder / paper["from"]), "--root", str(project),
                  "--generation", "cpu", *paper.get("init", [])]),
        ("lock", ["lock", name, "--root", str(project)]),
        ("install", ["install", str(lock), "--target", str(env)]),
        ("verify", ["verify", "env", "--prefix", str(env), str(lock)]),
        ("attest", ["attest", str(folder), "--prefix", str(env)]),
        ("audit", ["audit", str(folder), "--target", str(review), "--replace",
                   "--out", str(work / "audit")]),
        ("omp1", ["audit", str(folder), "--prefix", str(review), "--out",
                  str(work / "audit-omp1")]),
    ]
    base = dict(os.environ)
    if cold:  # a fresh machine: no archive, index answer or sdist build record of an earlier run
        shutil.rmtree(work / "cache", ignore_errors=True)
        base["XDG_CACHE_HOME"] = str(work / "cache")
    for step, args in steps:
        env_vars = {**base, "OMP_NUM_THREADS": "1"} if step == "omp1" else base
        code = run_step(result, step, args, log=log, env=env_vars)
        if step == "lock" and code == 0:
            shutil.copy2(project / "lockfiles" / f"{name}.conda-lock.yml", lock)
            result.python = _python(project / "environments" / f"{name}.toml")
        if step in ("audit", "omp1"):
            result.verdicts[step] = verdict(work / ("audit" if step == "audit"
                                                    else "audit-omp1") / "audit.json")
        elif code != 0:
            result.notes.append(f"{step} exit {code}: see {log}")
            break
    if not keep:
        for path in (env, review):
            shutil.rmtree(path, ignore_errors=True)
        if cold:
            shutil.rmtree(work / "cache", ignore_errors=True)
        else:
            _free_archives(lock, min_free_gb)
    return result


def _python(spec: Path) -> str:
    try:
        return str(tomllib.loads(spec.read_text())["python"])
    except (OSError, ValueError, KeyError):
        return "?"


def _free_archives(lock: Path, min_free_gb: float) -> None:
    """Remove this lock's archives from the install cache when the disk runs short."""
    free = shutil.disk_usage(lock.parent).free / 2**30
    if free >= min_free_gb or not lock.exists():
        return
    from samebits.install import default_cache_dir
    from samebits.lock.model import parse_lock

    cache = default_cache_dir()
    for p in parse_lock(lock).packages:
        key = (p.sha256 or p.md5 or "").lower()
        for folder in ("archives", "unpacked"):
            shutil.rmtree(cache / folder / key, ignore_errors=True)
    print(f"  (removed the lock's archives from {cache}: {free:.0f} GB was free)", flush=True)


def table(results: list[Result], reasons: dict[str, str] | None = None) -> str:
    """RESULTS.md: a row per paper, then why a paper has no result (``reasons``, by name),
    a line each, where one has none."""
    head = ["paper", "from", "torch", "python", *STEPS, "verdict", "verdict (OMP=1)"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r.name, f"`{r.source}`", r.torch, r.python]
        for step in STEPS:
            got = r.steps.get(step)
            cells.append("-" if got is None else f"{got[0]} ({got[1]:.0f} s)")
        cells += [r.verdicts.get("audit", "-"), r.verdicts.get("omp1", "-")]
        rows.append("| " + " | ".join(cells) + " |")
    notes = [f"- {r.name}: {(reasons or {})[r.name]}" for r in results
             if (reasons or {}).get(r.name)]
    return "\n".join(rows + ([""] + notes if notes else [])) + "\n"


@dataclass
class InitResult:
    """``--paper-init``: one paper's steps, whether the generated manifest declares every
    hand-written output (``missing``: those it does not), and the tolerances side by side."""

    name: str
    steps: dict[str, tuple[int, float]] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)  # cmd, output, hand, gen
    notes: list[str] = field(default_factory=list)


def _tolerance(t: object) -> str:
    rtol, atol = getattr(t, "rtol", 0.0), getattr(t, "atol", 0.0)
    if not rtol and not atol:
        return "0"
    return ", ".join(f"{k} {v:g}" for k, v in (("rtol", rtol), ("atol", atol)) if v)


def side_by_side(hand: Path, generated: Path) -> tuple[list[str], list[tuple[str, str, str,
                                                                             str]]]:
    """The hand-written outputs the generated manifest lacks ("command: output"), and a row
    (command, output, hand-written, generated) per output, per metric where either manifest
    lists metrics."""
    from samebits_app.paper.manifest import read_manifest

    h, g = read_manifest(hand), read_manifest(generated)
    made = {(c.name, o.label): o for c in g.commands for o in c.outputs}
    missing, rows = [], []
    for c in h.commands:
        for o in c.outputs:
            mine = made.get((c.name, o.label))
            if mine is None:
                missing.append(f"{c.name}: {o.label}")
                rows.append((c.name, o.label, f"{o.kind}: {_tolerance(o.tolerance)}",
                             "not declared"))
                continue
            if o.kind != mine.kind:
                rows.append((c.name, o.label, f"{o.kind}: {_tolerance(o.tolerance)}",
                             f"{mine.kind}: {_tolerance(mine.tolerance)}"))
                continue
            if o.kind == "metrics" and (o.metrics or mine.metrics):
                theirs, ours = dict(o.metrics), dict(mine.metrics)
                for metric in dict.fromkeys([*theirs, *ours]):
                    rows.append((c.name, f"{o.label}: {metric}",
                                 _tolerance(theirs.get(metric, o.tolerance))
                                 if theirs or not o.metrics else "-",
                                 _tolerance(ours[metric]) if metric in ours else (
                                     _tolerance(mine.tolerance) if not mine.metrics
                                     else "left out")))
                continue
            extra = ""
            if o.kind == "curve":
                extra = f" ({', '.join(mine.series) or 'every series'})"
            rows.append((c.name, o.label, _tolerance(o.tolerance),
                         _tolerance(mine.tolerance) + extra))
    return missing, rows


def one_init(paper: Paper, out: Path, *, keep: bool, min_free_gb: float,
             cold: bool = False, source: Path = HERE) -> InitResult:
    """``--paper-init`` for one paper (module doc)."""
    name = paper["name"]
    result = InitResult(name=name)
    calls = paper.get("paper_init") or []
    if not calls:
        result.notes.append("no paper_init key in corpus.toml")
        return result
    work = out / name
    folder = prepare(paper, work, source)
    project, log, lock = work / "project", work / "log.txt", folder / "conda-lock.yml"
    env = work / "env"
    steps = Result(name=name, torch=paper["torch"], source=paper["from"])
    print(f"{name} (paper init): from {paper['from']}", flush=True)
    base = dict(os.environ)
    if cold:
        shutil.rmtree(work / "cache", ignore_errors=True)
        base["XDG_CACHE_HOME"] = str(work / "cache")
    for step, args in [
            ("init", ["init", name, "--from", str(folder / paper["from"]), "--root",
                      str(project), "--generation", "cpu", *paper.get("init", [])]),
            ("lock", ["lock", name, "--root", str(project)]),
            ("install", ["install", str(lock), "--target", str(env)]),
            ("verify", ["verify", "env", "--prefix", str(env), str(lock)])]:
        code = run_step(steps, step, args, log=log, env=base)
        if step == "lock" and code == 0:
            shutil.copy2(project / "lockfiles" / f"{name}.conda-lock.yml", lock)
        if code != 0:
            result.notes.append(f"{step} exit {code}: see {log}")
            break
    result.steps.update(steps.steps)
    if not result.notes:
        copy = work / "paper-init" / "paper"
        shutil.rmtree(copy.parent, ignore_errors=True)
        shutil.copytree(folder, copy, symlinks=True,
                        ignore=shutil.ignore_patterns("samebits-paper.toml", "outputs",
                                                      "reference.attestation.json"))
        _init_steps(result, calls, folder, copy, env=env, work=work, log=log, base=base)
    if not keep:
        shutil.rmtree(env, ignore_errors=True)
        if cold:
            shutil.rmtree(work / "cache", ignore_errors=True)
        else:
            _free_archives(lock, min_free_gb)
    return result


def _init_steps(result: InitResult, calls: list[list[str]], folder: Path, copy: Path, *,
                env: Path, work: Path, log: Path, base: dict[str, str]) -> None:
    steps = Result(name=result.name, torch="", source="")
    took, codes = 0.0, []
    for call in calls:
        codes.append(run_step(steps, "paper-init", ["paper", "init", str(copy), "--prefix",
                                                    str(env), *call], log=log, env=base))
        took += steps.steps["paper-init"][1]
    result.steps["paper-init"] = (max(codes), took)
    if any(c not in (0, 1) for c in codes) or not (copy / "samebits-paper.toml").is_file():
        result.notes.append(f"paper init exit {max(codes)}: see {log}")
        return
    if 1 in codes:
        result.notes.append(f"paper init found an output the alike runs disagree on: see {log}")
    result.missing, result.rows = side_by_side(folder / "samebits-paper.toml",
                                               copy / "samebits-paper.toml")
    for step, args, omp in [
            ("attest", ["attest", str(copy), "--prefix", str(env)], None),
            ("audit", ["audit", str(copy), "--prefix", str(env), "--out",
                       str(work / "paper-init" / "audit")], None),
            ("omp1", ["audit", str(copy), "--prefix", str(env), "--out",
                      str(work / "paper-init" / "audit-omp1")], "1")]:
        env_vars = {**base, "OMP_NUM_THREADS": omp} if omp else base
        code = run_step(steps, step, args, log=log, env=env_vars)
        result.steps[step] = steps.steps[step]
        if step in ("audit", "omp1"):
            result.verdicts[step] = verdict(work / "paper-init" / (
                "audit" if step == "audit" else "audit-omp1") / "audit.json")
        elif code != 0:
            result.notes.append(f"{step} exit {code}: see {log}")
            return


def init_table(results: list[InitResult]) -> str:
    """``--paper-init``'s tables: the steps and verdicts, then the tolerances."""
    head = ["paper", *INIT_STEPS, "outputs", "verdict", "verdict (OMP=1)"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r.name]
        for step in INIT_STEPS:
            got = r.steps.get(step)
            cells.append("-" if got is None else f"{got[0]} ({got[1]:.0f} s)")
        cells.append("-" if not r.rows and not r.missing else (
            "all declared" if not r.missing else "missing: " + "; ".join(r.missing)))
        cells += [r.verdicts.get("audit", "-"), r.verdicts.get("omp1", "-")]
        rows.append("| " + " | ".join(cells) + " |")
    rows += ["", "| paper | command | output | hand-written | generated (paper init) |",
             "|---|---|---|---|---|"]
    rows += [f"| {r.name} | {c} | `{o}` | {h} | {g} |" for r in results for c, o, h, g in r.rows]
    notes = [f"- {r.name}: {n}" for r in results for n in r.notes]
    return "\n".join(rows + ([""] + notes if notes else [])) + "\n"


if __name__ == "__main__":  # the runner (tests/papers/corpus_runs.py) imports this module
    from tests.papers.corpus_runs import main

    sys.exit(main())

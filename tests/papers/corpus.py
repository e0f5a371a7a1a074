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

then the table: paper, torch, Python, each step's exit code and seconds, the two verdicts. The
papers run one at a time and each one's environments are removed before the next (old torch
from PyPI is a CUDA build of 2-3 GB); with less than ``--min-free-gb`` left, the lock's archives
are removed from the cache too.

    python -m tests.papers.corpus [NAME ...] [--out build/papers] [--keep] [--cold]

``--cold`` gives each paper empty caches of its own (a fresh machine: every archive
downloaded, every sdist built again, no index answer remembered); RESULTS.md is a cold run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
STEPS = ("init", "lock", "install", "verify", "attest", "audit", "omp1")
LIMITS = {"init": 300, "lock": 600, "install": 1800, "verify": 900, "attest": 1800,
          "audit": 3600, "omp1": 1800}


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


def prepare(paper: dict, work: Path) -> Path:
    """The paper folder as reviewers get it: the authors' files, the manifest and driver, and
    the corpus' shared generator where the manifest runs it."""
    if work.exists():
        shutil.rmtree(work)
    folder = work / "paper"
    shutil.copytree(HERE / paper["name"], folder)
    manifest = (folder / "samebits-paper.toml").read_text()
    for common in (HERE / "common").iterdir():
        if common.name in manifest:
            shutil.copy2(common, folder / common.name)
    return folder


def verdict(report: Path) -> str:
    try:
        return json.loads(report.read_text())["verdict"]["level"]
    except (OSError, ValueError, KeyError):
        return "-"


def one(paper: dict, out: Path, *, keep: bool, min_free_gb: float, cold: bool = False) -> Result:
    name = paper["name"]
    result = Result(name=name, torch=paper["torch"], source=paper["from"])
    work = out / name
    folder = prepare(paper, work)
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


def table(results: list[Result]) -> str:
    head = ["paper", "from", "torch", "python", *STEPS, "verdict", "verdict (OMP=1)"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [r.name, f"`{r.source}`", r.torch, r.python]
        for step in STEPS:
            got = r.steps.get(step)
            cells.append("-" if got is None else f"{got[0]} ({got[1]:.0f} s)")
        cells += [r.verdicts.get("audit", "-"), r.verdicts.get("omp1", "-")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s papers --", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="papers of corpus.toml (default: all)")
    parser.add_argument("--out", type=Path, default=Path("build/papers"))
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    parser.add_argument("--min-free-gb", type=float, default=25.0)
    parser.add_argument("--cold", action="store_true",
                        help="each paper from empty caches of its own (XDG_CACHE_HOME under its "
                        "folder, removed after it): archives, index answers and sdist build "
                        "records fetched and built again, as on a fresh machine")
    args = parser.parse_args(argv)
    papers = tomllib.loads((HERE / "corpus.toml").read_text())["paper"]
    unknown = set(args.names) - {p["name"] for p in papers}
    if unknown:
        parser.error(f"not in corpus.toml: {', '.join(sorted(unknown))}")
    chosen = [p for p in papers if not args.names or p["name"] in args.names]
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for paper in chosen:
        results.append(one(paper, args.out.resolve(), keep=args.keep,
                           min_free_gb=args.min_free_gb, cold=args.cold))
        text = table(results)
        (args.out / "RESULTS.md").write_text(text)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{text}\nload average at the end: {load}")
    ok = all(r.verdicts.get(s) in ("bit-identical", "within-tolerance", "explained")
             for r in results for s in ("audit", "omp1"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

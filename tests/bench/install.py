"""``python -m tests.bench install``: a warm ``samebits install`` of the cpu lock beside uv's.

Both install ``lockfiles/cpu.conda-lock.yml`` for linux-64 (32 wheels, torch with its CUDA
wheels, about 4.8 GB installed) on a Python 3.12 found as ``samebits install`` finds one. One
untimed round fills both caches (the first run downloads about 3 GB from PyPI for each), then
``--runs`` timed rounds, interleaved, each a whole process from an absent target folder:

    ours      samebits install cpu --prefix P --cache-dir C --json   (verify env included;
              the default link mode: reflink where the filesystem can, else copy)
    hardlink  the same with --link-mode hardlink (shares inodes with the cache; opt-in)
    uv        uv venv V --python PY && uv pip install --require-hashes --no-deps
              -r containers/cpu/linux-64.requirements.txt --python V/bin/python
              (warm uv cache; uv hardlinks from it on this kind of filesystem, compiles no
              bytecode and verifies nothing after installing)

Deleting the previous folder is not timed. Printed: every run, the median of each, the ratio
to uv, and the environment digest of each of our runs (the same path each time, so the digest
must not change). Goal: ours under 6 s on this project's 2-core machine.

    python -m tests.bench install [--runs=3] [--cache-dir=DIR] [--uv-cache-dir=DIR]
                                  [--work=DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "lockfiles" / "cpu.conda-lock.yml"
REQUIREMENTS = ROOT / "containers" / "cpu" / "linux-64.requirements.txt"
GOAL_SECONDS = 6.0


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _clear(path: Path) -> None:
    if path.exists() or path.is_symlink():
        shutil.rmtree(path)


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the process and its children, stdout) of one command."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read().decode()
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{text}"
                             f"{err.read().decode()}")
    return seconds, usage.ru_utime + usage.ru_stime, text


def run_ours(prefix: Path, cache: Path, python: str, *extra: str) -> tuple[float, float, dict]:
    _clear(prefix)
    seconds, cpu, out = timed([sys.executable, "-m", "samebits", "install", str(LOCK),
                               "--platform", "linux-64", "--target", str(prefix),
                               "--python", python, "--cache-dir", str(cache), "--json",
                               *extra])
    return seconds, cpu, json.loads(out)


def run_uv(venv: Path, python: str, uv_cache: Path) -> tuple[float, float]:
    _clear(venv)
    uv = _uv()
    env = {**os.environ, "UV_CACHE_DIR": str(uv_cache)}
    total = cpu = 0.0
    for cmd in ([uv, "venv", "--quiet", str(venv), "--python", python],
                [uv, "pip", "install", "--quiet", "--require-hashes", "--no-deps", "-r",
                 str(REQUIREMENTS), "--python", str(venv / "bin" / "python")]):
        seconds, used, _ = timed(cmd, env)
        total, cpu = total + seconds, cpu + used
    return total, cpu


def main(argv: list[str]) -> int:
    from samebits.install import find_interpreter

    p = argparse.ArgumentParser(prog="python -m tests.bench install")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", type=Path, default=ROOT / "build" / "bench" / "install")
    p.add_argument("--cache-dir", type=Path, help="samebits' cache (default WORK/cache)")
    p.add_argument("--uv-cache-dir", type=Path, help="uv's cache (default WORK/uv-cache)")
    args, _ = p.parse_known_args(argv)
    work = args.work.resolve()
    cache = (args.cache_dir or work / "cache").resolve()
    uv_cache = (args.uv_cache_dir or work / "uv-cache").resolve()
    prefix, venv = work / "env", work / "uv-venv"
    python = find_interpreter("3.12").executable
    print(f"filling the caches (untimed): {cache}, {uv_cache}; Python {python}", flush=True)
    run_ours(prefix, cache, python)
    run_uv(venv, python, uv_cache)
    times: dict[str, list[float]] = {"ours": [], "hardlink": [], "uv": []}
    cpus: dict[str, list[float]] = {"ours": [], "hardlink": [], "uv": []}
    digests: dict[str, list[str]] = {"ours": [], "hardlink": []}
    verdict = ""
    for r in range(1, args.runs + 1):
        for kind, extra in (("ours", ()), ("hardlink", ("--link-mode", "hardlink"))):
            seconds, cpu, doc = run_ours(prefix, cache, python, *extra)
            times[kind].append(seconds)
            cpus[kind].append(cpu)
            digests[kind].append(doc["verify"]["digests"]["environment"])
            verdict = ("identical" if doc["ok"] else
                       "identical files, libraries unresolved" if doc["identical"] else "DRIFT")
            placed = ", ".join(f"{n:,} {how}" for how, n in doc["placed"].items())
            print(f"  run {r} {kind:<8} {seconds:6.2f} s ({cpu:5.1f} CPU-s)  environment "
                  f"{digests[kind][-1][:16]}  ({placed}; verify: {verdict})", flush=True)
        seconds, cpu = run_uv(venv, python, uv_cache)
        times["uv"].append(seconds)
        cpus["uv"].append(cpu)
        print(f"  run {r} uv       {seconds:6.2f} s ({cpu:5.1f} CPU-s)", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"install cpu (linux-64, 32 wheels), warm caches, median of {args.runs} "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    print(f"  ours      {med['ours']:6.2f} s  {cpu_med['ours']:5.1f} CPU-s  samebits install, "
          f"link mode auto, verify env included ({med['ours'] / med['uv']:.1f}x uv)")
    print(f"  hardlink  {med['hardlink']:6.2f} s  {cpu_med['hardlink']:5.1f} CPU-s  samebits "
          f"install --link-mode hardlink ({med['hardlink'] / med['uv']:.1f}x uv)")
    print(f"  uv        {med['uv']:6.2f} s  {cpu_med['uv']:5.1f} CPU-s  uv venv + uv pip "
          "install --require-hashes --no-deps (hardlinks, no verify)")
    stable = all(len(set(v)) == 1 for v in digests.values()) and \
        set(digests["ours"]) == set(digests["hardlink"])
    print(f"  environment digest {digests['ours'][0]} in every run: "
          f"{'yes' if stable else 'NO'}")
    print(f"  goal: ours under {GOAL_SECONDS:g} s: "
          f"{'met' if med['ours'] < GOAL_SECONDS else 'NOT met'}")
    return 0 if stable else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``python -m tests.bench coverage``: the whole kernel-coverage scan of an installed CUDA torch
environment, beside ``verify env`` on the same prefix and NVIDIA's cuobjdump.

Builds (or reuses) ``build/bench/hopper-env``: the hopper lock's linux-64 wheels (torch 2.13.0
with its CUDA 13 libraries, triton; ~2.5 GB from PyPI into the samebits cache, hash-checked)
installed the way ``samebits install`` does. Then, in interleaved rounds after one warm-up
(page cache hot for everyone), each in a fresh process:

    ours       verify.kernels.codescan.scan_prefix + every generation's decision: walk,
               owners, every fatbin of every ELF file read (``samebits check --prefix``'s
               work), timed inside the process after imports
    cli        ``samebits check --prefix P --json`` end to end, for reference
    verify     ``python -m verify env --prefix P --no-linkage --no-coverage --json``: the time
               verify env takes on the same prefix
    cuobjdump  ``cuobjdump --list-elf --list-ptx`` on every file ours found code in (triton's
               bundled cuobjdump 13.1; x86_64 only), one process per file

Each figure is the best of the rounds. Goal: ours < 3 s.

    --prefix=DIR  the environment to use (default build/bench/hopper-env)
    --rounds=N    timed rounds (default 3)
    --jobs=N      scanning processes (default: available cores)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PREFIX = ROOT / "build" / "bench" / "hopper-env"
GOAL_SECONDS = 3.0
CUOBJDUMP = "lib/python3.12/site-packages/triton/backends/nvidia/bin/cuobjdump"


def ensure_prefix(prefix: Path) -> None:
    if (prefix / "lib" / "python3.12" / "site-packages" / "torch" / "lib"
            / "libtorch_cuda.so").exists():
        return
    from samebits.install import default_cache_dir, install_prefix
    from samebits.lock.read import load_lock

    print(f"building {prefix} from lockfiles/hopper.conda-lock.yml (linux-64) ...", flush=True)
    env = load_lock(ROOT / "lockfiles" / "hopper.conda-lock.yml", name="hopper", root=ROOT)
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=default_cache_dir(),
                   interpreter="/usr/local/bin/python3.12")


def child_ours(prefix: str, jobs: int) -> dict:
    from verify.kernels.codescan import scan_prefix
    from verify.kernels.coverage import generation_decisions

    c0 = _cpu()
    t0 = time.perf_counter()
    cov = scan_prefix(Path(prefix), jobs=jobs)
    gens = generation_decisions(cov)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "cpu": _cpu() - c0, "elf_files": cov.elf_files,
            "libraries": len(cov.libraries),
            "fatbins": sum(lib.fatbins for lib in cov.libraries),
            "decisions": sum(len(ds) for ds in gens.values()),
            "files": [lib.path for lib in cov.libraries]}


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the scanning workers)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _child(name: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "tests.bench.coverage", f"--child={name}",
                          *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.bench coverage")
    p.add_argument("--prefix", type=Path, default=DEFAULT_PREFIX)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int,
                   default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                   else os.cpu_count() or 1)
    p.add_argument("--child")
    args = p.parse_args(argv)
    if args.child == "ours":
        print(json.dumps(child_ours(str(args.prefix), args.jobs)))
        return 0
    prefix = args.prefix.absolute()
    ensure_prefix(prefix)
    cuobjdump = prefix / CUOBJDUMP
    best = {"ours": float("inf"), "cpu": float("inf"), "cli": float("inf"),
            "verify": float("inf"), "cuobjdump": float("inf")}
    info: dict = {}
    for rnd in range(args.rounds + 1):  # round 0 warms the page cache
        info = _child("ours", f"--prefix={prefix}", f"--jobs={args.jobs}")
        cli = _timed([sys.executable, "-m", "samebits", "check", "--prefix", str(prefix),
                      "--json", "-q"])
        ver = _timed([sys.executable, "-m", "verify", "env", "--prefix", str(prefix),
                      "--no-linkage", "--no-coverage", "--json"])
        cuo = float("nan")
        if cuobjdump.exists() and os.uname().machine == "x86_64":
            t0 = time.perf_counter()
            for rel in info["files"]:
                subprocess.run([str(cuobjdump), "--list-elf", "--list-ptx", str(prefix / rel)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            cuo = time.perf_counter() - t0
        if rnd:
            best["ours"] = min(best["ours"], info["seconds"])
            best["cpu"] = min(best["cpu"], info["cpu"])
            best["cli"] = min(best["cli"], cli)
            best["verify"] = min(best["verify"], ver)
            best["cuobjdump"] = min(best["cuobjdump"], cuo)
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"prefix: {prefix}: {info['elf_files']} ELF files, {info['libraries']} with device "
          f"code, {info['fatbins']:,} fatbins, {info['decisions']} decisions; "
          f"best of {args.rounds} rounds, {args.jobs} jobs")
    met = "met" if best["ours"] < GOAL_SECONDS else "MISSED"
    print(f"  ours       {best['ours']:6.2f} s   coverage scan + decisions "
          f"(goal < {GOAL_SECONDS:g} s: {met}); {best['cpu']:.2f} CPU-seconds")
    print(f"  cli        {best['cli']:6.2f} s   samebits check --prefix P --json, end to end")
    print(f"  verify     {best['verify']:6.2f} s   verify env --no-linkage --no-coverage on the "
          f"same prefix (ours is {best['ours'] / best['verify']:.2f}x of it)")
    if best["cuobjdump"] == best["cuobjdump"]:  # not NaN
        print(f"  cuobjdump  {best['cuobjdump']:6.2f} s   cuobjdump --list-elf --list-ptx on "
              f"the {info['libraries']} files (ours is {best['cuobjdump'] / best['ours']:.1f}x "
              "faster)")
    return 0 if best["ours"] < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

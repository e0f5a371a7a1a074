"""Benchmark: bundling the cpu lock's ~2.8 GB of archives, beside `tar -cf` of the same cache.

The linux-64 archives of lockfiles/cpu.conda-lock.yml (torch 2.13.0 with its CUDA wheels, as
PyPI ships it) are fetched from PyPI once into build/bench/cpu-cache (kept between runs).
Timed, in one run, alternating (the page cache is warm for all of them: the archives were just
read):

    read once  every archive read once (``cat > /dev/null``): the floor
    ours       what `samebits bundle cpu --platform linux-64` does once the cache holds the
               archives: every archive hashed against the lock as it streams into the tar, the
               bundle's sha256, fsync, rename
    tar -cf    tar -cf FILE -C CACHE archives: no hashing, no fsync; then the fsync of FILE
               timed on its own (a durable write), reported as tar -cf + fsync

Runs alternate folders, umasks and time zones; every run's bundle must have the same sha256.
CPU seconds are printed too: on a shared machine they say more than the wall clock.
Progress: a line per tenth of the bundle while it is written.

    python -m tests.bench bundle [--runs=N] [--cache=DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from samebits.bundle.make import write_bundle
from samebits.bundle.prep import prepare
from samebits.lock.read import load_lock
from samebits.project import Project

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = "linux-64"
SETTINGS = [(0o022, "UTC"), (0o077, "Asia/Kathmandu")]  # per run, alternating


def progress(total: int, what: str):
    state = {"done": 0, "tenth": 0, "start": time.perf_counter()}

    def advance(n: int) -> None:
        state["done"] += n
        tenth = min(10, state["done"] * 10 // max(total, 1))
        if tenth > state["tenth"]:
            state["tenth"] = tenth
            print(f"  {what}: {tenth * 10:3d}%  {state['done'] / 1e9:5.2f} GB  "
                  f"{time.perf_counter() - state['start']:6.1f} s", file=sys.stderr, flush=True)

    return advance


def cpu_seconds(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def ours(env, cache: Path, out: Path) -> tuple[float, str, float]:
    """(seconds, the bundle's sha256, CPU seconds of both threads)."""
    cpu, start = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    bundle = prepare(env, [PLATFORM], cache=cache, containers=ROOT / "containers" / env.name)
    result = write_bundle(bundle, out, advance=progress(bundle.archive_bytes, "ours"))
    return (time.perf_counter() - start, result.sha256,
            cpu_seconds(resource.RUSAGE_SELF) - cpu)


def tar_cf(cache: Path, out: Path) -> tuple[float, float, float]:
    """(seconds of tar -cf, seconds of the fsync after it, CPU seconds of tar)."""
    cpu, start = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(["tar", "-cf", str(out), "-C", str(cache), "archives"], check=True)
    tar = time.perf_counter() - start
    used = cpu_seconds(resource.RUSAGE_CHILDREN) - cpu
    start = time.perf_counter()
    fd = os.open(out, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return tar, time.perf_counter() - start, used


def read_once(cache: Path) -> float:
    files = sorted(str(p) for p in (cache / "archives").rglob("*") if p.is_file())
    start = time.perf_counter()
    subprocess.run(["cat", *files], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench bundle")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--cache", type=Path, default=ROOT / "build" / "bench" / "cpu-cache")
    args = ap.parse_args(argv)
    project = Project.at(ROOT)
    env = load_lock(project.lock_path("cpu"), name="cpu", root=ROOT)
    print(f"fetching what {args.cache} lacks of cpu/{PLATFORM} (once: ~2.8 GB from PyPI)",
          flush=True)
    bundle = prepare(env, [PLATFORM], cache=args.cache, containers=ROOT / "containers" / "cpu",
                     note=lambda s: print(s, flush=True))
    size = bundle.archive_bytes
    print(f"cpu/{PLATFORM}: {len(bundle.archives)} archives, {size / 1e9:.2f} GB; "
          f"{os.cpu_count()} cores", flush=True)
    t_read, t_ours, t_tar, t_sync, digests = [], [], [], [], []
    work = ROOT / "build" / "bench"
    for run in range(1, args.runs + 1):
        umask, tz = SETTINGS[(run - 1) % len(SETTINGS)]
        with tempfile.TemporaryDirectory(dir=work, prefix=f"bundle-run{run}-") as tmp:
            t_read.append(read_once(args.cache))
            print(f"run {run} read once  {t_read[-1]:7.2f} s  {size / t_read[-1] / 1e6:7.1f} "
                  "MB/s", flush=True)
            old_mask, old_tz = os.umask(umask), os.environ.get("TZ")
            os.environ["TZ"] = tz
            time.tzset()
            try:
                seconds, digest, cpu = ours(env, args.cache, Path(tmp) / f"run{run}" / "cpu.tar")
            finally:
                os.umask(old_mask)
                os.environ.pop("TZ") if old_tz is None else os.environ.update(TZ=old_tz)
                time.tzset()
            t_ours.append(seconds)
            digests.append(digest)
            print(f"run {run} ours       {seconds:7.2f} s  {size / seconds / 1e6:7.1f} MB/s  "
                  f"{cpu:5.1f} CPU-s  sha256 {digest} (umask {umask:03o}, TZ {tz})", flush=True)
            shutil.rmtree(Path(tmp) / f"run{run}")
            tar, sync, cpu = tar_cf(args.cache, Path(tmp) / "plain.tar")
            t_tar.append(tar)
            t_sync.append(tar + sync)
            print(f"run {run} tar -cf    {tar:7.2f} s  {size / tar / 1e6:7.1f} MB/s  "
                  f"{cpu:5.1f} CPU-s; + fsync {tar + sync:7.2f} s", flush=True)
    med = statistics.median
    same = len(set(digests)) == 1
    print(f"ours / tar -cf: {med(t_ours) / med(t_tar):.2f}x; ours / (tar -cf + fsync): "
          f"{med(t_ours) / med(t_sync):.2f}x; ours / read once: "
          f"{med(t_ours) / med(t_read):.2f}x (medians of {args.runs}); bundles byte-identical "
          f"across folders, umasks and time zones: {'yes' if same else 'NO'}; load average "
          f"{os.getloadavg()[0]:.1f} (a shared machine: figures indicative)")
    return 0 if same else 1

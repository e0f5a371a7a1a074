"""Benchmark: the image layers of a ~1 GB prefix, gzip and zstd, beside tar piped to the tools.

The prefix is a venv with torch==2.13.0 (pip takes the CPU wheel from local disk; kept in
build/bench/ between runs). Timed, in one run, alternating:

    ours gzip   scan the prefix, split it into layers by package, deterministic tar of each,
                gzip level 6 in 1 MiB blocks on every core, sha256 of both streams, blobs
                written: what `samebits render oci` does after installing
    ours zstd   the same with `--compression zstd`: libzstd level 3, one worker per core
    tar|gzip    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - DIR |
                gzip -n -6 > FILE, and sha256sum FILE            (baseline of ours gzip)
    tar|pigz    the same tar | pigz -n -6 -p CORES                (baseline of ours zstd)
    tar|zstd    the same tar | zstd -3 -T CORES                   (for reference)

A baseline whose tool is not installed is skipped, saying so (apt-get install pigz zstd).
Printed: seconds and CPU-seconds per run, the digests of each run (ours must be identical every
time), and the ratios (median and best of the runs, and of CPU-seconds; the load average is
printed, since other work on the machine takes cores from both). Goals: ours gzip >= 1.5x
tar|gzip; ours zstd >= 3x tar|pigz.

    python -m tests.bench oci [--runs=N] [--workers=N] [--prefix=DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from samebits.render.compression import zstd_params
from samebits.render.image import write_layer_blob
from samebits.render.layers import assign_layers, read_owners
from samebits.render.tarball import GZIP_PARAMS, scan_prefix

ROOT = Path(__file__).resolve().parents[2]
TORCH = "torch==2.13.0"


def torch_prefix(folder: Path) -> Path:
    """A venv with torch (CPU) installed, built once and reused."""
    marker = folder / ".complete"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    print(f"building the prefix: python -m venv {folder} && pip install {TORCH}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    subprocess.run([str(folder / "bin" / "pip"), "install", "--quiet",
                    "--disable-pip-version-check", TORCH], check=True)
    marker.write_text("")
    return folder


def du(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and
               not p.is_symlink())


def ours(prefix: Path, out: Path, workers: int, how: str) -> tuple[float, list[str]]:
    start = time.perf_counter()
    entries = [e for e in scan_prefix(prefix, links_out=("bin/python", "bin/python3",
                                                         f"bin/python3.{sys.version_info[1]}"))
               if e.path != ".complete"]
    layers = assign_layers(entries, read_owners(prefix))
    (out / "blobs" / "sha256").mkdir(parents=True)
    digests = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for layer in layers:
            d = write_layer_blob(out, prefix, layer.entries, root="opt/env", epoch=0, pool=pool,
                                 compression=how, workers=workers)  # type: ignore[arg-type]
            digests.append(f"{layer.name}={d.digest[:19]}")
    return time.perf_counter() - start, digests


TAR = "tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C {prefix} -cf - ."
BASELINES = {  # name: (tool, pipeline after tar)
    "tar|gzip": ("gzip", "gzip -n -6"),
    "tar|pigz": ("pigz", "pigz -n -6 -p {workers}"),
    "tar|zstd": ("zstd", "zstd -q -3 -T{workers}"),
}


def _cpu() -> float:
    """CPU seconds of this process (every thread) and of its finished children: less sensitive
    than wall time to other work on a shared machine."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def baseline(name: str, prefix: Path, out: Path, workers: int) -> tuple[float, str]:
    target = out / "layer.tar.x"
    pipe = BASELINES[name][1].format(workers=workers)
    start = time.perf_counter()
    subprocess.run(f"{TAR.format(prefix=prefix)} | {pipe} > {target}", shell=True, check=True)
    sha = hashlib.sha256()
    with open(target, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return time.perf_counter() - start, f"sha256:{sha.hexdigest()[:12]}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench oci")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--prefix", type=Path, help="an existing prefix instead of the torch venv")
    args = ap.parse_args(argv)
    prefix = args.prefix or torch_prefix(ROOT / "build" / "bench" / "torch-venv")
    size = du(prefix)
    print(f"prefix {prefix}: {size / 1e9:.2f} GB; {os.cpu_count()} cores, "
          f"{args.workers} workers; {GZIP_PARAMS}; zlib {zlib.ZLIB_VERSION} (build); "
          f"{zstd_params()}", flush=True)
    present = {}
    for name, (tool, _) in BASELINES.items():
        present[name] = shutil.which(tool) is not None
        if not present[name]:
            print(f"{name}: skipped, {tool} is not installed (apt-get install {tool})")
    times: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    digests: dict[str, list[object]] = {}
    for run in range(1, args.runs + 1):
        for name in ("ours gzip", "tar|gzip", "ours zstd", "tar|pigz", "tar|zstd"):
            if name in BASELINES and not present[name]:
                continue
            before = _cpu()
            with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
                if name.startswith("ours"):
                    seconds, got = ours(prefix, Path(tmp) / "o", args.workers, name[5:])
                    shown = " ".join(got)
                else:
                    seconds, got = baseline(name, prefix, Path(tmp), args.workers)
                    shown = got
            cpu = _cpu() - before
            times.setdefault(name, []).append(seconds)
            cpus.setdefault(name, []).append(cpu)
            digests.setdefault(name, []).append(got)
            print(f"run {run} {name:<9} {seconds:7.2f} s  {cpu:6.2f} CPU-s  "
                  f"{size / seconds / 1e6:6.1f} MB/s  {shown}", flush=True)
    same = {n: all(d == v[0] for d in v) for n, v in digests.items()}
    for ours_name, base, goal in (("ours gzip", "tar|gzip", 1.5), ("ours zstd", "tar|pigz", 3.0),
                                  ("ours zstd", "tar|zstd", None)):
        if base not in times:
            continue
        ratio = statistics.median(times[base]) / statistics.median(times[ours_name])
        best = min(times[base]) / min(times[ours_name])
        verdict = "" if goal is None else \
            f" (goal >= {goal:g}x: {'met' if ratio >= goal else 'MISSED'})"
        cpu_ratio = statistics.median(cpus[base]) / statistics.median(cpus[ours_name])
        print(f"ratio {base} / {ours_name}: {ratio:.2f}x median, {best:.2f}x best-of-"
              f"{args.runs}{verdict}; CPU-seconds {cpu_ratio:.2f}x")
    print(f"our digests identical on every run: gzip {'yes' if same['ours gzip'] else 'NO'}, "
          f"zstd {'yes' if same['ours zstd'] else 'NO'}; load average "
          f"{os.getloadavg()[0]:.1f} (a shared machine: figures indicative)")
    return 0 if same["ours gzip"] and same["ours zstd"] else 1

"""Benchmark: the image layers of a ~1 GB prefix, beside `tar | gzip -n -6`.

The prefix is a venv with torch==2.13.0 (pip takes the CPU wheel from local disk; kept in
build/bench/ between runs). Timed, in one run, alternating:

    ours      scan the prefix, split it into layers by package (torch, the rest), deterministic
              tar of each, gzip level 6 in 1 MiB blocks on every core, sha256 of both streams,
              blobs written to disk: what `samebits render oci` does after installing
    baseline  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - DIR |
              gzip -n -6 > FILE, and sha256sum FILE

Printed: seconds per run, the digests of each run (ours must be identical every time), and the
ratios baseline / ours (median and best of the runs; the load average is printed, since
other work on the machine takes cores from both). Goal: >= 1.5x, identical digests.

    python -m tests.bench oci [--runs=N] [--workers=N] [--prefix=DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def ours(prefix: Path, out: Path, workers: int) -> tuple[float, list[str]]:
    start = time.perf_counter()
    entries = [e for e in scan_prefix(prefix, links_out=("bin/python", "bin/python3",
                                                         f"bin/python3.{sys.version_info[1]}"))
               if e.path != ".complete"]
    layers = assign_layers(entries, read_owners(prefix))
    (out / "blobs" / "sha256").mkdir(parents=True)
    digests = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for layer in layers:
            d = write_layer_blob(out, prefix, layer.entries, root="opt/env", epoch=0, pool=pool)
            digests.append(f"{layer.name}={d.digest}")
    return time.perf_counter() - start, digests


def baseline(prefix: Path, out: Path) -> tuple[float, str]:
    target = out / "layer.tar.gz"
    start = time.perf_counter()
    subprocess.run(f"tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 "
                   f"-C {prefix} -cf - . | gzip -n -6 > {target}", shell=True, check=True)
    sha = hashlib.sha256()
    with open(target, "rb") as f:
        while chunk := f.read(1 << 20):
            sha.update(chunk)
    return time.perf_counter() - start, f"sha256:{sha.hexdigest()}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.bench oci")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--prefix", type=Path, help="an existing prefix instead of the torch venv")
    args = ap.parse_args(argv)
    prefix = args.prefix or torch_prefix(ROOT / "build" / "bench" / "torch-venv")
    size = du(prefix)
    print(f"prefix {prefix}: {size / 1e9:.2f} GB; {os.cpu_count()} cores, "
          f"{args.workers} workers; {GZIP_PARAMS}; zlib {zlib.ZLIB_VERSION} (build)", flush=True)
    t_ours, t_base, d_ours, d_base = [], [], [], []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
            seconds, digests = ours(prefix, Path(tmp) / "ours", args.workers)
            t_ours.append(seconds)
            d_ours.append(digests)
            print(f"run {run} ours      {seconds:7.2f} s  {size / seconds / 1e6:6.1f} MB/s  "
                  f"{' '.join(digests)}", flush=True)
            seconds, digest = baseline(prefix, Path(tmp))
            t_base.append(seconds)
            d_base.append(digest)
            print(f"run {run} tar|gzip  {seconds:7.2f} s  {size / seconds / 1e6:6.1f} MB/s  "
                  f"{digest}", flush=True)
    ratio = statistics.median(t_base) / statistics.median(t_ours)
    best = min(t_base) / min(t_ours)
    same = all(d == d_ours[0] for d in d_ours)
    print(f"ratio tar|gzip / ours: {ratio:.2f}x median, {best:.2f}x best-of-{args.runs} "
          f"(goal >= 1.5x); our digests identical on every run: {'yes' if same else 'NO'}; "
          f"tar|gzip identical: {'yes' if len(set(d_base)) == 1 else 'NO'}; "
          f"load average {os.getloadavg()[0]:.1f} (a shared machine: figures indicative)")
    return 0 if same else 1

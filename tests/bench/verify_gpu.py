"""Benchmark: the whole `samebits verify gpu` suite, interpreter start included.

Runs ``python -m verify gpu --json`` in a fresh process, as `nox -s verify-gpu` would, and
times it from exec to exit: imports, the machine probe, preflight, every workload, hashing the
environment prefix, writing the attestation. Printed: seconds per run, the slowest workloads,
and the ratio against the budget (30 s on one H200; 120 s on 2 CPU cores without a GPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_GPU_S = 30.0
BUDGET_CPU_S = 120.0
RUNS = 2


def one_run(out: Path) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "verify", "gpu", "--json", "--out", str(out)],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"verify gpu exited {proc.returncode}: {proc.stderr or proc.stdout}")
    return seconds, json.loads(proc.stdout)


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        results = [one_run(Path(tmp) / f"run{i}.json") for i in range(RUNS)]
        same = (Path(tmp) / "run0.json").read_bytes() == (Path(tmp) / "run1.json").read_bytes()
    doc = results[-1][1]
    gpu = doc["device"] != "cpu"
    budget = BUDGET_GPU_S if gpu else BUDGET_CPU_S
    where = "one GPU" if gpu else "CPU only"
    print(doc["device_line"])
    for i, (seconds, d) in enumerate(results, 1):
        print(f"run {i}: {seconds:6.1f} s wall (workloads {d['seconds']:.1f} s)")
    slow = sorted(doc["workloads"].items(), key=lambda kv: -kv[1]["seconds"])[:5]
    print("slowest: " + ", ".join(f"{n} {w['seconds']:.2f} s" for n, w in slow))
    best = min(s for s, _ in results)
    print(f"attestations byte-identical: {'yes' if same else 'NO'}")
    print(f"best {best:.1f} s vs budget {budget:.0f} s ({where}): ratio {best / budget:.2f}")
    return 0 if same and best <= budget else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

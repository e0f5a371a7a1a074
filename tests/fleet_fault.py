"""``torchrun ... -m tests.fleet_fault [hang:]WORKLOAD@RANK FLEET-ARGS``: ``python -m verify
fleet`` with one bit of WORKLOAD's first output flipped on rank RANK, to show the fleet report
names exactly that rank; with ``hang:``, WORKLOAD never returns on that rank, to show a hung
rank is named in a partial report after --rank-timeout.

The fault lives here, in the tests, and reaches the workload only by wrapping its function in
this one process: production code has no switch for it (an environment variable that could
falsify a result without a trace would make every attestation worth less).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import torch


def flip_first_output(fn: Any) -> Any:
    """``fn`` whose first output has the lowest bit of its first byte flipped."""

    def faulty(ctx: Any) -> Any:
        out = dict(fn(ctx))
        first = next(iter(out))
        t = out[first].detach().clone().contiguous()
        t.reshape(-1).view(torch.uint8)[0] ^= 1
        out[first] = t
        return out

    return faulty


def hang(fn: Any) -> Any:
    """``fn`` that never returns (a rank stuck in a kernel, a deadlock)."""

    def stuck(ctx: Any) -> Any:
        while True:
            time.sleep(60)

    return stuck


def main() -> int:
    spec, *args = sys.argv[1:]
    mode, _, spec = spec.rpartition(":")
    workload, _, rank = spec.partition("@")
    fault = hang if mode == "hang" else flip_first_output
    import verify.gpu.workloads as workloads

    if int(os.environ.get("RANK", "-1")) == int(rank):
        run_one = workloads._run_one

        def patched(name: str, fn: Any, ctx: Any) -> Any:
            return run_one(name, fault(fn) if name == workload else fn, ctx)

        workloads._run_one = patched
    from verify.cli import main as verify_main

    return verify_main(["fleet", *args])


if __name__ == "__main__":
    sys.exit(main())

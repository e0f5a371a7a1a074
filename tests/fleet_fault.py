"""``torchrun ... -m tests.fleet_fault WORKLOAD@RANK FLEET-ARGS``: ``python -m verify fleet``
with one bit of WORKLOAD's first output flipped on rank RANK, to show the fleet report names
exactly that rank.

The fault lives here, in the tests, and reaches the workload only by wrapping its function in
this one process: production code has no switch for it (an environment variable that could
falsify a result without a trace would make every attestation worth less).
"""

from __future__ import annotations

import os
import sys
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


def main() -> int:
    spec, *args = sys.argv[1:]
    workload, _, rank = spec.partition("@")
    import verify.workloads as workloads

    if int(os.environ.get("RANK", "-1")) == int(rank):
        run_one = workloads._run_one

        def patched(name: str, fn: Any, ctx: Any) -> Any:
            return run_one(name, flip_first_output(fn) if name == workload else fn, ctx)

        workloads._run_one = patched
    from verify.cli import main as verify_main

    return verify_main(["fleet", *args])


if __name__ == "__main__":
    sys.exit(main())

"""Test-only fault injection: make one rank's output wrong on purpose, by one bit.

``SAMEBITS_TEST_FLIP_BIT="WORKLOAD[@RANK]"`` makes the workload runner flip the lowest bit of
the first byte of WORKLOAD's first output, on rank RANK only (``RANK`` as torchrun sets it), or
in every process when no rank is given. It exists so the fleet report can be shown to name
exactly the rank that went wrong; the variable is not a numerics setting and is not recorded
among the facts, which is the point: the faulty rank stays in its equivalence class.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENV = "SAMEBITS_TEST_FLIP_BIT"


def target(environ: Mapping[str, str] | None = None) -> tuple[str, int | None] | None:
    """(workload, rank or None) from the environment, or None when no fault is asked for."""
    env = os.environ if environ is None else environ
    spec = env.get(ENV, "").strip()
    if not spec:
        return None
    name, _, rank = spec.partition("@")
    return name, int(rank) if rank else None


def inject(workload: str, raw: dict[str, bytes],
           environ: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """``raw`` with one bit flipped when the environment asks for it here, else unchanged."""
    env = os.environ if environ is None else environ
    want = target(env)
    if want is None or want[0] != workload or not raw:
        return raw
    if want[1] is not None and int(env.get("RANK", "-1")) != want[1]:
        return raw
    first = next(iter(raw))
    data = bytearray(raw[first])
    if data:
        data[0] ^= 1
    return {**raw, first: bytes(data)}

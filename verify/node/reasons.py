"""The node gate's reason codes: one table, stable names (``docs/reference/node-reasons.md``
is generated from it and a test holds the page to it).

A code never changes meaning; a new fact gets a new code. Each code has a level:

    drain   the node must not take jobs: ``verify node`` exits 1 and, with ``--drain``, tells
            Slurm ``state=drain reason="samebits: CODE"``
    warn    worth a look, not a reason to drain: exit 0 (exit 1 with ``--strict``)

Bad input (no such prefix, an unreadable lock, a bad key) is no reason code: it is exit 2,
as for every samebits command, and never drains a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Level = Literal["drain", "warn"]

# code -> (level, what it means): the one table
REASONS: dict[str, tuple[Level, str]] = {
    "env-drift": ("drain", "a file of the environment differs from what its packages record "
                  "(modified, missing, unowned, wrong mode or link): the detail names the "
                  "first few"),
    "env-unreadable": ("drain", "the environment could not be checked: a file could not be "
                       "read, or its Python cannot start"),
    "lock-mismatch": ("drain", "the installed packages are not the lock's (missing, extra, "
                      "another version, build or hash)"),
    "gpu-missing": ("drain", "fewer GPUs than --gpus N says the node has"),
    "gpu-lost": ("drain", "NVML reports a GPU lost (NVML_ERROR_GPU_IS_LOST) or cannot open it"),
    "driver-too-old": ("drain", "the driver is older than the environment's CUDA runtime "
                       "needs, even under minor version compatibility"),
    "kernel-missing": ("drain", "the environment has no kernel (SASS, or PTX this driver can "
                       "compile) for a GPU present"),
    "ecc-uncorrected": ("drain", "uncorrected ECC errors, volatile (since the last driver "
                        "load) or aggregate (lifetime), above the threshold"),
    "retired-pages-pending": ("drain", "pages are waiting to be retired: takes effect on the "
                              "next GPU reset"),
    "remapped-rows-pending": ("drain", "row remapping is pending: takes effect on the next GPU "
                              "reset"),
    "remapped-rows-failed": ("drain", "a row remapping failed: the GPU needs service"),
    "xid": ("drain", "a critical Xid event was seen while the gate listened"),
    "throttle-hw": ("drain", "hardware slowdown (HW slowdown, HW thermal or power brake) is "
                    "active"),
    "throttle-thermal": ("warn", "software thermal slowdown is active"),
    "pcie-degraded": ("drain", "the PCIe link runs narrower than its maximum width"),
    "pcie-gen-low": ("warn", "the PCIe link runs below its maximum generation (GPUs lower it "
                     "when idle: a hint only)"),
    "pcie-replay": ("warn", "the PCIe replay counter is above the threshold"),
    "nvlink-down": ("drain", "an NVLink is inactive while other links of that GPU are up"),
    "nvlink-errors": ("warn", "NVLink replay/recovery/CRC error counters above the threshold"),
    "nvml-unavailable": ("warn", "NVML could not be loaded or started, or answered with an "
                         "error, where a driver is present: GPU health not read"),
    "canary-mismatch": ("drain", "the canary's digest differs from the committed digest of "
                        "its equivalence class"),
    "canary-unknown": ("warn", "no committed digest for the canary's equivalence class "
                       "(record one with --record)"),
    "canary-failed": ("warn", "the canary could not run (torch missing, the device refused, "
                      "a timeout)"),
    "drain-failed": ("warn", "--drain was asked but scontrol is missing, failed or timed "
                     "out"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Reason:
    code: str
    detail: str
    gpu: int | None = None  # the GPU (NVML's index) the reason is about, if one

    def __post_init__(self) -> None:
        if self.code not in REASONS:  # a programming error, not the user's
            raise ValueError(f"unknown node reason code {self.code!r}")

    @property
    def level(self) -> Level:
        return REASONS[self.code][0]

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"code": self.code, "detail": self.detail,
                                  "level": self.level}
        if self.gpu is not None:
            out["gpu"] = self.gpu
        return out


def draining(reasons: Iterable[Reason], *, strict: bool = False) -> list[Reason]:
    """The reasons that fail the gate: the drain ones, and with ``strict`` the warnings too."""
    return [r for r in reasons if strict or r.level == "drain"]


def first_few(items: Sequence[str], limit: int = 3) -> str:
    """"a, b, c and 4 more"."""
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} more" if len(items) > limit else "")


def reasons_markdown() -> str:
    """docs/reference/node-reasons.md, generated from ``REASONS``."""
    from verify.node.health import threshold_markdown

    lines = ["<!-- Generated from verify/node/reasons.py and verify/node/health.py by "
             "`python -m verify.node.reasons`; tests/unit/test_node.py checks it. -->",
             "", "# Node gate reason codes", "",
             "`samebits verify node` names each problem by one of these codes, in its JSON "
             "(`reasons[].code`), its in-toto statement and, with `--drain`, the Slurm reason "
             "`samebits: CODE`. A **drain** code fails the gate (exit 1); a **warn** code is "
             "reported and fails it only with `--strict`. Bad input is exit 2 and never drains.",
             "", "| code | level | meaning |", "|---|---|---|"]
    lines += [f"| `{code}` | {level} | {text} |" for code, (level, text) in REASONS.items()]
    lines += ["", "## GPU health thresholds", "",
              "A counter above its threshold gives its code. An NVML field that answers "
              "`NVML_ERROR_NOT_SUPPORTED` or `NVML_ERROR_NO_PERMISSION` is *not readable*: "
              "recorded as such in `gpus[].unreadable`, never a failure.", "",
              threshold_markdown(), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    sys.stdout.write(reasons_markdown())

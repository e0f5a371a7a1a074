"""The CPU, threads and C library: ``/proc/cpuinfo`` (parsed purely), torch's thread pools,
the CPUs this process may run on, glibc's version."""

from __future__ import annotations

import os
import platform
from typing import Any

from verify.gpu.facts.model import CpuFacts, ThreadFacts


def parse_cpuinfo(text: str, *, arch: str) -> tuple[str, str, tuple[str, ...]]:
    """(vendor, model, sorted flags) from /proc/cpuinfo on x86_64 or aarch64."""
    first: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in first:
            first[key.strip()] = value.strip()
    vendor = first.get("vendor_id") or first.get("CPU implementer") or "unknown"
    model = first.get("model name") or first.get("Model") or first.get("CPU part") or arch
    flags = first.get("flags") or first.get("Features") or ""
    return vendor, model, tuple(sorted(set(flags.split())))


def cpu_facts() -> CpuFacts:
    arch = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            vendor, model, flags = parse_cpuinfo(f.read(), arch=arch)
    except OSError:
        vendor, model, flags = "unknown", platform.processor() or arch, ()
    return CpuFacts(arch=arch, vendor=vendor, model=model, flags=flags,
                    count=os.cpu_count() or 1)


def thread_facts(torch: Any) -> ThreadFacts:
    return ThreadFacts(intra_op=torch.get_num_threads(),
                       inter_op=torch.get_num_interop_threads(),
                       affinity=len(os.sched_getaffinity(0))
                       if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def glibc_version() -> str | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return text.split()[-1] if text else None

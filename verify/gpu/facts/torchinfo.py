"""What torch reports about itself and the GPUs it sees: build, CUDA runtime, cuDNN, NCCL,
the cuBLAS it loaded, arch list, and per device its properties; ``merge_gpus`` joins torch's
devices with the driver's by UUID."""

from __future__ import annotations

import ctypes
import re
from typing import Any

from samebits._compat import removeprefix
from verify.gpu.facts.model import GpuFacts, TorchFacts
from verify.gpu.facts.torchapi import find, unavailable


def cudnn_str(v: int) -> str:
    """91900 -> "9.19.0"; 8902 -> "8.9.2" (cuDNN changed its encoding at 9)."""
    if v >= 90000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _uuid(u: str) -> str:
    """NVML's "GPU-<uuid>" / "MIG-<uuid>" and torch's bare "<uuid>" compare equal."""
    return removeprefix(removeprefix(u, "GPU-"), "MIG-").lower()


def torch_facts(torch: Any, *, cuda_ok: bool) -> TorchFacts:
    return TorchFacts(
        version=torch.__version__,
        git_version=torch.version.git_version,
        build_config=torch.__config__.show(),
        cuda=torch.version.cuda,
        cudnn=cudnn_str(torch.backends.cudnn.version())
        if torch.backends.cudnn.is_available() else None,
        nccl=_nccl(torch) if cuda_ok else None,
        cublas=_cublas_version() if cuda_ok else None,
        arch_list=tuple(torch.cuda.get_arch_list()),
        cpu_capability=cpu_capability(torch),
        cuda_available=cuda_ok,
    )


# torch.__config__.show()'s words for a capability where get_cpu_capability's differ.
_SHOWN = {"NO AVX": "DEFAULT", "Z VECTOR": "ZVECTOR"}


def cpu_capability(torch: Any) -> str:
    """The ISA ATen dispatches to, "AVX512": ``torch.backends.cpu.get_cpu_capability()``
    (2.1 and later), else the line ATen writes into ``torch.__config__.show()``, "CPU
    capability usage: AVX2" (the same value, in the words of older torch for DEFAULT)."""
    get = find(torch, "torch.backends.cpu.get_cpu_capability")
    if get is not None:
        return str(get())
    return shown_cpu_capability(torch.__config__.show()) or unavailable(
        torch, "torch.backends.cpu.get_cpu_capability")


def shown_cpu_capability(config: str) -> str | None:
    m = re.search(r"CPU capability usage: *([^\n]+?) *$", config, re.MULTILINE)
    return _SHOWN.get(m.group(1), m.group(1)) if m else None


def _nccl(torch: Any) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def _cublas_version() -> str | None:
    """cublasGetProperty on the libcublas torch loaded; None when it cannot be found."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libcublas.so" in line}
        path = next(iter(sorted(paths)), None)
        if path is None:
            return None
        lib = ctypes.CDLL(path)
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return None
            parts.append(str(value.value))
        return ".".join(parts)
    except (OSError, AttributeError):
        return None


def torch_gpus(torch: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append({"torch_index": i, "name": p.name, "uuid": _uuid(str(getattr(p, "uuid", ""))),
                    "compute_capability": f"{p.major}.{p.minor}",
                    "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory})
    return out


def merge_gpus(found: list[dict[str, Any]], seen: list[dict[str, Any]]) -> tuple[GpuFacts, ...]:
    """Join the driver's rows with torch's devices by UUID; either side may be empty.

    Under MIG torch enumerates slices, whose UUIDs are the slice rows' (not the GPU's). A
    device torch sees that matches no row is kept as a row of its own, its error saying so,
    so ``Facts.gpu(i)`` never loses what the workloads ran on."""
    rows = found or [{**g, "index": g["torch_index"], "ecc": None, "mig": None} for g in seen]
    by_uuid = {_uuid(g["uuid"]): g for g in seen}
    matched = {_uuid(r["uuid"]) for r in rows if _uuid(r["uuid"]) in by_uuid}
    out = []
    for row in rows:
        t = by_uuid.get(_uuid(row["uuid"]), {}) if row["uuid"] else {}
        out.append(GpuFacts(
            index=row["index"], torch_index=t.get("torch_index"), name=row["name"],
            uuid=_uuid(row["uuid"]),
            compute_capability=row["compute_capability"] or t.get("compute_capability", ""),
            sm_count=t.get("sm_count"),
            memory_bytes=row.get("memory_bytes") or t.get("memory_bytes"),
            ecc=row.get("ecc"), mig=row.get("mig"),
            parent_uuid=_uuid(row["parent_uuid"]) if row.get("parent_uuid") else None,
            errors=tuple(row.get("errors", ())),
        ))
    if found:
        for g in seen:
            if _uuid(g["uuid"]) not in matched:
                out.append(GpuFacts(
                    index=-1, torch_index=g["torch_index"], name=g["name"],
                    uuid=_uuid(g["uuid"]), compute_capability=g["compute_capability"],
                    sm_count=g["sm_count"], memory_bytes=g["memory_bytes"], ecc=None, mig=None,
                    errors=("not in the driver's list: no NVML row has this UUID",)))
    return tuple(out)

"""The NVIDIA driver and its GPUs, as the driver sees them: NVML (nvidia-ml-py), else
``nvidia-smi``, else libcuda's ``cuDriverGetVersion`` (the version alone).

``probe_driver_and_gpus()`` returns the driver's facts (or None on a machine without one) and
one row per GPU in the driver's order, ignoring ``CUDA_VISIBLE_DEVICES``. The parsers
(``parse_smi_query``, ``parse_smi_cuda``, ``cuda_int``) are pure so tests feed them text.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import shutil
import subprocess
from typing import Any

from verify.facts.model import DriverFacts


def parse_smi_query(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits``."""
    rows: list[dict[str, Any]] = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            continue
        row = dict(zip(SMI_FIELDS, (None if c in ("[N/A]", "N/A", "") else c for c in cells),
                       strict=True))
        mem = row["memory.total"]
        rows.append({
            "index": int(row["index"] or len(rows)),
            "name": row["name"] or "unknown",
            "uuid": row["uuid"] or "",
            "compute_capability": row["compute_cap"] or "",
            "memory_bytes": int(float(mem)) * 1024 * 1024 if mem else None,
            "ecc": row["ecc.mode.current"].lower() if row["ecc.mode.current"] else None,
            "mig": row["mig.mode.current"].lower() if row["mig.mode.current"] else None,
            "driver": row["driver_version"],
        })
    return rows


SMI_FIELDS = ("index", "name", "uuid", "compute_cap", "memory.total", "ecc.mode.current",
              "mig.mode.current", "driver_version")


def parse_smi_cuda(text: str) -> str | None:
    """The "CUDA Version: 12.4" of plain ``nvidia-smi`` output."""
    m = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", text)
    return m.group(1) if m else None


def cuda_int(v: int) -> str:
    """12040 (NVML, cuDriverGetVersion) -> "12.4"."""
    return f"{v // 1000}.{v % 1000 // 10}"


def probe_driver_and_gpus() -> tuple[DriverFacts | None, list[dict[str, Any]]]:
    for probe in (_probe_nvml, _probe_smi):
        got = probe()
        if got is not None:
            return got
    cuda = _libcuda_version()
    return (DriverFacts(version="unknown", cuda=cuda, source="libcuda") if cuda else None), []


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _probe_nvml() -> tuple[DriverFacts, list[dict[str, Any]]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        driver = DriverFacts(version=_s(pynvml.nvmlSystemGetDriverVersion()),
                             cuda=cuda_int(pynvml.nvmlSystemGetCudaDriverVersion_v2()),
                             source="nvml")
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            gpus.append({"index": i, "name": _s(pynvml.nvmlDeviceGetName(h)),
                         "uuid": _s(pynvml.nvmlDeviceGetUUID(h)),
                         "compute_capability": f"{major}.{minor}",
                         "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                         "ecc": _nvml_mode(pynvml, pynvml.nvmlDeviceGetEccMode, h),
                         "mig": _nvml_mode(pynvml, pynvml.nvmlDeviceGetMigMode, h)})
        return driver, gpus
    except pynvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _nvml_mode(pynvml: Any, getter: Any, handle: Any) -> str | None:
    try:
        current, _pending = getter(handle)
    except pynvml.NVMLError:  # not supported on this GPU
        return None
    return "enabled" if current else "disabled"


def _probe_smi() -> tuple[DriverFacts, list[dict[str, Any]]] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        query = subprocess.run([smi, f"--query-gpu={','.join(SMI_FIELDS)}",
                                "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=30, check=True).stdout
        plain = subprocess.run([smi], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = parse_smi_query(query)
    cuda = parse_smi_cuda(plain) or _libcuda_version()
    if not rows or cuda is None:
        return None
    return DriverFacts(version=rows[0]["driver"] or "unknown", cuda=cuda, source="nvidia-smi"), rows


def _libcuda_version() -> str | None:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        value = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(value)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return cuda_int(value.value)

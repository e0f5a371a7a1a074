"""The NVIDIA driver and its GPUs, as the driver sees them: NVML (nvidia-ml-py), else
``nvidia-smi``, else libcuda's ``cuDriverGetVersion`` (the version alone).

``probe_driver_and_gpus()`` returns the driver's facts (or None on a machine without one) and
one row per GPU in the driver's order, ignoring ``CUDA_VISIBLE_DEVICES``; with MIG on, each
slice follows its GPU as a row of its own (``mig: "slice"``, ``parent_uuid``). NVML is asked
one field at a time: a field that fails is named in ``errors`` (of the driver, or of that GPU)
and the others are kept; a GPU whose handle fails (``NVML_ERROR_GPU_IS_LOST``) stays as a row
that says so. The parsers
(``parse_smi_query``, ``parse_smi_cuda``, ``cuda_int``) are pure so tests feed them text.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import importlib
import os
import re
import shutil
import subprocess
from typing import Any

from samebits.childenv import child_environ
from verify.gpu.facts.model import DriverFacts


def parse_smi_query(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits``."""
    rows: list[dict[str, Any]] = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_FIELDS):
            continue
        # the lengths are equal (checked above); zip(strict=) is 3.10, and this runs on 3.8
        row = dict(zip(SMI_FIELDS, (None if c in ("[N/A]", "N/A", "") else c  # noqa: B905
                                    for c in cells)))
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


def probe_driver_and_gpus(nvml: Any = None) -> tuple[DriverFacts | None, list[dict[str, Any]]]:
    """The driver and its GPUs. ``nvml`` is the nvidia-ml-py module (``pynvml``) to ask;
    by default it is imported, and tests pass one whose functions answer as a machine would."""
    init_error = None
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            nvml = None
    if nvml is not None:
        answer, init_error = _probe_nvml(nvml)
        if answer is not None:
            return answer
    got: tuple[DriverFacts | None, list[dict[str, Any]]] | None = _probe_smi()
    if got is None:
        cuda = _libcuda_version()
        got = ((DriverFacts(version="unknown", cuda=cuda, source="libcuda") if cuda else None),
               [])
    driver, gpus = got
    if driver is not None and init_error:
        driver = dataclasses.replace(driver, errors=(*driver.errors, f"nvml: {init_error}"))
    return driver, gpus


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def nvml_error_name(nvml: Any, exc: Exception) -> str:
    """NVMLError(15) -> "NVML_ERROR_GPU_IS_LOST" (nvidia-ml-py's constant for its value)."""
    value = getattr(exc, "value", None)
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_") and getattr(nvml, name) == value:
            return name
    return f"{type(exc).__name__}: {exc}"


# NVML errors that mean "no usable NVIDIA driver here", not a fault worth recording.
_ABSENT = ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")


def _probe_nvml(nvml: Any) -> tuple[tuple[DriverFacts, list[dict[str, Any]]] | None, str | None]:
    """(driver, GPUs) from NVML, every field asked on its own: a field that fails (no
    permission, not supported, a GPU lost) is recorded in that GPU's or the driver's
    ``errors`` and the rest is kept. (None, why) when NVML cannot start."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        name = nvml_error_name(nvml, exc)
        return None, None if name in _ABSENT else name
    try:
        errors: list[str] = []

        def ask(key: str, fn: Any, *args: Any, into: list[str] = errors) -> Any:
            try:
                return fn(*args)
            except nvml.NVMLError as exc:
                into.append(f"{key}: {nvml_error_name(nvml, exc)}")
                return None

        version = ask("version", nvml.nvmlSystemGetDriverVersion)
        cuda = ask("cuda", nvml.nvmlSystemGetCudaDriverVersion_v2)
        count = ask("device count", nvml.nvmlDeviceGetCount) or 0
        gpus: list[dict[str, Any]] = []
        for i in range(count):
            gpus.extend(_nvml_gpu(nvml, i, ask))
        driver = DriverFacts(version=_s(version) if version is not None else "unknown",
                             cuda=cuda_int(cuda) if cuda is not None else "unknown",
                             source="nvml", errors=tuple(errors))
        return (driver, gpus), None
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _nvml_gpu(nvml: Any, i: int, ask: Any) -> list[dict[str, Any]]:
    """GPU ``i`` as NVML sees it, then one row per MIG slice when MIG is on (CUDA enumerates
    the slices, and torch reports a slice's UUID: the slices are what processes run on)."""
    errs: list[str] = []
    row: dict[str, Any] = {"index": i, "name": "unknown", "uuid": "", "compute_capability": "",
                           "memory_bytes": None, "ecc": None, "mig": None, "errors": errs}
    h = ask("handle", nvml.nvmlDeviceGetHandleByIndex, i, into=errs)
    if h is None:
        return [row]
    name = ask("name", nvml.nvmlDeviceGetName, h, into=errs)
    uuid = ask("uuid", nvml.nvmlDeviceGetUUID, h, into=errs)
    cc = ask("compute capability", nvml.nvmlDeviceGetCudaComputeCapability, h, into=errs)
    mem = ask("memory", nvml.nvmlDeviceGetMemoryInfo, h, into=errs)
    row.update(name=_s(name) if name is not None else "unknown",
               uuid=_s(uuid) if uuid is not None else "",
               compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else "",
               memory_bytes=int(mem.total) if mem is not None else None,
               ecc=_nvml_mode(nvml, nvml.nvmlDeviceGetEccMode, h),
               mig=_nvml_mode(nvml, nvml.nvmlDeviceGetMigMode, h))
    if row["mig"] != "enabled":
        return [row]
    slices = []
    count = ask("MIG slots", nvml.nvmlDeviceGetMaxMigDeviceCount, h, into=errs) or 0
    for j in range(count):
        try:
            mh = nvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
        except nvml.NVMLError as exc:  # NOT_FOUND: an empty slot
            if nvml_error_name(nvml, exc) != "NVML_ERROR_NOT_FOUND":
                errs.append(f"MIG slot {j}: {nvml_error_name(nvml, exc)}")
            continue
        serrs: list[str] = []
        sname = ask("name", nvml.nvmlDeviceGetName, mh, into=serrs)
        suuid = ask("uuid", nvml.nvmlDeviceGetUUID, mh, into=serrs)
        smem = ask("memory", nvml.nvmlDeviceGetMemoryInfo, mh, into=serrs)
        slices.append({"index": i, "name": _s(sname) if sname is not None else row["name"],
                       "uuid": _s(suuid) if suuid is not None else "",
                       "compute_capability": row["compute_capability"],
                       "memory_bytes": int(smem.total) if smem is not None else None,
                       "ecc": row["ecc"], "mig": "slice", "parent_uuid": row["uuid"],
                       "errors": serrs})
    return [row, *slices]


def _nvml_mode(nvml: Any, getter: Any, handle: Any) -> str | None:
    try:
        current, _pending = getter(handle)
    except nvml.NVMLError:  # not supported on this GPU
        return None
    return "enabled" if current else "disabled"


def _probe_smi() -> tuple[DriverFacts, list[dict[str, Any]]] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        env = child_environ(os.environ)
        query = subprocess.run([smi, f"--query-gpu={','.join(SMI_FIELDS)}",
                                "--format=csv,noheader,nounits"], env=env,
                               capture_output=True, text=True, timeout=30, check=True).stdout
        plain = subprocess.run([smi], capture_output=True, text=True, timeout=30,
                               env=env).stdout
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

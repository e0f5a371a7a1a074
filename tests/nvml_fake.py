"""A stand-in for nvidia-ml-py at the library boundary: the ``pynvml`` functions samebits calls,
answering for a described machine, with nvidia-ml-py's own ``NVMLError`` classes and
``NVML_ERROR_*`` constants (the real module, imported; its functions that reach libnvidia-ml
are the ones replaced). What it can describe: GPUs, MIG slices, a lost GPU, fields the caller
has no permission to read, NVML that cannot start."""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml as real


@dataclass
class Slice:
    name: str
    uuid: str
    memory: int


@dataclass
class Gpu:
    name: str = "NVIDIA H200"
    uuid: str = "GPU-0a1b2c3d-0000-0000-0000-000000000000"
    cc: tuple[int, int] = (9, 0)
    memory: int = 150_000_000_000
    ecc: int | None = 1          # None: NVML_ERROR_NOT_SUPPORTED
    mig: int | None = 0
    slices: Sequence[Slice | None] = ()   # None: an empty MIG slot
    lost: bool = False           # nvmlDeviceGetHandleByIndex says NVML_ERROR_GPU_IS_LOST
    denied: frozenset[str] = frozenset()  # fields that raise NVML_ERROR_NO_PERMISSION


@dataclass
class Machine:
    gpus: Sequence[Gpu] = ()
    driver: str = "580.65.06"
    cuda: int = 13000
    init_error: int | None = None     # an NVML_ERROR_* value nvmlInit raises
    denied: frozenset[str] = frozenset()  # "version", "cuda", "count"
    calls: list[str] = field(default_factory=list)


def _err(code: int) -> Exception:
    return real.NVMLError(code)  # nvidia-ml-py picks the subclass (NVMLError_GpuIsLost, ...)


def fake_nvml(m: Machine) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    for name in dir(real):
        if name.startswith(("NVML_ERROR_", "NVMLError")):
            setattr(mod, name, getattr(real, name))

    def check(what: str, denied: frozenset[str]) -> None:
        m.calls.append(what)
        if what in denied:
            raise _err(real.NVML_ERROR_NO_PERMISSION)

    def init() -> None:
        m.calls.append("init")
        if m.init_error is not None:
            raise _err(m.init_error)

    def handle(i: int) -> tuple[str, int, int | None]:
        m.calls.append(f"handle {i}")
        if m.gpus[i].lost:
            raise _err(real.NVML_ERROR_GPU_IS_LOST)
        return ("gpu", i, None)

    def gpu(h: tuple[str, int, int | None]) -> Gpu:
        return m.gpus[h[1]]

    def name(h: Any) -> str:
        check("name", gpu(h).denied)
        return gpu(h).slices[h[2]].name if h[2] is not None else gpu(h).name

    def uuid(h: Any) -> str:
        check("uuid", gpu(h).denied)
        return gpu(h).slices[h[2]].uuid if h[2] is not None else gpu(h).uuid

    def cc(h: Any) -> tuple[int, int]:
        check("cc", gpu(h).denied)
        if h[2] is not None:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu(h).cc

    def memory(h: Any) -> Any:
        check("memory", gpu(h).denied)
        total = gpu(h).slices[h[2]].memory if h[2] is not None else gpu(h).memory
        return types.SimpleNamespace(total=total, free=total, used=0)

    def ecc(h: Any) -> tuple[int, int]:
        if gpu(h).ecc is None:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu(h).ecc, gpu(h).ecc

    def mig(h: Any) -> tuple[int, int]:
        if gpu(h).mig is None:
            raise _err(real.NVML_ERROR_NOT_SUPPORTED)
        return gpu(h).mig, gpu(h).mig

    def mig_count(h: Any) -> int:
        return len(gpu(h).slices)

    def mig_handle(h: Any, j: int) -> tuple[str, int, int]:
        if gpu(h).slices[j] is None:
            raise _err(real.NVML_ERROR_NOT_FOUND)
        return ("mig", h[1], j)

    def system(what: str, value: Any) -> Any:
        def fn() -> Any:
            check(what, m.denied)
            return value
        return fn

    mod.nvmlInit = init
    mod.nvmlShutdown = lambda: m.calls.append("shutdown")
    mod.nvmlSystemGetDriverVersion = system("version", m.driver)
    mod.nvmlSystemGetCudaDriverVersion_v2 = system("cuda", m.cuda)
    mod.nvmlDeviceGetCount = system("count", len(m.gpus))
    mod.nvmlDeviceGetHandleByIndex = handle
    mod.nvmlDeviceGetName = name
    mod.nvmlDeviceGetUUID = uuid
    mod.nvmlDeviceGetCudaComputeCapability = cc
    mod.nvmlDeviceGetMemoryInfo = memory
    mod.nvmlDeviceGetEccMode = ecc
    mod.nvmlDeviceGetMigMode = mig
    mod.nvmlDeviceGetMaxMigDeviceCount = mig_count
    mod.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    return mod

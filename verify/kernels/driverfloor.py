"""What an environment's CUDA runtime asks of the NVIDIA driver, and what a given driver gets.

The runtime (``verify.kernels.cudastack``: ``cuda_runtime_api.h`` beside its libcudart) needs the
driver of its own CUDA release for everything, and runs from the oldest driver of its major
under CUDA minor version compatibility (without PTX JIT of newer PTX, and without features
that need a newer driver). Driver floors come from the registry (``samebits.spec.gpus``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from samebits.spec.gpus import Registry, registry, version_key
from verify.kernels.cudastack import CudaStack


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverCheck:
    """What the environment's CUDA runtime asks of the driver, and (with ``given``) what a
    given driver gets: ``ok`` (the runtime's own release or newer), ``minor-compat`` (runs under
    CUDA minor version compatibility), ``too-old``, or ``unknown``."""

    runtime: str | None
    full: str | None = None          # the runtime release's own oldest driver
    compat: str | None = None        # the oldest driver of the runtime's major
    given: str | None = None
    provides: str | None = None      # the CUDA release the given driver provides
    status: str = "unknown"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"cuda_runtime": self.runtime, "driver": self.full, "minor_compat": self.compat,
                "given": self.given, "provides": self.provides, "status": self.status,
                "message": self.message}


def driver_check(stack: CudaStack, given: str | None = None,
                 reg: Registry | None = None) -> DriverCheck:
    reg = reg or registry()
    rt = stack.cuda_runtime
    release = reg.release(rt) if rt and "." in rt else None
    full = release.driver if release else None
    compat = reg.minor_compat.get(rt.split(".")[0]) if rt else None
    provides = reg.driver_cuda(given) if given else None
    if given is None:
        msg = (f"CUDA {rt} runtime: driver >= {full}" if full else
               f"CUDA {rt} runtime" if rt else "no CUDA runtime found")
        if compat and compat != full:
            msg += f" (runs from {compat} under minor version compatibility)"
        return DriverCheck(runtime=rt, full=full, compat=compat, status="unknown",
                           message=msg)
    have = version_key(given)
    if rt is None:
        status, msg = "ok", "no CUDA runtime in the environment"
    elif full and have >= version_key(full):
        status, msg = "ok", f"driver {given} provides CUDA {provides}; the runtime is {rt}"
    elif compat and have >= version_key(compat):
        status = "minor-compat"
        msg = (f"driver {given} provides CUDA {provides}; the CUDA {rt} runtime runs under minor "
               f"version compatibility (from {compat}): PTX newer than CUDA {provides} cannot be "
               "JIT-compiled and features that need a newer driver fail")
    else:
        need = compat or full
        status = "too-old"
        msg = (f"driver {given} provides CUDA {provides or 'older than 11.0'}; the CUDA {rt} "
               f"runtime needs {'>= ' + need if need else 'a newer driver'}")
    return DriverCheck(runtime=rt, full=full, compat=compat, given=given, provides=provides,
                       status=status, message=msg)

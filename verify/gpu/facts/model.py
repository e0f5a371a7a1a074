"""What a machine probe records: frozen, slotted dataclasses and their JSON form.

``Facts.to_dict()`` / ``Facts.from_dict()`` (format ``FACTS_FORMAT``) are what attestations
carry. Pure: nothing here touches the machine (``verify.gpu.facts.detect`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any

from samebits._compat import dataclass
from samebits.childenv import STARTUP
from samebits.errors import InputError, clip, quote

FACTS_FORMAT = 1

# Environment variables that change numerics or which device, kernels and code run: prefixes,
# then exact names. Recorded verbatim, so never add a prefix that carries credentials. The
# start-up variables (PYTHONPATH ... LD_LIBRARY_PATH) reach a process samebits starts only when
# a paper manifest keeps them (samebits.childenv): recorded, they are what audit compares.
NUMERIC_ENV_PREFIXES = ("CUBLAS_", "CUBLASLT_", "CUDNN_", "CUDA_", "NCCL_", "TORCH_",
                        "PYTORCH_", "OMP_", "KMP_", "GOMP_", "MKL_", "DNNL_", "ONEDNN_",
                        "OPENBLAS_", "NVIDIA_TF32_OVERRIDE")
NUMERIC_ENV_NAMES = ("ATEN_CPU_CAPABILITY", "PYTHONHASHSEED", "NVIDIA_VISIBLE_DEVICES",
                     *STARTUP)


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchFacts:
    version: str
    git_version: str
    build_config: str
    cuda: str | None  # the CUDA runtime torch was built with; None for a CPU-only build
    cudnn: str | None
    nccl: str | None
    cublas: str | None
    arch_list: tuple[str, ...]
    cpu_capability: str
    cuda_available: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverFacts:
    version: str
    cuda: str  # the newest CUDA version this driver provides, "12.4"
    source: str  # "nvml", "nvidia-smi" or "libcuda"
    errors: tuple[str, ...] = ()  # "cuda: NVML_ERROR_NO_PERMISSION": fields NVML refused


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuFacts:
    index: int  # NVML / nvidia-smi order (all GPUs, ignoring CUDA_VISIBLE_DEVICES)
    torch_index: int | None  # cuda:N as torch numbers it; None when torch cannot see it
    name: str
    uuid: str
    compute_capability: str  # "9.0"
    sm_count: int | None
    memory_bytes: int | None
    ecc: str | None  # "enabled", "disabled" or None when unknown
    mig: str | None  # "enabled"/"disabled" for a GPU, "slice" for one MIG slice of it
    parent_uuid: str | None = None  # a MIG slice's GPU
    errors: tuple[str, ...] = ()  # "memory: NVML_ERROR_NO_PERMISSION", "handle: ..._GPU_IS_LOST"


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuFacts:
    arch: str
    vendor: str
    model: str
    flags: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadFacts:
    intra_op: int
    inter_op: int
    affinity: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    torch: TorchFacts
    driver: DriverFacts | None
    gpus: tuple[GpuFacts, ...]
    cpu: CpuFacts
    threads: ThreadFacts
    glibc: str | None
    python: str
    env: tuple[tuple[str, str], ...]
    format: int = FACTS_FORMAT

    def gpu(self, torch_index: int) -> GpuFacts | None:
        return next((g for g in self.gpus if g.torch_index == torch_index), None)

    @property
    def cpu_isa(self) -> str:
        """ATen's CPU capability plus the flags that switch oneDNN/MKL kernels, "AVX512+bf16"."""
        extra = [short for flag, short in ISA_FLAGS if flag in self.cpu.flags]
        return "+".join([self.torch.cpu_capability, *extra])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["env"] = dict(self.env)
        return _lists(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "facts") -> Facts:
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        if data.get("format") != FACTS_FORMAT:
            raise InputError(f"{where}: format = {quote(data.get('format'))}: this samebits reads "
                             f"facts format {FACTS_FORMAT}",
                             hint="re-run `samebits verify gpu` with this samebits")
        try:
            driver = data["driver"]
            return cls(
                torch=_build(TorchFacts, data["torch"]),
                driver=_build(DriverFacts, driver) if driver is not None else None,
                gpus=tuple(_build(GpuFacts, g) for g in data["gpus"]),
                cpu=_build(CpuFacts, data["cpu"]),
                threads=_build(ThreadFacts, data["threads"]),
                glibc=data["glibc"],
                python=data["python"],
                env=tuple(sorted(dict(data["env"]).items())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed facts: {clip(repr(exc), 200)}") from None


# (flag in /proc/cpuinfo, short name): features that change which GEMM/conv kernels run.
ISA_FLAGS = (("avx512_bf16", "bf16"), ("avx512_fp16", "fp16"), ("amx_tile", "amx"),
             ("avx512_vnni", "vnni"), ("sve", "sve"), ("sve2", "sve2"))


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} in {cls.__name__}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _lists(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _lists(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_lists(v) for v in obj]
    return obj


def is_numeric_env(name: str) -> bool:
    return name.startswith(NUMERIC_ENV_PREFIXES) or name in NUMERIC_ENV_NAMES

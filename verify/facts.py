"""The one machine probe: ``detect()`` returns frozen ``Facts``; everything else takes them in.

What is recorded (``Facts.to_dict()``, format ``FACTS_FORMAT``):

    torch      version, git commit, build config, CUDA runtime, cuDNN, NCCL, cuBLAS, arch list,
               CPU capability (the ISA ATen dispatches to), whether CUDA is usable
    driver     driver version and the CUDA version it provides (NVML, else nvidia-smi, else
               libcuda), or None on a machine without an NVIDIA driver
    gpus       name, UUID, compute capability, SM count, memory, ECC and MIG mode, and the
               index torch gives it (None when torch cannot see it)
    cpu        architecture, vendor, model, flags
    threads    torch's intra-op and inter-op threads, CPUs this process may run on
    glibc, python
    env        every environment variable that can change numerics (``NUMERIC_ENV``)

Only this module touches the machine. The parsers (``parse_cpuinfo``, ``parse_smi_query``,
``parse_smi_cuda``) are pure so tests feed them text.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from samebits.errors import InputError

FACTS_FORMAT = 1

# Environment variables that change numerics or which device and kernels run: prefixes, then
# exact names. Recorded verbatim, so never add a prefix that carries credentials.
NUMERIC_ENV_PREFIXES = ("CUBLAS_", "CUBLASLT_", "CUDNN_", "CUDA_", "NCCL_", "TORCH_",
                        "PYTORCH_", "OMP_", "KMP_", "GOMP_", "MKL_", "DNNL_", "ONEDNN_",
                        "OPENBLAS_", "NVIDIA_TF32_OVERRIDE")
NUMERIC_ENV_NAMES = ("ATEN_CPU_CAPABILITY", "PYTHONHASHSEED", "NVIDIA_VISIBLE_DEVICES",
                     "LD_PRELOAD", "LD_LIBRARY_PATH")


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
    mig: str | None


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
            raise InputError(f"{where}: format = {data.get('format')!r}: this samebits reads "
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
            raise InputError(f"{where}: malformed facts: {exc!r}") from None


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
    if isinstance(obj, list | tuple):
        return [_lists(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------- pure parsers

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


def parse_smi_query(text: str) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits``."""
    rows = []
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


def cudnn_str(v: int) -> str:
    """91900 -> "9.19.0"; 8902 -> "8.9.2" (cuDNN changed its encoding at 9)."""
    if v >= 90000:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _uuid(u: str) -> str:
    return u.removeprefix("GPU-").lower()


# ---------------------------------------------------------------------------- the probe

def detect(*, environ: Mapping[str, str] | None = None) -> Facts:
    """Probe this machine once. Initialises CUDA when torch can use it; creates no cuBLAS handle."""
    import torch

    environ = os.environ if environ is None else environ
    cuda_ok = bool(torch.version.cuda) and torch.cuda.is_available()
    driver, gpus = _probe_driver_and_gpus()
    torch_gpus = _torch_gpus(torch) if cuda_ok else []
    arch = platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            vendor, model, flags = parse_cpuinfo(f.read(), arch=arch)
    except OSError:
        vendor, model, flags = "unknown", platform.processor() or arch, ()
    return Facts(
        torch=TorchFacts(
            version=torch.__version__,
            git_version=torch.version.git_version,
            build_config=torch.__config__.show(),
            cuda=torch.version.cuda,
            cudnn=cudnn_str(torch.backends.cudnn.version())
            if torch.backends.cudnn.is_available() else None,
            nccl=_nccl(torch) if cuda_ok else None,
            cublas=_cublas_version() if cuda_ok else None,
            arch_list=tuple(torch.cuda.get_arch_list()),
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
            cuda_available=cuda_ok,
        ),
        driver=driver,
        gpus=_merge_gpus(gpus, torch_gpus),
        cpu=CpuFacts(arch=arch, vendor=vendor, model=model, flags=flags,
                     count=os.cpu_count() or 1),
        threads=ThreadFacts(intra_op=torch.get_num_threads(),
                            inter_op=torch.get_num_interop_threads(),
                            affinity=len(os.sched_getaffinity(0))
                            if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1),
        glibc=_glibc(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        env=tuple(sorted((k, v) for k, v in environ.items() if is_numeric_env(k))),
    )


def is_numeric_env(name: str) -> bool:
    return name.startswith(NUMERIC_ENV_PREFIXES) or name in NUMERIC_ENV_NAMES


def _glibc() -> str | None:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        return None
    return text.split()[-1] if text else None


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


def _torch_gpus(torch: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append({"torch_index": i, "name": p.name, "uuid": _uuid(str(getattr(p, "uuid", ""))),
                    "compute_capability": f"{p.major}.{p.minor}",
                    "sm_count": p.multi_processor_count, "memory_bytes": p.total_memory})
    return out


def _merge_gpus(found: list[dict[str, Any]], seen: list[dict[str, Any]]) -> tuple[GpuFacts, ...]:
    """Join the driver's list with torch's by UUID; either side may be empty."""
    by_uuid = {_uuid(g["uuid"]): g for g in seen}
    rows = found or [{**g, "index": g["torch_index"], "ecc": None, "mig": None} for g in seen]
    out = []
    for row in rows:
        t = by_uuid.get(_uuid(row["uuid"]), {})
        out.append(GpuFacts(
            index=row["index"], torch_index=t.get("torch_index"), name=row["name"],
            uuid=_uuid(row["uuid"]),
            compute_capability=row["compute_capability"] or t.get("compute_capability", ""),
            sm_count=t.get("sm_count"),
            memory_bytes=row.get("memory_bytes") or t.get("memory_bytes"),
            ecc=row.get("ecc"), mig=row.get("mig"),
        ))
    return tuple(out)


def _probe_driver_and_gpus() -> tuple[DriverFacts | None, list[dict[str, Any]]]:
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

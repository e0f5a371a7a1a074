"""The process-wide torch settings the workloads run under: set once, read back, recorded.

Two profiles differ only in the determinism knobs:

    deterministic  torch.use_deterministic_algorithms(True), cudnn.deterministic=True,
                   cudnn.benchmark=False, CUBLAS_WORKSPACE_CONFIG=:4096:8
    default        what a typical training script runs with: torch's defaults plus
                   cudnn.benchmark=True, CUBLAS_WORKSPACE_CONFIG unset

Precision is a separate choice applied to either profile: ``float32_matmul_precision``
("highest" keeps fp32 GEMMs in fp32; "high" allows TF32 on CUDA; "medium" allows bf16, which
oneDNN uses on CPUs with avx512_bf16/AMX) and ``cudnn_allow_tf32`` for convolutions.

``apply`` mutates torch's global state (there is no other kind); ``readback`` reports what torch
says afterwards, and that, not the request, goes into the attestation.

The cuBLAS workspace: torch reads CUBLAS_WORKSPACE_CONFIG once per process, when it first
sizes a workspace, and keeps that size; the variable may say something else later (set after
the first GEMM, or by a parent that changed it). ``readback`` records both: the variable as it
is now, and the sizes in force in this process (``at::cuda::getChosenWorkspaceSize`` and
``getCUDABlasLtWorkspaceSize``, called in the loaded libtorch_cuda), only once CUDA is
initialised (the functions query the device) and only where torch exports them (2.9 and later:
None, with the reason, before).
"""

from __future__ import annotations

import os
from dataclasses import MISSING, asdict, fields, replace
from typing import Any, Literal

from samebits._compat import dataclass
from samebits.errors import InputError
from verify.gpu.facts.torchapi import find, unavailable

Precision = Literal["highest", "high", "medium"]
PRECISIONS: tuple[str, ...] = ("highest", "high", "medium")
WORKSPACE = ":4096:8"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    profile: str
    deterministic_algorithms: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    cublas_workspace_config: str | None
    float32_matmul_precision: Precision = "highest"
    cudnn_allow_tf32: bool = False

    def with_precision(self, *, matmul: str | None = None, tf32: bool | None = None) -> Settings:
        """The same profile with other precision choices; ``tf32`` sets both GEMM and conv."""
        out = self
        if tf32 is not None:
            out = replace(out, cudnn_allow_tf32=tf32,
                          float32_matmul_precision="high" if tf32 else "highest")
        if matmul is not None:
            if matmul not in PRECISIONS:
                raise InputError(f"float32 matmul precision {matmul!r}: expected one of "
                                 f"{', '.join(PRECISIONS)}")
            out = replace(out, float32_matmul_precision=matmul)  # type: ignore[arg-type]
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Settings:
        names = {f.name for f in fields(cls)}
        if set(data) - names:
            raise InputError(f"unknown settings {sorted(set(data) - names)}")
        missing = sorted(f.name for f in fields(cls) if f.name not in data
                         and f.default is MISSING and f.default_factory is MISSING)
        if missing:
            raise InputError(f"settings without {', '.join(missing)}")
        return cls(**data)


DETERMINISTIC = Settings(profile="deterministic", deterministic_algorithms=True,
                         cudnn_deterministic=True, cudnn_benchmark=False,
                         cublas_workspace_config=WORKSPACE)
DEFAULT = Settings(profile="default", deterministic_algorithms=False, cudnn_deterministic=False,
                   cudnn_benchmark=True, cublas_workspace_config=None)
PROFILES = {s.profile: s for s in (DETERMINISTIC, DEFAULT)}

# The single steps from DEFAULT toward DETERMINISTIC the probe tries one at a time. The
# workspace config rides with deterministic algorithms: torch refuses cuBLAS without it.
KNOBS: dict[str, dict[str, Any]] = {
    "use_deterministic_algorithms": {"deterministic_algorithms": True,
                                     "cublas_workspace_config": WORKSPACE},
    "cudnn.deterministic": {"cudnn_deterministic": True},
    "cudnn.benchmark=False": {"cudnn_benchmark": False},
    "CUBLAS_WORKSPACE_CONFIG": {"cublas_workspace_config": WORKSPACE},
}


def knob(base: Settings, name: str) -> Settings:
    return replace(base, profile=f"{base.profile}+{name}", **KNOBS[name])


def apply(settings: Settings, *, environ: Any = None, torch: Any = None) -> None:
    """Set torch's global state (``torch``: the module, by default the one imported) to
    ``settings``. Call before the first CUDA GEMM. A torch before 1.12 has no float32 matmul
    precision: its one switch, ``torch.backends.cuda.matmul.allow_tf32``, is what
    ``set_float32_matmul_precision`` sets (off for ``highest``); one before 1.8 has no
    ``use_deterministic_algorithms`` and is left as it is. ``readback`` records the truth."""
    if torch is None:
        import torch

    environ = os.environ if environ is None else environ
    if settings.cublas_workspace_config is None:
        environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        environ["CUBLAS_WORKSPACE_CONFIG"] = settings.cublas_workspace_config
    if (deterministic := find(torch, "torch.use_deterministic_algorithms")) is not None:
        deterministic(settings.deterministic_algorithms)
    torch.backends.cudnn.deterministic = settings.cudnn_deterministic
    torch.backends.cudnn.benchmark = settings.cudnn_benchmark
    if (precision := find(torch, "torch.set_float32_matmul_precision")) is not None:
        precision(settings.float32_matmul_precision)
    else:
        torch.backends.cuda.matmul.allow_tf32 = settings.float32_matmul_precision != "highest"
    torch.backends.cudnn.allow_tf32 = settings.cudnn_allow_tf32


def readback(torch: Any = None) -> dict[str, Any]:
    """What torch (``torch``: the module, by default the one imported) reports now: the
    settings as recorded in an attestation. A setting this torch cannot report is
    ``unavailable (torch 2.2.2 has no ...)`` (``verify.gpu.facts.torchapi``)."""
    if torch is None:
        import torch

    def ask(name: str, *, call: bool = True, form: Any = bool) -> Any:
        got = find(torch, name)
        if got is None:
            return unavailable(torch, name)
        return form(got() if call else got)

    return {
        "deterministic_algorithms": ask("torch.are_deterministic_algorithms_enabled"),
        "deterministic_warn_only": ask("torch.is_deterministic_algorithms_warn_only_enabled"),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "float32_matmul_precision": ask("torch.get_float32_matmul_precision", form=str),
        "cuda_matmul_allow_tf32": ask("torch.backends.cuda.matmul.allow_tf32", call=False),
        "cudnn_allow_tf32": ask("torch.backends.cudnn.allow_tf32", call=False),
        "cuda_matmul_allow_fp16_reduced_precision_reduction":
            ask("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction", call=False),
        "cuda_matmul_allow_bf16_reduced_precision_reduction":
            ask("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", call=False),
        "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        "blas_library": ask("torch.backends.cuda.preferred_blas_library",
                            form=lambda v: str(v).rsplit(".", 1)[-1]),
        **cublas_workspace(torch),
    }


_WORKSPACE_SYMBOLS = {"cublas_workspace_bytes": "_ZN2at4cuda22getChosenWorkspaceSizeEv",
                      "cublaslt_workspace_bytes": "_ZN2at4cuda26getCUDABlasLtWorkspaceSizeEv"}


def cublas_workspace(torch: Any) -> dict[str, Any]:
    """The cuBLAS and cuBLASLt workspace sizes torch uses in this process, in bytes; None
    (and why, in ``cublas_workspace_source``) where they cannot be read."""
    import ctypes

    out: dict[str, Any] = dict.fromkeys(_WORKSPACE_SYMBOLS)
    if not (torch.version.cuda and torch.cuda.is_available() and torch.cuda.is_initialized()):
        out["cublas_workspace_source"] = "no CUDA in use"
        return out
    lib_path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    try:
        lib = ctypes.CDLL(lib_path)
        for key, symbol in _WORKSPACE_SYMBOLS.items():
            fn = getattr(lib, symbol)
            fn.restype = ctypes.c_size_t
            out[key] = int(fn())
    except (OSError, AttributeError) as exc:
        out["cublas_workspace_source"] = f"not readable from this torch: {exc}"[:200]
        return out
    out["cublas_workspace_source"] = "libtorch_cuda at::cuda::getChosenWorkspaceSize"
    return out


def recorded(settings: Settings) -> dict[str, Any]:
    """The profile's name and torch's readback, as the attestation's ``settings``."""
    return {"profile": settings.profile, **readback()}

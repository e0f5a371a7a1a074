"""What the torch at hand has: an API looked up by its dotted name, or the words for its absence.

The facts probe and the workloads run on every torch from 1.13 to 2.13. An API newer than the
torch in the audited environment is no error but a recorded value,
``unavailable (torch 2.0.1 has no torch.backends.cpu.get_cpu_capability)``: the attestation
says what could not be asked, and ``verify.gpu.compare`` compares it like any other value.

    find(torch, "torch.backends.cuda.preferred_blas_library")  # the function, or None
    unavailable(torch, "torch.nn.attention")  # "unavailable (torch 2.0.1 has no ...)"

Where each API appeared (read off PyPI's 1.13.1, 2.0.1, 2.2.2 and the 2.13.0 wheels):

    torch.backends.cpu.get_cpu_capability          2.1   (before: torch.__config__.show()'s
                                                          "CPU capability usage: AVX2")
    torch.backends.cuda.preferred_blas_library     2.3
    torch.nn.attention.sdpa_kernel, SDPBackend     2.3   (2.0 to 2.2: torch.backends.cuda
                                                          .sdp_kernel, no enable_cudnn flag)
    torch.nn.functional.scaled_dot_product_attention  2.0
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction  2.0 (1.13's matmul
                                                          object raises AssertionError)
    fp16 GEMM and convolution kernels on a CPU     after 2.0 (2.0.1: "not implemented for
                                                          'Half'"; 2.2.2 has them)
    torch.get_float32_matmul_precision             1.12  (before: torch.backends.cuda.matmul
                                                          .allow_tf32 alone, 1.7)
    torch.use_deterministic_algorithms             1.8
    torch.is_deterministic_algorithms_warn_only_enabled  1.11
    torch.load(weights_only=True)                  1.13  (the floor: paper tensors)
"""

from __future__ import annotations

import importlib
import types
from typing import Any

UNAVAILABLE = "unavailable"


def find(torch: Any, dotted: str) -> Any:
    """``torch.a.b.c`` by its dotted name, or None. ``torch`` is the module (or, in tests, an
    object standing in for it); a submodule of a real module is imported when not yet."""
    parts = dotted.split(".")
    if parts[0] != "torch":
        raise ValueError(f"{dotted!r}: expected a name under torch")
    obj = torch
    for i, part in enumerate(parts[1:], start=1):
        try:
            nxt = getattr(obj, part, None)
        except AssertionError:  # torch 1.13's torch.backends.cuda.matmul: "Unknown attribute"
            return None
        if nxt is None and isinstance(obj, types.ModuleType) and (
                obj.__name__ == ".".join(parts[:i])):
            try:
                nxt = importlib.import_module(f"{obj.__name__}.{part}")
            except ImportError:
                return None
        if nxt is None:
            return None
        obj = nxt
    return obj


def lacks(torch: Any, what: str) -> str:
    """"torch 2.0.1 has no torch.nn.attention"."""
    return f"torch {torch.__version__} has no {what}"


def unavailable(torch: Any, what: str) -> str:
    """The recorded value of a fact this torch cannot give."""
    return f"{UNAVAILABLE} ({lacks(torch, what)})"


def is_unavailable(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(f"{UNAVAILABLE} (")

"""Attention family: scaled_dot_product_attention forward and backward, one backend each.

fp16 on CUDA (what flash and cuDNN need), fp32 on CPU. When PyTorch finds no kernel for the
chosen backend it warns why (sdp_utils, one warning per failed check) and raises "No available
kernel". Those warnings decide what is recorded: a backend PyTorch turns down because it is not
deterministic under ``torch.use_deterministic_algorithms(True)`` (cuDNN attention:
``check_cudnn_deterministic``, "cuDNN SDPA is not deterministic.") is ``Refused`` with that
reason and the profile that runs it; any other reason is ``Unavailable`` with PyTorch's words.

The backend is chosen with ``torch.nn.attention.sdpa_kernel`` (torch 2.3 and later), else with
``torch.backends.cuda.sdp_kernel`` (2.0 to 2.2; its ``enable_cudnn`` flag only where it has
one). That older switch does not bind every device (torch 2.0 runs the math kernel on a CPU
whatever it says), so there ``torch._fused_sdp_choice`` is asked which kernel will run: another
backend than the one named is ``Unavailable``, never bits recorded under the wrong name. A torch
without ``scaled_dot_product_attention`` (1.13) records every backend ``Unavailable``.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from typing import Any

import torch
import torch.nn.functional as F

from verify.gpu.facts.torchapi import find, lacks
from verify.gpu.workloads._common import Context, Outputs, Refused, Unavailable

MATH, FLASH, EFFICIENT, CUDNN = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION",
                                 "CUDNN_ATTENTION")
# torch.backends.cuda.sdp_kernel's flag for each backend (torch 2.0 to 2.2).
LEGACY_FLAGS = {MATH: "enable_math", FLASH: "enable_flash", EFFICIENT: "enable_mem_efficient",
                CUDNN: "enable_cudnn"}
SDPA = "torch.nn.functional.scaled_dot_product_attention"


def _sdpa(ctx: Context, backend: str) -> Outputs:
    if not hasattr(F, "scaled_dot_product_attention"):
        raise Unavailable(f"{backend}: {lacks(torch, SDPA)}")
    if backend in (EFFICIENT, CUDNN) and not ctx.cuda:
        raise Unavailable(f"{backend} has no CPU kernel")
    dtype = torch.float16 if ctx.cuda else torch.float32
    g = ctx.generator()
    q, k, v = (ctx.randn(g, 2, 4, 128, 64, dtype=dtype, grad=True) for _ in range(3))
    upstream = ctx.randn(g, 2, 4, 128, 64, dtype=dtype)
    select, legacy = only_backend(torch, backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with select:
                if legacy:
                    _check_choice(backend, q, k, v, device=ctx.device.type)
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                dq, dk, dv = torch.autograd.grad(out, (q, k, v), upstream)
        except RuntimeError as exc:
            if "No available kernel" in str(exc) or "No viable backend" in str(exc):
                reasons = [str(w.message).strip() for w in caught]
                raise no_kernel(backend, reasons,
                                deterministic=torch.are_deterministic_algorithms_enabled()
                                ) from None
            raise
    return {"out": out, "grad_q": dq, "grad_k": dk, "grad_v": dv}


def only_backend(torch: Any, backend: str) -> tuple[contextlib.AbstractContextManager[Any], bool]:
    """(a context in which only ``backend`` may run, whether it is torch's older switch)."""
    sdpa_kernel = find(torch, "torch.nn.attention.sdpa_kernel")
    if sdpa_kernel is not None:
        return sdpa_kernel(getattr(find(torch, "torch.nn.attention.SDPBackend"), backend)), False
    legacy = find(torch, "torch.backends.cuda.sdp_kernel")
    if legacy is None:
        raise Unavailable(f"{backend}: {lacks(torch, 'torch.nn.attention')}")
    flags = inspect.signature(legacy).parameters
    if LEGACY_FLAGS[backend] not in flags:
        raise Unavailable(f"{backend}: {lacks(torch, 'torch.nn.attention')} and its "
                          f"torch.backends.cuda.sdp_kernel has no {LEGACY_FLAGS[backend]}")
    return legacy(**{flag: name == backend for name, flag in LEGACY_FLAGS.items()
                     if flag in flags}), True


def _check_choice(backend: str, q: Any, k: Any, v: Any, *, device: str) -> None:
    """Under torch's older switch: the kernel torch will run must be ``backend``'s."""
    choose = find(torch, "torch._fused_sdp_choice")
    names = find(torch, "torch.backends.cuda.SDPBackend")
    if choose is None or names is None:
        return
    chosen = int(choose(q, k, v, is_causal=True))
    by_value = {int(getattr(names, n)): n for n in names.__members__}
    if by_value.get(chosen, backend) not in (backend, "ERROR"):
        raise Unavailable(f"{backend}: torch {torch.__version__} runs its "
                          f"{by_value.get(chosen, chosen)} kernel on {device} when "
                          f"torch.backends.cuda.sdp_kernel asks for {backend} alone")


# What PyTorch's checks say when a backend is turned down for being nondeterministic.
NONDETERMINISTIC = ("is not deterministic", "non-deterministic", "nondeterministic")


def no_kernel(backend: str, reasons: list[str], *, deterministic: bool) -> Exception:
    """``Refused`` when PyTorch turned ``backend`` down under deterministic algorithms (its
    reason quoted), else ``Unavailable`` with the reasons it gave."""
    said = [r for r in dict.fromkeys(reasons) if r]
    det = [r for r in said if any(s in r for s in NONDETERMINISTIC)]
    if deterministic and det:
        return Refused(f'{backend}: PyTorch refuses it under use_deterministic_algorithms(True): '
                       f'"{det[0]}"; it runs under the default profile (--profile default)')
    why = f": {'; '.join(r[:160] for r in said[:3])}" if said else ""
    return Unavailable(f"{backend}: no kernel for this device, dtype or settings{why}")


def sdpa_math(ctx: Context) -> Outputs:
    return _sdpa(ctx, MATH)


def sdpa_flash(ctx: Context) -> Outputs:
    return _sdpa(ctx, FLASH)


def sdpa_efficient(ctx: Context) -> Outputs:
    return _sdpa(ctx, EFFICIENT)


def sdpa_cudnn(ctx: Context) -> Outputs:
    return _sdpa(ctx, CUDNN)


WORKLOADS = {f.__name__: f for f in (sdpa_math, sdpa_flash, sdpa_efficient, sdpa_cudnn)}

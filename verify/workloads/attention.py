"""Attention family: scaled_dot_product_attention forward and backward, one backend each.

fp16 on CUDA (what flash and cuDNN need), fp32 on CPU. When PyTorch finds no kernel for the
chosen backend it warns why (sdp_utils, one warning per failed check) and raises "No available
kernel". Those warnings decide what is recorded: a backend PyTorch turns down because it is not
deterministic under ``torch.use_deterministic_algorithms(True)`` (cuDNN attention:
``check_cudnn_deterministic``, "cuDNN SDPA is not deterministic.") is ``Refused`` with that
reason and the profile that runs it; any other reason is ``Unavailable`` with PyTorch's words.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from verify.workloads._common import Context, Outputs, Refused, Unavailable


def _sdpa(ctx: Context, backend: SDPBackend) -> Outputs:
    if backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION) and not ctx.cuda:
        raise Unavailable(f"{backend.name} has no CPU kernel")
    dtype = torch.float16 if ctx.cuda else torch.float32
    g = ctx.generator()
    q, k, v = (ctx.randn(g, 2, 4, 128, 64, dtype=dtype, grad=True) for _ in range(3))
    upstream = ctx.randn(g, 2, 4, 128, 64, dtype=dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                dq, dk, dv = torch.autograd.grad(out, (q, k, v), upstream)
        except RuntimeError as exc:
            if "No available kernel" in str(exc) or "No viable backend" in str(exc):
                reasons = [str(w.message).strip() for w in caught]
                raise no_kernel(backend.name, reasons,
                                deterministic=torch.are_deterministic_algorithms_enabled()
                                ) from None
            raise
    return {"out": out, "grad_q": dq, "grad_k": dk, "grad_v": dv}


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
    return _sdpa(ctx, SDPBackend.MATH)


def sdpa_flash(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.FLASH_ATTENTION)


def sdpa_efficient(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.EFFICIENT_ATTENTION)


def sdpa_cudnn(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.CUDNN_ATTENTION)


WORKLOADS = {f.__name__: f for f in (sdpa_math, sdpa_flash, sdpa_efficient, sdpa_cudnn)}

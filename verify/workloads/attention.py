"""Attention family: scaled_dot_product_attention forward and backward, one backend each.

fp16 on CUDA (what flash and cuDNN need), fp32 on CPU. A backend with no kernel for this
device, dtype or settings raises ``Unavailable``; the suite records that, not a digest.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from verify.workloads._common import Context, Outputs, Unavailable


def _sdpa(ctx: Context, backend: SDPBackend) -> Outputs:
    if backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION) and not ctx.cuda:
        raise Unavailable(f"{backend.name} has no CPU kernel")
    dtype = torch.float16 if ctx.cuda else torch.float32
    g = ctx.generator()
    q, k, v = (ctx.randn(g, 2, 4, 128, 64, dtype=dtype, grad=True) for _ in range(3))
    upstream = ctx.randn(g, 2, 4, 128, 64, dtype=dtype)
    try:
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            dq, dk, dv = torch.autograd.grad(out, (q, k, v), upstream)
    except RuntimeError as exc:
        if "No available kernel" in str(exc) or "No viable backend" in str(exc):
            raise Unavailable(f"{backend.name}: no kernel for this device, dtype or "
                              "settings") from None
        raise
    return {"out": out, "grad_q": dq, "grad_k": dk, "grad_v": dv}


def sdpa_math(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.MATH)


def sdpa_flash(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.FLASH_ATTENTION)


def sdpa_efficient(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.EFFICIENT_ATTENTION)


def sdpa_cudnn(ctx: Context) -> Outputs:
    return _sdpa(ctx, SDPBackend.CUDNN_ATTENTION)


WORKLOADS = {f.__name__: f for f in (sdpa_math, sdpa_flash, sdpa_efficient, sdpa_cudnn)}

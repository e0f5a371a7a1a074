"""Convolution family: conv2d forward with input and weight gradients; adaptive pooling."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verify.gpu.workloads._common import Context, Outputs


def _conv(ctx: Context, dtype: torch.dtype) -> Outputs:
    g = ctx.generator()
    x = ctx.randn(g, 8, 16, 32, 32, dtype=dtype, grad=True)
    w = ctx.randn(g, 32, 16, 3, 3, dtype=dtype, grad=True)
    upstream = ctx.randn(g, 8, 32, 32, 32, dtype=dtype)
    y = F.conv2d(x, w, padding=1)
    dx, dw = torch.autograd.grad(y, (x, w), upstream)
    return {"y": y, "grad_input": dx, "grad_weight": dw}


def conv2d_fp32(ctx: Context) -> Outputs:
    return _conv(ctx, torch.float32)


def conv2d_fp16(ctx: Context) -> Outputs:
    return _conv(ctx, torch.float16)


def adaptive_avgpool2d_bwd(ctx: Context) -> Outputs:
    g = ctx.generator()
    x = ctx.randn(g, 8, 32, 30, 30, grad=True)
    y = F.adaptive_avg_pool2d(x, (7, 7))
    (dx,) = torch.autograd.grad(y, (x,), ctx.randn(g, 8, 32, 7, 7))
    return {"y": y, "grad_input": dx}


WORKLOADS = {f.__name__: f for f in (conv2d_fp32, conv2d_fp16, adaptive_avgpool2d_bwd)}

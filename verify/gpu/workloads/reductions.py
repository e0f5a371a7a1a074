"""Reduction family: sum, norm, softmax, layer_norm (forward and backward)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verify.gpu.workloads._common import Context, Outputs


def sum_fp32(ctx: Context) -> Outputs:
    x = ctx.randn(ctx.generator(), 1 << 22)
    return {"sum": x.sum(), "row_sums": x.view(1024, 4096).sum(dim=0)}


def norm_fp32(ctx: Context) -> Outputs:
    x = ctx.randn(ctx.generator(), 1 << 22)
    return {"norm": torch.linalg.vector_norm(x)}


def softmax_fp32(ctx: Context) -> Outputs:
    x = ctx.randn(ctx.generator(), 256, 4096)
    return {"softmax": torch.softmax(x, dim=-1)}


def layernorm_fp32(ctx: Context) -> Outputs:
    g = ctx.generator()
    x = ctx.randn(g, 256, 1024, grad=True)
    w = ctx.randn(g, 1024, grad=True)
    b = ctx.randn(g, 1024, grad=True)
    y = F.layer_norm(x, (1024,), w, b)
    dx, dw, db = torch.autograd.grad(y, (x, w, b), ctx.randn(g, 256, 1024))
    return {"y": y, "grad_input": dx, "grad_weight": dw, "grad_bias": db}


WORKLOADS = {f.__name__: f for f in (sum_fp32, norm_fp32, softmax_fp32, layernorm_fp32)}

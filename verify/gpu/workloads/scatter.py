"""Scatter family: index_add_, scatter_add_, embedding backward, all with colliding indices."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verify.gpu.workloads._common import Context, Outputs


def index_add(ctx: Context) -> Outputs:
    g = ctx.generator()
    src = ctx.randn(g, 65536, 64)
    index = ctx.randint(g, 512, 65536)
    out = torch.zeros(512, 64, device=ctx.device).index_add_(0, index, src)
    return {"out": out}


def scatter_add(ctx: Context) -> Outputs:
    g = ctx.generator()
    src = ctx.randn(g, 1 << 20)
    index = ctx.randint(g, 1024, 1 << 20)
    out = torch.zeros(1024, device=ctx.device).scatter_add_(0, index, src)
    return {"out": out}


def embedding_bwd(ctx: Context) -> Outputs:
    g = ctx.generator()
    weight = ctx.randn(g, 1000, 64, grad=True)
    index = ctx.randint(g, 1000, 32, 512)
    y = F.embedding(index, weight)
    (dw,) = torch.autograd.grad(y, (weight,), ctx.randn(g, 32, 512, 64))
    return {"grad_weight": dw}


WORKLOADS = {f.__name__: f for f in (index_add, scatter_add, embedding_bwd)}

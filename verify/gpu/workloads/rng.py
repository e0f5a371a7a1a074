"""RNG family: the device's own generator, seeded (inputs elsewhere come from the CPU)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from verify.gpu.workloads._common import Context, Outputs


def randn(ctx: Context) -> Outputs:
    return {"x": torch.randn(1 << 20, generator=ctx.device_generator(), device=ctx.device)}


def dropout(ctx: Context) -> Outputs:
    x = ctx.randn(ctx.generator(), 1 << 20, grad=True)
    torch.manual_seed(ctx.seed)  # dropout takes no generator: seed the default ones
    y = F.dropout(x, p=0.5, training=True)
    (dx,) = torch.autograd.grad(y, (x,), torch.ones_like(y))
    return {"y": y, "grad_input": dx}


WORKLOADS = {f.__name__: f for f in (randn, dropout)}

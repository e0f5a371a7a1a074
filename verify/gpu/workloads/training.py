"""Training family: three AdamW steps of a tiny CNN and of a TransformerEncoderLayer.

Weights are initialised on the CPU under a fixed seed, then moved; the final parameters are the
outputs. No AdaptiveAvgPool2d (deterministic mode refuses its CUDA backward) and no dropout
(the rng family covers it).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from verify.gpu.workloads._common import Context, Outputs

STEPS = 3


def _adamw(params: Any) -> torch.optim.Optimizer:
    """AdamW's single-tensor loop: ``foreach=False`` where the option exists (torch 1.12),
    the only loop before it."""
    if "foreach" in inspect.signature(torch.optim.AdamW).parameters:
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=False)
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


def _train(ctx: Context, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Outputs:
    opt = _adamw(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    params = {f"param.{name}": p.detach() for name, p in model.named_parameters()}
    return {"losses": torch.stack(losses), **params}


def _init(ctx: Context, build: type[nn.Module] | object) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(ctx.seed)
        model = build()  # type: ignore[operator]
    return model.to(ctx.device)


class _CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AvgPool2d(8),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).flatten(1))


class _Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(256, 64)
        self.layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0,
                                                batch_first=True)
        self.head = nn.Linear(64, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layer(self.embed(x)))


def train_cnn_adamw(ctx: Context) -> Outputs:
    g = ctx.generator()
    x = ctx.randn(g, 16, 3, 16, 16)
    y = ctx.randint(g, 10, 16)
    return _train(ctx, _init(ctx, _CNN), x, y)


def train_transformer_adamw(ctx: Context) -> Outputs:
    g = ctx.generator()
    tokens = ctx.randint(g, 256, 8, 64)
    return _train(ctx, _init(ctx, _Transformer), tokens[:, :-1], tokens[:, 1:])


WORKLOADS = {f.__name__: f for f in (train_cnn_adamw, train_transformer_adamw)}

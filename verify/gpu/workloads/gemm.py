"""GEMM family: square matmuls per dtype, split-K-prone long-K shapes, and bmm."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from verify.gpu.workloads._common import Context, Outputs


@contextlib.contextmanager
def _tf32() -> Iterator[None]:
    """TF32 for this GEMM only; CPU kernels ignore it, so on CPU the bits equal gemm_fp32.
    Before torch 1.12 (no float32 matmul precision) through its one switch, which "high"
    sets."""
    if not hasattr(torch, "set_float32_matmul_precision"):
        matmul = torch.backends.cuda.matmul
        was = matmul.allow_tf32
        matmul.allow_tf32 = True
        try:
            yield
        finally:
            matmul.allow_tf32 = was
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _square(ctx: Context, dtype: torch.dtype) -> Outputs:
    g = ctx.generator("gemm_square")  # one input set for every dtype: fp32 and tf32 comparable
    a = ctx.randn(g, 512, 512, dtype=dtype)
    b = ctx.randn(g, 512, 512, dtype=dtype)
    return {"c": a @ b}


def _splitk(ctx: Context, dtype: torch.dtype) -> Outputs:
    g = ctx.generator("gemm_splitk")
    a = ctx.randn(g, 64, 65536, dtype=dtype)
    b = ctx.randn(g, 65536, 64, dtype=dtype)
    return {"c": a @ b}


def gemm_fp32(ctx: Context) -> Outputs:
    return _square(ctx, torch.float32)


def gemm_tf32(ctx: Context) -> Outputs:
    with _tf32():
        return _square(ctx, torch.float32)


def gemm_fp16(ctx: Context) -> Outputs:
    return _square(ctx, torch.float16)


def gemm_bf16(ctx: Context) -> Outputs:
    return _square(ctx, torch.bfloat16)


def gemm_splitk_fp32(ctx: Context) -> Outputs:
    return _splitk(ctx, torch.float32)


def gemm_splitk_fp16(ctx: Context) -> Outputs:
    return _splitk(ctx, torch.float16)


def bmm_fp32(ctx: Context) -> Outputs:
    g = ctx.generator()
    a = ctx.randn(g, 16, 128, 64)
    b = ctx.randn(g, 16, 64, 128)
    return {"c": torch.bmm(a, b)}


WORKLOADS = {f.__name__: f for f in (gemm_fp32, gemm_tf32, gemm_fp16, gemm_bf16,
                                     gemm_splitk_fp32, gemm_splitk_fp16, bmm_fp32)}

"""What the suite runs, as data: no torch import, so ``compare`` can read it anywhere.

Each entry names its family module (``verify/gpu/workloads/<family>.py`` holds the code) and the
fact groups that can change its bits; ``verify.gpu.compare`` maps groups to recorded facts when it
attributes a difference. ``SUITE_VERSION`` changes whenever a workload's inputs, shapes or
outputs change: attestations from different suite versions are not comparable bit for bit.
"""

from __future__ import annotations

from samebits._compat import dataclass

SUITE_VERSION = 1

# Fact groups (see verify.gpu.compare.GROUPS for the recorded keys each one covers).
#   build        torch build, CUDA runtime, device type (every workload)
#   isa          CPU vector ISA or GPU model: which kernels exist (every workload)
#   blas         cuBLAS / MKL / oneDNN versions and GEMM precision settings
#   dnn          cuDNN / oneDNN versions and convolution settings
#   parallel     how work is split: CPU threads, SM count
#   determinism  the determinism knobs (atomics, benchmark mode, cuBLAS workspace)
#   rng          generator placement (CUDA: SM count)
BUILD = ("build", "isa", "determinism")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadSpec:
    name: str
    family: str
    summary: str
    sensitive_to: tuple[str, ...]


def _w(name: str, family: str, summary: str, *groups: str) -> WorkloadSpec:
    return WorkloadSpec(name=name, family=family, summary=summary, sensitive_to=BUILD + groups)


CATALOG: tuple[WorkloadSpec, ...] = (
    _w("gemm_fp32", "gemm", "512x512x512 matmul, fp32", "blas", "parallel"),
    _w("gemm_tf32", "gemm", "512x512x512 matmul, fp32 inputs with TF32 allowed (CUDA only "
       "changes)", "blas", "parallel"),
    _w("gemm_fp16", "gemm", "512x512x512 matmul, fp16", "blas", "parallel"),
    _w("gemm_bf16", "gemm", "512x512x512 matmul, bf16", "blas", "parallel"),
    _w("gemm_splitk_fp32", "gemm", "64x65536x64 matmul (long K: split-K prone), fp32",
       "blas", "parallel"),
    _w("gemm_splitk_fp16", "gemm", "64x65536x64 matmul (long K: split-K prone), fp16",
       "blas", "parallel"),
    _w("bmm_fp32", "gemm", "16 x (128x64 @ 64x128) batched matmul, fp32", "blas", "parallel"),
    _w("conv2d_fp32", "conv", "3x3 conv2d forward, input and weight gradients, fp32",
       "dnn", "blas", "parallel"),
    _w("conv2d_fp16", "conv", "3x3 conv2d forward, input and weight gradients, fp16",
       "dnn", "blas", "parallel"),
    _w("adaptive_avgpool2d_bwd", "conv", "AdaptiveAvgPool2d backward (deterministic mode "
       "refuses it on CUDA)", "parallel"),
    _w("sdpa_math", "attention", "scaled_dot_product_attention forward+backward, math backend",
       "blas", "parallel"),
    _w("sdpa_flash", "attention", "scaled_dot_product_attention forward+backward, flash "
       "backend", "parallel"),
    _w("sdpa_efficient", "attention", "scaled_dot_product_attention forward+backward, "
       "memory-efficient backend (CUDA only)", "parallel"),
    _w("sdpa_cudnn", "attention", "scaled_dot_product_attention forward+backward, cuDNN "
       "backend (CUDA only)", "dnn", "parallel"),
    _w("sum_fp32", "reductions", "sum of 2^22 fp32 values", "parallel"),
    _w("norm_fp32", "reductions", "2-norm of 2^22 fp32 values", "parallel"),
    _w("softmax_fp32", "reductions", "softmax over rows of 256x4096 fp32", "parallel"),
    _w("layernorm_fp32", "reductions", "layer_norm forward+backward, 256x1024 fp32",
       "parallel"),
    _w("index_add", "scatter", "index_add_ of 65536 rows into 512 (many collisions)",
       "parallel"),
    _w("scatter_add", "scatter", "scatter_add_ of 2^20 values into 1024 slots", "parallel"),
    _w("embedding_bwd", "scatter", "embedding backward with repeated indices", "parallel"),
    _w("randn", "rng", "torch.randn of 2^20 values from a seeded device generator", "rng"),
    _w("dropout", "rng", "dropout(p=0.5) forward+backward with a seeded device generator",
       "rng"),
    _w("train_cnn_adamw", "training", "3 AdamW steps of a tiny CNN", "blas", "dnn", "parallel"),
    _w("train_transformer_adamw", "training", "3 AdamW steps of a TransformerEncoderLayer",
       "blas", "parallel", "rng"),
)

BY_NAME = {w.name: w for w in CATALOG}
NAMES = tuple(w.name for w in CATALOG)
FAMILIES = tuple(dict.fromkeys(w.family for w in CATALOG))

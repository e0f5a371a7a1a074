"""The known-answer canary's workload, run in the environment under test:
``python -m verify.node.canaryrun --device cpu|cuda:N --threads N`` prints one JSON line.

A fixed chain, seeded from a CPU generator (so the inputs are the same bits on every device):
a float32 GEMM, a float32 reduction over its rows (vectorised by ATen: the order of the adds
follows the CPU capability in use), softmax, and a float64 GEMM and reduction chain. Each
output's bytes are hashed in order into one sha256. A few milliseconds on a CPU core.

Standard library, torch and ``samebits.gcpause`` only (like ``verify.gpu.workloads``): it
runs in whatever interpreter the environment has. Everything that can change the digest is
read back and printed with it (``settings``).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import sys
import time
from typing import Any

from samebits.gcpause import exit_now

CANARY_VERSION = 1
SEED = 20261201
N = 192  # the GEMMs' size: big enough to block and vectorise, small enough for a few ms


def workload(torch: Any, device: str) -> list[Any]:
    """The outputs, in order; inputs drawn on the CPU from one seeded generator."""
    gen = torch.Generator().manual_seed(SEED)
    a = torch.randn(N, N, generator=gen, dtype=torch.float32)
    b = torch.randn(N, N, generator=gen, dtype=torch.float32)
    v = torch.randn(N * 64 + 7, generator=gen, dtype=torch.float32)  # an odd length: a tail
    a, b, v = a.to(device), b.to(device), v.to(device)
    c = a @ b
    rows = c.sum(dim=1)
    soft = torch.softmax(c[:16], dim=1)
    total = v.sum()
    d = a.double() @ b.double().t()
    chain = (d @ d).sum(dim=0).cumsum(0)
    return [c, rows, soft, total, d, chain, torch.linalg.vector_norm(d, dim=1)]


def digest(torch: Any, outputs: list[Any]) -> str:
    """sha256 over each output's dtype, shape and raw bytes (native layout, contiguous), read
    with ctypes: torch's ``.numpy()`` needs numpy, which the environment need not have."""
    h = hashlib.sha256()
    for t in outputs:
        t = t.detach().to("cpu").contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()))
    return h.hexdigest()


def settings(torch: Any, threads: int) -> dict[str, Any]:
    """Every setting that can change the digest, as torch reports it after they were set."""
    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    return {"canary_version": CANARY_VERSION, "torch": torch.__version__,
            "torch_git": torch.version.git_version, "cuda_runtime": torch.version.cuda,
            "threads": torch.get_num_threads(), "threads_asked": threads,
            "interop_threads": torch.get_num_interop_threads(),
            "cpu_capability": str(get()) if get else "unknown",
            "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
            "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "float32_matmul_precision": (torch.get_float32_matmul_precision()
                                         if hasattr(torch, "get_float32_matmul_precision")
                                         else f"unavailable (torch {torch.__version__} has "
                                         "no torch.get_float32_matmul_precision)"),
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "mkldnn": torch.backends.mkldnn.is_available(),
            "numeric_env": {k: v for k, v in sorted(os.environ.items())
                            if k.startswith(("OMP_", "MKL_", "KMP_", "DNNL_", "ONEDNN_",
                                             "OPENBLAS_", "NVIDIA_TF32"))}}


def deterministic(torch: Any) -> None:
    """ATen's deterministic algorithms, as ``torch.use_deterministic_algorithms(True)`` sets
    them. That function also sets ``torch._inductor.config.deterministic``, and since torch 2.x
    importing that config imports inductor and dynamo: 0.8 s of a 2-second prolog on torch
    2.13, for a flag only compiled code reads. The canary compiles nothing (``workload`` is
    eager ATen ops), so it sets ATen's flag alone, through the same call torch makes; what
    torch reports afterwards (``are_deterministic_algorithms_enabled``) is in its settings."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:  # pragma: no cover - a torch without it: the public call
        torch.use_deterministic_algorithms(True)
    else:
        setter(True)


def run(device: str, threads: int) -> dict[str, Any]:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch

    torch.set_num_threads(threads)
    deterministic(torch)
    if hasattr(torch, "set_float32_matmul_precision"):  # torch 1.12; before, the switch below
        torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    start = time.perf_counter()
    out = digest(torch, workload(torch, device))
    doc: dict[str, Any] = {"device": device, "digest": out,
                           "seconds": round(time.perf_counter() - start, 4),
                           "settings": settings(torch, threads)}
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        p = torch.cuda.get_device_properties(torch.device(device))
        doc.update(gpu_name=p.name, sm_count=p.multi_processor_count,
                   uuid=str(getattr(p, "uuid", "")))
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m verify.node.canaryrun")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    try:
        doc = run(args.device, args.threads)
    except ImportError as exc:
        doc = {"device": args.device, "error": f"torch cannot be imported: {exc}"}
    except RuntimeError as exc:  # no such device, CUDA not usable
        doc = {"device": args.device, "error": str(exc).splitlines()[0][:300]}
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    exit_now(main())  # no teardown after the answer (samebits.gcpause)

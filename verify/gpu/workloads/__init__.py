"""Deterministic workloads: run them, hash every output, optionally save the raw bytes.

    from verify.gpu.facts import detect
    from verify.gpu.workloads import run_suite
    from verify.gpu.workloads.settings import DETERMINISTIC

    facts = detect()
    suite = run_suite(facts, device="cuda:0", settings=DETERMINISTIC, only=["gemm_fp32"])
    suite.digests()          # {"gemm_fp32": "<sha256 hex>"}
    suite.settings           # torch's readback of the settings, as attested

``run_suite`` applies ``settings`` to this process (torch's state is global), then runs each
workload of ``catalog.CATALOG`` (or those named in ``only``) in catalog order. Every workload
draws its inputs from a CPU generator seeded by its name, so subsets and order change nothing.
Each output is hashed as sha256 of its raw bytes (native layout, contiguous, little-endian);
a workload's digest is sha256 of its outputs' bytes concatenated in the order it returns them.

A workload ends in one of four states: ``ok`` (digests), ``unavailable`` (no kernel here, e.g.
cuDNN attention on a CPU, fp16 GEMMs on the CPU of torch 2.0, or an API this torch lacks:
``verify.gpu.facts.torchapi``), ``refused`` (deterministic mode has no deterministic kernel, e.g.
AdaptiveAvgPool2d backward on CUDA, or PyTorch turns a backend down as nondeterministic, e.g.
cuDNN attention: the detail quotes PyTorch's reason and names the profile that runs it) or
``error`` (anything else; the message is kept).

With ``save_outputs=DIR`` the raw bytes go to ``DIR/<workload>/<output>.bin`` and an index to
``DIR/outputs.json`` (format 1) that ``verify.gpu.errorstats.output_errors`` reads.

The family modules (gemm, conv, attention, reductions, scatter, rng, training) import torch;
``catalog`` does not.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal

from samebits._compat import dataclass, removeprefix
from samebits._io import atomic_write, canonical_json
from samebits.errors import UsageError
from verify.gpu.facts import Facts
from verify.gpu.workloads.catalog import BY_NAME, CATALOG, NAMES, SUITE_VERSION
from verify.gpu.workloads.settings import DETERMINISTIC, Settings

Status = Literal["ok", "unavailable", "refused", "error"]
OUTPUTS_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputDigest:
    name: str
    dtype: str
    shape: tuple[int, ...]
    sha256: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadResult:
    name: str
    status: Status
    sha256: str | None = None
    outputs: tuple[OutputDigest, ...] = ()
    detail: str = ""
    seconds: float = field(default=0.0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The attested record: no timings, nothing that varies between equal runs."""
        out: dict[str, Any] = {"status": self.status}
        if self.sha256 is not None:
            out["sha256"] = self.sha256
            out["outputs"] = [{"name": o.name, "dtype": o.dtype, "shape": list(o.shape),
                               "sha256": o.sha256} for o in self.outputs]
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    device: str
    settings: Mapping[str, Any]
    results: Mapping[str, WorkloadResult]
    version: int = SUITE_VERSION

    def digests(self) -> dict[str, str]:
        """name -> sha256 for every workload that ran."""
        return {n: r.sha256 for n, r in self.results.items() if r.sha256 is not None}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.results.values():
            out[r.status] = out.get(r.status, 0) + 1
        return out


def select(only: Iterable[str] | None) -> tuple[str, ...]:
    """Workload names in catalog order; unknown names are a UsageError listing the known ones."""
    if only is None:
        return NAMES
    wanted = [n.strip() for item in only for n in item.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise UsageError(f"unknown workload {', '.join(repr(n) for n in unknown)}",
                         hint=f"known workloads: {', '.join(NAMES)}")
    return tuple(n for n in NAMES if n in wanted)


def run_suite(facts: Facts, *, device: str, settings: Settings = DETERMINISTIC,
              only: Iterable[str] | None = None, save_outputs: Path | None = None,
              progress: Callable[[str], None] | None = None) -> Suite:
    """Apply ``settings``, run the workloads on ``device`` ("cpu", "cuda:0"), hash the outputs."""
    import torch

    from verify.gpu.workloads import settings as settings_mod
    from verify.gpu.workloads._common import Context, seed_for

    names = select(only)
    if device.startswith("cuda") and not facts.torch.cuda_available:
        raise UsageError(f"device {device}: torch {facts.torch.version} cannot use CUDA here",
                         hint="pass --device cpu")
    settings_mod.apply(settings)
    dev = torch.device(device)
    results: dict[str, WorkloadResult] = {}
    saved: dict[str, Any] = {}
    for name in names:
        spec = BY_NAME[name]
        fn = getattr(importlib.import_module(f"verify.gpu.workloads.{spec.family}"), name)
        ctx = Context(device=dev, seed=seed_for(name))
        start = time.perf_counter()
        result, tensors = _run_one(name, fn, ctx)
        results[name] = _timed(result, time.perf_counter() - start)
        if save_outputs is not None and tensors:
            saved[name] = _save(Path(save_outputs), result, tensors)
        if progress is not None:
            progress(name)
    if save_outputs is not None:
        index = {"format": OUTPUTS_FORMAT, "device": device, "suite_version": SUITE_VERSION,
                 "workloads": saved}
        atomic_write(Path(save_outputs) / "outputs.json", canonical_json(index))
    return Suite(device=device, settings=settings_mod.recorded(settings), results=results)


def _timed(r: WorkloadResult, seconds: float) -> WorkloadResult:
    return WorkloadResult(name=r.name, status=r.status, sha256=r.sha256, outputs=r.outputs,
                          detail=r.detail, seconds=seconds)


def _run_one(name: str, fn: Any, ctx: Any) -> tuple[WorkloadResult, dict[str, Any]]:
    import torch

    from verify.gpu.workloads._common import Refused, Unavailable

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # backend-selection chatter, not results
            tensors = fn(ctx)
            if ctx.cuda:
                torch.cuda.synchronize(ctx.device)
    except Unavailable as exc:
        return WorkloadResult(name=name, status="unavailable", detail=str(exc)), {}
    except Refused as exc:
        return WorkloadResult(name=name, status="refused", detail=str(exc)[:300]), {}
    except Exception as exc:  # recorded, not raised: one broken kernel must not hide the rest
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        refused = isinstance(exc, RuntimeError) and (
            "deterministic" in msg or "CUBLAS_WORKSPACE_CONFIG" in msg)
        status: Status = ("refused" if refused else
                          "unavailable" if no_kernel_for_dtype(exc, msg) else "error")
        return WorkloadResult(name=name, status=status, detail=msg[:300]), {}
    raw = {k: tensor_bytes(t) for k, t in tensors.items()}
    outputs = tuple(OutputDigest(name=k, dtype=removeprefix(str(t.dtype), "torch."),
                                 shape=tuple(t.shape), sha256=hashlib.sha256(raw[k]).hexdigest())
                    for k, t in tensors.items())
    whole = hashlib.sha256(b"".join(raw.values())).hexdigest()
    return WorkloadResult(name=name, status="ok", sha256=whole, outputs=outputs), raw


# ATen's words when an operator has no kernel for a dtype or a device: torch 2.0 on a CPU,
# '"addmm_impl_cpu_" not implemented for 'Half'' (torch 2.2.2 has fp16 GEMMs and convolutions);
# "Could not run 'aten::...' with arguments from the 'CPU' backend" (NotImplementedError).
_NO_KERNEL = (re.compile(r"\" not implemented for '[A-Za-z0-9]+'"),
              re.compile(r"^Could not run '[^']+' with arguments from the '[^']+' backend"))


def no_kernel_for_dtype(exc: Exception, msg: str) -> bool:
    """Whether ``exc`` says this torch has no kernel for the op here: ``unavailable``."""
    return isinstance(exc, RuntimeError) and any(  # NotImplementedError is one
        p.search(msg) for p in _NO_KERNEL)


def tensor_bytes(t: Any) -> bytes:
    """The raw bytes of ``t``: detached, on the CPU, contiguous."""
    t = t.detach().to("cpu").contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def _save(root: Path, result: WorkloadResult, raw: Mapping[str, bytes]) -> dict[str, Any]:
    index = {}
    for o in result.outputs:
        rel = f"{result.name}/{o.name}.bin"
        atomic_write(root / rel, raw[o.name])
        index[o.name] = {"file": rel, "dtype": o.dtype, "shape": list(o.shape),
                         "sha256": o.sha256}
    return index


__all__ = ["CATALOG", "NAMES", "OutputDigest", "Suite", "WorkloadResult", "run_suite", "select",
           "tensor_bytes"]

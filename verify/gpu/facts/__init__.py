"""The one machine probe: ``detect()`` returns frozen ``Facts``; everything else takes them in.

What is recorded (``Facts.to_dict()``, format ``FACTS_FORMAT``):

    torch      version, git commit, build config, CUDA runtime, cuDNN, NCCL, cuBLAS, arch list,
               CPU capability (the ISA ATen dispatches to), whether CUDA is usable
    driver     driver version and the CUDA version it provides (NVML, else nvidia-smi, else
               libcuda), or None on a machine without an NVIDIA driver
    gpus       name, UUID, compute capability, SM count, memory, ECC and MIG mode, and the
               index torch gives it (None when torch cannot see it)
    cpu        architecture, vendor, model, flags
    threads    torch's intra-op and inter-op threads, CPUs this process may run on
    glibc, python
    env        every environment variable that can change numerics (``is_numeric_env``)

Modules, one source each: ``model`` (the dataclasses, pure), ``cpu`` (/proc/cpuinfo, threads,
glibc), ``driver`` (NVML, nvidia-smi, libcuda), ``torchinfo`` (torch's build and devices).
Only ``detect`` touches the machine. Like ``verify.gpu.workloads`` (whose worker calls it), this
package imports only the standard library, torch and (optionally) nvidia-ml-py, plus samebits'
stdlib-only ``errors``, ``_compat`` and ``childenv`` (the environment of the nvidia-smi it may
run), and runs on Python 3.8 or later (``verify.gpu.launch.IN_ENV``).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from typing import Any

from verify.gpu.facts.cpu import cpu_facts, glibc_version, parse_cpuinfo, thread_facts
from verify.gpu.facts.driver import cuda_int, parse_smi_cuda, parse_smi_query, probe_driver_and_gpus
from verify.gpu.facts.model import (
    FACTS_FORMAT,
    ISA_FLAGS,
    NUMERIC_ENV_NAMES,
    NUMERIC_ENV_PREFIXES,
    CpuFacts,
    DriverFacts,
    Facts,
    GpuFacts,
    ThreadFacts,
    TorchFacts,
    is_numeric_env,
)
from verify.gpu.facts.torchinfo import cudnn_str, merge_gpus, torch_facts, torch_gpus

__all__ = ["FACTS_FORMAT", "ISA_FLAGS", "NUMERIC_ENV_NAMES", "NUMERIC_ENV_PREFIXES", "CpuFacts",
           "DriverFacts", "Facts", "GpuFacts", "ThreadFacts", "TorchFacts", "cpu_facts",
           "cuda_int", "cudnn_str", "detect", "is_numeric_env", "parse_cpuinfo",
           "parse_smi_cuda", "parse_smi_query"]


def detect(*, environ: Mapping[str, str] | None = None, nvml: Any = None) -> Facts:
    """Probe this machine once. Initialises CUDA when torch can use it; creates no cuBLAS handle.
    ``nvml``: the nvidia-ml-py module to ask (default: ``import pynvml``)."""
    import torch

    environ = os.environ if environ is None else environ
    cuda_ok = bool(torch.version.cuda) and torch.cuda.is_available()
    driver, gpus = probe_driver_and_gpus(nvml)
    return Facts(
        torch=torch_facts(torch, cuda_ok=cuda_ok),
        driver=driver,
        gpus=merge_gpus(gpus, torch_gpus(torch) if cuda_ok else []),
        cpu=cpu_facts(),
        threads=thread_facts(torch),
        glibc=glibc_version(),
        python=f"{platform.python_implementation()} {platform.python_version()}",
        env=tuple(sorted((k, v) for k, v in environ.items() if is_numeric_env(k))),
    )

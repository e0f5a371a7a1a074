"""verify.gpu.facts: the pure parsers, the frozen record's round trip, and one real probe."""

from __future__ import annotations

import pytest

from samebits.errors import InputError
from tests.fixtures.samples import sample_facts
from verify.gpu.facts import (
    Facts,
    cuda_int,
    cudnn_str,
    detect,
    is_numeric_env,
    parse_cpuinfo,
    parse_smi_cuda,
    parse_smi_query,
)

X86_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx2 avx512f amx_tile
processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx2 avx512f amx_tile
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd sve sve2 bf16
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""


@pytest.mark.parametrize(("text", "arch", "expected"), [
    (X86_CPUINFO, "x86_64", ("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480+",
                             ("amx_tile", "avx2", "avx512f", "fpu", "sse"))),
    (ARM_CPUINFO, "aarch64", ("0x41", "0xd4f", ("asimd", "bf16", "fp", "sve", "sve2"))),
    ("", "riscv64", ("unknown", "riscv64", ())),
])
def test_parse_cpuinfo(text: str, arch: str, expected: tuple) -> None:
    """Vendor, model and sorted flags come from the first processor on x86 and on ARM."""
    assert parse_cpuinfo(text, arch=arch) == expected


SMI_QUERY = ("0, NVIDIA H200, GPU-0a1b2c3d, 9.0, 143771, Enabled, Disabled, 580.65.06\n"
             "1, NVIDIA H200, GPU-0a1b2c3e, 9.0, 143771, [N/A], [N/A], 580.65.06\n")


def test_parse_smi_query() -> None:
    """nvidia-smi's CSV becomes one row per GPU, MiB become bytes and [N/A] becomes None."""
    rows = parse_smi_query(SMI_QUERY)
    assert rows[0] == {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-0a1b2c3d",
                       "compute_capability": "9.0", "memory_bytes": 143771 * 1024 * 1024,
                       "ecc": "enabled", "mig": "disabled", "driver": "580.65.06"}
    assert (rows[1]["ecc"], rows[1]["mig"], rows[1]["index"]) == (None, None, 1)


@pytest.mark.parametrize(("text", "expected"), [
    ("| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |", "12.2"),
    ("| NVIDIA-SMI 580.65.06    Driver Version: 580.65.06    CUDA Version: 13.0  |", "13.0"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", None),
])
def test_parse_smi_cuda(text: str, expected: str | None) -> None:
    """The driver's CUDA version is read from nvidia-smi's banner, or None without one."""
    assert parse_smi_cuda(text) == expected


@pytest.mark.parametrize(("fn", "value", "expected"), [
    (cuda_int, 12040, "12.4"), (cuda_int, 13000, "13.0"), (cuda_int, 12090, "12.9"),
    (cudnn_str, 91900, "9.19.0"), (cudnn_str, 90100, "9.1.0"), (cudnn_str, 8902, "8.9.2"),
])
def test_version_encodings(fn, value: int, expected: str) -> None:
    """NVML's and cuDNN's integer versions decode to dotted strings."""
    assert fn(value) == expected


@pytest.mark.parametrize(("name", "recorded"), [
    ("OMP_NUM_THREADS", True), ("CUBLAS_WORKSPACE_CONFIG", True), ("NVIDIA_TF32_OVERRIDE", True),
    ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", True), ("ATEN_CPU_CAPABILITY", True),
    ("PYTHONHASHSEED", True), ("MKL_CBWR", True), ("HOME", False), ("PATH", False),
    ("GITHUB_TOKEN", False),
])
def test_numeric_env(name: str, recorded: bool) -> None:
    """Only variables that can change numerics are recorded."""
    assert is_numeric_env(name) is recorded


@pytest.mark.parametrize("gpu", [False, True])
def test_round_trip(gpu: bool) -> None:
    """to_dict then from_dict gives back equal facts."""
    facts = sample_facts(gpu=gpu, env=(("OMP_NUM_THREADS", "1"),))
    assert Facts.from_dict(facts.to_dict()) == facts


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(format=2), "facts: format = 2: this samebits reads facts format 1"),
    (lambda d: d["cpu"].update(cores=4), "facts: malformed facts: ValueError(\"unknown keys "
                                         "['cores'] in CpuFacts\")"),
    (lambda d: d.pop("threads"), "facts: malformed facts: KeyError('threads')"),
])
def test_from_dict_rejects(mutate, message: str) -> None:
    """Unknown formats, unknown keys and missing sections are errors that say which."""
    doc = sample_facts().to_dict()
    mutate(doc)
    with pytest.raises(InputError) as err:
        Facts.from_dict(doc)
    assert err.value.message == message


@pytest.mark.parametrize(("flags", "capability", "isa"), [
    (("avx2", "avx512f"), "AVX512", "AVX512"),
    (("avx512_bf16", "avx512_vnni", "avx512f"), "AVX512", "AVX512+bf16+vnni"),
    (("amx_tile", "avx512_bf16", "avx512_fp16"), "AVX512", "AVX512+bf16+fp16+amx"),
    (("avx2",), "AVX2", "AVX2"),
])
def test_cpu_isa(flags: tuple[str, ...], capability: str, isa: str) -> None:
    """The ISA class is ATen's capability plus the flags that switch GEMM kernels."""
    facts = sample_facts(cpu_flags=flags, torch_cpu_capability=capability)
    assert facts.cpu_isa == isa


def test_detect_this_machine() -> None:
    """The real probe runs here, sees torch, and keeps only numerics variables."""
    import torch

    facts = detect(environ={"OMP_NUM_THREADS": "2", "HOME": "/root", "CUDA_VISIBLE_DEVICES": ""})
    assert facts.torch.version == torch.__version__
    assert facts.torch.cuda_available is torch.cuda.is_available()
    assert facts.env == (("CUDA_VISIBLE_DEVICES", ""), ("OMP_NUM_THREADS", "2"))
    assert facts.threads.intra_op == torch.get_num_threads()
    assert Facts.from_dict(facts.to_dict()) == facts

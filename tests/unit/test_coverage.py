"""verify.kernels.coverage and verify.kernels.cudastack: the per-GPU rules, the driver floor, the
CUDA stack read from files. The rules on NVIDIA's real libraries:
tests/integration/test_coverage_network.py."""

from __future__ import annotations

import pytest

from tests.fixtures.samples import CUFILE, TORCH, cov, lib
from verify.kernels.coverage import (
    Coverage,
    Target,
    decide,
    decide_library,
    generation_decisions,
)
from verify.kernels.cudastack import CudaStack, essence, stack_from
from verify.kernels.driverfloor import driver_check
from verify.kernels.report import runs_on_line

SPARSE = lib("libcusparseLt.so.0", ["sm_80", "sm_90"])

@pytest.mark.parametrize(("targets", "cc", "status", "via"), [
    (["sm_80", "sm_86"], (8, 9), "native", ("sm_86",)),       # sm_86 SASS on an Ada card
    (["sm_80"], (8, 6), "native", ("sm_80",)),
    (["sm_90"], (10, 0), "none", ()),                          # no cross-major SASS
    (["sm_90a"], (9, 0), "native", ("sm_90a",)),
    (["sm_90a"], (9, 1), "none", ()),                          # arch-specific: exactly 9.0
    (["sm_100"], (10, 3), "native", ("sm_100",)),              # B300 runs sm_100
    (["sm_103f"], (10, 0), "none", ()),                        # family code needs 10.3+
    (["sm_100f"], (10, 3), "native", ("sm_100f",)),
    (["sm_120"], (12, 1), "native", ("sm_120",)),              # GB10 runs sm_120
    (["sm_75", "compute_90/9.0"], (10, 0), "jit", ()),         # PTX JITs forward
    (["compute_90a/9.0"], (10, 0), "none", ()),                # arch-specific PTX does not
    (["compute_100f/9.0"], (12, 0), "none", ()),               # family PTX stays in 10.x
    (["compute_100f/9.0"], (10, 3), "jit", ()),
    (["compute_90/9.0"], (8, 0), "none", ()),                  # PTX never JITs backwards
    (["kind8_75"], (7, 5), "none", ()),                        # LTO-IR is not loadable
])
def test_one_fatbin_on_one_gpu(targets: list[str], cc: tuple[int, int], status: str,
                               via: tuple[str, ...]) -> None:
    """SASS runs on later minors of its major, arch-specific code on exactly its X.Y,
    family-specific code within its family; PTX JIT-compiles for any later X.Y."""
    d = decide_library(lib("libx.so", targets), cc)
    assert (d.status, d.sass) == (status, via)


def test_uncovered_fatbins_are_counted_not_failed() -> None:
    """cuBLASLt-like: most fatbins run on an A100, those built for sm_90a only are counted."""
    d = decide_library(lib("libcublasLt.so.13", ["sm_80", "sm_90"], ["sm_90a"], ["sm_90a"],
                           ["compute_75/9.0"]), (8, 0))
    assert (d.status, d.uncovered, d.uncovered_targets, d.jit_fatbins) == (
        "native", 2, ("sm_90a",), 1)


@pytest.mark.parametrize(("env", "cc", "status", "reason"), [
    (cov(TORCH), "9.0", "native", ""),
    (cov(TORCH), "7.0", "none", "no sm_70 in libtorch_cuda.so"),
    (cov(TORCH, SPARSE), "7.5", "partial",
     "runs, but no sm_75 in libcusparseLt.so.0: those libraries' kernels fail there"),
    (cov(TORCH, CUFILE), "9.0", "jit",
     "libcufile.so.0 only by PTX JIT (the JIT needs PTX ISA 7.1: driver >= 455.23.05)"),
    (cov(SPARSE), "7.5", "none", "no sm_75 in libcusparseLt.so.0"),  # nothing else: none
    (cov(), "9.0", "no-cuda", "no CUDA device code in this environment"),
])
def test_environment_decisions(env: Coverage, cc: str, status: str, reason: str) -> None:
    """The worst library decides; only optional libraries failing is "partial"."""
    d = decide(env, cc)
    assert (d.status, d.reason) == (status, reason)


def test_driver_too_old_for_the_ptx() -> None:
    """A driver that cannot compile the only PTX a library has makes that GPU fail, named."""
    jit_only = lib("libcublas.so.13", ["sm_75", "compute_90/9.0"])
    assert decide(cov(jit_only), "10.0").status == "jit"
    d = decide(cov(jit_only), "10.0", driver="575.51.03")
    assert d.status == "none"
    assert d.reason == ("no sm_100 in libcublas.so.13 that driver 575.51.03 (CUDA 12.9) can use: "
                        "their PTX is newer")


@pytest.mark.parametrize(("runtime", "driver", "status", "message"), [
    ("13.0", None, "unknown", "CUDA 13.0 runtime: driver >= 580.65.06"),
    ("12.6", None, "unknown",
     "CUDA 12.6 runtime: driver >= 560.28.03 (runs from 525.60.13 under minor version "
     "compatibility)"),
    ("13.0", "580.65.06", "ok", "driver 580.65.06 provides CUDA 13.0; the runtime is 13.0"),
    ("12.6", "535.104", "minor-compat",
     "driver 535.104 provides CUDA 12.2; the CUDA 12.6 runtime runs under minor version "
     "compatibility (from 525.60.13): PTX newer than CUDA 12.2 cannot be JIT-compiled and "
     "features that need a newer driver fail"),
    ("13.0", "535.104.05", "too-old",
     "driver 535.104.05 provides CUDA 12.2; the CUDA 13.0 runtime needs >= 580.65.06"),
    ("12.6", "470.57.02", "too-old",
     "driver 470.57.02 provides CUDA 11.4; the CUDA 12.6 runtime needs >= 525.60.13"),
    (None, "535.104", "ok", "no CUDA runtime in the environment"),
])
def test_driver_floor(runtime: str | None, driver: str | None, status: str,
                      message: str) -> None:
    """The runtime's own driver, minor version compatibility from its major's oldest driver,
    and too old below that."""
    got = driver_check(CudaStack(cuda_runtime=runtime), driver)
    assert (got.status, got.message) == (status, message)


def test_runs_on_line() -> None:
    """The one-line summary the audit and verify env show."""
    line = runs_on_line(generation_decisions(cov(TORCH, CUFILE)))
    assert line == ("Ampere ✔ (sm_80, sm_86) Ada ✔ Hopper ✔ (JIT: libcufile.so.0) Blackwell ✔ "
                    "(sm_100, sm_103, sm_120, sm_121) (JIT: libcufile.so.0) "
                    "Volta ✘ (no sm_70 in libtorch_cuda.so, libcufile.so.0)")


def test_coverage_round_trips() -> None:
    """The cached / committed JSON form gives back equal coverage."""
    c = Coverage(libraries=(TORCH, CUFILE), elf_files=7,
                 stack=CudaStack(cuda_runtime="13.0", cudnn="9.20.0", ptxas=(("bin/ptxas",
                                                                              "12.8"),)))
    assert Coverage.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("token", ["sm_90", "sm_90a", "sm_103f", "compute_121/9.2",
                                   "compute_100f/9.0", "kind8_75"])
def test_target_tokens_round_trip(token: str) -> None:
    """Targets are written and read back as the same tokens."""
    assert Target.parse(token).token == token


# ------------------------------------------------------------------ the CUDA stack

CUDART = b"/* ... */\n#define CUDART_VERSION  13000\n#define OTHER 1\n"
CUDNN = b"#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 20\n#define CUDNN_PATCHLEVEL 0\n"
NCCL = b"#define NCCL_MAJOR 2\n#define NCCL_MINOR 29\n#define NCCL_PATCH 7\n"
VERSION_PY = b"__version__ = '2.13.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"


@pytest.mark.parametrize(("files", "expected"), [
    ({"nvidia/cu13/include/cuda_runtime_api.h": CUDART, "nvidia/cu13/lib/libcudart.so.13": b"",
      "nvidia/cudnn/include/cudnn_version.h": CUDNN, "nvidia/nccl/include/nccl.h": NCCL,
      "torch/version.py": VERSION_PY},
     {"cuda_runtime": "13.0", "cudnn": "9.20.0", "nccl": "2.29.7", "torch": "2.13.0+cu130",
      "torch_cuda": "13.0"}),
    # triton's own copy of the CUDA headers (no libcudart beside it) is not the runtime
    ({"triton/backends/nvidia/include/cuda_runtime_api.h": CUDART,
      "lib/libcudart.so.12.6.77": b"", "lib/libcudnn.so.9.5.1": b"", "lib/libnccl.so.2.26.2": b""},
     {"cuda_runtime": "12.6.77", "cudnn": "9.5.1", "nccl": "2.26.2", "torch": None,
      "torch_cuda": None}),
])
def test_stack_from_files(files: dict[str, bytes], expected: dict[str, str | None]) -> None:
    """Versions come from the headers next to the libraries, else from library file names."""
    s = stack_from(files, lambda p: files[p])
    assert {k: getattr(s, k) for k in expected} == expected


def test_ptxas_release_and_essence() -> None:
    """A runtime compiler's ptxas says its CUDA release; the cache keeps just that line."""
    blob = b"\0junk\0Cuda compilation tools, release 12.8, V12.8.93\0more"
    files = {"triton/backends/nvidia/bin/ptxas": blob}
    assert stack_from(files, lambda p: files[p]).ptxas == (
        ("triton/backends/nvidia/bin/ptxas", "12.8"),)
    assert essence("x/bin/ptxas", blob) == b"Cuda compilation tools, release 12.8"
    assert essence("include/nccl.h", b"/* c */\n" + NCCL) == NCCL.rstrip(b"\n")

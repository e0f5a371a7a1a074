"""verify.gpu.workloads: selection, hashing, statuses, saved outputs, and GPU-only determinism."""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path

import pytest
import torch

from samebits.errors import UsageError
from tests.fixtures.samples import CUDNN_REFUSAL
from verify.gpu.facts import Facts, detect
from verify.gpu.workloads import NAMES, run_suite, select, tensor_bytes
from verify.gpu.workloads.catalog import BY_NAME, CATALOG, FAMILIES
from verify.gpu.workloads.settings import DEFAULT, DETERMINISTIC, readback


@pytest.fixture(scope="module")
def facts() -> Facts:
    return detect()


@pytest.fixture(autouse=True)
def _restore_torch_state(monkeypatch: pytest.MonkeyPatch):
    """run_suite sets torch's global settings and CUBLAS_WORKSPACE_CONFIG; restore them."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)  # restored on teardown
    cudnn = torch.backends.cudnn
    before = (torch.are_deterministic_algorithms_enabled(), torch.get_float32_matmul_precision(),
              cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0])
    torch.set_float32_matmul_precision(before[1])
    cudnn.allow_tf32, cudnn.deterministic, cudnn.benchmark = before[2:]


@pytest.mark.parametrize(("only", "expected"), [
    (None, NAMES),
    (["sum_fp32,gemm_fp32"], ("gemm_fp32", "sum_fp32")),
    (["randn", " dropout "], ("randn", "dropout")),
])
def test_select(only, expected: tuple[str, ...]) -> None:
    """--only takes comma lists or repeats and keeps catalog order."""
    assert select(only) == expected


def test_select_unknown() -> None:
    """An unknown workload name is a usage error that lists the known ones."""
    with pytest.raises(UsageError, match="unknown workload 'gemm_fp64'") as err:
        select(["gemm_fp32,gemm_fp64"])
    assert "gemm_fp32" in (err.value.hint or "")


@pytest.mark.parametrize("family", FAMILIES)
def test_catalog_matches_code(family: str) -> None:
    """Every catalog entry has a function in its family module, and nothing else does."""
    module = importlib.import_module(f"verify.gpu.workloads.{family}")
    assert set(module.WORKLOADS) == {w.name for w in CATALOG if w.family == family}


@pytest.mark.parametrize(("tensor", "raw"), [
    (torch.tensor([1.0, -2.0], dtype=torch.float32), b"\x00\x00\x80?\x00\x00\x00\xc0"),
    (torch.tensor([1.0], dtype=torch.bfloat16), b"\x80?"),
    (torch.tensor([[1, 2], [3, 4]], dtype=torch.int16).t(), b"\x01\x00\x03\x00\x02\x00\x04\x00"),
    (torch.tensor([True, False]), b"\x01\x00"),
    (torch.zeros(0), b""),
])
def test_tensor_bytes(tensor: torch.Tensor, raw: bytes) -> None:
    """Raw bytes are the contiguous little-endian values, whatever the dtype or strides."""
    assert tensor_bytes(tensor) == raw


@pytest.mark.parametrize(("name", "status", "detail"), [
    ("gemm_fp32", "ok", ""),
    ("sdpa_flash", "ok", ""),
    ("sdpa_efficient", "unavailable", "EFFICIENT_ATTENTION has no CPU kernel"),
    ("sdpa_cudnn", "unavailable", "CUDNN_ATTENTION has no CPU kernel"),
])
def test_cpu_statuses(facts: Facts, name: str, status: str, detail: str) -> None:
    """On the CPU the fused CUDA attention backends are unavailable, not errors."""
    result = run_suite(facts, device="cpu", only=[name]).results[name]
    assert (result.status, result.detail) == (status, detail)


def test_digests_and_outputs(facts: Facts, tmp_path: Path) -> None:
    """A workload's digest hashes its outputs' bytes in order, and saved outputs match them."""
    suite = run_suite(facts, device="cpu", only=["layernorm_fp32", "randn"],
                      save_outputs=tmp_path)
    index = json.loads((tmp_path / "outputs.json").read_text())
    assert index["format"] == 1 and set(index["workloads"]) == {"layernorm_fp32", "randn"}
    for name, result in suite.results.items():
        files = index["workloads"][name]
        data = [(tmp_path / files[o.name]["file"]).read_bytes() for o in result.outputs]
        assert [hashlib.sha256(d).hexdigest() for d in data] == [o.sha256 for o in result.outputs]
        assert hashlib.sha256(b"".join(data)).hexdigest() == result.sha256
    assert [o.name for o in suite.results["layernorm_fp32"].outputs] == [
        "y", "grad_input", "grad_weight", "grad_bias"]


def test_subset_does_not_change_bits(facts: Facts) -> None:
    """Seeds come from names, so a workload's digest is the same alone or after others."""
    alone = run_suite(facts, device="cpu", only=["dropout"]).digests()
    after = run_suite(facts, device="cpu", only=["randn,dropout"]).digests()
    assert alone["dropout"] == after["dropout"]


def test_tf32_is_fp32_on_cpu(facts: Facts) -> None:
    """TF32 has no CPU path: gemm_tf32 gives gemm_fp32's bits here (it shares the inputs)."""
    if facts.torch.cuda_available:
        pytest.skip("on a GPU the two differ by design")
    digests = run_suite(facts, device="cpu", only=["gemm_fp32,gemm_tf32"]).digests()
    assert digests["gemm_tf32"] == digests["gemm_fp32"]


def test_medium_precision_on_cpu(facts: Facts) -> None:
    """Precision "medium" lets oneDNN compute fp32 GEMMs in bf16, on CPUs with bf16 or AMX."""
    if facts.torch.cuda_available:
        pytest.skip("checks the CPU path")
    names = ["gemm_fp32,sum_fp32"]
    highest = run_suite(facts, device="cpu", only=names).digests()
    medium = run_suite(facts, device="cpu", only=names,
                       settings=DETERMINISTIC.with_precision(matmul="medium")).digests()
    has_bf16 = "+bf16" in facts.cpu_isa or "+amx" in facts.cpu_isa
    assert (medium["gemm_fp32"] != highest["gemm_fp32"]) is has_bf16
    assert medium["sum_fp32"] == highest["sum_fp32"]


@pytest.mark.parametrize(("profile", "expected"), [
    (DETERMINISTIC, {"deterministic_algorithms": True, "cudnn_benchmark": False,
                     "cublas_workspace_config": ":4096:8", "float32_matmul_precision": "highest"}),
    (DEFAULT, {"deterministic_algorithms": False, "cudnn_benchmark": True,
               "cublas_workspace_config": None, "float32_matmul_precision": "highest"}),
    (DETERMINISTIC.with_precision(tf32=True),
     {"float32_matmul_precision": "high", "cuda_matmul_allow_tf32": True,
      "cudnn_allow_tf32": True}),
])
def test_settings_are_read_back(facts: Facts, profile, expected: dict) -> None:
    """The attested settings are torch's own readback after the suite applied the profile."""
    suite = run_suite(facts, device="cpu", settings=profile, only=["randn"])
    assert {k: suite.settings[k] for k in expected} == expected
    assert suite.settings["profile"] == profile.profile
    assert {k: v for k, v in readback().items()} == {
        k: v for k, v in suite.settings.items() if k != "profile"}


def test_cuda_device_without_cuda(facts: Facts) -> None:
    """Asking for CUDA where torch cannot use it is a usage error, not a crash."""
    if facts.torch.cuda_available:
        pytest.skip("this machine has CUDA")
    with pytest.raises(UsageError, match="cannot use CUDA here"):
        run_suite(facts, device="cuda:0", only=["randn"])


@pytest.mark.gpu
def test_gpu_deterministic_refusal(facts: Facts) -> None:
    """Deterministic mode refuses AdaptiveAvgPool2d backward on CUDA; default mode runs it."""
    det = run_suite(facts, device="cuda:0", only=["adaptive_avgpool2d_bwd"])
    assert det.results["adaptive_avgpool2d_bwd"].status == "refused"
    loose = run_suite(facts, device="cuda:0", settings=DEFAULT, only=["adaptive_avgpool2d_bwd"])
    assert loose.results["adaptive_avgpool2d_bwd"].status == "ok"


@pytest.mark.gpu
def test_gpu_tf32_changes_fp32_gemm(facts: Facts) -> None:
    """On a GPU TF32 changes an fp32 GEMM's bits: gemm_tf32 differs from gemm_fp32."""
    digests = run_suite(facts, device="cuda:0", only=["gemm_fp32,gemm_tf32"]).digests()
    assert digests["gemm_tf32"] != digests["gemm_fp32"]


@pytest.mark.gpu
def test_gpu_every_workload_runs(facts: Facts) -> None:
    """Under deterministic settings every GPU workload runs or is refused/unavailable by name."""
    suite = run_suite(facts, device="cuda:0")
    errors = {n: r.detail for n, r in suite.results.items() if r.status == "error"}
    assert errors == {}
    assert suite.results["gemm_fp32"].status == "ok"
    assert set(suite.results) == set(BY_NAME)


# ------------------------------------------------- what PyTorch says when it refuses a backend

class _CudaContext:
    """A Context that says it is on CUDA while its tensors stay on the CPU: the attention code
    takes its CUDA branch (fp16 inputs, every backend tried) on a machine without a GPU."""

    def __init__(self, seed: int) -> None:
        from verify.gpu.workloads._common import Context

        self._ctx = Context(device=torch.device("cpu"), seed=seed)
        self.cuda = True
        self.device = self._ctx.device

    def __getattr__(self, name: str):  # generator, randn, ...
        return getattr(self._ctx, name)


def _torch_refusing_cudnn(*args, **kwargs):
    """torch.nn.functional.scaled_dot_product_attention as CUDA torch behaves under
    sdpa_kernel(CUDNN_ATTENTION) with deterministic algorithms: it warns, then gives up."""
    import warnings

    warnings.warn(CUDNN_REFUSAL, UserWarning, stacklevel=2)
    raise RuntimeError("No available kernel. Aborting execution.")


@pytest.mark.parametrize(("deterministic", "status", "detail"), [
    (True, "refused", 'CUDNN_ATTENTION: PyTorch refuses it under use_deterministic_algorithms'
                      '(True): "cuDNN SDPA is not deterministic."; it runs under the default '
                      'profile (--profile default)'),
    (False, "unavailable", "CUDNN_ATTENTION: no kernel for this device, dtype or settings: "
                           "cuDNN SDPA is not deterministic."),
])
def test_cudnn_attention_refusal_is_recorded_with_torchs_reason(
        monkeypatch: pytest.MonkeyPatch, deterministic: bool, status: str, detail: str) -> None:
    """Deterministic mode's refusal of cuDNN attention is "refused" with PyTorch's reason and
    the profile that runs it, not "unavailable"; the SDPA call is faked at torch's boundary
    (the real one needs a GPU: test_gpu_cudnn_attention_refused)."""
    from verify.gpu import workloads
    from verify.gpu.workloads import attention
    from verify.gpu.workloads._common import seed_for

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", _torch_refusing_cudnn)
    torch.use_deterministic_algorithms(deterministic)
    result, _ = workloads._run_one("sdpa_cudnn", attention.sdpa_cudnn,
                                   _CudaContext(seed_for("sdpa_cudnn")))
    assert (result.status, result.detail) == (status, detail)


@pytest.mark.gpu
def test_gpu_cudnn_attention_refused(facts: Facts) -> None:
    """On a real GPU: cuDNN attention is refused under the deterministic profile, with
    PyTorch's reason, and runs under the default one."""
    det = run_suite(facts, device="cuda:0", only=["sdpa_cudnn"]).results["sdpa_cudnn"]
    assert det.status == "refused" and "--profile default" in det.detail
    loose = run_suite(facts, device="cuda:0", settings=DEFAULT, only=["sdpa_cudnn"])
    assert loose.results["sdpa_cudnn"].status in ("ok", "unavailable")


def test_workspace_in_force_is_recorded_beside_the_variable() -> None:
    """The settings record the cuBLAS workspace sizes in force in this process next to the
    variable; without CUDA in use they are None, and say why."""
    back = readback()
    assert (back["cublas_workspace_bytes"], back["cublaslt_workspace_bytes"],
            back["cublas_workspace_source"]) == (None, None, "no CUDA in use")


@pytest.mark.gpu
def test_gpu_workspace_is_read_per_process(facts: Facts, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch sizes the cuBLAS workspace once per process: changing the variable after the
    first GEMM changes the recorded variable, not the size in force (32 MiB for :4096:8)."""
    run_suite(facts, device="cuda:0", only=["gemm_fp32"])
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    back = readback()
    assert back["cublas_workspace_config"] == ":16:8"
    assert back["cublas_workspace_bytes"] == 4096 * 1024 * 8

"""verify.gpu.compare: equivalence classes, verdicts, attribution, and error statistics."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest
import torch

from samebits.errors import InputError
from tests.fixtures.samples import BASE, DET, H200, NAMES, att, ok
from verify.gpu.attest import Attestation
from verify.gpu.compare import class_id, compare
from verify.gpu.errorstats import error_stats, output_errors
from verify.gpu.facts import DriverFacts
from verify.gpu.workloads import tensor_bytes

TF32 = {**DET, "float32_matmul_precision": "high", "cuda_matmul_allow_tf32": True,
        "cudnn_allow_tf32": True}


def test_identical() -> None:
    """Equal facts and equal bits: identical, same class."""
    report = compare(att(), att(source="b.json"))
    assert (report.verdict, report.same_class, report.different) == ("identical", True, ())
    assert set(report.identical) == set(NAMES)
    assert report.identical[:2] == ("gemm_fp32", "adaptive_avgpool2d_bwd")  # catalog order


def test_same_class_different_bits_is_unexplained() -> None:
    """Same class, different bits: unexplained, with the non-class differences as leads."""
    a = att(gpu=True)
    b = att(gpu=True, changed={"gemm_fp32": ok("f")},
            driver=DriverFacts(version="580.82.07", cuda="13.0", source="nvml"),
            gpus=(dataclasses.replace(H200, uuid="ffff"),))
    report = compare(a, b)
    assert (report.verdict, report.same_class) == ("unexplained", True)
    assert [w.name for w in report.different] == ["gemm_fp32"]
    assert report.different[0].attributed_to == ()
    assert {d.key for d in report.other_differences} >= {"driver.version", "gpu.uuid"}
    assert class_id(a) == class_id(b)


@pytest.mark.parametrize(("a", "b", "workload", "attributed", "expected"), [
    pytest.param(att(threads_intra_op=1, env=(("OMP_NUM_THREADS", "1"),)),
                 att(changed={"sum_fp32": ok("f")}, env=(("OMP_NUM_THREADS", "2"),)),
                 "sum_fp32", ("env.OMP_NUM_THREADS", "threads.intra_op"), True, id="threads"),
    pytest.param(att(gpu=True), att(gpu=True, settings=TF32, changed={"gemm_fp32": ok("f")}),
                 "gemm_fp32", ("settings.cuda_matmul_allow_tf32",
                               "settings.float32_matmul_precision"), True, id="tf32-on-gpu"),
    pytest.param(att(), att(settings={**DET, "float32_matmul_precision": "medium",
                                      "cuda_matmul_allow_tf32": True},
                            changed={"gemm_fp32": ok("f")}),
                 "gemm_fp32", ("settings.float32_matmul_precision",), True,
                 id="medium-precision-on-cpu"),
    pytest.param(att(gpu=True),
                 att(gpu=True, env=(("NVIDIA_TF32_OVERRIDE", "0"),),
                     changed={"gemm_fp32": ok("f")}),
                 "gemm_fp32", ("env.NVIDIA_TF32_OVERRIDE",), True, id="tf32-override-env"),
    pytest.param(att(gpu=True),
                 att(gpu=True, gpus=(dataclasses.replace(H200, sm_count=114),),
                     changed={"randn": ok("f")}),
                 "randn", ("gpu.sm_count",), True, id="rng-follows-sm-count"),
    pytest.param(att(gpu=True),
                 att(gpu=True, settings={**DET, "profile": "default",
                                         "deterministic_algorithms": False},
                     changed={"adaptive_avgpool2d_bwd": {"status": "refused"}}),
                 "adaptive_avgpool2d_bwd", ("settings.deterministic_algorithms",
                                            "settings.profile"), True, id="refused-vs-ok"),
    pytest.param(att(threads_intra_op=1), att(changed={"randn": ok("f")}),
                 "randn", ("threads.intra_op",), False, id="not-a-known-sensitivity"),
])
def test_attribution(a: Attestation, b: Attestation, workload: str,
                     attributed: tuple[str, ...], expected: bool) -> None:
    """Across classes, each differing workload is attributed to the differing facts."""
    report = compare(a, b)
    assert report.verdict == "explained" and not report.same_class
    (diff,) = report.different
    assert (diff.name, diff.attributed_to, diff.expected) == (workload, attributed, expected)


def test_classes_differ_but_bits_do_not() -> None:
    """TF32 switched on for a CPU run: different class (the float32 matmul precision, which a
    CPU run reads), same bits; the CUDA TF32 switches are no class fact where no CUDA ran."""
    report = compare(att(), att(settings=TF32))
    assert (report.verdict, report.same_class) == ("identical", False)
    assert [d.key for d in report.class_differences] == ["settings.float32_matmul_precision"]


@pytest.mark.parametrize(("changes", "keys"), [
    ({"cpu_model": "AMD EPYC 9654", "cpu_count": 192}, set()),
    ({"cpu_vendor": "GenuineIntel"}, {"cpu.vendor"}),
    ({"cpu_flags": ("avx2", "avx512f")}, {"cpu.isa"}),
    ({"torch_git_version": "deadbeef"}, {"torch.git_version"}),
    ({"env": (("CUDA_VISIBLE_DEVICES", "1"),)}, set()),
    ({"env": (("MKL_CBWR", "AVX2"),)}, {"env.MKL_CBWR"}),
])
def test_cpu_class_definition(changes: dict, keys: set[str]) -> None:
    """CPU classes follow vendor, ISA, threads, torch build and numerics env, not the model."""
    report = compare(att(), att(**changes))
    assert {d.key for d in report.class_differences} == keys


def test_workloads_only_in_one() -> None:
    """Workloads one side did not run are listed, not compared."""
    a = att()
    b = dataclasses.replace(att(), workloads={k: v for k, v in BASE.items() if k != "randn"})
    report = compare(a, b)
    assert (report.only_in_a, report.only_in_b, report.verdict) == (("randn",), (), "identical")
    none = dataclasses.replace(att(), workloads={"other": ok("1")})
    with pytest.raises(InputError, match="have no workload in common"):
        compare(a, none)


F32 = torch.float32


@pytest.mark.parametrize(("a", "b", "max_abs", "max_ulp", "differing"), [
    (torch.tensor([1.0, 2.0], dtype=F32), torch.tensor([1.0, 2.0], dtype=F32), 0.0, 0, 0),
    (torch.tensor([1.0], dtype=F32), torch.tensor([1.0 + 2**-23], dtype=F32), 2**-23, 1, 1),
    (torch.tensor([0.0], dtype=F32), torch.tensor([-0.0], dtype=F32), 0.0, 0, 0),
    (torch.tensor([1.4e-45], dtype=F32), torch.tensor([-1.4e-45], dtype=F32), 2.8e-45, 0, 1),
    (torch.tensor([1.0], dtype=torch.float16), torch.tensor([1.0009765625], dtype=torch.float16),
     2**-10, 1, 1),
    (torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([1.0078125], dtype=torch.bfloat16),
     2**-7, 1, 1),
    (torch.tensor([3, 7]), torch.tensor([3, 4]), 3.0, 3, 1),
    (torch.tensor([1.0], dtype=F32), torch.tensor([math.nan], dtype=F32), math.inf, None, 1),
])
def test_error_stats(a: torch.Tensor, b: torch.Tensor, max_abs: float, max_ulp: int | None,
                     differing: int) -> None:
    """Max absolute error and ULP distance per dtype; +0 and -0 are 0 ULP apart; values of
    opposite sign are counted apart, not measured in ULP."""
    stats = error_stats("out", a, b)
    assert stats.max_abs == pytest.approx(max_abs, rel=1e-3)
    if max_ulp is not None:
        assert stats.max_ulp == max_ulp
    assert (stats.differing, stats.total) == (differing, a.numel())


@pytest.mark.parametrize(("a", "b", "dtype", "text"), [
    ([1.0, 2.0], [1.0, 2.0 + 2**-22], F32, "1 ULP"),
    ([1.8e-6], [-1.8e-6], F32, "opposite signs"),
    ([2.0, -3.0], [-2.0, 3.0], torch.float64, "opposite signs"),  # once an int64 overflow
    ([1.0, 1e-3], [1.0 + 2**-23 * 3, -1e-3], F32, "3 ULP (1 element of opposite sign)"),
    ([0.0, 5e-324], [-0.0, 0.0], torch.float64, "1 ULP"),
])
def test_ulp_across_zero(a: list[float], b: list[float], dtype: torch.dtype, text: str) -> None:
    """Values of opposite sign are said to be so, not given a billion-ULP distance."""
    stats = error_stats("out", torch.tensor(a, dtype=dtype), torch.tensor(b, dtype=dtype))
    assert stats.ulp_text() == text
    assert 0 <= stats.max_ulp < 2**63


def _save(root: Path, values: list[float]) -> None:
    data = tensor_bytes(torch.tensor(values, dtype=F32))  # no numpy: CI's torch has none
    (root / "sum_fp32").mkdir(parents=True)
    (root / "sum_fp32" / "sum.bin").write_bytes(data)
    index = {"format": 1, "workloads": {"sum_fp32": {"sum": {
        "file": "sum_fp32/sum.bin", "dtype": "float32", "shape": [len(values)],
        "sha256": hashlib.sha256(data).hexdigest()}}}}
    (root / "outputs.json").write_text(json.dumps(index))


def test_output_errors(tmp_path: Path) -> None:
    """Saved outputs that differ give their error statistics; equal ones give none."""
    _save(tmp_path / "a", [1.0, 2.0])
    _save(tmp_path / "b", [1.0, 2.0 + 2**-22])
    _save(tmp_path / "c", [1.0, 2.0])
    (stats,) = output_errors(tmp_path / "a", tmp_path / "b")["sum_fp32"]
    assert (stats.output, stats.max_ulp, stats.differing) == ("sum", 1, 1)
    assert output_errors(tmp_path / "a", tmp_path / "c") == {}
    with pytest.raises(InputError, match="no such saved-outputs index"):
        output_errors(tmp_path / "a", tmp_path / "missing")


MKL = "PyTorch built with:\n  - Build settings: BLAS_INFO=mkl, LAPACK_INFO=mkl, USE_MKL=ON, "
OPENBLAS = "PyTorch built with:\n  - Build settings: BLAS_INFO=open, LAPACK_INFO=open, "


@pytest.mark.parametrize(("config", "a", "b", "keys"), [
    # a cuBLAS setting on a machine with no CUDA: "—" (not recorded) and "no CUDA in use"
    # are one meaning, and no CUDA setting is a class fact of a CPU run anyway
    (MKL, {}, {"settings": {**DET, "cublas_workspace_source": "no CUDA in use"}}, set()),
    (MKL, {}, {"settings": {**DET, "blas_library": "Cublas", "cudnn_allow_tf32": True}},
     set()),
    (MKL, {}, {"env": (("CUBLAS_WORKSPACE_CONFIG", ":16:8"),)}, set()),
    # a BLAS variable counts only for the BLAS torch uses (torch.__config__)
    (MKL, {}, {"env": (("OPENBLAS_CORETYPE", "Haswell"), ("OPENBLAS_L2_SIZE", "1"))}, set()),
    (MKL, {}, {"env": (("MKL_CBWR", "AVX2"),)}, {"env.MKL_CBWR"}),
    (OPENBLAS, {}, {"env": (("OPENBLAS_CORETYPE", "Haswell"),)}, {"env.OPENBLAS_CORETYPE"}),
    (OPENBLAS, {}, {"env": (("MKL_CBWR", "AVX2"),)}, set()),
    ("", {}, {"env": (("OPENBLAS_CORETYPE", "Haswell"),)}, {"env.OPENBLAS_CORETYPE"}),
])
def test_relevance(config: str, a: dict, b: dict, keys: set[str]) -> None:
    """A fact is in a run's class, and so can explain a difference, only if the run could
    have used it: no CUDA fact where no CUDA ran, no variable of a BLAS torch does not use
    (an unknown BLAS keeps them all)."""
    sa = {"settings": DET, **a}
    sb = {"settings": DET, **b}
    report = compare(att(torch_build_config=config, **sa),
                     att(torch_build_config=config, changed={"gemm_fp32": ok("f")}, **sb))
    assert {d.key for d in report.class_differences} == keys
    (diff,) = report.different
    assert set(diff.attributed_to) == keys


def test_cpu_attribution_names_no_cuda_fact() -> None:
    """A CPU run with another thread count and stray CUDA and OpenBLAS values: each difference
    is attributed to the thread count alone, with why it is plausible."""
    b = att(torch_build_config=MKL, threads_intra_op=1,
            settings={**DET, "cublas_workspace_source": "no CUDA in use"},
            env=(("OPENBLAS_CORETYPE", "Haswell"),),
            changed={n: ok("f") for n in ("gemm_fp32", "sum_fp32")})
    report = compare(att(torch_build_config=MKL), b)
    assert [(d.name, d.attributed_to, d.expected) for d in report.different] == [
        ("gemm_fp32", ("threads.intra_op",), True), ("sum_fp32", ("threads.intra_op",), True)]
    assert report.different[1].why == (
        "threads.intra_op 2 → 1: it adds partial results across threads (or SMs), whose number "
        "sets the order of the additions (parallel)",)


def test_counts_name_what_they_count() -> None:
    """Each workload counted once: ran on both sides (identical, explained, differing), or by
    the status that kept its bits from a side."""
    a = att(changed={"randn": {"status": "unavailable"}, "adaptive_avgpool2d_bwd":
                     {"status": "error"}})
    b = att(threads_intra_op=1, changed={"randn": {"status": "unavailable"},
                                         "adaptive_avgpool2d_bwd": {"status": "error"},
                                         "sum_fp32": ok("f")})
    assert compare(a, b).counts() == {
        "workloads": 4, "both_ran": 2, "identical": 1, "explained": 1, "differing": 0,
        "unavailable": 1, "error": 1, "refused": 0, "other": 0}
    one_sided = att(changed={"gemm_fp32": {"status": "error"}})
    assert compare(att(), one_sided).counts() == {
        "workloads": 4, "both_ran": 3, "identical": 3, "explained": 0, "differing": 0,
        "unavailable": 0, "error": 1, "refused": 0, "other": 0}

"""`samebits verify gpu` and `verify compare` end to end, in fresh processes like a user runs them.

One module fixture starts the runs the selected tests read (``@pytest.mark.reads``) at once
(they are independent processes): two full runs with OMP_NUM_THREADS=2 (one also saving its
outputs: that must not change the attestation), a subset with OMP_NUM_THREADS=1, and a small
subset three times: as it is, with TF32 on, and with TF32 on and --probe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits_app.cli import main
from tests.fixtures.plugin import runs_read

SUBSET = "gemm_fp32,gemm_splitk_fp32,conv2d_fp32,sum_fp32,layernorm_fp32,randn,train_cnn_adamw"
SMALL = "gemm_fp32,conv2d_fp32,sum_fp32,index_add"
RUNS: dict[str, tuple[dict[str, str], list[str]]] = {
    "full1": ({"OMP_NUM_THREADS": "2"}, ["--save-outputs", "{tmp}/full1.out"]),
    "full2": ({"OMP_NUM_THREADS": "2"}, []),
    "omp1": ({"OMP_NUM_THREADS": "1"}, ["--only", SUBSET, "--save-outputs", "{tmp}/omp1.out"]),
    "small": ({"OMP_NUM_THREADS": "2"}, ["--only", SMALL]),
    "tf32": ({"OMP_NUM_THREADS": "2"}, ["--only", SMALL, "--tf32"]),
    "probe": ({"OMP_NUM_THREADS": "2"}, ["--only", SMALL, "--tf32", "--probe", "--json"]),
}


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    """Each run's attestation path, exit code and stdout (device forced to the CPU), for the
    runs the selected tests read."""
    tmp = tmp_path_factory.mktemp("verify-gpu")
    procs = {}
    for name in runs_read(request, RUNS):
        env, extra = RUNS[name]
        environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        cmd = [sys.executable, "-m", "verify", "gpu", "--device", "cpu",
               "--out", str(tmp / f"{name}.json"), *[a.format(tmp=tmp) for a in extra]]
        procs[name] = subprocess.Popen(cmd, env={**environ, **env}, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{name}: {stderr}"
        out[name] = (tmp / f"{name}.json", proc.returncode, stdout)
    return out


def compare_json(a: Path, b: Path, capsys: pytest.CaptureFixture[str], *extra: str):
    rc = main(["verify", "compare", str(a), str(b), "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.reads("full1", "full2")
@pytest.mark.slow
def test_two_runs_byte_identical(runs) -> None:
    """Two full runs on this machine write byte-identical attestations."""
    assert runs["full1"][0].read_bytes() == runs["full2"][0].read_bytes()
    assert runs["full1"][2].startswith("device: cpu (")


@pytest.mark.reads("full1", "full2")
@pytest.mark.slow
def test_compare_identical(runs, capsys: pytest.CaptureFixture[str]) -> None:
    """compare exits 0 and says IDENTICAL for the two full runs."""
    assert main(["verify", "compare", str(runs["full1"][0]), str(runs["full2"][0])]) == 0
    text = capsys.readouterr().out
    assert "same class" in text and "IDENTICAL" in text
    assert "device: cpu" in text


@pytest.mark.reads("omp1", "full1")
@pytest.mark.slow
def test_compare_explains_thread_count(runs, capsys: pytest.CaptureFixture[str]) -> None:
    """OMP_NUM_THREADS=1 vs 2: every differing workload is attributed to the thread count."""
    rc, doc = compare_json(runs["omp1"][0], runs["full1"][0], capsys)
    assert (rc, doc["verdict"]) == (1, "explained")
    assert {d["key"] for d in doc["class_differences"]} == {"threads.intra_op",
                                                            "env.OMP_NUM_THREADS"}
    differing = {w["name"]: w for w in doc["different"]}
    assert "sum_fp32" in differing  # DESIGN.md: CPU sums change with the thread count
    for w in differing.values():
        assert "threads.intra_op" in w["attributed_to"] and w["expected"], w


@pytest.mark.reads("omp1", "full1")
@pytest.mark.slow
def test_compare_error_statistics(runs, capsys: pytest.CaptureFixture[str]) -> None:
    """With saved outputs, compare adds the max absolute error and ULP distance."""
    tmp = runs["omp1"][0].parent
    rc, doc = compare_json(runs["omp1"][0], runs["full1"][0], capsys,
                           "--outputs-a", str(tmp / "omp1.out"),
                           "--outputs-b", str(tmp / "full1.out"))
    (err,) = next(w for w in doc["different"] if w["name"] == "sum_fp32")["errors"]
    assert err["output"] == "sum" and err["max_ulp"] >= 1 and 0 < err["max_abs"] < 1e-2


@pytest.mark.reads("small", "tf32")
def test_compare_names_tf32(runs, capsys: pytest.CaptureFixture[str]) -> None:
    """TF32 on: of the TF32 settings, a CPU run's class names only float32_matmul_precision
    (oneDNN reads it); cuBLAS's and cuDNN's switches are irrelevant where no CUDA ran
    (``verify.gpu.compare.CUDA_ONLY``), and on a CPU they change no bits (no TF32 path)."""
    rc, doc = compare_json(runs["small"][0], runs["tf32"][0], capsys)
    keys = {d["key"] for d in doc["class_differences"]}
    assert keys == {"settings.float32_matmul_precision"}
    assert (rc, doc["verdict"], doc["only_in_a"], doc["only_in_b"]) == (0, "identical", [], [])
    assert len(doc["identical"]) == len(SMALL.split(","))


@pytest.mark.reads("probe")
@pytest.mark.slow
def test_probe_on_this_cpu(runs) -> None:
    """--probe runs fresh processes per profile; on this CPU every workload is stable."""
    doc = json.loads(runs["probe"][2])
    assert doc["device"] == "cpu" and doc["device_line"].startswith("device: cpu")
    probe = doc["probe"]
    assert (probe["processes"], probe["replicas"]) == (4, 2)
    assert [(e["name"], e["deterministic"], e["default"]) for e in probe["entries"]] == [
        (n, "stable", "stable") for n in SMALL.split(",")]


@pytest.mark.parametrize(("argv", "rc", "stream", "message"), [
    (["verify", "gpu", "--only", "gemm_fp64"], 2, "err", "error: unknown workload 'gemm_fp64'"),
    (["verify", "gpu", "--list"], 0, "out", "gemm_splitk_fp32"),
    (["verify", "gpu", "nope.conda-lock.yml"], 2, "err",
     "error: nope.conda-lock.yml: no such lockfile"),
    (["verify", "compare", "nope.json", "nope.json"], 2, "err",
     "error: nope.json: no such attestation"),
    (["verify", "compare", "a.json", "b.json", "--outputs-a", "x"], 2, "err",
     "error: --outputs-a and --outputs-b go together"),
])
def test_cli_errors(argv: list[str], rc: int, stream: str, message: str,
                    capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input exits 2 with an error line; --list prints the catalog."""
    assert main(argv) == rc
    captured = capsys.readouterr()
    assert message in (captured.out if stream == "out" else captured.err)


@pytest.mark.gpu
def test_gpu_runs_identical_and_tf32_explained(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """On a GPU: two processes give identical bits; TF32 changes fp32 GEMM and is named."""
    def run(name: str, *extra: str) -> Path:
        out = tmp_path / f"{name}.json"
        subprocess.run([sys.executable, "-m", "verify", "gpu", "--out", str(out), *extra],
                       check=True, capture_output=True)
        return out

    a, b = run("a"), run("b")
    assert a.read_bytes() == b.read_bytes()
    rc, doc = compare_json(a, run("tf32", "--tf32"), capsys)
    differing = {w["name"]: w for w in doc["different"]}
    assert rc == 1 and "gemm_fp32" in differing
    assert "settings.cuda_matmul_allow_tf32" in differing["gemm_fp32"]["attributed_to"]


@pytest.mark.reads("full1")
@pytest.mark.slow
def test_attestation_carries_kernel_coverage(runs) -> None:
    """The attestation says what the environment's kernels run on (this CPU torch venv: no
    CUDA code) and, on a GPU, the decision for the GPU used."""
    from verify.kernels.report import NO_CUDA

    doc = json.loads(runs["full1"][0].read_text())
    cov = doc["predicate"]["coverage"]
    assert (cov["runs_on"], cov["libraries"], cov["this_gpu"]) == (NO_CUDA, 0, None)
    assert cov["stack"]["torch"].endswith("+cpu") and cov["stack"]["torch_cuda"] is None


def test_coverage_summary_decides_the_gpu_in_use() -> None:
    """On a GPU the attestation records the decision for its compute capability."""
    from tests.fixtures.samples import CUFILE, TORCH, cov, sample_facts
    from verify.gpu.attest import build_statement
    from verify.kernels.report import summary

    s = summary(cov(TORCH, CUFILE), gpu_cc="7.0")
    assert s["this_gpu"] == {"cc": "7.0", "sm": "sm_70", "status": "none",
                             "reason": "no sm_70 in libtorch_cuda.so, libcufile.so.0"}
    st = build_statement(facts=sample_facts(gpu=True), device="cuda:0", settings={},
                         workloads={}, suite_version=1, environment={"environment": "e" * 64},
                         coverage=s)
    assert st["predicate"]["coverage"]["this_gpu"]["status"] == "none"

"""verify.gpu.preflight: every reason a machine cannot give meaningful bits, said before running."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from samebits.errors import UsageError
from tests.fixtures.samples import H200, sample_facts
from verify.gpu.facts import DriverFacts
from verify.gpu.preflight import LockNeeds, PreflightError, Problem, check, resolve_device

ROOT = Path(__file__).resolve().parents[2]
HOPPER = LockNeeds(path="lockfiles/hopper.conda-lock.yml", cuda="12.4",
                   compute_capabilities=("9.0",), generation="hopper")
OLD_DRIVER = DriverFacts(version="535.104.05", cuda="12.2", source="nvml")
A100 = dataclasses.replace(H200, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0",
                           sm_count=108)
B200 = dataclasses.replace(H200, name="NVIDIA B200", compute_capability="10.0", sm_count=148)
CU124_ARCHS = ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")


@pytest.mark.parametrize(("facts", "device", "requested", "lock", "expected"), [
    pytest.param(sample_facts(gpu=True), "cuda:0", "auto", HOPPER, [], id="all-good"),
    pytest.param(sample_facts(), "cpu", "auto", HOPPER, [], id="no-gpu-runs-on-cpu"),
    pytest.param(
        sample_facts(gpu=True, driver=OLD_DRIVER, torch_cuda="12.4"), "cuda:0", "auto", HOPPER,
        [Problem(check="driver-cuda",
                 message="driver 535.104.05 provides CUDA 12.2; this lock needs >= 12.4 "
                         "(lockfiles/hopper.conda-lock.yml: __cuda = \"12.4\")",
                 hint="CUDA 12.4 needs driver >= 550.54.14")],
        id="driver-older-than-lock"),
    pytest.param(
        sample_facts(gpu=True, driver=OLD_DRIVER, torch_cuda_available=False), "cpu", "auto",
        None,
        [Problem(check="driver-torch",
                 message="driver 535.104.05 provides CUDA 12.2; torch 2.13.0+cu130 was built "
                         "for CUDA 13.0",
                 hint="CUDA 13.0 needs driver >= 580.65.06")],
        id="driver-older-than-torch"),
    pytest.param(
        sample_facts(gpu=True, gpus=(B200,), torch_arch_list=CU124_ARCHS,
                     torch_version="2.6.0+cu124"), "cuda:0", "auto", None,
        [Problem(check="no-kernel",
                 message="GPU 0 (NVIDIA B200) has compute capability 10.0, but torch "
                         "2.6.0+cu124 carries kernels for sm_50, sm_60, sm_70, sm_75, sm_80, "
                         "sm_86, sm_90 only: every workload would fail with \"no kernel image "
                         "is available for execution on the device\"",
                 hint="install a torch build whose arch list covers sm_100")],
        id="no-kernel-image"),
    pytest.param(
        sample_facts(gpu=True, gpus=(A100,)), "cuda:0", "auto", HOPPER,
        [Problem(check="lock-gpu",
                 message="lockfiles/hopper.conda-lock.yml targets hopper (compute capability "
                         "9.0); GPU 0 is NVIDIA A100-SXM4-80GB (8.0)",
                 hint="use the lockfile for this GPU's generation")],
        id="lock-for-another-generation"),
    pytest.param(
        sample_facts(gpus=(H200,), driver=DriverFacts(version="580.65.06", cuda="13.0",
                                                      source="nvidia-smi")),
        "cpu", "auto", None,
        [Problem(check="cpu-only-torch",
                 message="torch 2.13.0+cpu is a CPU-only build, but this machine has 1 GPU "
                         "(NVIDIA H200): the workloads would run on the CPU",
                 hint="install the lock's CUDA build of torch, or pass --device cpu to attest "
                      "the CPU on purpose")],
        id="cpu-torch-on-gpu-machine"),
    pytest.param(sample_facts(gpus=(H200,)), "cpu", "cpu", HOPPER, [], id="cpu-on-purpose"),
    pytest.param(
        sample_facts(gpu=True, gpus=(dataclasses.replace(H200, compute_capability="8.9"),),
                     torch_arch_list=("sm_80", "sm_86")), "cuda:0", "auto", None, [],
        id="sm86-sass-runs-on-sm89"),
    pytest.param(
        sample_facts(gpu=True, gpus=(B200,), torch_arch_list=("sm_90", "compute_90")),
        "cuda:0", "auto", None, [], id="ptx-jits-forward"),
])
def test_check(facts, device: str, requested: str, lock, expected: list[Problem]) -> None:
    """Each failure mode gives one problem with the message and hint a user needs."""
    assert list(check(facts, device=device, requested=requested, lock=lock)) == expected


def test_every_problem_reported() -> None:
    """An old driver on the wrong GPU for the lock reports both problems, not the first."""
    facts = sample_facts(gpu=True, gpus=(A100,), driver=OLD_DRIVER, torch_cuda="12.4")
    problems = check(facts, device="cuda:0", lock=HOPPER)
    err = PreflightError(problems)
    assert [p.check for p in problems] == ["driver-cuda", "lock-gpu"]
    assert err.exit_code == 1
    assert err.message.startswith("preflight found 2 problems:\n  driver 535.104.05")
    assert err.to_json()["problems"][1]["check"] == "lock-gpu"


@pytest.mark.parametrize(("gpu", "requested", "expected"), [
    (False, "auto", "cpu"), (True, "auto", "cuda:0"), (True, "cuda", "cuda:0"),
    (True, "cuda:1", "cuda:1"), (True, "cpu", "cpu"),
])
def test_resolve_device(gpu: bool, requested: str, expected: str) -> None:
    """auto picks the GPU only when torch can use one."""
    assert resolve_device(sample_facts(gpu=gpu), requested) == expected


def test_resolve_device_rejects() -> None:
    """A device name that is not auto, cpu, cuda or cuda:N is a usage error."""
    with pytest.raises(UsageError, match="--device 'gpu0': expected auto, cpu, cuda or cuda:N"):
        resolve_device(sample_facts(), "gpu0")


@pytest.mark.parametrize(("name", "cuda", "ccs", "generation"), [
    ("hopper", "13.0", ("9.0",), "hopper"),
    ("cpu", None, (), "cpu"),
])
def test_lock_needs_from_committed_lock(name: str, cuda, ccs, generation: str) -> None:
    """The committed lockfiles' __cuda and compute capabilities are read for preflight."""
    needs = LockNeeds.read(ROOT / "lockfiles" / f"{name}.conda-lock.yml")
    assert (needs.cuda, needs.compute_capabilities, needs.generation) == (cuda, ccs, generation)


@pytest.mark.parametrize(("env", "device", "expected"), [
    ((("LD_LIBRARY_PATH", "/opt/env/lib:/usr/local/nvidia/lib64"),), "cpu", []),
    ((("LD_LIBRARY_PATH", "/usr/local/cuda/lib64:/opt/env/lib"),), "cpu",
     [Problem(check="library-path",
              message="LD_LIBRARY_PATH points outside the environment (/opt/env): "
                      "/usr/local/cuda/lib64; a library found there is loaded instead of the "
                      "locked one",
              hint="unset LD_LIBRARY_PATH (the environment finds its own libraries)")]),
    ((("LD_PRELOAD", "/tmp/libfast.so"),), "cuda:0",
     [Problem(check="preload", message="LD_PRELOAD=/tmp/libfast.so injects a library into "
              "every process", hint="unset LD_PRELOAD")]),
])
def test_library_checks(env: tuple, device: str, expected: list[Problem]) -> None:
    """Library search paths outside the environment and preloads are named, on CPU and GPU."""
    facts = sample_facts(gpu=device != "cpu", env=env)
    requested = "cpu" if device == "cpu" else "auto"
    assert list(check(facts, device=device, requested=requested, lock=None,
                      prefix="/opt/env")) == expected


BLACKWELL = LockNeeds(path="lockfiles/blackwell.conda-lock.yml", cuda="13.0",
                      compute_capabilities=("10.0", "12.0"), generation="blackwell")


@pytest.mark.parametrize(("name", "cc"), [("NVIDIA B300", "10.3"), ("NVIDIA GB300", "10.3"),
                                          ("NVIDIA GB10", "12.1"), ("NVIDIA B200", "10.0")])
def test_blackwell_lock_takes_every_blackwell(name: str, cc: str) -> None:
    """Compute capabilities 10.3 (B300/GB300) and 12.1 (GB10) are Blackwell: the blackwell
    lock (which records the 10.0 and 12.0 it is built for) is theirs."""
    gpu = dataclasses.replace(H200, name=name, compute_capability=cc)
    facts = sample_facts(gpu=True, gpus=(gpu,))
    assert list(check(facts, device="cuda:0", lock=BLACKWELL)) == []


def test_hopper_lock_still_refuses_a_b300() -> None:
    """Membership is by generation: a Hopper lock on a B300 is still the wrong lock."""
    gpu = dataclasses.replace(H200, name="NVIDIA B300", compute_capability="10.3")
    (problem,) = check(sample_facts(gpu=True, gpus=(gpu,)), device="cuda:0",
                       lock=dataclasses.replace(HOPPER, cuda="13.0"))
    assert problem.check == "lock-gpu"

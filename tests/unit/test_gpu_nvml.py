"""The NVML probe with nvidia-ml-py faked at the library boundary (tests/fixtures/nvml_fake.py): MIG
slices matched to the devices torch sees, a lost GPU, fields the process may not read, and
NVML that cannot start. One failing call costs one field, never the rest."""

from __future__ import annotations

import dataclasses
import sys

import pynvml
import pytest

from tests.fixtures.nvml_fake import Gpu, Machine, Slice, fake_nvml
from tests.fixtures.samples import sample_facts
from verify.gpu.facts import DriverFacts, GpuFacts, merge_gpus
from verify.gpu.facts.driver import probe_driver_and_gpus
from verify.gpu.preflight import check

H200_B = Gpu(uuid="GPU-0a1b2c3e-0000-0000-0000-000000000000")


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch):  # -> (Machine) -> (driver, rows)
    """Install the fake as ``pynvml`` (where the probe imports it from) and probe."""
    def run(machine: Machine) -> tuple[DriverFacts | None, list[dict]]:
        monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(machine))
        return probe_driver_and_gpus()
    return run


def test_healthy_machine(probe) -> None:
    """Two GPUs: driver, CUDA, and every field of each; NVML shut down after."""
    m = Machine(gpus=[Gpu(), H200_B])
    driver, gpus = probe(m)
    assert driver == DriverFacts(version="580.65.06", cuda="13.0", source="nvml")
    assert [(g["index"], g["uuid"], g["compute_capability"], g["ecc"], g["mig"], g["errors"])
            for g in gpus] == [
        (0, "GPU-0a1b2c3d-0000-0000-0000-000000000000", "9.0", "enabled", "disabled", []),
        (1, "GPU-0a1b2c3e-0000-0000-0000-000000000000", "9.0", "enabled", "disabled", [])]
    assert m.calls[-1] == "shutdown"


def test_no_permission_costs_one_field(probe) -> None:
    """NVML_ERROR_NO_PERMISSION on one GPU's memory and on the driver's CUDA version: those
    two fields are named, everything else is recorded."""
    m = Machine(gpus=[Gpu(), dataclasses.replace(H200_B, denied=frozenset({"memory"}))],
                denied=frozenset({"cuda"}))
    driver, gpus = probe(m)
    assert driver == DriverFacts(version="580.65.06", cuda="unknown", source="nvml",
                                 errors=("cuda: NVML_ERROR_NO_PERMISSION",))
    assert gpus[1]["memory_bytes"] is None
    assert gpus[1]["errors"] == ["memory: NVML_ERROR_NO_PERMISSION"]
    assert (gpus[1]["name"], gpus[1]["compute_capability"]) == ("NVIDIA H200", "9.0")
    assert gpus[0]["memory_bytes"] == 150_000_000_000


def test_lost_gpu_is_a_row_that_says_so(probe) -> None:
    """NVML_ERROR_GPU_IS_LOST on GPU 1: GPU 0 is intact, GPU 1 stays in the list, named lost."""
    driver, gpus = probe(Machine(gpus=[Gpu(), dataclasses.replace(H200_B, lost=True)]))
    assert driver is not None and driver.errors == ()
    assert gpus[0]["errors"] == [] and gpus[0]["name"] == "NVIDIA H200"
    assert (gpus[1]["index"], gpus[1]["name"], gpus[1]["errors"]) == (
        1, "unknown", ["handle: NVML_ERROR_GPU_IS_LOST"])
    facts = merge_gpus(gpus, [])
    assert facts[1].errors == ("handle: NVML_ERROR_GPU_IS_LOST",)


MIG_GPU = Gpu(mig=1, slices=[
    Slice(name="NVIDIA H200 MIG 1g.18gb", uuid="MIG-11111111-2222-3333-4444-555555555555",
          memory=18_000_000_000),
    None,  # an empty slot: NVML_ERROR_NOT_FOUND, not an error
    Slice(name="NVIDIA H200 MIG 3g.71gb", uuid="MIG-66666666-7777-8888-9999-000000000000",
          memory=71_000_000_000)])
# What torch reports inside a process given the first slice (CUDA_VISIBLE_DEVICES=MIG-...).
TORCH_SEES = [{"torch_index": 0, "name": "NVIDIA H200 MIG 1g.18gb",
               "uuid": "11111111-2222-3333-4444-555555555555", "compute_capability": "9.0",
               "sm_count": 16, "memory_bytes": 17_800_000_000}]


def test_mig_slices_are_matched_to_torch(probe) -> None:
    """With MIG on, each slice is a row; torch's device (a slice, by the slice's UUID, not the
    GPU's) is matched to it, so facts, preflight and classes see the slice torch ran on."""
    _, rows = probe(Machine(gpus=[MIG_GPU]))
    assert [(r["mig"], r["name"]) for r in rows] == [
        ("enabled", "NVIDIA H200"), ("slice", "NVIDIA H200 MIG 1g.18gb"),
        ("slice", "NVIDIA H200 MIG 3g.71gb")]
    gpus = merge_gpus(rows, TORCH_SEES)
    used = sample_facts(gpu=True, gpus=gpus).gpu(0)
    assert used == GpuFacts(index=0, torch_index=0, name="NVIDIA H200 MIG 1g.18gb",
                            uuid="11111111-2222-3333-4444-555555555555",
                            compute_capability="9.0", sm_count=16, memory_bytes=18_000_000_000,
                            ecc="enabled", mig="slice",
                            parent_uuid="0a1b2c3d-0000-0000-0000-000000000000")
    assert list(check(sample_facts(gpu=True, gpus=gpus), device="cuda:0")) == []


def test_device_nvml_does_not_list_is_kept() -> None:
    """A device torch sees that no NVML row names (an old driver's MIG naming) is recorded with
    what torch says, not dropped: Facts.gpu(0) still describes what the workloads ran on."""
    gpus = merge_gpus([{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-aaaa",
                        "compute_capability": "9.0", "memory_bytes": 1, "ecc": None,
                        "mig": "enabled"}], TORCH_SEES)
    got = sample_facts(gpu=True, gpus=gpus).gpu(0)
    assert got is not None and got.sm_count == 16
    assert got.errors == ("not in the driver's list: no NVML row has this UUID",)


@pytest.mark.parametrize(("code", "expect_driver"), [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, None),   # a machine without the NVIDIA driver
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, None),
])
def test_nvml_that_cannot_start(probe, code: int, expect_driver: DriverFacts | None) -> None:
    """NVML without a driver behind it: no driver facts (then nvidia-smi and libcuda are
    asked, and there are none here either)."""
    assert probe(Machine(gpus=[Gpu()], init_error=code)) == (expect_driver, [])

"""The GPU generation registry: data facts and the checks built on them."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from samebits.spec.gpus import registry, sass_runs_on


@pytest.mark.parametrize(("generation", "cuda", "ok"), [
    ("volta", "12.6", True),
    ("volta", "13.0", False),
    ("ampere", "11.0", False),
    ("ampere", "11.1", True),
    ("ada", "11.7", False),
    ("ada", "11.8", True),
    ("hopper", "12.4", True),
    ("blackwell", "12.4", False),
    ("blackwell", "12.8", True),
    ("blackwell", "13.0", True),
])
def test_cuda_line_serves_generation(generation: str, cuda: str, ok: bool) -> None:
    """A CUDA line serves a generation exactly when the registry's range contains it."""
    assert (registry().generations[generation].cuda_problem(cuda) is None) is ok


def test_cpu_generation_takes_no_cuda() -> None:
    """The cpu generation refuses any CUDA line."""
    assert "takes no CUDA line" in registry().generations["cpu"].cuda_problem("12.4")


@pytest.mark.parametrize(("sm", "cc", "runs"), [
    (("8.0", "8.6"), "8.9", True),    # sm_86 SASS runs on Ada
    (("7.5", "8.0"), "7.0", False),   # nothing for Volta in a cu128 build
    (("9.0",), "9.0", True),
    (("9.0",), "10.0", False),        # no cross-major compatibility
])
def test_sass_compatibility(sm: tuple[str, ...], cc: str, runs: bool) -> None:
    """SASS for X.Y runs on X.Z with Z >= Y and nothing else."""
    assert sass_runs_on(sm, cc) is runs


@pytest.mark.parametrize(("spec", "cudas"), [
    ("==2.7.1", ["12.6"]),
    ("==2.9.1", ["12.8"]),
    ("==2.13.0", ["13.0"]),
    (">=2.7,<2.9", ["12.6", "12.8"]),
    ("==1.0", []),
])
def test_pypi_torch_lines(spec: str, cudas: list[str]) -> None:
    """A torch specifier maps to the PyPI CUDA lines its releases were built for."""
    assert [ln.cuda for ln in registry().pypi_torch_lines(SpecifierSet(spec))] == cudas


def test_every_generation_named_in_design_is_present() -> None:
    """The registry holds the six generations samebits ships specs for."""
    assert set(registry().generations) == {"volta", "ampere", "ada", "hopper", "blackwell", "cpu"}


@pytest.mark.parametrize(("text", "label", "ccs"), [
    ("sm_90", "sm_90", ("9.0",)), ("sm_90a", "sm_90a", ("9.0",)), ("12.1", "12.1", ("12.1",)),
    ("H100", "H100", ("9.0",)), ("nvidia rtx 5090", "nvidia rtx 5090", ("12.0",)),
    ("GB300", "GB300", ("10.3",)), ("GB10", "GB10", ("12.1",)), ("T4", "T4", ("7.5",)),
    ("Blackwell", "blackwell", ("10.0", "10.3", "12.0", "12.1")), ("Z80", None, None),
])
def test_resolve_gpu(text: str, label: str | None, ccs: tuple[str, ...] | None) -> None:
    """`check --gpu` takes sm_XY, X.Y, a model name or a generation."""
    got = registry().resolve_gpu(text)
    assert got == ((label, ccs) if label else None)


@pytest.mark.parametrize(("cc", "generation"), [
    ("7.0", "volta"), ("8.6", "ampere"), ("8.9", "ada"), ("9.0", "hopper"),
    ("10.0", "blackwell"), ("10.3", "blackwell"), ("12.0", "blackwell"), ("12.1", "blackwell"),
    ("7.5", None),
])
def test_generation_of(cc: str, generation: str | None) -> None:
    """10.3 (B300, GB300) and 12.1 (GB10) belong to Blackwell; Turing to no generation."""
    g = registry().generation_of(cc)
    assert (g.name if g else None) == generation


@pytest.mark.parametrize(("driver", "cuda"), [
    ("535.104.05", "12.2"), ("535.54.03", "12.2"), ("535.54.02", "12.1"), ("580.65.06", "13.0"),
    ("570.26", "12.8"), ("440.33", None),
])
def test_driver_provides(driver: str, cuda: str | None) -> None:
    """A driver provides the newest CUDA release whose oldest driver it is at least."""
    assert registry().driver_cuda(driver) == cuda


def test_ptx_isa_to_release() -> None:
    """PTX ISA 8.5 is CUDA 12.5's; 8.6 (no public toolkit) needs 12.8's driver; 9.2 is newer
    than any release the registry knows."""
    r = registry()
    assert r.release_for_ptx("8.5").version == "12.5"
    assert r.release_for_ptx("8.6").version == "12.8"
    assert r.release_for_ptx("9.2") is None

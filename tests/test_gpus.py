"""The GPU generation registry: data facts and the checks built on them."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from samebits.gpus import registry, sass_runs_on


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

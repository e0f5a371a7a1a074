"""The GPU generation registry, read from ``data/gpus.toml``.

Everything here is data plus pure checks: which CUDA lines can target a generation, and what
torch from PyPI ships for a given release. ``spec`` calls the checks before anything is solved.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True, slots=True, kw_only=True)
class Generation:
    name: str
    compute_capabilities: tuple[str, ...]
    examples: tuple[str, ...]
    cuda: SpecifierSet | None
    cuda_text: str = ""
    note: str = ""

    @property
    def needs_cuda(self) -> bool:
        return self.cuda is not None

    def cuda_problem(self, cuda: str) -> str | None:
        """Why CUDA line ``cuda`` cannot serve this generation, or None when it can."""
        if self.cuda is None:
            return f"the {self.name} generation takes no CUDA line; remove [cuda]"
        if Version(cuda) in self.cuda:
            return None
        need = f"{self.name} ({sm_names(self.compute_capabilities)}) needs CUDA {self.cuda_text}"
        return need + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class PypiTorchLine:
    """What torch from PyPI ships for the releases in ``torch``."""

    torch: SpecifierSet
    cuda: str
    cudnn: str
    nccl: str
    sm: tuple[str, ...]
    aarch64_cuda: bool

    def covers(self, generation: Generation) -> bool:
        return all(sass_runs_on(self.sm, cc) for cc in generation.compute_capabilities)


def sm_names(ccs: tuple[str, ...] | list[str]) -> str:
    """("8.0", "8.6") -> "sm_80, sm_86"."""
    return ", ".join(f"sm_{cc.replace('.', '')}" for cc in ccs)


def sass_runs_on(sm: tuple[str, ...] | list[str], cc: str) -> bool:
    """Whether code built for the architectures ``sm`` runs on compute capability ``cc``.

    SASS for X.Y runs on X.Z with Z >= Y (same major): sm_86 code runs on an sm_89 Ada card.
    """
    major, minor = (int(x) for x in cc.split("."))
    for arch in sm:
        a_major, a_minor = (int(x) for x in arch.split("."))
        if a_major == major and a_minor <= minor:
            return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Registry:
    generations: dict[str, Generation]
    pypi_torch: tuple[PypiTorchLine, ...]

    def pypi_torch_line(self, version: str) -> PypiTorchLine | None:
        v = Version(version)
        for line in self.pypi_torch:
            if v in line.torch:
                return line
        return None

    def pypi_torch_lines(self, spec: SpecifierSet) -> list[PypiTorchLine]:
        """The known lines containing at least one release that ``spec`` admits.

        A line is probed at its lower bound and at each minor release inside it.
        """
        out = []
        for line in self.pypi_torch:
            probes = _line_probes(line.torch)
            if any(spec.contains(p, prereleases=True) for p in probes):
                out.append(line)
        return out


def _line_probes(spec: SpecifierSet) -> list[str]:
    lo = hi = None
    for s in spec:
        if s.operator == ">=":
            lo = Version(s.version)
        elif s.operator == "<":
            hi = Version(s.version)
    if lo is None or hi is None:
        return []
    probes = []
    minor = lo.minor
    while Version(f"{lo.major}.{minor}") < hi:
        probes += [f"{lo.major}.{minor}.{patch}" for patch in range(0, 10)]
        minor += 1
    return probes


def _parse(data: dict[str, Any]) -> Registry:
    gens = {}
    for name, g in data["generation"].items():
        cuda = g.get("cuda")
        gens[name] = Generation(
            name=name,
            compute_capabilities=tuple(g["compute-capabilities"]),
            examples=tuple(g.get("examples", ())),
            cuda=SpecifierSet(cuda) if cuda else None,
            cuda_text=cuda or "",
            note=g.get("note", ""),
        )
    lines = tuple(
        PypiTorchLine(
            torch=SpecifierSet(t["torch"]),
            cuda=t["cuda"],
            cudnn=t["cudnn"],
            nccl=t["nccl"],
            sm=tuple(t["sm"]),
            aarch64_cuda=t["aarch64-cuda"],
        )
        for t in data["pypi-torch"]
    )
    return Registry(generations=gens, pypi_torch=lines)


@functools.cache
def registry() -> Registry:
    text = resources.files("samebits").joinpath("data/gpus.toml").read_text()
    return _parse(tomllib.loads(text))


GENERATIONS = ("volta", "ampere", "ada", "hopper", "blackwell", "cpu")

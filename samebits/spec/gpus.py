"""The GPU generation registry, read from ``data/gpus.toml``.

Everything here is data plus pure checks: which CUDA lines can target a generation, and what
torch from PyPI ships for a given release (``spec`` calls these before anything is solved);
GPU models by name; which generation a compute capability belongs to; and, per CUDA release,
the oldest driver and the PTX ISA version (``verify.kernels.coverage`` and the preflight use these).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
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
    compute_capabilities: tuple[str, ...]  # what a build must carry code for
    examples: tuple[str, ...]
    cuda: SpecifierSet | None
    cuda_text: str = ""
    note: str = ""
    members: tuple[str, ...] = ()  # every compute capability of the generation (10.3, 12.1)

    @property
    def all_capabilities(self) -> tuple[str, ...]:
        return self.members or self.compute_capabilities

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
    checked: str | None = None  # the release whose wheels a network test reads

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


def cc_key(cc: str) -> tuple[int, int]:
    """"9.0" -> (9, 0); "12.1" -> (12, 1)."""
    major, minor = cc.split(".")
    return int(major), int(minor)


def version_key(v: str) -> tuple[int, ...]:
    """"580.65.06" -> (580, 65, 6): driver versions compare part by part."""
    return tuple(int(x) for x in v.split("."))


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaRelease:
    version: str      # "13.0"
    driver: str       # the oldest Linux driver for it
    ptx_isa: str      # the PTX ISA version its compiler writes


@dataclass(frozen=True, slots=True, kw_only=True)
class Registry:
    generations: dict[str, Generation]
    pypi_torch: tuple[PypiTorchLine, ...]
    models: dict[str, str] = field(default_factory=dict)  # model name -> compute capability
    cuda_releases: tuple[CudaRelease, ...] = ()           # oldest first
    minor_compat: dict[str, str] = field(default_factory=dict)  # CUDA major -> oldest driver
    core_libraries: tuple[str, ...] = ()  # file name prefixes: see [coverage] in gpus.toml

    def is_core_library(self, filename: str) -> bool:
        return filename.startswith(self.core_libraries)

    def generation_of(self, cc: str) -> Generation | None:
        """The generation a compute capability belongs to, or None (Turing: 7.5)."""
        return next((g for g in self.generations.values() if cc in g.all_capabilities), None)

    def model(self, name: str) -> str | None:
        """A GPU model's compute capability: "H100", "nvidia rtx 5090", "GB300"."""
        want = _model_key(name)
        return next((cc for m, cc in self.models.items() if _model_key(m) == want), None)

    def resolve_gpu(self, text: str) -> tuple[str, tuple[str, ...]] | None:
        """What ``--gpu`` names: (label, compute capabilities), or None when nothing matches.

        "sm_90", "sm_90a", "9.0", "H100", "RTX 5090" -> one capability; "hopper" -> the
        generation's members."""
        raw = text.strip()
        m = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})[af]?", raw.lower())
        if m and raw.lower().startswith(("sm_", "compute_")):
            digits = m.group(1)
            return raw, (f"{int(digits[:-1])}.{digits[-1]}",)
        if re.fullmatch(r"\d{1,2}\.\d", raw):
            return raw, (raw,)
        cc = self.model(raw)
        if cc is not None:
            return raw, (cc,)
        gen = self.generations.get(raw.lower())
        if gen is not None and gen.all_capabilities:
            return gen.name, gen.all_capabilities
        return None

    def release(self, cuda: str) -> CudaRelease | None:
        major_minor = ".".join(cuda.split(".")[:2])
        return next((r for r in self.cuda_releases if r.version == major_minor), None)

    def release_for_ptx(self, isa: str) -> CudaRelease | None:
        """The first CUDA release whose compiler writes PTX ISA ``isa`` (or a newer one)."""
        want = cc_key(isa)
        return next((r for r in self.cuda_releases if cc_key(r.ptx_isa) >= want), None)

    def driver_cuda(self, driver: str) -> str | None:
        """The newest CUDA release a driver provides: 535.104 -> "12.2"."""
        have = version_key(driver)
        ok = [r.version for r in self.cuda_releases if version_key(r.driver) <= have]
        return ok[-1] if ok else None

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


def _model_key(name: str) -> str:
    return "".join(name.lower().removeprefix("nvidia").split())


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
            members=tuple(g.get("members", ())),
        )
    lines = tuple(
        PypiTorchLine(
            torch=SpecifierSet(t["torch"]),
            cuda=t["cuda"],
            cudnn=t["cudnn"],
            nccl=t["nccl"],
            sm=tuple(t["sm"]),
            aarch64_cuda=t["aarch64-cuda"],
            checked=t.get("checked"),
        )
        for t in data["pypi-torch"]
    )
    releases = tuple(sorted((CudaRelease(version=v, driver=r["driver"], ptx_isa=r["ptx-isa"])
                             for v, r in data.get("cuda-releases", {}).items()),
                            key=lambda r: cc_key(r.version)))
    return Registry(generations=gens, pypi_torch=lines, models=dict(data.get("models", {})),
                    cuda_releases=releases, minor_compat=dict(data.get("cuda-minor-compat", {})),
                    core_libraries=tuple(data.get("coverage", {}).get("core-libraries", ())))


@functools.cache
def registry() -> Registry:
    text = resources.files("samebits").joinpath("data/gpus.toml").read_text()
    return _parse(tomllib.loads(text))


GENERATIONS = ("volta", "ampere", "ada", "hopper", "blackwell", "cpu")

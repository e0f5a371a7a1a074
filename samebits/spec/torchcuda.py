"""The CUDA line of the torch build a declaration asks for, and the generation it gets.

    cuda_evidence(declared, torch_requires)
        a +cu118 / +cpu local version; a download.pytorch.org/whl/cuXYZ index; an
        nvidia-cuda-runtime pin; conda's pytorch-cuda, cudatoolkit or cuda-version; PyPI's
        torch by samebits' registry, else by the wheel's Requires-Dist (read at the edge)
    choose_generation(evidence, requested, cuda)
        --generation (cpu drops the CUDA line: a CUDA build runs on the CPU); else cpu without
        a CUDA build; else the only generation the line serves; else UsageError naming them

Pure; ``samebits init`` (``samebits_app.cmd_init``) calls these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from samebits.errors import UsageError
from samebits.foreign.sources import Declared, Requested
from samebits.spec.gpus import registry, sass_runs_on

PYTORCH_INDEX = re.compile(r"^https://download\.pytorch\.org/whl/(cpu|cu\d{2,3})/?$")
CUDA_RUNTIME = re.compile(r"^nvidia-cuda-runtime(-cu\d+)?$")
CONDA_CUDA = ("pytorch-cuda", "cudatoolkit", "cuda-version", "cuda-cudart", "cuda-runtime")


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaEvidence:
    line: str | None  # "12.1"; None: a CPU-only build
    what: str  # where the line was read, for messages
    sm: tuple[str, ...] = ()  # the architectures the build carries, when the registry knows


def cuda_of_label(label: str) -> str | None:
    """``cu118`` -> "11.8", ``cu121`` -> "12.1", ``cu130`` -> "13.0"."""
    m = re.fullmatch(r"cu(\d+)(\d)", label)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def torch_pin(declared: Declared) -> Requested | None:
    return next((r for r in declared.pypi if r.name == "torch"), None)


def cuda_evidence(declared: Declared, *, torch_requires: Sequence[str] | None = None,
                  ) -> CudaEvidence | None:
    """The CUDA line the environment's torch is built for, from the declaration alone and,
    for a PyPI torch the registry does not know, the wheel's Requires-Dist."""
    torch = torch_pin(declared)
    if torch is not None and torch.pinned:
        local = Version(torch.pinned).local or ""
        if local == "cpu" or local.startswith("rocm"):
            return CudaEvidence(line=None, what=f"{torch.text} ({torch.where}): a "
                                f"{'CPU' if local == 'cpu' else 'ROCm'} build")
        line = cuda_of_label(local)
        if line:
            return CudaEvidence(line=line, what=f"{torch.text} ({torch.where})")
    for url in declared.extra_indexes + ((declared.index,) if declared.index else ()):
        m = PYTORCH_INDEX.match(url)
        if m and torch is not None:
            label = m.group(1)
            if label == "cpu":
                return CudaEvidence(line=None, what=f"the index {url}: CPU builds")
            return CudaEvidence(line=cuda_of_label(label), what=f"{torch.text} from {url}")
    for r in declared.pypi:
        if CUDA_RUNTIME.match(r.name) and r.pinned:
            line = ".".join(r.pinned.split(".")[:2])
            return CudaEvidence(line=line, what=f"{r.text} ({r.where})")
    for c in declared.conda:
        if c.name in CONDA_CUDA:
            m = re.search(r"(\d+)\.(\d+)", c.spec.split(" ", 1)[-1])
            if m:
                return CudaEvidence(line=f"{m.group(1)}.{m.group(2)}",
                                    what=f"{c.spec} ({c.where})")
    if torch is not None and torch.pinned and torch.url is None:
        known = registry().pypi_torch_line(torch.pinned)
        if known is not None:
            return CudaEvidence(line=known.cuda, what=f"{torch.text} from PyPI (CUDA "
                                f"{known.cuda} by samebits' registry)", sm=known.sm)
        for text in torch_requires or ():
            req = Requirement(text)
            spec = list(req.specifier)
            if CUDA_RUNTIME.match(str(canonicalize_name(req.name))) and spec:
                v = spec[0].version
                return CudaEvidence(line=".".join(v.split(".")[:2]),
                                    what=f"{torch.text} (its wheel requires "
                                    f"{canonicalize_name(req.name)} {v})")
    return None


def needs_torch_metadata(declared: Declared) -> bool:
    """Whether ``cuda_evidence`` would read the torch wheel's Requires-Dist."""
    if cuda_evidence(declared) is not None:
        return False
    torch = torch_pin(declared)
    return torch is not None and torch.pinned is not None and torch.url is None


def choose_generation(evidence: CudaEvidence | None, *, requested: str | None,
                      cuda: str | None, has_torch: bool,
                      retry: str = "samebits init NAME --from FILE --generation G",
                      ) -> tuple[str, str | None, str]:
    """(generation, CUDA line or None, why); ``retry`` is the command a hint suggests."""
    gens = registry().generations
    gpus = [g for g in gens.values() if g.needs_cuda]
    line = cuda or (evidence.line if evidence else None)
    if requested == "cpu":
        return "cpu", None, "--generation cpu" + (
            f" (a CUDA {evidence.line} build of torch runs on the CPU)"
            if evidence and evidence.line else "")
    if requested is not None:
        if line is None:
            raise UsageError(f"--generation {requested}: cannot tell the CUDA line of "
                             + (evidence.what if evidence else
                                "this environment (no CUDA build of torch is pinned)"),
                             hint="pass --cuda X.Y, or pin torch to a CUDA build")
        return requested, line, "--generation" + (f"; CUDA {line} from {evidence.what}"
                                                  if evidence and not cuda else "")
    if evidence is None or evidence.line is None:
        why = evidence.what if evidence else (
            "no CUDA build of torch is pinned" if has_torch else "no torch")
        return "cpu", None, f"{why}: generation cpu (pass --generation for a GPU)"
    fitting = [g.name for g in gpus if g.cuda_problem(evidence.line) is None
               and (not evidence.sm or all(sass_runs_on(evidence.sm, cc)
                                           for cc in g.compute_capabilities))]
    if len(fitting) == 1:
        return fitting[0], evidence.line, (f"the only generation CUDA {evidence.line} serves "
                                           f"({evidence.what})")
    raise UsageError(
        f"{evidence.what} is a CUDA {evidence.line} build: pass --generation "
        + (", ".join(fitting[:-1]) + f" or {fitting[-1]}" if len(fitting) > 1 else "")
        + (f" (the GPUs CUDA {evidence.line} serves), or --generation cpu to run it without a "
           "GPU" if fitting else f"cpu: no GPU generation samebits knows runs CUDA "
           f"{evidence.line}"),
        hint=retry)

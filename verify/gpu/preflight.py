"""Preflight: everything that would make the workloads fail or mislead, said before they run.

``check(facts, device=, lock=)`` is pure and returns every problem, not the first:

    driver-cuda    the driver provides an older CUDA than the lock's ``__cuda``
                   ("driver 535.104.05 provides CUDA 12.2; this lock needs >= 12.4")
    driver-torch   the driver's CUDA major is older than the one torch was built for
    no-kernel      a GPU's compute capability is not in torch's arch list: every kernel would
                   fail with "no kernel image is available for execution on the device"
    lock-gpu       the GPU is not of the lock's generation (a B300, 10.3, is Blackwell: the
                   registry's ``members``), or, for a lock of no known generation, not one of
                   its compute capabilities
    cpu-only-torch a CPU-only torch on a machine whose driver sees GPUs
    library-path   LD_LIBRARY_PATH names folders outside the environment (and outside the
                   driver's own): a library there is loaded instead of the locked one
    preload        LD_PRELOAD injects a library into every process

The two library checks apply to the CPU too; they need the environment's ``prefix``.

``PreflightError`` (exit 1) carries them all. It extends the tree of ``samebits.errors``:

    SamebitsError
    └── PreflightError   exit 1: this machine cannot give meaningful bits for this lock
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from samebits.childenv import DRIVER_LIB_DIRS
from samebits.errors import EXIT_DIFFERENT, SamebitsError, UsageError, plural
from samebits.spec.gpus import registry, sass_runs_on
from verify.gpu.facts import Facts, GpuFacts


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    check: str
    message: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        return {"check": self.check, "message": self.message, "hint": self.hint}


class PreflightError(SamebitsError):
    exit_code = EXIT_DIFFERENT
    kind = "preflight"

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        lines = [p.message for p in problems]
        head = lines[0] if len(lines) == 1 else (
            f"preflight found {len(lines)} problems:\n  " + "\n  ".join(lines))
        hints = [p.hint for p in problems if p.hint]
        super().__init__(head, hint="; ".join(dict.fromkeys(hints)) or None)

    def to_json(self) -> dict[str, object]:
        out = super().to_json()
        out["problems"] = [p.to_json() for p in self.problems]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LockNeeds:
    """What a lockfile asks of the machine (its ``samebits.*`` custom metadata)."""

    path: str
    cuda: str | None
    compute_capabilities: tuple[str, ...]
    generation: str | None
    environment: str | None = None

    @classmethod
    def read(cls, path: Path) -> LockNeeds:
        """A samebits (conda-lock) lock's needs; a lock of another format records none (its
        conversion would need an index for nothing)."""
        from samebits.lock.model import parse_lock
        from samebits.lock.read import lock_format

        if lock_format(path) != "conda-lock":
            return cls(path=str(path), cuda=None, compute_capabilities=(), generation=None)
        lock = parse_lock(path)
        ccs = tuple(c.strip() for c in (lock.meta("compute-capabilities") or "").split(",")
                    if c.strip())
        return cls(path=str(path), cuda=lock.meta("__cuda") or None, compute_capabilities=ccs,
                   generation=lock.meta("generation"), environment=lock.meta("environment"))


def resolve_device(facts: Facts, requested: str) -> str:
    """"auto" -> "cuda:0" when torch can use a GPU, else "cpu"; "cuda" -> "cuda:0"."""
    if requested == "auto":
        return "cuda:0" if facts.torch.cuda_available else "cpu"
    if requested == "cuda":
        return "cuda:0"
    if requested == "cpu" or re.fullmatch(r"cuda:\d+", requested):
        return requested
    raise UsageError(f"--device {requested!r}: expected auto, cpu, cuda or cuda:N")




def library_problems(facts: Facts, prefix: str) -> list[Problem]:
    """LD_LIBRARY_PATH folders outside ``prefix`` and LD_PRELOAD: other bits than the lock's."""
    env = dict(facts.env)
    out = []
    root = prefix.rstrip("/") + "/"
    outside = [d for d in env.get("LD_LIBRARY_PATH", "").split(":")
               if d and not (d.rstrip("/") + "/").startswith(root)
               and d.rstrip("/") not in DRIVER_LIB_DIRS]
    if outside:
        out.append(Problem(
            check="library-path",
            message=f"LD_LIBRARY_PATH points outside the environment ({prefix}): "
                    f"{', '.join(outside)}; a library found there is loaded instead of the "
                    "locked one",
            hint="unset LD_LIBRARY_PATH (the environment finds its own libraries)"))
    if env.get("LD_PRELOAD"):
        out.append(Problem(
            check="preload",
            message=f"LD_PRELOAD={env['LD_PRELOAD']} injects a library into every process",
            hint="unset LD_PRELOAD"))
    return out


def check(facts: Facts, *, device: str, requested: str = "auto",
          lock: LockNeeds | None = None, prefix: str | None = None) -> tuple[Problem, ...]:
    problems: list[Problem] = library_problems(facts, prefix) if prefix else []
    if requested == "cpu":  # attesting the CPU on purpose: the GPU side is not in question
        return tuple(problems)
    driver = facts.driver
    if driver is not None and lock is not None and lock.cuda and _older(driver.cuda, lock.cuda):
        problems.append(Problem(
            check="driver-cuda",
            message=f"driver {driver.version} provides CUDA {driver.cuda}; this lock needs >= "
                    f"{lock.cuda} ({lock.path}: __cuda = \"{lock.cuda}\")",
            hint=_driver_hint(lock.cuda)))
    if driver is not None and facts.torch.cuda and _older_major(driver.cuda, facts.torch.cuda):
        problems.append(Problem(
            check="driver-torch",
            message=f"driver {driver.version} provides CUDA {driver.cuda}; torch "
                    f"{facts.torch.version} was built for CUDA {facts.torch.cuda}",
            hint=_driver_hint(facts.torch.cuda)))
    if facts.gpus and not facts.torch.cuda:
        names = sorted({g.name for g in facts.gpus})
        problems.append(Problem(
            check="cpu-only-torch",
            message=f"torch {facts.torch.version} is a CPU-only build, but this machine has "
                    f"{plural(len(facts.gpus), 'GPU')} ({', '.join(names)}): the workloads would "
                    "run on the CPU",
            hint="install the lock's CUDA build of torch, or pass --device cpu to attest the "
                 "CPU on purpose"))
    for gpu in _used_gpus(facts, device):
        problems.extend(_gpu_problems(facts, gpu, lock))
    return tuple(problems)


def _used_gpus(facts: Facts, device: str) -> list[GpuFacts]:
    if device == "cpu":
        return []
    gpu = facts.gpu(int(device.split(":", 1)[1]))
    return [gpu] if gpu is not None else []


def _gpu_problems(facts: Facts, gpu: GpuFacts, lock: LockNeeds | None) -> list[Problem]:
    out = []
    cc = gpu.compute_capability
    sms = [a for a in facts.torch.arch_list if a.startswith("sm_")]
    ptx = [a for a in facts.torch.arch_list if a.startswith("compute_")]
    if cc and facts.torch.arch_list and not sass_runs_on(
            [_arch_cc(a) for a in sms], cc) and not any(_cc_le(_arch_cc(p), cc) for p in ptx):
        out.append(Problem(
            check="no-kernel",
            message=f"GPU {gpu.index} ({gpu.name}) has compute capability {cc}, but torch "
                    f"{facts.torch.version} carries kernels for {', '.join(sms) or 'none'} only: "
                    "every workload would fail with \"no kernel image is available for "
                    "execution on the device\"",
            hint=f"install a torch build whose arch list covers sm_{cc.replace('.', '')}"))
    if lock is not None and lock.compute_capabilities and cc and not _in_lock(lock, cc):
        out.append(Problem(
            check="lock-gpu",
            message=f"{lock.path} targets {lock.generation or 'other GPUs'} (compute capability "
                    f"{', '.join(lock.compute_capabilities)}); GPU {gpu.index} is {gpu.name} "
                    f"({cc})",
            hint="use the lockfile for this GPU's generation"))
    return out


def _in_lock(lock: LockNeeds, cc: str) -> bool:
    gen = registry().generations.get(lock.generation or "")
    return cc in (gen.all_capabilities if gen is not None else lock.compute_capabilities)


def _arch_cc(arch: str) -> str:
    """"sm_90a" -> "9.0", "sm_120" -> "12.0", "compute_75" -> "7.5"."""
    digits = re.sub(r"\D", "", arch.split("_", 1)[1])
    return f"{digits[:-1]}.{digits[-1]}"


def _cc_le(a: str, b: str) -> bool:
    return tuple(int(x) for x in a.split(".")) <= tuple(int(x) for x in b.split("."))


def _older(have: str, need: str) -> bool:
    try:
        return Version(have) < Version(need)
    except InvalidVersion:
        return False


def _older_major(have: str, need: str) -> bool:
    try:
        return Version(have).major < Version(need).major
    except InvalidVersion:
        return False


def _driver_hint(cuda: str) -> str:
    v = Version(cuda)
    release = registry().release(f"{v.major}.{v.minor}")
    floor = release.driver if release else None
    return (f"CUDA {v.major}.{v.minor} needs driver >= {floor}" if floor
            else f"install a driver that provides CUDA >= {v.major}.{v.minor}")

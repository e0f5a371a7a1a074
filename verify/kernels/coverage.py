"""Kernel coverage: on which GPUs an environment's CUDA code runs, decided from its fatbins.

Per library (one ELF file with fatbins, ``LibraryCode``) and compute capability X.Y, each
fatbin is decided on its own (a library keeps one fatbin per translation unit):

    native  it holds SASS that runs on X.Y: ``sm_XZ`` or ``sm_XZf`` with Z <= Y (SASS runs on
            later minors of its major: sm_86 on an sm_89 Ada card, sm_100 on a B300's 10.3);
            ``sm_XYa`` only on exactly X.Y
    jit     no such SASS, but PTX the driver can compile for X.Y: ``compute_AB`` with A.B <=
            X.Y (any major), ``compute_XZf`` with Z <= Y, ``compute_XYa`` exactly. The driver
            must know that PTX's ISA version: the floor is the driver of the CUDA release that
            introduced it (``samebits.spec.gpus`` ``cuda-releases``)
    none    neither: "no kernel image is available for execution on the device"

The library is ``native`` when some of its fatbins run natively (those that need the JIT are
counted: cuFFT ships many kernels as PTX only, on every GPU), ``jit`` when none does but some
JIT-compile (a library built for ``compute_90`` alone, on a Blackwell), ``none`` when nothing
runs. Fatbins that hold code for other architectures only (cuBLASLt's ``sm_90a`` kernels
seen from an A100) are counted as ``uncovered``: libraries pick kernels by architecture and
never launch them there. Per environment and X.Y the worst library decides (none > jit >
native), and every failing library is named with what it does carry; a generation is decided
per member X.Y.

An environment in which only optional libraries fail (anything but the ``core`` ones the
registry names: torch's own, cuBLAS, cuDNN, NCCL) is ``partial``: it runs, and what those
libraries do fails there (cuSPARSELt, for 2:4 sparsity, needs sm_80 and later).

With a driver given, PTX newer than that driver's CUDA does not count (it cannot be
JIT-compiled). What the CUDA runtime itself asks of the driver: ``verify.kernels.driverfloor``; the
one-line summary: ``verify.kernels.report.runs_on_line``. Everything here is pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from samebits.spec.gpus import Registry, cc_key, registry
from verify.kernels.cudastack import CudaStack
from verify.kernels.fatbin import FileCode

COVERAGE_FORMAT = 1
Status = Literal["native", "jit", "none"]
EnvStatus = Literal["native", "jit", "partial", "none", "no-cuda"]
_RANK = {"native": 0, "jit": 1, "none": 2}


# ------------------------------------------------------------------ targets


@dataclass(frozen=True, slots=True, order=True)
class Target:
    """One entry as coverage sees it. Tokens: ``sm_90a``, ``compute_121/9.2`` (PTX ISA 9.2),
    ``kind8_75`` (an entry of another kind: LTO-IR; never loaded by the driver as is)."""

    kind: str          # "sass" | "ptx" | "kind<N>"
    arch: int
    variant: str = ""  # "" | "a" | "f"
    isa: str = ""      # PTX only

    @property
    def cc(self) -> tuple[int, int]:
        return divmod(self.arch, 10)

    @property
    def token(self) -> str:
        if self.kind == "sass":
            return f"sm_{self.arch}{self.variant}"
        if self.kind == "ptx":
            return f"compute_{self.arch}{self.variant}/{self.isa}"
        return f"{self.kind}_{self.arch}"

    @property
    def name(self) -> str:
        """``sm_90a``, ``compute_121``: the token without the ISA version."""
        return self.token.split("/")[0]

    @classmethod
    def parse(cls, token: str) -> Target:
        head, _, isa = token.partition("/")
        prefix, _, rest = head.rpartition("_")
        variant = rest[-1] if rest[-1:] in ("a", "f") else ""
        arch = int(rest[:-1] if variant else rest)
        kind = {"sm": "sass", "compute": "ptx"}.get(prefix, prefix)
        return cls(kind=kind, arch=arch, variant=variant, isa=isa)

    def runs_natively(self, cc: tuple[int, int]) -> bool:
        if self.kind != "sass":
            return False
        if self.variant == "a":
            return self.cc == cc
        return self.cc[0] == cc[0] and self.cc[1] <= cc[1]

    def jit_compiles(self, cc: tuple[int, int]) -> bool:
        if self.kind != "ptx":
            return False
        if self.variant == "a":
            return self.cc == cc
        if self.variant == "f":
            return self.cc[0] == cc[0] and self.cc[1] <= cc[1]
        return self.cc <= cc


def _targets(code: FileCode) -> Counter[tuple[Target, ...]]:
    """Distinct target sets of the file's fatbins (empty ones left out), fatbins each. Keys
    are plain tuples while counting (tens of thousands of entries), Targets at the end."""
    keys: Counter[tuple[tuple[str, int, str, str], ...]] = Counter()
    for fat in code.fatbins:
        if fat.empty:
            continue
        keys[tuple(sorted({("sass" if e.kind == 2 else "ptx" if e.kind == 1 else f"kind{e.kind}",
                            e.arch, e.variant,
                            f"{e.version[0]}.{e.version[1]}" if e.kind == 1 else "")
                           for e in fat.entries}))] += 1
    made: dict[tuple[str, int, str, str], Target] = {}
    groups: Counter[tuple[Target, ...]] = Counter()
    for key, n in keys.items():
        ts = tuple(made.setdefault(k, Target(kind=k[0], arch=k[1], variant=k[2], isa=k[3]))
                   for k in key)
        groups[tuple(sorted(ts))] += n
    return groups


# ------------------------------------------------------------------ libraries


@dataclass(frozen=True, slots=True, kw_only=True)
class LibraryCode:
    """The device code of one file, summarised: what ``samebits check`` keeps and caches."""

    path: str
    package: str | None
    fatbins: int                                        # fatbins that may hold kernels
    groups: tuple[tuple[tuple[Target, ...], int], ...]  # distinct target sets, fatbins each
    compression: tuple[tuple[str, int], ...] = ()       # entries per compression
    empty_fatbins: int = 0                              # known to define no kernel: skipped
    relocatable_bytes: int = 0
    error: str | None = None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def label(self) -> str:
        return f"{self.name} [{self.package}]" if self.package else self.path

    def targets(self) -> list[Target]:
        return sorted({t for ts, _ in self.groups for t in ts})

    def sass(self) -> list[str]:
        return _arch_sorted(t.token for t in self.targets() if t.kind == "sass")

    def ptx(self) -> list[str]:
        return _arch_sorted(t.token for t in self.targets() if t.kind == "ptx")

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "package": self.package, "fatbins": self.fatbins,
                "sass": self.sass(), "ptx": self.ptx(),
                "groups": [{"targets": [t.token for t in ts], "fatbins": n}
                           for ts, n in self.groups],
                "compression": dict(self.compression), "empty_fatbins": self.empty_fatbins,
                "relocatable_bytes": self.relocatable_bytes, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LibraryCode:
        return cls(path=d["path"], package=d.get("package"), fatbins=int(d["fatbins"]),
                   groups=tuple((tuple(Target.parse(t) for t in g["targets"]),
                                 int(g["fatbins"])) for g in d["groups"]),
                   compression=tuple(sorted(dict(d.get("compression", {})).items())),
                   empty_fatbins=int(d.get("empty_fatbins", 0)),
                   relocatable_bytes=int(d.get("relocatable_bytes", 0)), error=d.get("error"))


def _arch_sorted(tokens: Iterable[str]) -> list[str]:
    def key(tok: str) -> tuple[int, str]:
        t = Target.parse(tok)
        return t.arch, tok
    return sorted(set(tokens), key=key)


def library_code(path: str, package: str | None, code: FileCode) -> LibraryCode | None:
    """The summary of one file's code; None for a file with no kernel and no problem."""
    groups = _targets(code)
    if not groups and code.error is None:
        return None
    comp = Counter(e.compression for f in code.fatbins for e in f.entries)
    empty = sum(1 for f in code.fatbins if f.empty)
    return LibraryCode(
        path=path, package=package, fatbins=len(code.fatbins) - empty,
        groups=tuple(sorted(groups.items(), key=lambda kv: (-kv[1], [t.token for t in kv[0]]))),
        compression=tuple(sorted(comp.items())), empty_fatbins=empty,
        relocatable_bytes=code.relocatable_bytes, error=code.error)


@dataclass(frozen=True, slots=True, kw_only=True)
class LibraryDecision:
    library: LibraryCode
    status: Status
    sass: tuple[str, ...] = ()      # the SASS that runs natively
    ptx: str | None = None          # the newest-ISA PTX the JIT needs, as a token
    jit_fatbins: int = 0            # fatbins that run only by JIT
    uncovered: int = 0              # fatbins with no code for this GPU
    blocked: int = 0                # of those, fatbins whose PTX is too new for the driver
    uncovered_targets: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.library.path, "package": self.library.package,
                               "status": self.status}
        if self.sass:
            out["sass"] = list(self.sass)
        if self.ptx:
            out["ptx"] = self.ptx
            out["jit_fatbins"] = self.jit_fatbins
        if self.blocked:
            out["blocked_by_driver"] = self.blocked
        if self.uncovered:
            out["uncovered_fatbins"] = self.uncovered
            out["of"] = self.library.fatbins
            out["uncovered_targets"] = list(self.uncovered_targets)
        if self.status == "none":
            out["carries"] = self.library.sass() + self.library.ptx()
        return out


def decide_library(lib: LibraryCode, cc: tuple[int, int],
                   max_isa: tuple[int, int] | None = None) -> LibraryDecision:
    """One library on compute capability ``cc``; with ``max_isa`` (the newest PTX ISA the
    driver knows), PTX of a newer ISA does not count: the driver cannot compile it."""
    native = jit = uncovered = blocked = 0
    sass: set[str] = set()
    ptx: list[Target] = []
    missing: set[str] = set()
    for targets, n in lib.groups:
        runs = [t for t in targets if t.runs_natively(cc)]
        if runs:
            native += n
            sass.add(max(runs, key=lambda t: (t.cc, t.variant == "a")).name)
            continue
        jits = [t for t in targets if t.jit_compiles(cc)]
        usable = [t for t in jits if max_isa is None or not t.isa or cc_key(t.isa) <= max_isa]
        if usable:
            jit += n
            ptx.append(max(usable, key=lambda t: (t.cc, cc_key(t.isa) if t.isa else (0, 0))))
            continue
        blocked += n if jits else 0
        uncovered += n
        missing.update(t.name for t in targets)
    best = max(ptx, key=lambda t: cc_key(t.isa) if t.isa else (0, 0)) if ptx else None
    status: Status = "native" if native else "jit" if jit else "none"
    return LibraryDecision(library=lib, status=status, sass=tuple(_arch_sorted(sass)),
                           ptx=best.token if best else None, jit_fatbins=jit,
                           uncovered=uncovered, blocked=blocked,
                           uncovered_targets=tuple(_arch_sorted(missing)))


# ------------------------------------------------------------------ environments


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    """The device code of one environment (an installed prefix, or one platform of a lock)."""

    libraries: tuple[LibraryCode, ...]
    stack: CudaStack = field(default_factory=CudaStack)
    elf_files: int = 0  # ELF files read

    def to_dict(self) -> dict[str, Any]:
        return {"format": COVERAGE_FORMAT, "elf_files": self.elf_files,
                "stack": self.stack.to_dict(),
                "libraries": [lib.to_dict() for lib in self.libraries]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Coverage:
        return cls(libraries=tuple(LibraryCode.from_dict(x) for x in d["libraries"]),
                   stack=CudaStack.from_dict(d.get("stack", {})),
                   elf_files=int(d.get("elf_files", 0)))


@dataclass(frozen=True, slots=True, kw_only=True)
class CcDecision:
    cc: str
    generation: str | None
    status: EnvStatus
    libraries: tuple[LibraryDecision, ...]
    jit_driver: str | None = None    # the oldest driver that JIT-compiles every PTX needed
    jit_isa: str | None = None
    reason: str = ""

    @property
    def sm(self) -> str:
        return "sm_" + self.cc.replace(".", "")

    @property
    def runs(self) -> bool:
        """It runs, possibly without some optional library's kernels (``partial``)."""
        return self.status in ("native", "jit", "partial")

    def failing(self) -> list[LibraryDecision]:
        return [d for d in self.libraries if d.status == "none"]

    def to_dict(self) -> dict[str, Any]:
        counts = Counter(d.status for d in self.libraries)
        return {"cc": self.cc, "sm": self.sm, "generation": self.generation,
                "status": self.status, "reason": self.reason,
                "libraries": {k: counts.get(k, 0) for k in ("native", "jit", "none")},
                "native": {d.library.path: list(d.sass) for d in self.libraries
                           if d.status == "native"},
                "failing": [d.to_dict() for d in self.failing()],
                "jit": [d.to_dict() for d in self.libraries if d.ptx and d.status != "none"],
                "partial": [d.to_dict() for d in self.libraries
                            if d.status != "none" and d.uncovered],
                "jit_driver": self.jit_driver, "jit_ptx_isa": self.jit_isa}


def _library_order(d: LibraryDecision) -> tuple[int, str]:
    # torch's own library first: it is what "no kernel image" is about in most reports
    return (0 if d.library.name.startswith("libtorch_cuda") else 1, d.library.path)


def decide(cov: Coverage, cc: str, *, driver: str | None = None,
           reg: Registry | None = None) -> CcDecision:
    """Does the environment run on compute capability ``cc``, with ``driver`` if given?"""
    reg = reg or registry()
    key = cc_key(cc)
    gen = reg.generation_of(cc)
    have = known = None
    if driver is not None:
        have = reg.driver_cuda(driver)
        known = reg.release(have) if have else None
    max_isa = cc_key(known.ptx_isa) if known else (0, 0) if driver is not None else None
    decisions = tuple(sorted((decide_library(lib, key, max_isa) for lib in cov.libraries
                              if lib.fatbins), key=_library_order))
    gname = gen.name if gen else None
    if not decisions:
        return CcDecision(cc=cc, generation=gname, status="no-cuda", libraries=(),
                          reason="no CUDA device code in this environment")
    worst: Status = max((d.status for d in decisions), key=_RANK.__getitem__)
    failing = [d for d in decisions if d.status == "none"]
    core = [d for d in failing if reg.is_core_library(d.library.name)]
    status: EnvStatus = worst
    if failing and not core and len(failing) < len(decisions):
        status = "partial"
    isas = [Target.parse(d.ptx).isa for d in decisions if d.status != "none" and d.ptx]
    isa = max(isas, key=cc_key) if isas else None
    release = reg.release_for_ptx(isa) if isa else None
    jit_driver = release.driver if release else None
    sm = "sm_" + cc.replace(".", "")
    reason = ""
    if status in ("none", "partial"):
        names = [d.library.name for d in failing]
        more = f" and {len(names) - 2} more" if len(names) > 2 else ""
        reason = f"no {sm} in {', '.join(names[:2])}{more}"
        if any(d.blocked for d in failing):
            reason += (f" that driver {driver} (CUDA {have or 'older than 11.0'}) can use: "
                       "their PTX is newer")
        if status == "partial":
            reason = f"runs, but {reason}: those libraries' kernels fail there"
    elif status == "jit":
        names = [d.library.name for d in decisions if d.status == "jit"]
        floor = f"driver >= {jit_driver}" if jit_driver else \
            "a driver newer than any CUDA release samebits knows"
        reason = f"{', '.join(names)} only by PTX JIT (the JIT needs PTX ISA {isa}: {floor})"
    return CcDecision(cc=cc, generation=gname, status=status, libraries=decisions,
                      jit_driver=jit_driver, jit_isa=isa, reason=reason)


def generation_decisions(cov: Coverage, *, driver: str | None = None,
                         reg: Registry | None = None) -> dict[str, list[CcDecision]]:
    """Every GPU generation of the registry (not ``cpu``) -> a decision per member X.Y."""
    reg = reg or registry()
    return {name: [decide(cov, cc, driver=driver, reg=reg) for cc in g.all_capabilities]
            for name, g in reg.generations.items() if g.all_capabilities}

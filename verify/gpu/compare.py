"""Compare two attestations: same bits? If not, which recorded facts explain it?

Equivalence classes. Two runs belong to the same class when everything that may legitimately
change bits is equal (``class_facts``):

    always  device type, suite version, torch version and git commit, every settings value,
            every recorded numerics environment variable except those that only pick a device
            or a cache (``ENV_NOT_CLASS``)
    cuda    CUDA runtime, cuDNN, cuBLAS, GPU model, compute capability, SM count
    cpu     CPU vendor, ISA (ATen's capability plus bf16/fp16/AMX/VNNI/SVE flags), torch threads

A value this torch could not give (``unavailable (torch 2.0.1 has no ...)``,
``verify.gpu.facts.torchapi``) equals any other unavailable value: ``comparable``.

Relevance (``irrelevant``): a fact is in a run's class only if that run could have used it:
no CUDA setting or variable (``CUDA_ONLY``) where no CUDA ran, no OpenBLAS variable where
torch's BLAS (``BLAS_INFO`` in ``torch.__config__.show()``, recorded as
``torch.build_config``) is another, no MKL variable where torch does not use MKL. A fact
left out this way can explain nothing. Equal meanings are equal (``meaning``): a CUDA-only
value a run without CUDA did not record (``None``) and "no CUDA in use" are one value.

Counts (``Report.counts``): of the workloads both sides attest, how many ran on both
(identical, explained, differing) and how many gave no bits on a side (unavailable, error,
refused), each counted once.

Verdicts (``Report.verdict``):

    identical    no workload run by both differs: ``identical`` lists those with the same
                 digest, ``not_run`` those that gave no bits on either side (the same status
                 other than ok on both: unavailable, say, on two torch 2.0 CPUs): neither a
                 difference nor bits compared
    unexplained  same class, different bits: "suspect a hardware fault or undeclared drift";
                 the facts outside the class that differ (driver, UUID, ...) are listed as leads
    explained    different classes: each differing workload is attributed to the class facts
                 that differ and that it is known to be sensitive to (``catalog`` groups ->
                 ``GROUPS``); when none of those differ, to every differing class fact, flagged
                 ``expected=False``; each attributed fact comes with why it is plausible
    (``WorkloadDiff.why``: the values and what about the workload it can change, ``GROUP_WHY``)

``compare`` is pure; ``verify.gpu.errorstats.output_errors`` reads two ``--save-outputs`` folders
(torch) and its result goes into ``compare(errors=...)`` for the max absolute error and ULP
distance.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from samebits._io import compact_json, sha256_hex
from samebits.childenv import STARTUP
from samebits.errors import InputError
from verify.gpu.attest import Attestation
from verify.gpu.errorstats import OutputError
from verify.gpu.facts.torchapi import UNAVAILABLE, is_unavailable
from verify.gpu.workloads.catalog import BY_NAME, NAMES

Verdict = Literal["identical", "explained", "unexplained"]

# Recorded keys each sensitivity group of verify/gpu/workloads/catalog.py covers (fnmatch patterns).
GROUPS: dict[str, tuple[str, ...]] = {
    # what code runs: the torch build, and the start-up variables that load other code or
    # libraries than the environment's (kept by a paper's keep-env, samebits.childenv)
    "build": ("device", "suite_version", "torch.version", "torch.git_version",
              *(f"env.{name}" for name in STARTUP)),
    "isa": ("cpu.vendor", "cpu.isa", "gpu.name", "gpu.compute_capability",
            "env.ATEN_CPU_CAPABILITY", "env.DNNL_*", "env.ONEDNN_*"),
    "determinism": ("settings.profile", "settings.deterministic_*", "settings.cudnn_deterministic",
                    "settings.cudnn_benchmark", "settings.cublas_workspace_config",
                    "settings.cublas*_workspace_*", "env.CUBLAS_WORKSPACE_CONFIG"),
    "blas": ("torch.cuda", "torch.cublas", "settings.float32_matmul_precision",
             "settings.cuda_matmul_*", "settings.blas_library", "settings.mkldnn_enabled",
             "env.CUBLAS*", "env.NVIDIA_TF32_OVERRIDE", "env.TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
             "env.TORCH_BLAS_*", "env.MKL_*", "env.OPENBLAS_*"),
    "dnn": ("torch.cudnn", "settings.cudnn_*", "settings.mkldnn_enabled", "env.CUDNN_*",
            "env.NVIDIA_TF32_OVERRIDE", "env.TORCH_CUDNN_*"),
    "parallel": ("threads.*", "gpu.sm_count", "env.OMP_*", "env.MKL_*", "env.KMP_*",
                 "env.GOMP_*", "env.OPENBLAS_*"),
    "rng": ("gpu.sm_count",),
}
# Why a fact in a group can change a workload's bits (what an attribution says).
GROUP_WHY = {
    "build": "another torch build or device runs other code",
    "isa": "its kernels are picked by the instruction set (CPU ISA, GPU model)",
    "determinism": "the determinism settings pick its algorithms",
    "blas": "its matrix products go through the BLAS library and its precision settings",
    "dnn": "its convolutions go through cuDNN or oneDNN and their settings",
    "parallel": "it adds partial results across threads (or SMs), whose number sets the order "
                "of the additions",
    "rng": "its generator places random numbers by the SM count",
}
# Keys that only change bits on a GPU: irrelevant to a run that used no CUDA.
CUDA_ONLY = ("torch.cuda", "torch.cudnn", "torch.cublas", "gpu.*", "settings.cuda_*",
             "settings.cudnn_*", "settings.cublas*", "settings.blas_library", "env.CUBLAS*",
             "env.CUDNN_*", "env.CUDA_*", "env.NVIDIA_TF32_OVERRIDE",
             "env.TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "env.TORCH_CUDNN_*")
NO_CUDA = "no CUDA in use"  # what a run without CUDA records where a CUDA value would be
ENV_NOT_CLASS = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                 "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE", "TORCH_HOME", "TORCH_EXTENSIONS_DIR",
                 "PYTORCH_KERNEL_CACHE_PATH", "NCCL_*")  # NCCL: the suite runs on one device
_CLASS_COMMON = ("device", "suite_version", "torch.version", "torch.git_version")
_CLASS_CUDA = ("torch.cuda", "torch.cudnn", "torch.cublas", "gpu.name",
               "gpu.compute_capability", "gpu.sm_count")
_CLASS_CPU = ("cpu.vendor", "cpu.isa", "threads.intra_op")


@dataclass(frozen=True, slots=True, kw_only=True)
class FactDiff:
    key: str
    a: Any
    b: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadDiff:
    name: str
    a: str  # "ok <sha256>" or the status
    b: str
    outputs: tuple[str, ...]  # the outputs whose digests differ
    attributed_to: tuple[str, ...]
    expected: bool  # attributed_to holds a fact the workload is known to be sensitive to
    errors: tuple[OutputError, ...] = ()
    why: tuple[str, ...] = ()  # per sensitivity: the facts with their values, why plausible


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    source: str
    device: str
    class_id: str
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    verdict: Verdict
    a: Side
    b: Side
    same_class: bool
    class_differences: tuple[FactDiff, ...]
    other_differences: tuple[FactDiff, ...]
    identical: tuple[str, ...]  # the same digest on both sides
    different: tuple[WorkloadDiff, ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    not_run: tuple[str, ...] = ()  # no bits on either side: the same non-ok status on both

    statuses: tuple[tuple[str, str, str], ...] = ()  # (name, authors' status, reviewer's)

    @property
    def compared(self) -> int:
        """How many workloads gave bits on at least one side (identical + different)."""
        return len(self.identical) + len(self.different)

    def counts(self) -> dict[str, int]:
        """Each workload both sides attest counted once: ``both_ran`` (ok on both sides:
        ``identical``, ``explained`` or ``differing``), else by the status that kept its bits
        from one side (``unavailable``, ``error``, ``refused``, ``other``)."""
        diffs = {d.name: d for d in self.different}
        out = dict.fromkeys(("workloads", "both_ran", "identical", "explained", "differing",
                             "unavailable", "error", "refused", "other"), 0)
        for name, sa, sb in self.statuses:
            out["workloads"] += 1
            if sa == sb == "ok":
                out["both_ran"] += 1
                d = diffs.get(name)
                out["identical" if d is None else "explained"
                    if d.expected and not self.same_class else "differing"] += 1
                continue
            bad = {sa, sb} - {"ok"}
            kind = next((k for k in ("error", "unavailable", "refused") if k in bad), "other")
            out[kind] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def flat_facts(att: Attestation) -> dict[str, Any]:
    """Every recorded fact and setting under one dotted key ("threads.intra_op")."""
    f = att.facts
    out: dict[str, Any] = {"device": att.device_type, "suite_version": att.suite_version,
                           "samebits": att.samebits, "device_name": att.device,
                           "cpu.isa": f.cpu_isa}
    doc = f.to_dict()
    for section in ("torch", "driver", "cpu", "threads"):
        for k, v in (doc[section] or {}).items():
            out[f"{section}.{k}"] = v
    gpu = f.gpu(int(att.device.split(":")[1])) if att.device_type == "cuda" else None
    if gpu is not None:
        for k, v in doc["gpus"][f.gpus.index(gpu)].items():
            out[f"gpu.{k}"] = v
    out["gpus"] = [f"{g.name} {g.uuid}" for g in f.gpus]
    out["glibc"], out["python"] = f.glibc, f.python
    out.update({f"env.{k}": v for k, v in f.env})
    out.update({f"settings.{k}": v for k, v in att.settings.items()})
    return out


def torch_blas(att: Attestation) -> str | None:
    """The BLAS torch was built with (``BLAS_INFO=mkl`` in its build config), None unknown."""
    config = att.facts.torch.build_config or ""
    m = re.search(r"BLAS_INFO=([A-Za-z0-9_]+)", config)
    return m.group(1).lower() if m else None


def irrelevant(key: str, att: Attestation) -> str | None:
    """Why ``att``'s run could not have used the fact ``key``; None when it could."""
    if att.device_type != "cuda" and _matches(key, CUDA_ONLY):
        return "a CUDA fact, and this run used no CUDA"
    blas = torch_blas(att)
    if blas is None:
        return None
    config = att.facts.torch.build_config or ""
    if key.startswith("env.OPENBLAS_") and blas not in ("open", "openblas"):
        return f"an OpenBLAS variable, and torch's BLAS is {blas} (torch.__config__)"
    if key.startswith("env.MKL_") and blas != "mkl" and "USE_MKL=ON" not in config:
        return f"an MKL variable, and torch's BLAS is {blas} without MKL (torch.__config__)"
    return None


def meaning(key: str, value: Any, att: Attestation | None) -> Any:
    """A recorded value as a comparison reads it: ``comparable``, and for a run without CUDA
    every CUDA-only value it did not record (None) is the "no CUDA in use" it would write."""
    if att is not None and att.device_type != "cuda" and _matches(key, CUDA_ONLY) and (
            value is None or value == NO_CUDA):
        return NO_CUDA
    return comparable(value)


def is_class_key(key: str, device_type: str) -> bool:
    if key.startswith("env."):
        return not any(fnmatch.fnmatchcase(key[4:], p) for p in ENV_NOT_CLASS)
    if key.startswith("settings."):
        return True
    extra = _CLASS_CUDA if device_type == "cuda" else _CLASS_CPU
    return key in _CLASS_COMMON or key in extra


def comparable(value: Any) -> Any:
    """A recorded value as comparisons see it: every "unavailable (torch 2.0.1 has no ...)"
    is the same "unavailable" (two torches that both lack an API agree on it)."""
    return UNAVAILABLE if is_unavailable(value) else value


def class_facts(att: Attestation) -> dict[str, Any]:
    """The facts that define ``att``'s equivalence class: those that may change its bits and
    that its run could have used (``irrelevant``)."""
    flat = flat_facts(att)
    keys = [k for k in flat if is_class_key(k, att.device_type)]
    extra = _CLASS_CUDA if att.device_type == "cuda" else _CLASS_CPU
    return {k: meaning(k, flat.get(k), att) for k in sorted({*keys, *_CLASS_COMMON, *extra})
            if irrelevant(k, att) is None}


def class_id(att: Attestation) -> str:
    return sha256_hex(compact_json(class_facts(att)))[:12]


def class_label(att: Attestation) -> str:
    f, flat = att.facts, flat_facts(att)
    if att.device_type == "cuda":
        sm = str(flat.get("gpu.compute_capability")).replace(".", "")
        return (f"{flat.get('gpu.name')} (sm_{sm}, {flat.get('gpu.sm_count')} SMs), "
                f"CUDA {f.torch.cuda}, cuDNN {f.torch.cudnn}, "
                f"cuBLAS {f.torch.cublas}, torch {f.torch.version}")
    n = f.threads.intra_op
    return (f"cpu {f.cpu.vendor} {f.cpu_isa}, {n} thread{'s' if n != 1 else ''}, "
            f"torch {f.torch.version}")


def _side(att: Attestation) -> Side:
    return Side(source=att.source, device=att.device, class_id=class_id(att),
                label=class_label(att))


def _diffs(a: Mapping[str, Any], b: Mapping[str, Any], keys: Iterable[str],
           sides: tuple[Attestation, Attestation] | None = None) -> list[FactDiff]:
    x, y = sides or (None, None)
    return [FactDiff(key=k, a=a.get(k), b=b.get(k)) for k in sorted(set(keys))
            if meaning(k, a.get(k), x) != meaning(k, b.get(k), y)]


def _state(rec: Mapping[str, Any] | None) -> str:
    if rec is None:
        return "absent"
    return f"ok {rec.get('sha256')}" if rec.get("status") == "ok" else str(rec.get("status"))


def _matches(key: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(key, p) for p in patterns)


def _value(v: Any) -> str:
    text = "—" if v is None else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


def fact_why(d: FactDiff) -> str:
    """A differing fact with its values and what it can change (for results of any code)."""
    group = next((g for g, patterns in GROUPS.items() if _matches(d.key, patterns)), None)
    what = GROUP_WHY[group].replace("its ", "the ").replace("it adds", "code that adds") \
        if group else "it may change results"
    return f"{d.key} {_value(d.a)} → {_value(d.b)}: {what}"


def attribute(workload: str, class_diffs: Iterable[FactDiff], *,
              cpu_only: bool = False) -> tuple[tuple[str, ...], bool]:
    """The differing class facts that explain ``workload``, and whether any is expected."""
    hits, expected, _ = attribution(workload, class_diffs, cpu_only=cpu_only)
    return hits, expected


def attribution(workload: str, class_diffs: Iterable[FactDiff], *, cpu_only: bool = False
                ) -> tuple[tuple[str, ...], bool, tuple[str, ...]]:
    """(the differing class facts that explain ``workload``, whether any is expected, why each
    is plausible).

    Expected: facts in the workload's sensitivity groups (minus GPU-only ones when both runs
    used the CPU). When none of those differ, every differing class fact, flagged unexpected.
    """
    diffs = list(class_diffs)
    spec = BY_NAME.get(workload)
    groups = spec.sensitive_to if spec else ()
    by_group: dict[str, list[str]] = {}
    hits: list[str] = []
    for d in diffs:
        if cpu_only and _matches(d.key, CUDA_ONLY):
            continue
        group = next((g for g in groups if _matches(d.key, GROUPS[g])), None)
        if group is not None:
            hits.append(d.key)
            by_group.setdefault(group, []).append(f"{d.key} {_value(d.a)} → {_value(d.b)}")
    if hits:
        return tuple(hits), True, tuple(f"{', '.join(facts)}: {GROUP_WHY[g]} ({g})"
                                        for g, facts in by_group.items())
    return (tuple(d.key for d in diffs), False,
            tuple(f"{d.key} {_value(d.a)} → {_value(d.b)}: not among what {workload} is "
                  f"known to be sensitive to ({', '.join(groups) or 'nothing recorded'})"
                  for d in diffs))


def compare(a: Attestation, b: Attestation, *,
            errors: Mapping[str, tuple[OutputError, ...]] | None = None) -> Report:
    flat_a, flat_b = flat_facts(a), flat_facts(b)
    cls_a, cls_b = class_facts(a), class_facts(b)
    class_diffs = _diffs(flat_a, flat_b, {*cls_a, *cls_b}, (a, b))  # the values as recorded
    other_keys = {*flat_a, *flat_b} - {*cls_a, *cls_b}
    other_diffs = _diffs(flat_a, flat_b, other_keys, (a, b))
    order = {n: i for i, n in enumerate(NAMES)}
    common = sorted(set(a.workloads) & set(b.workloads), key=lambda n: (order.get(n, 1 << 30), n))
    if not common:
        raise InputError(f"{a.source} and {b.source} have no workload in common")
    identical: list[str] = []
    not_run: list[str] = []
    different: list[WorkloadDiff] = []
    statuses: list[tuple[str, str, str]] = []
    for name in common:
        ra, rb = a.workloads[name], b.workloads[name]
        sa, sb = _state(ra), _state(rb)
        statuses.append((name, str(ra.get("status")), str(rb.get("status"))))
        if sa == sb:
            (identical if sa.startswith("ok ") else not_run).append(name)
            continue
        outs_a = {o["name"]: o.get("sha256") for o in ra.get("outputs", ())}
        outs_b = {o["name"]: o.get("sha256") for o in rb.get("outputs", ())}
        outs = tuple(o for o in dict.fromkeys([*outs_a, *outs_b]) if outs_a.get(o) != outs_b.get(o))
        cpu_only = a.device_type == b.device_type == "cpu"
        hits, expected, why = (attribution(name, class_diffs, cpu_only=cpu_only)
                               if class_diffs else ((), False, ()))
        different.append(WorkloadDiff(name=name, a=sa, b=sb, outputs=outs, attributed_to=hits,
                                      expected=expected, errors=(errors or {}).get(name, ()),
                                      why=why))
    same = not class_diffs
    verdict: Verdict = "identical" if not different else ("unexplained" if same else "explained")
    return Report(
        verdict=verdict, a=_side(a), b=_side(b), same_class=same,
        class_differences=tuple(class_diffs), other_differences=tuple(other_diffs),
        identical=tuple(identical), different=tuple(different), not_run=tuple(not_run),
        statuses=tuple(statuses),
        only_in_a=tuple(sorted(set(a.workloads) - set(b.workloads))),
        only_in_b=tuple(sorted(set(b.workloads) - set(a.workloads))),
    )

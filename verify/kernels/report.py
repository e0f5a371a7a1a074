"""Coverage as documents: the JSON ``samebits check --json`` prints and ``--write`` commits
(``lockfiles/<env>.coverage.json``), its Markdown twin (``.coverage.md``), and the text lines
a terminal, ``verify env`` and the audit show. All pure and byte-stable for equal inputs.

The lock document (``kind: samebits.coverage``, ``format: 1``)::

    lockfile, lock_sha256, environment       which lock, by name and digest (freshness)
    platforms: {platform: platform document}

A platform document: ``stack`` (verify.kernels.cudastack), ``driver``
(verify.kernels.coverage.DriverCheck), ``elf_files``, ``libraries`` (one per file with device code:
SASS, PTX with its ISA, the distinct target sets of its fatbins), ``generations`` ({generation:
[decision per X.Y]}) and ``runs_on`` (the one line).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from samebits.errors import plural
from samebits.spec.gpus import Registry, registry
from verify.kernels.coverage import CcDecision, Coverage, decide, generation_decisions
from verify.kernels.driverfloor import driver_check

DOC_KIND = "samebits.coverage"
DOC_FORMAT = 1
MARK = {"native": "✔", "jit": "✔", "partial": "◐", "none": "✘", "no-cuda": "–"}


def platform_doc(cov: Coverage, *, driver: str | None = None,
                 reg: Registry | None = None) -> dict[str, Any]:
    reg = reg or registry()
    gens = generation_decisions(cov, driver=driver, reg=reg)
    return {"stack": cov.stack.to_dict(), "driver": driver_check(cov.stack, driver, reg).to_dict(),
            "elf_files": cov.elf_files, "libraries": [lib.to_dict() for lib in cov.libraries],
            "generations": {g: [d.to_dict() for d in ds] for g, ds in gens.items()},
            "runs_on": runs_on_line(gens)}


def lock_doc(*, environment: str, lockfile: str, lock_sha256: str,
             platforms: Mapping[str, Coverage], reg: Registry | None = None) -> dict[str, Any]:
    """The committed document: each platform's libraries once, the decisions without the
    per-library lists of what each carries (``libraries`` has them)."""
    docs = {p: _lean(platform_doc(c, reg=reg)) for p, c in sorted(platforms.items())}
    return {"kind": DOC_KIND, "format": DOC_FORMAT, "environment": environment,
            "lockfile": lockfile, "lock_sha256": lock_sha256, "platforms": docs}


def _lean(doc: dict[str, Any]) -> dict[str, Any]:
    for ds in doc["generations"].values():
        for d in ds:
            for key in ("failing", "partial", "jit"):
                d[key] = [{k: v for k, v in lib.items()
                           if k not in ("carries", "uncovered_targets", "package")}
                          for lib in d[key]]
    return doc


def gpu_doc(cov: Coverage, label: str, ccs: Sequence[str], *, driver: str | None = None,
            reg: Registry | None = None) -> dict[str, Any]:
    """``check --gpu``: a decision per compute capability of what ``label`` names, and the
    driver check; ``runs`` is the verdict (every capability runs and the driver suffices)."""
    reg = reg or registry()
    decisions = [decide(cov, cc, driver=driver, reg=reg) for cc in ccs]
    drv = driver_check(cov.stack, driver, reg)
    runs = all(d.runs or d.status == "no-cuda" for d in decisions) and drv.status != "too-old"
    partial = any(d.status == "partial" for d in decisions)
    return {"gpu": label, "runs": runs, "partial": runs and partial, "driver": drv.to_dict(),
            "stack": cov.stack.to_dict(), "decisions": [d.to_dict() for d in decisions]}


# ------------------------------------------------------------------ text


def runs_on_line(decisions: Mapping[str, Sequence[CcDecision]]) -> str:
    """"Ampere ✔ Ada ✔ Hopper ✔ Blackwell ✔ (sm_100, ...) Volta ✘ (no sm_70 in ...)"."""
    order = sorted(decisions, key=lambda g: (not all(d.runs for d in decisions[g]),
                                             _GEN_ORDER.get(g, 99)))
    parts = []
    for g in order:
        ds = decisions[g]
        title = g.capitalize()
        if ds and all(d.status == "no-cuda" for d in ds):
            parts.append(f"{title} – (no CUDA code)")
        elif all(d.status in ("native", "jit") for d in ds):
            jit = sorted({lib.library.name for d in ds for lib in d.libraries
                          if lib.status == "jit"})
            sms = f" ({', '.join(d.sm for d in ds)})" if len(ds) > 1 else ""
            note = f" (JIT: {', '.join(jit)})" if jit else ""
            parts.append(f"{title} ✔{sms}{note}")
        elif all(d.runs for d in ds):
            reasons = list(dict.fromkeys(d.reason for d in ds if d.status == "partial"))
            parts.append(f"{title} ◐ ({'; '.join(reasons)})")
        else:
            reasons = list(dict.fromkeys(d.reason for d in ds if not d.runs))
            parts.append(f"{title} ✘ ({'; '.join(reasons)})")
    return " ".join(parts)


_GEN_ORDER = {"volta": 0, "ampere": 1, "ada": 2, "hopper": 3, "blackwell": 4}



def _in_order(gens: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Generations in the registry's order (a JSON round trip sorts them by name)."""
    order = list(registry().generations)
    return sorted(gens.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order
                                                else len(order), kv[0]))


def stack_line(doc: Mapping[str, Any]) -> str:
    s, d = doc["stack"], doc["driver"]
    parts = [d["message"]]
    if s.get("torch"):
        parts.append(f"torch {s['torch']} (CUDA {s.get('torch_cuda') or 'none'})")
    if s.get("cudnn"):
        parts.append(f"cuDNN {s['cudnn']}")
    if s.get("nccl"):
        parts.append(f"NCCL {s['nccl']}")
    if s.get("ptxas"):
        parts.append("ptxas " + ", ".join(sorted({p["cuda"] for p in s["ptxas"]}))
                     + " (compiles triton kernels at run time)")
    return "; ".join(parts)


def decision_line(d: Mapping[str, Any]) -> str:
    """"sm_90 (hopper): ✔ native" / "sm_70 (volta): ✘ no sm_70 in libtorch_cuda.so, ..."."""
    gen = f" ({d['generation']})" if d.get("generation") else ""
    body = "native" if d["status"] == "native" else d["reason"]
    return f"{d['sm']}{gen}: {MARK[d['status']]} {body}".rstrip()


def library_lines(d: Mapping[str, Any]) -> list[str]:
    out = []
    for lib in d["failing"]:
        out.append(f"  ✘ {lib['path']} [{lib.get('package') or '?'}] carries "
                   f"{', '.join(lib['carries']) or 'nothing'}")
    for lib in d["jit"]:
        out.append(f"  JIT {lib['path']} [{lib.get('package') or '?'}]: "
                   f"{plural(lib['jit_fatbins'], 'fatbin')} by "
                   f"{lib['ptx'].replace('/', ' PTX ISA ')}")
    for lib in d["partial"]:
        if lib.get("blocked_by_driver"):
            out.append(f"  ! {lib['path']} [{lib.get('package') or '?'}]: "
                       f"{plural(lib['blocked_by_driver'], 'fatbin')} "
                       f"{'holds' if lib['blocked_by_driver'] == 1 else 'hold'} only PTX newer "
                       "than the driver")
    return out


def gpu_text(doc: Mapping[str, Any], where: str) -> str:
    verdict = "RUNS, BUT NOT EVERY LIBRARY" if doc.get("partial") else \
        "RUNS" if doc["runs"] else "DOES NOT RUN"
    lines = [f"{doc['gpu']} on {where}: {verdict}",
             f"  {doc['driver']['message']}"]
    for d in doc["decisions"]:
        lines.append("  " + decision_line(d))
        lines.extend("  " + x for x in library_lines(d))
    return "\n".join(lines)


def platform_text(doc: Mapping[str, Any], where: str) -> str:
    libs = doc["libraries"]
    lines = [f"{where}: {stack_line(doc)}",
             f"  runs on: {doc['runs_on']}",
             f"  {len(libs)} libraries with device code among {doc['elf_files']} ELF files"]
    for _gen, ds in _in_order(doc["generations"]):
        for d in ds:
            if d["status"] in ("none", "partial"):
                lines.append("  " + decision_line(d))
    return "\n".join(lines)


NO_CUDA = "CPUs only (no CUDA device code in the environment)"


def summary(cov: Coverage, *, gpu_cc: str | None = None) -> dict[str, Any]:
    """What an attestation and the audit carry: the runs-on line, the stack, and the decision
    for the GPU in use (``gpu_cc``; None on the CPU)."""
    line = runs_on_line(generation_decisions(cov)) if cov.libraries else NO_CUDA
    this = decide(cov, gpu_cc) if gpu_cc and cov.libraries else None
    return {"runs_on": line, "libraries": len(cov.libraries), "stack": cov.stack.to_dict(),
            "this_gpu": ({"cc": this.cc, "sm": this.sm, "status": this.status,
                          "reason": this.reason} if this is not None else None)}


def runs_on_note(prefix: Any, *, gpu_cc: str | None = None) -> tuple[str, str | None]:
    """For the audit's preflight: ("this lock runs on: ...", a reason when this machine's GPU,
    compute capability ``gpu_cc``, is one its kernels do not run on)."""
    from verify.kernels.codescan import scan_prefix

    s = summary(scan_prefix(prefix), gpu_cc=gpu_cc)
    this = s["this_gpu"]
    reason = (f"this GPU ({this['sm']}): {this['reason']}"
              if this is not None and this["status"] == "none" else None)
    return f"this lock runs on: {s['runs_on']}", reason


# ------------------------------------------------------------------ markdown


def _cell(items: Sequence[str], limit: int = 14) -> str:
    if not items:
        return "—"
    more = f" (+{len(items) - limit})" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"# Kernel coverage: {doc['environment']}", "",
             f"What the CUDA libraries of `{doc['lockfile']}` (sha256 `{doc['lock_sha256']}`) "
             "carry, read from the bytes of its wheels, and on which GPUs it therefore runs. "
             "Generated by `samebits check --all --write`; do not edit.",
             ""]
    for plat, p in doc["platforms"].items():
        lines += [f"## {plat}", "", stack_line(p), "", f"**Runs on:** {p['runs_on']}", "",
                  "| generation | GPU | verdict |", "|---|---|---|"]
        for gen, ds in _in_order(p["generations"]):
            for d in ds:
                body = "native" if d["status"] == "native" else d["reason"]
                lines.append(f"| {gen} | {d['sm']} | {MARK[d['status']]} {body} |")
        lines += ["", "| library | package | fatbins | SASS | PTX (ISA) |", "|---|---|---|---|---|"]
        for lib in p["libraries"]:
            ptx = [t.replace("/", " (") + ")" for t in lib["ptx"]]
            lines.append(f"| `{lib['path']}` | {lib.get('package') or '—'} | {lib['fatbins']} "
                         f"| {_cell(lib['sass'])} | {_cell(ptx)} |")
        lines.append("")
    return "\n".join(lines)

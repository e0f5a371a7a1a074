"""``node_gate(request)``: one host's gate, as data (the library API ``verify node`` runs).

The steps, in the order that keeps the gate inside its budget: NVML's health (a few ms, plus
``xid_wait``); the canary workers start, one process per device, and compute while the
environment is checked (``verify.node.envgate``: a stat per sealed file); then the kernel
coverage for the GPUs present (their compute capabilities, this driver); then the canaries'
answers are collected (each bounded by ``canary_timeout``). Nothing here prints, exits or
drains: ``verify.node.cmd_node`` is the edge. ``nvml`` is the nvidia-ml-py module to ask
(default: ``import pynvml``): tests pass one answering as a described machine would.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify.node.reasons import Reason, draining


@dataclass(frozen=True, slots=True, kw_only=True)
class GateRequest:
    prefix: Path
    lockfile: Path | None = None
    platform: str | None = None
    read: Any = None                     # samebits.lock.read.ReadOptions
    cache: Path
    host: str
    full: bool = False
    full_every: int | None = None
    strict: bool = False
    canary: bool = True
    workload_python: str | None = None
    canary_threads: int = 1
    canary_timeout: float = 120.0
    canary_digests: Path | None = None
    expect_gpus: int | None = None
    xid_wait: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    host: str
    reasons: tuple[Reason, ...]
    env: dict[str, Any] | None
    gpus: tuple[dict[str, Any], ...]
    gpu_state: str            # "ok", "no-driver", "no-nvml" or the NVML error name
    driver: str | None
    canary: tuple[dict[str, Any], ...]
    settings: dict[str, Any]
    seconds: float
    lock_sha256: str | None = None
    failing: tuple[Reason, ...] = field(default=())

    @property
    def healthy(self) -> bool:
        return not self.failing


def _nvml(nvml: Any) -> Any:
    if nvml is not None:
        return nvml
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def gpu_part(nvml: Any, *, xid_wait: float, expect: int | None
             ) -> tuple[str, list[dict[str, Any]], str | None, list[Reason]]:
    """(state, GPU documents, driver version, reasons) from NVML."""
    from verify.node.health import judge, read_health

    reasons: list[Reason] = []
    gpus: list[dict[str, Any]]
    if nvml is None:
        state, gpus, driver = ("no-nvml" if Path("/proc/driver/nvidia").exists()
                               else "no-driver"), [], None
        if state == "no-nvml":
            reasons.append(Reason(code="nvml-unavailable", detail="an NVIDIA driver is "
                                  "loaded but nvidia-ml-py (pynvml) is not installed"))
    else:
        state, gpus, driver = read_health(nvml, xid_wait=xid_wait)
        if state not in ("ok", "no-driver"):
            reasons.append(Reason(code="nvml-unavailable", detail=f"NVML: {state}"))
    for g in gpus:
        reasons += judge(g)
    if expect is not None and len(gpus) < expect:
        reasons.append(Reason(code="gpu-missing", detail=f"{len(gpus)} GPU(s) found, "
                              f"--gpus {expect} expected ({state})"))
    return state, gpus, driver, reasons


Started = tuple[str, "subprocess.Popen[str] | None", str]  # (device, process, why not)


def _start_canaries(python: str, devices: list[str], threads: int,
                    stack: contextlib.ExitStack) -> list[Started]:
    from verify.gpu.launch import shim, worker_environ

    folder = stack.enter_context(shim())
    started: list[Started] = []
    for device in devices:
        args = [python, "-m", "verify.node.canaryrun", "--device", device, "--threads",
                str(threads)]
        try:
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=worker_environ(), cwd=folder,
                                    stdin=subprocess.DEVNULL)
        except OSError as exc:
            started.append((device, None, f"{python}: {exc.strerror or exc}"))
            continue
        started.append((device, proc, ""))
    return started


def _collect(device: str, proc: subprocess.Popen[str] | None, why: str, deadline: float
             ) -> dict[str, Any]:
    if proc is None:
        return {"device": device, "error": why}
    try:
        stdout, stderr = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"device": device, "error": "the canary ran past its time limit"}
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["no message"])[-1]
        return {"device": device, "error": f"the canary exited {proc.returncode}: {tail}"}
    try:
        return dict(json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return {"device": device, "error": "the canary printed no JSON"}


def canary_reasons(verdicts: list[dict[str, Any]]) -> list[Reason]:
    out = []
    for v in verdicts:
        if v.get("error"):
            out.append(Reason(code="canary-failed", detail=f"{v['device']}: {v['error']}"))
        elif v["ok"] is None and v.get("settings_differ"):
            why = ", ".join(f"{d['setting']} {d['value']} (recorded with {d['recorded']})"
                            for d in v["settings_differ"])
            out.append(Reason(code="canary-unknown", detail=f"{v['device']}: class "
                              f"{v['class']}'s digest was recorded under other settings: "
                              f"{why} (digest {v['digest'][:16]})"))
        elif v["ok"] is None:
            out.append(Reason(code="canary-unknown", detail=f"{v['device']}: no committed "
                              f"digest for class {v['class']} (digest {v['digest'][:16]})"))
        elif not v["ok"]:
            out.append(Reason(code="canary-mismatch", detail=f"{v['device']}: digest "
                              f"{v['digest'][:16]}, class {v['class']} expects "
                              f"{v['expected'][:16]}"))
    return out


def coverage_reasons(manifest: Any, gpus: list[dict[str, Any]], driver: str | None
                     ) -> tuple[list[Reason], dict[int, dict[str, Any]]]:
    """Per GPU present: does the environment carry kernels for it, and is the driver new
    enough for its CUDA runtime (``verify.kernels``)?"""
    from verify.kernels.codescan import scan_manifest
    from verify.kernels.coverage import decide
    from verify.kernels.driverfloor import driver_check

    cov = scan_manifest(manifest)
    reasons, docs = [], {}
    drv = driver_check(cov.stack, driver) if driver else None
    if drv is not None and drv.status == "too-old":
        reasons.append(Reason(code="driver-too-old", detail=drv.message))
    for g in gpus:
        if not g.get("compute_capability"):
            continue
        d = decide(cov, g["compute_capability"], driver=driver)
        docs[g["gpu"]] = {"status": d.status, "reason": d.reason,
                          "driver": drv.status if drv else None}
        if d.status == "none":
            reasons.append(Reason(code="kernel-missing", detail=f"GPU {g['gpu']} {g['name']} "
                                  f"(sm_{g['compute_capability'].replace('.', '')}): "
                                  f"{d.reason}", gpu=g["gpu"]))
    return reasons, docs


def node_gate(req: GateRequest, *, nvml: Any = None) -> GateResult:
    from samebits.lock.model import lock_digest
    from verify.env.check import check_env
    from verify.node import canary as canary_mod
    from verify.node.envgate import choose_proof, env_doc, env_reasons, save_state

    start = time.perf_counter()
    prefix = req.prefix.absolute()
    state, gpus, driver, reasons = gpu_part(_nvml(nvml), xid_wait=req.xid_wait,
                                            expect=req.expect_gpus)
    lock_sha = lock_digest(req.lockfile) if req.lockfile else None
    table = canary_mod.load_digests(req.canary_digests or canary_mod.CANARY_FILE) \
        if req.canary else {}
    devices = [f"cuda:{i}" for i in range(len(gpus))] or ["cpu"]
    python = req.workload_python or _env_python(prefix)
    hashed, why, next_state = choose_proof(req.cache, prefix, full=req.full,
                                           every=req.full_every)
    with contextlib.ExitStack() as stack:
        started = _start_canaries(python, devices, req.canary_threads, stack) \
            if req.canary else []
        try:
            report = check_env(prefix, lockfile=req.lockfile, platform=req.platform,
                               read=req.read, cache=req.cache, linkage=False,
                               coverage=False, trust_seal=not hashed)
        except BaseException:
            for _, proc, _why in started:
                if proc is not None:
                    proc.kill()
                    proc.communicate()
            raise
        save_state(req.cache, next_state)
        env = env_doc(report, prefix=prefix, hashed=hashed, why=why)
        reasons = env_reasons(report) + reasons
        if gpus:
            cov_reasons, cov_docs = coverage_reasons(report.manifest, gpus, driver)
            reasons += cov_reasons
            gpus = [{**g, "coverage": cov_docs.get(g["gpu"])} for g in gpus]
        deadline = time.monotonic() + req.canary_timeout
        runs = [_collect(*one, deadline) for one in started]
    verdicts = [canary_mod.verdict(_with_facts(r, gpus, driver), lock_sha256=lock_sha,
                                   table=table) for r in runs]
    reasons += canary_reasons(verdicts)
    settings = {"full": req.full, "full_every": req.full_every, "proof": env["proof"],
                "strict": req.strict, "canary": req.canary, "workload_python": python,
                "canary_threads": req.canary_threads, "xid_wait": req.xid_wait,
                "expect_gpus": req.expect_gpus, "gpu_state": state, "driver": driver,
                "lockfile": str(req.lockfile) if req.lockfile else None,
                "lock_sha256": lock_sha, "platform": report.platform}
    return GateResult(host=req.host, reasons=tuple(reasons), env=env, gpus=tuple(gpus),
                      gpu_state=state, driver=driver, canary=tuple(verdicts),
                      settings=settings, seconds=time.perf_counter() - start,
                      lock_sha256=lock_sha,
                      failing=tuple(draining(reasons, strict=req.strict)))


def _with_facts(run: dict[str, Any], gpus: list[dict[str, Any]], driver: str | None
                ) -> dict[str, Any]:
    """The worker's answer with what the class key needs from this side: the CPU's model
    and the vector extensions it supports, the driver."""
    if "error" in run:
        return run
    from verify.gpu.facts.cpu import cpu_facts
    from verify.node.canary import cpu_supports

    cpu = cpu_facts()
    return {**run, "cpu_model": cpu.model, "cpu_supports": cpu_supports(cpu.flags),
            "driver": driver}


def _env_python(prefix: Path) -> str:
    for name in ("bin/python3", "bin/python"):
        if (prefix / name).exists():
            return str(prefix / name)
    return str(prefix / "bin" / "python")

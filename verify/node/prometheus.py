"""``--prometheus FILE``: the gate as a node-exporter textfile-collector file.

Rendered from the statement's predicate alone, in a fixed order (metrics as listed here,
samples by their labels), so the same gate gives the same bytes; written atomically (a
temporary file in the same folder, then a rename: node-exporter never reads half a file).
Prometheus' text exposition format 0.0.4: ``# HELP`` and ``# TYPE`` before each metric,
label values with ``\\``, ``"`` and newlines escaped.

    samebits_node_healthy                 1 healthy, 0 failing
    samebits_node_reason{code,level}      1 per reason given
    samebits_env_drift_files              files that differ from their records
    samebits_env_files                    files checked
    samebits_canary_ok{device,class}      1 matched, 0 mismatched or unknown
    samebits_node_check_seconds           how long the gate took
    samebits_gpu_healthy{gpu,uuid}        1 when no reason names that GPU
    samebits_gpu_<value>{gpu,uuid}        each numeric health value (verify.node.health)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verify.node.health import THRESHOLDS

GPU_VALUES = (*THRESHOLDS, "pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max",
              "nvlinks", "nvlinks_up")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, Any]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items()) + "}"


def _num(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(round(float(value), 6))


def render(predicate: Mapping[str, Any]) -> str:
    metrics: list[tuple[str, str, list[tuple[dict[str, Any], float]]]] = []

    def metric(name: str, help: str, samples: list[tuple[dict[str, Any], float]]) -> None:
        metrics.append((name, help, samples))

    host = {"host": predicate["host"]}
    metric("samebits_node_healthy", "1 when samebits' node gate passed, 0 when it failed",
           [(host, bool(predicate["healthy"]))])
    metric("samebits_node_reason", "1 for each reason the gate gave (code, level)",
           sorted(((host | {"code": r["code"], "level": r["level"]}, 1)
                   for r in predicate["reasons"]), key=lambda s: (s[0]["code"])))
    env = predicate.get("env") or {}
    metric("samebits_env_drift_files", "files of the environment that differ from their "
           "records", [(host, int(env.get("drift", 0)))] if env else [])
    metric("samebits_env_files", "files of the environment checked",
           [(host, int(env.get("files", 0)))] if env else [])
    metric("samebits_canary_ok", "1 when the canary matched its committed digest, else 0",
           sorted(((host | {"device": c["device"], "class": c["class"] or ""}, c["ok"] is True)
                   for c in predicate["canary"]), key=lambda s: s[0]["device"]))
    metric("samebits_node_check_seconds", "seconds the node gate took",
           [(host, float(predicate["seconds"]))])
    gpus = sorted(predicate["gpus"], key=lambda g: g["gpu"])
    named = {str(r.get("gpu")) for r in predicate["reasons"] if r.get("gpu") is not None}
    metric("samebits_gpu_healthy", "1 when no reason names this GPU",
           [({"gpu": g["gpu"], "uuid": g["uuid"]}, str(g["gpu"]) not in named) for g in gpus])
    for value in GPU_VALUES:
        samples = [({"gpu": g["gpu"], "uuid": g["uuid"]}, g["values"][value]) for g in gpus
                   if isinstance(g["values"].get(value), int)]
        metric(f"samebits_gpu_{value}", THRESHOLDS[value][2] if value in THRESHOLDS
               else f"NVML's {value.replace('_', ' ')}", samples)
    lines = []
    for name, help, samples in metrics:
        if not samples:
            continue
        lines += [f"# HELP {name} {help}", f"# TYPE {name} gauge"]
        lines += [f"{name}{_labels(labels)} {_num(v)}" for labels, v in samples]
    return "\n".join(lines) + "\n"


def write(path: Path, predicate: Mapping[str, Any]) -> None:
    from samebits._io import atomic_write

    atomic_write(path, render(predicate))

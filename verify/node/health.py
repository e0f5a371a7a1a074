"""GPU health through NVML (nvidia-ml-py, ``import pynvml``): what the driver knows is wrong.

``read_health(nvml, xid_wait=...)`` asks NVML, one field at a time, for each GPU (the driver's
order): uncorrected ECC counts (volatile: since the driver loaded; aggregate: the GPU's
lifetime), retired pages pending, remapped rows pending/failed, the clock event (throttle)
reasons, the PCIe link's generation and width against their maxima and its replay counter,
each NVLink's state and error counters, and the critical Xid events that arrive while it
listens (``xid_wait`` seconds; NVML cannot list earlier ones: the kernel log's ``NVRM: Xid``
lines are where those are). A field answering ``NVML_ERROR_NOT_SUPPORTED`` or
``NVML_ERROR_NO_PERMISSION`` is *not readable* (``unreadable``), never a failure.

``judge(gpu)`` is pure: the ``THRESHOLDS`` table (printed in docs/reference/node-reasons.md)
turns a GPU's values into reason codes (``verify.node.reasons``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from verify.node.reasons import Reason

# value -> (the largest value that is healthy, its code, what is counted)
THRESHOLDS: dict[str, tuple[int, str, str]] = {
    "ecc_volatile_uncorrected": (0, "ecc-uncorrected",
                                 "uncorrected ECC errors since the driver loaded"),
    "ecc_aggregate_uncorrected": (0, "ecc-uncorrected",
                                  "uncorrected ECC errors over the GPU's life"),
    "retired_pages_pending": (0, "retired-pages-pending", "1 when pages wait to be retired"),
    "remapped_rows_pending": (0, "remapped-rows-pending", "1 when a row remap waits for reset"),
    "remapped_rows_failed": (0, "remapped-rows-failed", "1 when a row remap failed"),
    "xid_events": (0, "xid", "critical Xid events while the gate listened"),
    "throttle_hw": (0, "throttle-hw", "1 when HW slowdown, HW thermal slowdown or HW power "
                    "brake is active"),
    "throttle_sw_thermal": (0, "throttle-thermal", "1 when SW thermal slowdown is active"),
    "pcie_width_missing": (0, "pcie-degraded", "lanes below the link's maximum width"),
    "pcie_gen_missing": (0, "pcie-gen-low", "generations below the link's maximum"),
    "pcie_replay": (100, "pcie-replay", "PCIe replays since the driver loaded"),
    "nvlink_down": (0, "nvlink-down", "inactive NVLinks on a GPU with some link active"),
    "nvlink_errors": (100, "nvlink-errors", "NVLink DL replay + recovery + CRC errors, all "
                      "links"),
}

# nvmlClocksEventReason* bits (the same values as the older ...ThrottleReason* names)
HW_SLOWDOWN = 0x8
SW_THERMAL = 0x20
HW_THERMAL = 0x40
HW_POWER_BRAKE = 0x80
THROTTLE_NAMES = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap",
                  HW_SLOWDOWN: "hw_slowdown", 0x10: "sync_boost", SW_THERMAL: "sw_thermal",
                  HW_THERMAL: "hw_thermal", HW_POWER_BRAKE: "hw_power_brake",
                  0x100: "display_clocks"}
NOT_READABLE = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION")
NO_SUCH_LINK = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT")
ABSENT = ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")


def threshold_markdown() -> str:
    rows = ["| value | healthy up to | code | what is counted |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {limit} | `{code}` | {what} |"
             for name, (limit, code, what) in THRESHOLDS.items()]
    return "\n".join(rows)


def error_name(nvml: Any, exc: Exception) -> str:
    from verify.gpu.facts.driver import nvml_error_name

    return nvml_error_name(nvml, exc)


class _Asker:
    """One GPU's answers: ``values``, ``unreadable`` (field -> NVML error) and ``errors``."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.values: dict[str, Any] = {}
        self.unreadable: dict[str, str] = {}
        self.errors: dict[str, str] = {}

    def ask(self, field: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            name = error_name(self.nvml, exc)
            (self.unreadable if name in NOT_READABLE else self.errors)[field] = name
            return None


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def read_gpu(nvml: Any, index: int) -> tuple[dict[str, Any], Any]:
    """(GPU ``index``'s health document, its NVML handle or None)."""
    a = _Asker(nvml)
    doc: dict[str, Any] = {"gpu": index, "name": "unknown", "uuid": ""}
    h = a.ask("handle", nvml.nvmlDeviceGetHandleByIndex, index)
    if h is None:
        doc.update(values={}, unreadable=a.unreadable, errors=a.errors)
        return doc, None
    name = a.ask("name", nvml.nvmlDeviceGetName, h)
    uuid = a.ask("uuid", nvml.nvmlDeviceGetUUID, h)
    cc = a.ask("compute_capability", nvml.nvmlDeviceGetCudaComputeCapability, h)
    doc.update(name=_s(name) if name is not None else "unknown",
               uuid=_s(uuid) if uuid is not None else "",
               compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None)
    v = a.values
    unc = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    for field, counter in (("ecc_volatile_uncorrected", nvml.NVML_VOLATILE_ECC),
                           ("ecc_aggregate_uncorrected", nvml.NVML_AGGREGATE_ECC)):
        got = a.ask(field, nvml.nvmlDeviceGetTotalEccErrors, h, unc, counter)
        if got is not None:
            v[field] = int(got)
    got = a.ask("retired_pages_pending", nvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
    if got is not None:
        v["retired_pages_pending"] = int(got == nvml.NVML_FEATURE_ENABLED)
    got = a.ask("remapped_rows", nvml.nvmlDeviceGetRemappedRows, h)
    if got is not None:
        _corr, _unc, pending, failed = got
        v["remapped_rows_pending"] = int(bool(pending))
        v["remapped_rows_failed"] = int(bool(failed))
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) \
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the older name
    reasons = a.ask("throttle", getter, h)
    if reasons is not None:
        bits = int(reasons)
        v["throttle_reasons"] = [n for bit, n in sorted(THROTTLE_NAMES.items()) if bits & bit]
        v["throttle_hw"] = int(bool(bits & (HW_SLOWDOWN | HW_THERMAL | HW_POWER_BRAKE)))
        v["throttle_sw_thermal"] = int(bool(bits & SW_THERMAL))
    _pcie(a, h)
    _nvlink(a, h)
    doc.update(values=v, unreadable=a.unreadable, errors=a.errors)
    return doc, h


def _pcie(a: _Asker, h: Any) -> None:
    nvml, v = a.nvml, a.values
    gen = a.ask("pcie_gen", nvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
    gen_max = a.ask("pcie_gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration, h)
    width = a.ask("pcie_width", nvml.nvmlDeviceGetCurrPcieLinkWidth, h)
    width_max = a.ask("pcie_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth, h)
    if gen is not None and gen_max is not None:
        v.update(pcie_gen=int(gen), pcie_gen_max=int(gen_max),
                 pcie_gen_missing=max(0, int(gen_max) - int(gen)))
    if width is not None and width_max is not None:
        v.update(pcie_width=int(width), pcie_width_max=int(width_max),
                 pcie_width_missing=max(0, int(width_max) - int(width)))
    replay = a.ask("pcie_replay", nvml.nvmlDeviceGetPcieReplayCounter, h)
    if replay is not None:
        v["pcie_replay"] = int(replay)


def _nvlink(a: _Asker, h: Any) -> None:
    """Each link until the first that does not exist; a GPU without NVLink has no values."""
    nvml = a.nvml
    states: list[int] = []
    errors = 0
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except nvml.NVMLError as exc:
            name = error_name(nvml, exc)
            if name not in NO_SUCH_LINK:  # past the last link is no link, not an error
                (a.unreadable if name in NOT_READABLE else a.errors)["nvlink"] = name
            break
        states.append(int(state == nvml.NVML_FEATURE_ENABLED))
        for counter in (nvml.NVML_NVLINK_ERROR_DL_REPLAY, nvml.NVML_NVLINK_ERROR_DL_RECOVERY,
                        nvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, nvml.NVML_NVLINK_ERROR_DL_CRC_DATA):
            got = a.ask("nvlink_errors", nvml.nvmlDeviceGetNvLinkErrorCounter, h, link, counter)
            errors += int(got or 0)
    if states:
        a.values.update(nvlinks=len(states), nvlinks_up=sum(states),
                        nvlink_down=(len(states) - sum(states)) if any(states) else 0,
                        nvlink_errors=errors)


def _listen_xid(nvml: Any, handles: list[tuple[int, Any]], wait: float,
                docs: list[dict[str, Any]]) -> None:
    """Critical Xid events within ``wait`` seconds (bounded: NVML's own timeout per wait)."""
    if not handles:
        return
    try:
        events = nvml.nvmlEventSetCreate()
    except nvml.NVMLError as exc:
        for d in docs:
            d["unreadable" if error_name(nvml, exc) in NOT_READABLE else "errors"][
                "xid"] = error_name(nvml, exc)
        return
    try:
        listening: dict[int, int] = {}
        for i, h in handles:
            try:
                nvml.nvmlDeviceRegisterEvents(h, nvml.nvmlEventTypeXidCriticalError, events)
                listening[i] = 0
            except nvml.NVMLError as exc:
                name = error_name(nvml, exc)
                docs[i]["unreadable" if name in NOT_READABLE else "errors"]["xid"] = name
        seen: dict[int, list[int]] = {i: [] for i in listening}
        deadline = time.monotonic() + max(0.0, wait)
        while listening:
            left = int(max(0.0, deadline - time.monotonic()) * 1000)
            try:
                data = nvml.nvmlEventSetWait_v2(events, left)
            except nvml.NVMLError:  # NVML_ERROR_TIMEOUT: nothing more within the window
                break
            which = next((i for i, h in handles if h == data.device), None)
            if which in seen:  # with the window over, what is queued is still read
                seen[which].append(int(data.eventData))
        for i, xids in seen.items():
            docs[i]["values"].update(xid_events=len(xids), xids=xids)
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlEventSetFree(events)


def read_health(nvml: Any, *, xid_wait: float = 0.0
                ) -> tuple[str, list[dict[str, Any]], str | None]:
    """(state, one document per GPU, the driver's version). state: "ok" (NVML answered),
    "no-driver" (no NVIDIA driver here: no GPU checks), or "NVML_ERROR_..." (it failed)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        name = error_name(nvml, exc)
        return ("no-driver" if name in ABSENT else name), [], None
    try:
        try:
            driver = _s(nvml.nvmlSystemGetDriverVersion())
        except nvml.NVMLError:
            driver = None
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as exc:
            return error_name(nvml, exc), [], driver
        docs, handles = [], []
        for i in range(count):
            doc, h = read_gpu(nvml, i)
            docs.append(doc)
            if h is not None:
                handles.append((i, h))
        _listen_xid(nvml, handles, xid_wait, docs)
        return "ok", docs, driver
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def judge(gpu: dict[str, Any]) -> list[Reason]:
    """The reasons one GPU's health document gives, in ``THRESHOLDS`` order (one per code)."""
    label = f"GPU {gpu['gpu']} {gpu['name']}".rstrip()
    out: dict[str, Reason] = {}
    lost = [f for f, e in gpu["errors"].items() if e == "NVML_ERROR_GPU_IS_LOST"]
    if lost or "handle" in gpu["errors"]:
        why = gpu["errors"].get("handle") or "NVML_ERROR_GPU_IS_LOST"
        return [Reason(code="gpu-lost", detail=f"{label}: {why}", gpu=gpu["gpu"])]
    values = gpu["values"]
    for name, (limit, code, what) in THRESHOLDS.items():
        value = values.get(name)
        if value is not None and value > limit and code not in out:
            detail = f"{label}: {name} = {value} (healthy up to {limit}: {what})"
            if name == "xid_events":
                detail += f"; Xid {', '.join(str(x) for x in values.get('xids', []))}"
            if name.startswith("throttle"):
                detail += f"; active: {', '.join(values.get('throttle_reasons', []))}"
            if name == "pcie_width_missing":
                detail += f"; x{values['pcie_width']} of x{values['pcie_width_max']}"
            if name == "pcie_gen_missing":
                detail += f"; gen {values['pcie_gen']} of {values['pcie_gen_max']}"
            out[code] = Reason(code=code, detail=detail, gpu=gpu["gpu"])
    if gpu["errors"]:
        fields = ", ".join(f"{f}: {e}" for f, e in sorted(gpu["errors"].items()))
        out["nvml-unavailable"] = Reason(code="nvml-unavailable", detail=f"{label}: {fields}",
                                         gpu=gpu["gpu"])
    return list(out.values())

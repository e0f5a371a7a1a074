"""Before a fleet runs anything: every rank checks in, and the group is refused when a rank
cannot give meaningful bits. Pure; ``verify.fleet.run`` moves the check-ins between ranks.

A check-in (one per rank, JSON): rank, local_rank, host, device, gpu_uuid, and the problems
``verify.gpu.preflight.check`` found on that rank (library paths outside the environment, an old
driver, a GPU torch has no kernel for, ...). The group is refused (verdict ``refused``, exit 1,
nothing run) when

    preflight  a rank's preflight found problems: each is named with its rank and host
    shared     two ranks run on one GPU (the same UUID; a MIG slice counts as its own GPU): their
               results are not independent and their timing and memory interfere
    missing    a rank did not check in within the per-rank timeout: named, with its last
               known host when the launcher told it
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any


def shared_devices(checkins: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Groups of ranks on one GPU: the same GPU UUID, or (UUID unknown) the same cuda:N on
    the same host."""
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = defaultdict(list)
    for c in checkins:
        device = str(c.get("device") or "")
        if not device.startswith("cuda"):
            continue
        key: tuple[str, ...] = ("uuid", str(c["gpu_uuid"])) if c.get("gpu_uuid") else (
            "device", str(c.get("host")), device)
        groups[key].append(c)
    out = []
    for key, cs in sorted(groups.items()):
        if len(cs) < 2:
            continue
        ranks = sorted(int(c["rank"]) for c in cs)
        hosts = sorted({str(c.get("host")) for c in cs})
        what = f"GPU {key[1]}" if key[0] == "uuid" else f"{key[2]} on {key[1]}"
        out.append({"ranks": ranks, "hosts": hosts, "gpu_uuid": cs[0].get("gpu_uuid"),
                    "device": cs[0].get("device"),
                    "message": f"ranks {', '.join(map(str, ranks))} share {what} "
                               f"({', '.join(hosts)}): their results are not independent and "
                               "their timing and memory interfere"})
    return out


def refusal(checkins: Sequence[Mapping[str, Any]],
            missing: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """Why the group must not run ({"preflight", "shared_devices", "missing"}), or None."""
    pre = [{"rank": int(c["rank"]), "host": c.get("host"), "device": c.get("device"), **p}
           for c in sorted(checkins, key=lambda c: int(c["rank"]))
           for p in c.get("preflight", ())]
    shared = shared_devices(checkins)
    if not (pre or shared or missing):
        return None
    return {"preflight": pre, "shared_devices": shared, "missing": list(missing)}


def refusal_lines(doc: Mapping[str, Any]) -> list[str]:
    out = [f"REFUSED rank {p['rank']} on {p['host']} ({p['device']}): {p['message']}"
           for p in doc.get("preflight", ())]
    out += [f"REFUSED {s['message']}" for s in doc.get("shared_devices", ())]
    out += [f"MISSING rank {m['rank']}: {m['reason']}" for m in doc.get("missing", ())]
    return out

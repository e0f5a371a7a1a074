"""The fleet report's hosts: which ranks ran where, and which host is the odd one out. Pure.

A host's signature is the set of equivalence classes its ranks fell into and its environment
(the subjects of its ranks' statements: verify env's digests of the prefix each host ran).
The signature held by a strict majority of the hosts is the fleet's; a host whose signature
differs is **odd**, named with what differs (``class``, ``environment``) and how many hosts
agree with each other. Under ``--no-env-digest`` a host's name stands in for its environment
(``host`` subjects): every host differs by design, so the environment is left out.

No majority (two hosts that differ, or no signature held by more than half): nobody is odd,
the report does not guess.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

STAND_IN = "host"  # the subject verify fleet writes for --no-env-digest


def _env_key(environment: Mapping[str, str]) -> str:
    if set(environment) == {STAND_IN}:
        return ""
    return ",".join(f"{n}={d}" for n, d in sorted(environment.items()))


def host_docs(ranks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per host (sorted by name): its ranks, classes, environment and ``odd``
    (what sets it apart from the majority of hosts; empty for the others)."""
    by_host: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in ranks:
        by_host[str(r.get("host"))].append(r)
    sig: dict[str, tuple[tuple[str, ...], str]] = {}
    for host, rs in by_host.items():
        classes = tuple(sorted({str(r.get("class")) for r in rs}))
        envs = sorted({_env_key(r.get("environment") or {}) for r in rs})
        sig[host] = (classes, "|".join(envs))
    counts = Counter(sig.values())
    majority: tuple[tuple[str, ...], str] | None = None
    n = 0
    if counts:
        top, n = counts.most_common(1)[0]
        majority = top if n * 2 > len(sig) and len(sig) > 1 else None
    out = []
    for host in sorted(by_host):
        rs = sorted(by_host[host], key=lambda r: int(r["rank"]))
        odd: list[str] = []
        if majority is not None and sig[host] != majority:
            odd = [what for what, mine, theirs in (("class", sig[host][0], majority[0]),
                                                    ("environment", sig[host][1], majority[1]))
                   if mine != theirs]
        out.append({"host": host, "ranks": [int(r["rank"]) for r in rs],
                    "classes": list(sig[host][0]),
                    "environment": dict(rs[0].get("environment") or {}),
                    "odd": odd, "agreeing_hosts": n if odd else None})
    return out


def host_lines(hosts: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for h in hosts:
        if h["odd"]:
            what = " and ".join("its " + w for w in h["odd"])
            out.append(f"ODD host {h['host']} (ranks {','.join(map(str, h['ranks']))}): "
                       f"{what} differ{'s' if len(h['odd']) == 1 else ''} from the "
                       f"{h['agreeing_hosts']} hosts that agree")
    return out

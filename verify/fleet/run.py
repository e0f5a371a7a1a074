"""The distributed edge of ``verify fleet``: one process per rank, over torch.distributed.

Launched by torchrun, a Kubernetes job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), srun alone or mpirun (``verify.fleet.launcher``: the ranks and the rendezvous host
from their own variables). Each rank probes its machine and checks in (its facts, its device,
its prefix); rank 0 has the check-ins judged (``judge``: the preflight of every rank, run where
samebits' own dependencies are) and refuses the group when a rank cannot give meaningful bits.
Then each rank runs the workload suite on its own device (``cuda:LOCAL_RANK`` when torch sees
GPUs, else the CPU) and the collective workload (NCCL on GPUs, gloo on CPUs). Records travel as
JSON through the process group's store (``Exchange``), rank by rank with a deadline: a hung rank
is named in a partial report, and no numpy is needed. Rank 0 returns the ``Outcome``: the raw
records, which ``verify.fleet.judge`` turns into statements and the report.

The environment digest is computed once per host (by local rank 0, ``env_digest``) and shared,
so eight ranks on one node do not hash the same prefix eight times.

Two callers: ``verify fleet`` as a rank (samebits' own process, beside torch: the preflight and
``verify env``'s digest in-process) and the rank program ``python -m verify.fleet``, which
``samebits verify fleet --prefix ENV -- LAUNCHER`` starts in the environment under test (the
launcher judges the check-ins, ``verify.fleet.handoff``; the digest is ``verify.fleet.tree``).
So this module runs in that environment's interpreter too (``verify.gpu.launch.IN_ENV``): the
standard library and torch only, Python 3.8 or later.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from samebits._compat import dataclass
from samebits.errors import InputError, UsageError, quote
from verify.gpu.facts import Facts, detect
from verify.gpu.workloads import run_suite, tensor_bytes
from verify.gpu.workloads.catalog import SUITE_VERSION
from verify.gpu.workloads.settings import DETERMINISTIC

# Message sizes of the collective workload, in float32 elements (4 KiB and 16 MiB).
COLLECTIVE_SIZES = {"small": 1 << 10, "large": 1 << 22}
COLLECTIVE_ENV = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL", "NCCL_IB_DISABLE",
                  "NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                  "GLOO_SOCKET_IFNAME")


@dataclass(frozen=True, slots=True, kw_only=True)
class RankEnv:
    rank: int
    world_size: int
    local_rank: int
    host: str
    launcher: str = "torchrun"
    init_method: str = "env://"

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> RankEnv:
        from verify.fleet.launcher import rendezvous

        meet = rendezvous(os.environ if environ is None else environ)
        return cls(rank=meet.rank, world_size=meet.world_size, local_rank=meet.local_rank,
                   host=socket.gethostname(), launcher=meet.launcher,
                   init_method=meet.init_method())


def pick_device(facts: Facts, local_rank: int, requested: str) -> str:
    if requested == "cpu" or (requested == "auto" and not facts.torch.cuda_available):
        return "cpu"
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        raise UsageError(f"--device {requested}: torch sees no CUDA device on this rank")
    return f"cuda:{local_rank % count}"


def _digest(t: Any) -> str:
    return hashlib.sha256(tensor_bytes(t)).hexdigest()


def collectives(device: str, rank: int, world: int) -> dict[str, Any]:
    """all_reduce and reduce_scatter of seeded data, small and large, each run twice.

    Inputs come from a CPU generator seeded by rank, so every run of the same world sees the
    same data; the sums' bits then depend on the backend's algorithm and the hardware alone.
    """
    import torch
    import torch.distributed as tdist

    # torch >= 2.11 renamed reduce_scatter_tensor (now deprecated) to reduce_scatter_single.
    reduce_scatter = getattr(tdist, "reduce_scatter_single", None) or tdist.reduce_scatter_tensor
    out: dict[str, Any] = {}
    for size, numel in COLLECTIVE_SIZES.items():
        numel -= numel % world
        gen = torch.Generator().manual_seed(0x5AEB + rank)
        x = torch.randn(numel, generator=gen, dtype=torch.float32).to(device)
        for rep in (1, 2):
            y = x.clone()
            tdist.all_reduce(y)
            shard = torch.empty(numel // world, dtype=torch.float32, device=device)
            reduce_scatter(shard, x.clone())
            out[f"all_reduce/{size}/{rep}"] = _digest(y)
            out[f"reduce_scatter/{size}/{rep}"] = _digest(shard)
    return out


# ------------------------------------------------------------------ moving JSON between ranks

KEY = "samebits/fleet/"


class Exchange:
    """JSON documents between ranks through the process group's key-value store (the c10d
    store torchrun or the rank-0 TCPStore serves). Unlike ``all_gather_object`` it needs no
    numpy (torch unpickles gathered objects through ``tensor.numpy()``) and it can wait for one
    rank at a time, with a deadline, so a hung rank is named instead of hanging everyone."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def put(self, key: str, doc: Any) -> None:
        self.store.set(KEY + key, json.dumps(doc, sort_keys=True))

    def get(self, key: str, timeout: float) -> Any | None:
        """The document, or None when it did not appear within ``timeout`` seconds."""
        try:
            self.store.wait([KEY + key], dt.timedelta(seconds=max(timeout, 0.001)))
            return json.loads(self.store.get(KEY + key))
        except (RuntimeError, TimeoutError):  # DistStoreError: "wait timeout"
            return None

    def gather(self, prefix: str, world: int, timeout: float
               ) -> tuple[list[Any], list[int]]:
        """Every rank's ``prefix/<rank>`` within one deadline: (documents, ranks missing)."""
        deadline = time.monotonic() + timeout
        got, missing = [], []
        for r in range(world):
            doc = self.get(f"{prefix}/{r}", deadline - time.monotonic())
            if doc is None:
                missing.append(r)
            else:
                got.append(doc)
        return got, missing


def _default_store() -> Any:
    import torch.distributed as tdist

    return tdist.distributed_c10d._get_default_store()


OUTCOME_FORMAT = 1
# what a rank's check-in carries beyond what the report shows of it (refused_report)
CHECKIN_ONLY = ("facts", "prefix", "requested")

if TYPE_CHECKING:  # an alias for annotations only: Python 3.8 cannot subscript Callable
    # rank 0's judge: the check-ins (each with its rank's facts, device, prefix) -> rank ->
    # the preflight's problems on that rank ({"check", "message", "hint"} each)
    Judge = Callable[[Sequence[Mapping[str, Any]]], Mapping[int, Sequence[Mapping[str, str]]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What rank 0 reports: the records of the ranks that reported and those that did not, or
    (``refused``) why the group did not run. Its JSON form is what the rank program hands the
    launcher (``to_dict``, ``from_dict``: format ``OUTCOME_FORMAT``)."""

    records: tuple[dict[str, Any], ...] = ()
    missing: tuple[dict[str, Any], ...] = ()
    refused: dict[str, Any] | None = None
    checkins: tuple[dict[str, Any], ...] = ()
    backend: str = "gloo"
    world_size: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"format": OUTCOME_FORMAT, "records": list(self.records),
                "missing": list(self.missing), "refused": self.refused,
                "checkins": list(self.checkins), "backend": self.backend,
                "world_size": self.world_size}

    @classmethod
    def from_dict(cls, doc: Any, *, where: str) -> Outcome:
        fmt = doc.get("format") if isinstance(doc, dict) else None
        if fmt != OUTCOME_FORMAT:
            raise InputError(f"{where}: format = {quote(fmt)}: not a fleet outcome (format "
                             f"{OUTCOME_FORMAT})")
        try:
            return cls(records=tuple(doc["records"]), missing=tuple(doc["missing"]),
                       refused=doc["refused"], checkins=tuple(doc["checkins"]),
                       backend=str(doc["backend"]), world_size=int(doc["world_size"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed fleet outcome: {exc!r}") from None


def _missing(ranks: list[int], checkins: Sequence[Mapping[str, Any]], what: str,
             timeout: float) -> list[dict[str, Any]]:
    known = {int(c["rank"]): c for c in checkins}
    return [{"rank": r, "host": known.get(r, {}).get("host"),
             "device": known.get(r, {}).get("device"),
             "reason": f"no {what} within {timeout:g} s: hung or crashed"} for r in ranks]


def _judged(checkins: Sequence[Mapping[str, Any]], judge: Judge) -> list[dict[str, Any]]:
    """The check-ins as the report shows them, each with its rank's preflight problems."""
    problems = judge(checkins)
    return [{**{k: v for k, v in c.items() if k not in CHECKIN_ONLY},
             "preflight": [dict(p) for p in problems.get(int(c["rank"]), ())]}
            for c in checkins]


def run_rank(*, judge: Judge, env_digest: Callable[[str], Mapping[str, str]] | None = None,
             device_request: str = "auto", only: list[str] | None = None,
             rank_timeout: float = 600, me: RankEnv | None = None) -> Outcome | None:
    """This rank's part. Rank 0 returns the ``Outcome``; the other ranks return None.

    1. check in (host, device, GPU UUID, this rank's facts and prefix); rank 0 has the
       check-ins judged (``judge``: every rank's preflight) and refuses the group when a
       preflight failed, two ranks share a GPU or a rank did not check in
    2. the environment digest, once per host (local rank 0: ``env_digest(sys.prefix)``; None:
       the host's name stands in)
    3. the workload suite; its record goes to rank 0, which waits ``rank_timeout`` seconds
       per missing rank after its own
    4. the collectives, when every rank reported (the process group times out after
       ``rank_timeout`` too)

    A record holds what the rank's statement is made of (facts, settings, workloads, suite
    version, environment digests), not the statement: ``verify.fleet.judge.with_statements``
    makes it where samebits' own code runs.
    """
    import torch.distributed as tdist

    from verify.fleet.checkin import refusal

    me = me or RankEnv.from_environ()
    facts = detect()
    device = pick_device(facts, me.local_rank, device_request)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(device)
    tdist.init_process_group(backend=backend, init_method=me.init_method, rank=me.rank,
                             world_size=me.world_size,
                             timeout=dt.timedelta(seconds=rank_timeout))
    ex = Exchange(_default_store())
    slow = 3 * rank_timeout  # how long the others wait for rank 0's decisions
    try:
        gpu = facts.gpu(int(device.split(":")[1])) if device.startswith("cuda") else None
        checkin = {"rank": me.rank, "local_rank": me.local_rank, "host": me.host,
                   "device": device, "gpu_uuid": gpu.uuid if gpu else None,
                   "requested": device_request, "prefix": sys.prefix,
                   "facts": facts.to_dict()}
        ex.put(f"checkin/{me.rank}", checkin)
        if me.rank == 0:
            checkins, late = ex.gather("checkin", me.world_size, rank_timeout)
            judged = _judged(checkins, judge)
            why = refusal(judged, _missing(late, checkins, "check-in", rank_timeout))
            ex.put("go/checkin", {"go": why is None})
            if why is not None:
                return Outcome(refused=why, checkins=tuple(judged), backend=backend,
                               world_size=me.world_size)
        else:
            go = ex.get("go/checkin", slow)
            if not go or not go["go"]:
                return None
        env_digests = None
        if env_digest is not None:
            if me.local_rank == 0:
                ex.put(f"env/{me.host}", dict(env_digest(sys.prefix)))
            env_digests = ex.get(f"env/{me.host}", rank_timeout)
        suite = run_suite(facts, device=device, settings=DETERMINISTIC, only=only)
        record = {
            "rank": me.rank, "local_rank": me.local_rank, "host": me.host, "device": device,
            "gpu_uuid": gpu.uuid if gpu else None, "backend": backend,
            "collective_env": {k: os.environ[k] for k in COLLECTIVE_ENV if k in os.environ},
            "facts": facts.to_dict(), "settings": dict(suite.settings),
            "workloads": {n: r.to_dict() for n, r in suite.results.items()},
            "suite_version": SUITE_VERSION,
            "environment": env_digests or {"host": hashlib.sha256(me.host.encode()).hexdigest()},
        }
        ex.put(f"record/{me.rank}", record)
        if me.rank == 0:
            records, late = ex.gather("record", me.world_size, rank_timeout)
            ex.put("go/collectives", {"go": not late})
            if late:
                checkins, _ = ex.gather("checkin", me.world_size, 0)
                return Outcome(records=tuple(records), backend=backend,
                               world_size=me.world_size, missing=tuple(
                                   _missing(late, checkins, "workload record", rank_timeout)))
        else:
            go = ex.get("go/collectives", slow)
            if not go or not go["go"]:
                return None
        try:
            coll: dict[str, Any] = collectives(device, me.rank, me.world_size)
        except RuntimeError as exc:  # a rank died or hung inside the collective: gloo's timeout
            coll = {"error": str(exc).strip().splitlines()[0][:200]}
        ex.put(f"collectives/{me.rank}", coll)
        if me.rank != 0:
            return None
        colls, late = ex.gather("collectives", me.world_size, rank_timeout)
        present = [r for r in range(me.world_size) if r not in late]  # in gather's order
        by_rank = {r: colls[i] for i, r in enumerate(present)}
        out = [{**rec, "collectives": by_rank.get(int(rec["rank"]), {})} for rec in records]
        return Outcome(records=tuple(out), backend=backend, world_size=me.world_size,
                       missing=tuple(_missing(late, [], "collective result", rank_timeout)))
    finally:
        tdist.destroy_process_group()

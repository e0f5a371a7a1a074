"""The distributed edge of ``verify fleet``: one process per rank, over torch.distributed.

Launched by torchrun, a Kubernetes job (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), srun alone or mpirun (``verify.fleet.launcher``: the ranks and the rendezvous host
from their own variables). Each rank probes its machine and runs its preflight,
runs the workload suite on its own device (``cuda:LOCAL_RANK`` when torch sees GPUs, else the
CPU) and the collective workload (NCCL on GPUs, gloo on CPUs). Records travel as JSON through
the process group's store (``Exchange``), rank by rank with a deadline: a hung rank is named in
a partial report, and no numpy is needed. Rank 0 turns the records into the report
(``verify.fleet.report.analyse``).

The environment digest is computed once per host (by local rank 0) and shared, so eight ranks
on one node do not hash the same prefix eight times.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.errors import UsageError
from verify.gpu.attest import build_statement
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


def _env_digests(prefix: str) -> dict[str, str]:
    from verify.env.digest import prefix_digests

    return dict(prefix_digests(Path(prefix)))


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What rank 0 reports: the records of the ranks that reported and those that did not, or
    (``refused``) why the group did not run."""

    records: tuple[dict[str, Any], ...] = ()
    missing: tuple[dict[str, Any], ...] = ()
    refused: dict[str, Any] | None = None
    checkins: tuple[dict[str, Any], ...] = ()
    backend: str = "gloo"


def _missing(ranks: list[int], checkins: list[dict[str, Any]], what: str,
             timeout: float) -> list[dict[str, Any]]:
    known = {int(c["rank"]): c for c in checkins}
    return [{"rank": r, "host": known.get(r, {}).get("host"),
             "device": known.get(r, {}).get("device"),
             "reason": f"no {what} within {timeout:g} s: hung or crashed"} for r in ranks]


def run_rank(*, device_request: str = "auto", only: list[str] | None = None,
             skip_env_digest: bool = False, rank_timeout: float = 600,
             lockfile: Path | None = None) -> Outcome | None:
    """This rank's part. Rank 0 returns the ``Outcome``; the other ranks return None.

    1. check in (host, device, GPU UUID, this rank's preflight); rank 0 refuses the group when
       a preflight failed, two ranks share a GPU or a rank did not check in
    2. the environment digest, once per host (local rank 0)
    3. the workload suite; its record goes to rank 0, which waits ``rank_timeout`` seconds
       per missing rank after its own
    4. the collectives, when every rank reported (the process group times out after
       ``rank_timeout`` too)
    """
    import torch.distributed as tdist

    from verify.fleet.checkin import refusal
    from verify.gpu.preflight import LockNeeds, check

    me = RankEnv.from_environ()
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
        needs = LockNeeds.read(lockfile) if lockfile else None
        problems = check(facts, device=device, requested=device_request, lock=needs,
                         prefix=sys.prefix)
        checkin = {"rank": me.rank, "local_rank": me.local_rank, "host": me.host,
                   "device": device, "gpu_uuid": gpu.uuid if gpu else None,
                   "preflight": [p.to_json() for p in problems]}
        ex.put(f"checkin/{me.rank}", checkin)
        if me.rank == 0:
            checkins, late = ex.gather("checkin", me.world_size, rank_timeout)
            why = refusal(checkins, _missing(late, checkins, "check-in", rank_timeout))
            ex.put("go/checkin", {"go": why is None})
            if why is not None:
                return Outcome(refused=why, checkins=tuple(checkins), backend=backend)
        else:
            go = ex.get("go/checkin", slow)
            if not go or not go["go"]:
                return None
        env_digests = None
        if not skip_env_digest:
            if me.local_rank == 0:
                ex.put(f"env/{me.host}", _env_digests(sys.prefix))
            env_digests = ex.get(f"env/{me.host}", rank_timeout)
        suite = run_suite(facts, device=device, settings=DETERMINISTIC, only=only)
        statement = build_statement(
            facts=facts, device=device, settings=suite.settings,
            workloads={n: r.to_dict() for n, r in suite.results.items()},
            suite_version=SUITE_VERSION,
            environment=env_digests or {"host": hashlib.sha256(me.host.encode()).hexdigest()})
        record = {
            "rank": me.rank, "local_rank": me.local_rank, "host": me.host, "device": device,
            "gpu_uuid": gpu.uuid if gpu else None, "backend": backend,
            "collective_env": {k: os.environ[k] for k in COLLECTIVE_ENV if k in os.environ},
            "statement": statement,
        }
        ex.put(f"record/{me.rank}", record)
        if me.rank == 0:
            records, late = ex.gather("record", me.world_size, rank_timeout)
            ex.put("go/collectives", {"go": not late})
            if late:
                checkins, _ = ex.gather("checkin", me.world_size, 0)
                return Outcome(records=tuple(records), backend=backend, missing=tuple(
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
        by_rank = dict(zip([r for r in range(me.world_size) if r not in late], colls,
                           strict=True))
        out = [{**rec, "collectives": by_rank.get(int(rec["rank"]), {})} for rec in records]
        return Outcome(records=tuple(out), backend=backend, missing=tuple(
            _missing(late, [], "collective result", rank_timeout)))
    finally:
        tdist.destroy_process_group()

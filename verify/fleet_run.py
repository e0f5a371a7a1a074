"""The distributed edge of ``verify fleet``: one process per rank, gathered with torch.distributed.

Launched by torchrun, srun or a Kubernetes job (anything that sets RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT). Each rank probes its machine, runs the workload suite
on its own device (``cuda:LOCAL_RANK`` when torch sees GPUs, else the CPU), runs the collective
workload, and the group gathers every rank's record with ``all_gather_object`` over NCCL (GPUs)
or gloo (CPUs). Rank 0 turns the records into the report (``verify.fleet.analyse``).

The environment digest is computed once per host (by local rank 0) and shared, so eight ranks
on one node do not hash the same prefix eight times.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits.errors import UsageError
from verify.attest import build_statement
from verify.facts import Facts, detect
from verify.workloads import run_suite, tensor_bytes
from verify.workloads.catalog import SUITE_VERSION
from verify.workloads.settings import DETERMINISTIC

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

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> RankEnv:
        env = dict(os.environ if environ is None else environ)
        missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in env]
        if missing:
            raise UsageError(
                f"verify fleet runs under a launcher; {', '.join(missing)} not set",
                hint="torchrun --nproc-per-node N -m verify fleet --out fleet.json")
        return cls(rank=int(env["RANK"]), world_size=int(env["WORLD_SIZE"]),
                   local_rank=int(env.get("LOCAL_RANK", "0")), host=socket.gethostname())


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


def _env_digests(local_rank: int, skip: bool) -> dict[str, str] | None:
    if skip or local_rank != 0:
        return None
    from verify.digest import prefix_digests

    return dict(prefix_digests(Path(sys.prefix)))


def run_rank(*, device_request: str = "auto", only: list[str] | None = None,
             skip_env_digest: bool = False, timeout_s: float = 1800) -> list[dict[str, Any]] | None:
    """Run this rank's part; every rank returns the gathered records, in rank order."""
    import torch.distributed as tdist

    me = RankEnv.from_environ()
    facts = detect()
    device = pick_device(facts, me.local_rank, device_request)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if device.startswith("cuda"):
        import torch

        torch.cuda.set_device(device)
    tdist.init_process_group(backend=backend, timeout=dt.timedelta(seconds=timeout_s))
    try:
        hosts: list[Any] = [None] * me.world_size
        tdist.all_gather_object(hosts, (me.host, me.local_rank,
                                        _env_digests(me.local_rank, skip_env_digest)))
        env_digests = next((d for h, lr, d in hosts if h == me.host and lr == 0 and d), None)
        suite = run_suite(facts, device=device, settings=DETERMINISTIC, only=only)
        statement = build_statement(
            facts=facts, device=device, settings=suite.settings,
            workloads={n: r.to_dict() for n, r in suite.results.items()},
            suite_version=SUITE_VERSION,
            environment=env_digests or {"host": hashlib.sha256(me.host.encode()).hexdigest()})
        coll = collectives(device, me.rank, me.world_size)
        gpu = facts.gpu(int(device.split(":")[1])) if device.startswith("cuda") else None
        record = {
            "rank": me.rank, "local_rank": me.local_rank, "host": me.host, "device": device,
            "gpu_uuid": gpu.uuid if gpu else None, "backend": backend,
            "collective_env": {k: os.environ[k] for k in COLLECTIVE_ENV if k in os.environ},
            "collectives": coll, "statement": statement,
        }
        records: list[Any] = [None] * me.world_size
        tdist.all_gather_object(records, record)
        tdist.barrier()
        return sorted(records, key=lambda r: r["rank"])
    finally:
        tdist.destroy_process_group()

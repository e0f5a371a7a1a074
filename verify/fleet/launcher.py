"""Which launcher started this rank, and where its group meets: torchrun, Slurm, Open MPI.

``rendezvous(environ)`` is pure (the node list is expanded here; ``scontrol show hostnames``
only where the expression is beyond the bracket syntax below):

    torchrun, a Kubernetes job, anything torch's env:// reads
              RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    Slurm     srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the first host of
              SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST); the port derived from
              SLURM_JOB_ID and SLURM_STEP_ID (``slurm_port``), unless MASTER_ADDR/PORT are set
    Open MPI  mpirun (and prterun, its PMIx launcher): OMPI_COMM_WORLD_RANK,
              OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK; MASTER_ADDR (and
              MASTER_PORT, default 29500) must be given (mpirun -x)
    PMI       MPICH's and Intel MPI's mpiexec (Hydra), Cray's PALS: PMI_RANK, PMI_SIZE,
              MPI_LOCALRANKID (Hydra) or PMI_LOCAL_RANK (PALS); MASTER_ADDR as for Open MPI

The variables torchrun sets win where they are set (torchrun inside an salloc), then Slurm's,
then Open MPI's, then PMI's. PMIx alone puts only a process's rank in its environment
(PMIX_RANK, PMIX_NAMESPACE; the job's size is a PMIx query), so a rank that has only those is
told which variables its launcher does set (srun --mpi=pmix sets Slurm's). Nothing set: a
UsageError naming what each launcher would set.

A rank started by ``samebits verify fleet --prefix ENV -- LAUNCHER`` imports this module in the
environment under test's own interpreter (``verify.gpu.launch.IN_ENV``): the standard library
only, Python 3.8 or later.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping

from samebits._compat import dataclass
from samebits.errors import UsageError

DEFAULT_PORT = 29500
# MPI launchers, which name no rendezvous host (MASTER_ADDR must be given): (launcher, its
# program, who sets the variables, rank, size, the local rank's variables in order, how to
# pass MASTER_ADDR)
MPI_LAUNCHERS = (
    ("openmpi", "mpirun", "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     ("OMPI_COMM_WORLD_LOCAL_RANK",),
     "mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500"),
    ("pmi", "mpiexec", "PMI", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
     "mpiexec -genv MASTER_ADDR <host of rank 0> -genv MASTER_PORT 29500"),
)
# srun's ports: one per job step, in a range of unprivileged ports no common service uses
SLURM_PORT_BASE = 20000
SLURM_PORT_SPAN = 20000


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendezvous:
    launcher: str           # "torchrun", "slurm", "openmpi", "pmi"
    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int

    def init_method(self) -> str:
        """torch.distributed's: env:// under torchrun (its agent already serves the store at
        MASTER_PORT, and env:// joins it), else rank 0's TCP store at the rendezvous."""
        if self.launcher == "torchrun":
            return "env://"
        return f"tcp://{self.master_addr}:{self.master_port}"


def slurm_port(job_id: int, step_id: int) -> int:
    """A port for the step's rendezvous, the same on every rank of the step, different for
    the steps of one job and for neighbouring jobs."""
    return SLURM_PORT_BASE + (job_id * 7 + step_id) % SLURM_PORT_SPAN


_GROUP = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?(?:,|$)")


def expand_hostlist(expr: str) -> list[str] | None:
    """Slurm's host list (``node[01-03,07],gpu5``) as names, or None where the expression is
    beyond one bracket per name (then ``scontrol show hostnames`` decides)."""
    hosts: list[str] = []
    pos = 0
    while pos < len(expr):
        m = _GROUP.match(expr, pos)
        if m is None or m.end() == pos:
            return None
        stem, ranges = m.group(1), m.group(2)
        if ranges is None:
            hosts.append(stem)
        else:
            for part in ranges.split(","):
                lo, _, hi = part.partition("-")
                if not lo.isdigit() or (hi and not hi.isdigit()):
                    return None
                width = len(lo)
                hosts += [f"{stem}{n:0{width}d}" for n in range(int(lo), int(hi or lo) + 1)]
        pos = m.end()
    return hosts or None


def _scontrol_hostnames(expr: str) -> list[str]:
    proc = subprocess.run(["scontrol", "show", "hostnames", expr], capture_output=True,
                          text=True, timeout=30, check=False)
    return proc.stdout.split() if proc.returncode == 0 else []


def launcher_name(environ: Mapping[str, str]) -> str | None:
    """Which launcher's variables ``environ`` holds, in ``rendezvous``'s order ("torchrun",
    "slurm", "openmpi", "pmi"), or None."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        return "torchrun"
    if "SLURM_PROCID" in environ and "SLURM_NTASKS" in environ:
        return "slurm"
    return next((launcher for launcher, _, _, rank, size, _, _ in MPI_LAUNCHERS
                 if rank in environ and size in environ), None)


def rendezvous(environ: Mapping[str, str], *,
               hostnames: Callable[[str], list[str]] = _scontrol_hostnames) -> Rendezvous:
    """This rank's place in its group, from what its launcher set (module docstring)."""
    env = dict(environ)

    def number(name: str) -> int:
        try:
            return int(env[name])
        except ValueError:
            raise UsageError(f'{name}="{env[name][:40]}": not a number') from None

    if "RANK" in env and "WORLD_SIZE" in env:
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in env]
        if missing:
            raise UsageError(f"verify fleet: RANK and WORLD_SIZE are set but not "
                             f"{', '.join(missing)}",
                             hint="torchrun sets all four; set them as torchrun does")
        return Rendezvous(launcher="torchrun", rank=number("RANK"),
                          world_size=number("WORLD_SIZE"),
                          local_rank=number("LOCAL_RANK") if "LOCAL_RANK" in env else 0,
                          master_addr=env["MASTER_ADDR"], master_port=number("MASTER_PORT"))
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
        addr = env.get("MASTER_ADDR")
        if addr is None:
            hosts = expand_hostlist(nodes) or hostnames(nodes)
            if not hosts:
                raise UsageError(f'SLURM_STEP_NODELIST="{nodes[:60]}": no host in it',
                                 hint="set MASTER_ADDR to the host of rank 0")
            addr = hosts[0]
        port = number("MASTER_PORT") if "MASTER_PORT" in env else slurm_port(
            number("SLURM_JOB_ID") if "SLURM_JOB_ID" in env else 0,
            number("SLURM_STEP_ID") if "SLURM_STEP_ID" in env else 0)
        return Rendezvous(launcher="slurm", rank=number("SLURM_PROCID"),
                          world_size=number("SLURM_NTASKS"),
                          local_rank=number("SLURM_LOCALID") if "SLURM_LOCALID" in env else 0,
                          master_addr=addr, master_port=port)
    for launcher, program, family, rank, size, locals_, hint in MPI_LAUNCHERS:
        if rank in env and size in env:
            if "MASTER_ADDR" not in env:
                raise UsageError(f"verify fleet under {program}: MASTER_ADDR is not set "
                                 f"({family} names no rendezvous host)",
                                 hint=f"samebits verify fleet --prefix ENV -- {hint}")
            local = next((k for k in locals_ if k in env), None)
            return Rendezvous(launcher=launcher, rank=number(rank), world_size=number(size),
                              local_rank=number(local) if local else 0,
                              master_addr=env["MASTER_ADDR"],
                              master_port=number("MASTER_PORT") if "MASTER_PORT" in env
                              else DEFAULT_PORT)
    if "PMIX_RANK" in env:
        raise UsageError("verify fleet under PMIx: PMIX_RANK is set but no launcher variable "
                         "gives the job's size (PMIx keeps it behind a query)",
                         hint="srun --mpi=pmix sets SLURM_PROCID/SLURM_NTASKS, prterun sets "
                         "OMPI_COMM_WORLD_RANK/SIZE; or set RANK, WORLD_SIZE, MASTER_ADDR and "
                         "MASTER_PORT as torchrun does")
    raise UsageError("verify fleet runs under a launcher: none of torchrun's RANK/WORLD_SIZE, "
                     "Slurm's SLURM_PROCID/SLURM_NTASKS, Open MPI's OMPI_COMM_WORLD_RANK or "
                     "PMI's PMI_RANK/PMI_SIZE is set",
                     hint="torchrun --nproc-per-node N -m verify fleet --out fleet.json where "
                     "samebits is installed beside torch; else samebits verify fleet --prefix "
                     "ENV --out fleet.json -- torchrun --nproc-per-node N (or -- srun -N NODES "
                     "-n TASKS), which starts the ranks in ENV")

"""Which launcher started a rank, and where its group meets (verify.fleet.launcher): the variables
torchrun, srun, mpirun, mpiexec and PALS really set, as tables; the real Slurm run is
tests/integration/test_slurm.py."""

from __future__ import annotations

import pytest

from samebits.errors import UsageError
from verify.fleet.launcher import Rendezvous, expand_hostlist, rendezvous, slurm_port

SRUN = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "1234",
        "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "gpu[07-08]"}

CASES = [
    ("torchrun", {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h0",
                  "MASTER_PORT": "29500"},
     Rendezvous(launcher="torchrun", rank=1, world_size=2, local_rank=1, master_addr="h0",
                master_port=29500)),
    ("srun alone: rank 0 on the step's first node, the port from the job and step",
     SRUN, Rendezvous(launcher="slurm", rank=3, world_size=4, local_rank=1, master_addr="gpu07",
                      master_port=slurm_port(1234, 0))),
    ("torchrun inside an allocation: torchrun's variables win",
     {**SRUN, "RANK": "0", "WORLD_SIZE": "8", "MASTER_ADDR": "h9", "MASTER_PORT": "1"},
     Rendezvous(launcher="torchrun", rank=0, world_size=8, local_rank=0, master_addr="h9",
                master_port=1)),
    ("srun with MASTER_ADDR/PORT given",
     {**SRUN, "MASTER_ADDR": "login1", "MASTER_PORT": "4000"},
     Rendezvous(launcher="slurm", rank=3, world_size=4, local_rank=1, master_addr="login1",
                master_port=4000)),
    ("mpirun -x MASTER_ADDR",
     {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4",
      "OMPI_COMM_WORLD_LOCAL_RANK": "0", "MASTER_ADDR": "n1"},
     Rendezvous(launcher="openmpi", rank=2, world_size=4, local_rank=0, master_addr="n1",
                master_port=29500)),
    ("MPICH's mpiexec (Hydra) -genv MASTER_ADDR",
     {"PMI_RANK": "5", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "4",
      "PMI_FD": "7", "MASTER_ADDR": "n2", "MASTER_PORT": "4100"},
     Rendezvous(launcher="pmi", rank=5, world_size=8, local_rank=1, master_addr="n2",
                master_port=4100)),
    ("Cray PALS",
     {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "3", "PMI_LOCAL_SIZE": "4",
      "MASTER_ADDR": "nid001"},
     Rendezvous(launcher="pmi", rank=3, world_size=4, local_rank=3, master_addr="nid001",
                master_port=29500)),
    ("srun --mpi=pmix: Slurm's variables, PMIx's beside them",
     {**SRUN, "PMIX_RANK": "3", "PMIX_NAMESPACE": "slurm.pmix.1234.0"},
     Rendezvous(launcher="slurm", rank=3, world_size=4, local_rank=1, master_addr="gpu07",
                master_port=slurm_port(1234, 0))),
]


@pytest.mark.parametrize(("env", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rendezvous(env: dict[str, str], expected: Rendezvous) -> None:
    """Each launcher's own variables give the rank, the world and where rank 0 listens."""
    assert rendezvous(env, hostnames=lambda _: []) == expected


ERRORS = [
    ("nothing set", {}, "verify fleet runs under a launcher: none of torchrun's"),
    ("torchrun's half", {"RANK": "0", "WORLD_SIZE": "2"},
     "RANK and WORLD_SIZE are set but not MASTER_ADDR, MASTER_PORT"),
    ("mpirun without MASTER_ADDR", {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"},
     "MASTER_ADDR is not set (Open MPI names no rendezvous host)"),
    ("mpiexec without MASTER_ADDR", {"PMI_RANK": "0", "PMI_SIZE": "2"},
     "MASTER_ADDR is not set (PMI names no rendezvous host)"),
    ("PMIx alone", {"PMIX_RANK": "0", "PMIX_NAMESPACE": "prterun-h-1@1"},
     "PMIX_RANK is set but no launcher variable gives the job's size"),
    ("a rank that is no number", {**SRUN, "SLURM_PROCID": "x"}, 'SLURM_PROCID="x": not a number'),
    ("an empty node list", {**SRUN, "SLURM_STEP_NODELIST": ""},
     'SLURM_STEP_NODELIST="": no host in it'),
]


@pytest.mark.parametrize(("env", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_rendezvous_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError) as info:
        rendezvous(env, hostnames=lambda _: [])
    assert message in info.value.message


HOSTLISTS = [
    ("node1", ["node1"]),
    ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
    ("a[1-2],b,c[9]", ["a1", "a2", "b", "c9"]),
    ("rack[1-2]-gpu[1-2]", None),   # two brackets in one name: scontrol decides
    ("n[x-2]", None),
]


@pytest.mark.parametrize(("expr", "hosts"), HOSTLISTS, ids=[h[0] for h in HOSTLISTS])
def test_expand_hostlist(expr: str, hosts: list[str] | None) -> None:
    assert expand_hostlist(expr) == hosts


def test_scontrol_decides_beyond_one_bracket() -> None:
    """A node list beyond the simple syntax is expanded by scontrol (here a stand-in for it)."""
    got = rendezvous({**SRUN, "SLURM_STEP_NODELIST": "rack[1-2]-gpu[1-2]"},
                     hostnames=lambda expr: ["rack1-gpu1", "rack1-gpu2"])
    assert got.master_addr == "rack1-gpu1"


def test_slurm_ports_differ_by_step_and_job() -> None:
    ports = {slurm_port(job, step) for job in range(100, 110) for step in range(3)}
    assert len(ports) == 30 and all(20000 <= p < 40000 for p in ports)

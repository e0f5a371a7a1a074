"""verify fleet under a real Slurm (Debian's slurm-wlm and munge, one node on this machine,
tests/fixtures/slurm_cluster.py): `srun` alone starts the fleet, no torchrun, no RANK or
MASTER_ADDR."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.slurm_cluster import SlurmCluster, require_slurm

ROOT = Path(__file__).resolve().parents[2]
ONLY = "gemm_fp32,sum_fp32"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    require_slurm()
    got = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield got
    got.stop()


def test_srun_alone_starts_a_fleet(cluster: SlurmCluster, tmp_path: Path) -> None:
    """`srun -n 2 python -m verify fleet`: two ranks from SLURM_PROCID/SLURM_NTASKS, rank 0's
    host from the step's node list, the port from the job id; one consistent report."""
    out = tmp_path / "fleet.json"
    res = cluster.run("srun", "-n", "2", "--time", "5", sys.executable, "-m", "verify",
                      "fleet", "--device", "cpu", "--only", ONLY, "--no-env-digest",
                      "--rank-timeout", "240", "--out", str(out), check=False, timeout=420,
                      cwd=ROOT)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["world_size"] == 2 and report["verdict"] == "consistent"
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert {r["host"] for r in report["ranks"]} == {cluster.node}


def test_a_task_without_srun_is_told_what_to_run(tmp_path: Path) -> None:
    """Outside any launcher: one line naming what torchrun, srun and mpirun would set."""
    import subprocess

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_"))
           and k not in ("RANK", "WORLD_SIZE")}
    res = subprocess.run([sys.executable, "-m", "verify", "fleet", "--out",
                          str(tmp_path / "f.json")], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=120)
    assert res.returncode == 2
    assert "Slurm's SLURM_PROCID/SLURM_NTASKS" in res.stderr and "Traceback" not in res.stderr

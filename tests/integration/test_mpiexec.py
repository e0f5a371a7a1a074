"""`verify fleet` under a real PMI launcher: MPICH's `mpiexec` (Hydra; Debian's mpich), which
sets PMI_RANK, PMI_SIZE and MPI_LOCALRANKID but names no rendezvous host, so MASTER_ADDR is
given with -genv. The variables of the other PMI launchers are tables in
tests/unit/test_fleet_launcher.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.netns import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.requires("mpiexec")
def test_mpiexec_starts_a_fleet(tmp_path: Path) -> None:
    """`mpiexec -n 2 -genv MASTER_ADDR 127.0.0.1 python -m verify fleet`: two ranks from
    PMI_RANK/PMI_SIZE, their local ranks from MPI_LOCALRANKID, one consistent report."""
    out = tmp_path / "fleet.json"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    res = subprocess.run(["mpiexec", "-n", "2", "-genv", "MASTER_ADDR", "127.0.0.1",
                          "-genv", "MASTER_PORT", str(free_port()), sys.executable, "-m", "verify",
                          "fleet", "--device", "cpu", "--only", "randn", "--no-env-digest",
                          "--rank-timeout", "240", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=420)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["world_size"] == 2 and report["verdict"] == "consistent"
    assert [(r["rank"], r["local_rank"]) for r in report["ranks"]] == [(0, 0), (1, 1)]


"""A fleet's ranks in the environment under test with nothing added to it (issue 45).

The environment is a venv holding torch alone: ``python -m venv --without-pip`` and pip's
``torch==2.13.0`` (this machine's CPU wheel, from pip's configured find-links) with what torch
requires, from pip's index; its lock is a requirements.txt with the sha256 of every wheel that
went in. ``samebits verify fleet --prefix VENV -- LAUNCHER`` runs two ranks there under torchrun
and under the real one-node Slurm of tests/fixtures/slurm_cluster.py (``srun -n 2``); afterwards
not one file of the venv has changed and ``samebits verify node`` of it against its lock is
healthy. A rank, or the launcher, on a Python without torch says so in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from tests.fixtures.netns import free_port
from tests.fixtures.slurm_cluster import SlurmCluster, require_slurm
from verify.fleet.start import rank_program
from verify.fleet.tree import tree_digest

ROOT = Path(__file__).resolve().parents[2]
TORCH = "2.13.0"
ONLY = "gemm_fp32,randn"
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
NO_TORCH = ("has no torch: run the ranks with the environment's Python (samebits verify fleet "
            "--prefix ENV -- srun ...)")


@dataclass(frozen=True)
class TorchAlone:
    prefix: Path
    lock: Path
    cache: Path


def _run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=900, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{cmd}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="session")
def torch_alone(tmp_path_factory: pytest.TempPathFactory) -> TorchAlone:
    """A venv holding torch and what it requires, nothing else (no pip), and its lock."""
    base = tmp_path_factory.mktemp("torch-alone")
    wheels, prefix = base / "wheels", base / "venv"
    _run(sys.executable, "-m", "pip", "download", "--quiet", "--no-cache-dir", "--only-binary",
         ":all:", "--dest", wheels, f"torch=={TORCH}")
    _run(sys.executable, "-m", "venv", "--without-pip", prefix)
    _run(sys.executable, "-m", "pip", "--python", prefix / "bin" / "python", "install",
         "--quiet", "--no-cache-dir", "--no-index", "--find-links", wheels, f"torch=={TORCH}")
    lines = ["--no-index", f"--find-links {wheels}"]
    for wheel in sorted(wheels.glob("*.whl")):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        lines.append(f"{name}=={version} "
                     f"--hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}")
    lock = base / "requirements.txt"
    lock.write_text("\n".join(lines) + "\n")
    return TorchAlone(prefix=prefix, lock=lock, cache=base / "cache")


def files_of(prefix: Path) -> dict[str, int]:
    """Every file and link under ``prefix``, with its modification time in ns."""
    return {str(p.relative_to(prefix)): p.lstat().st_mtime_ns for p in prefix.rglob("*")
            if not p.is_dir() or p.is_symlink()}


def fleet_command(prefix: Path, out: Path, *launcher: str, lock: Path | None = None
                  ) -> list[str]:
    return [sys.executable, "-m", "samebits", "verify", "fleet",
            *([str(lock)] if lock else []), "--prefix", str(prefix),
            "--device", "cpu", "--only", ONLY, "--rank-timeout", "240", "--out", str(out),
            "--", *launcher]


def check_fleet(res: subprocess.CompletedProcess[str], out: Path, env: TorchAlone,
                before: dict[str, int]) -> None:
    """Two consistent ranks that ran in the venv (its own tree digest), nothing left beside
    the report, not one file of the venv written, and the node gate healthy."""
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "verdict: CONSISTENT" in res.stdout
    report = json.loads(out.read_text())
    assert (report["verdict"], report["world_size"], report["backend"]) == (
        "consistent", 2, "gloo")
    assert [r["device"] for r in report["ranks"]] == ["cpu", "cpu"]
    tree = {"tree": tree_digest(str(env.prefix))}
    assert [r["environment"] for r in report["ranks"]] == [tree, tree]
    assert report["workloads"] == sorted(ONLY.split(","))
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]  # the handoff is gone
    assert files_of(env.prefix) == before
    gate = subprocess.run(
        [sys.executable, "-m", "samebits", "verify", "node", str(env.lock), "--prefix",
         str(env.prefix), "--lock-python", LINE, "--cache-dir", str(env.cache), "--json"],
        capture_output=True, text=True, timeout=600)
    assert "Traceback" not in gate.stderr, gate.stderr
    doc = json.loads(gate.stdout)
    assert gate.returncode == 0 and doc["healthy"] is True, doc["reasons"]
    assert [r["code"] for r in doc["reasons"] if r["level"] == "drain"] == []
    assert doc["env"]["drift"] == 0


@pytest.mark.network
@pytest.mark.slow
def test_a_fleet_runs_in_torch_alone_under_torchrun(torch_alone: TorchAlone,
                                                    tmp_path: Path) -> None:
    """`samebits verify fleet --prefix VENV -- torchrun --standalone --nproc-per-node 2`: the
    venv's own torchrun starts both ranks in it; one consistent report; the venv untouched and
    its node gate healthy."""
    before = files_of(torch_alone.prefix)
    out = tmp_path / "report" / "fleet.json"
    res = subprocess.run(fleet_command(torch_alone.prefix, out, "torchrun", "--standalone",
                                       "--nproc-per-node", "2"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    check_fleet(res, out, torch_alone, before)
    assert f"running: {torch_alone.prefix}/bin/python -m torch.distributed.run" in res.stderr


@pytest.mark.network
@pytest.mark.slow
def test_torchrun_on_two_nodes_one_command_per_node(torch_alone: TorchAlone,
                                                    tmp_path: Path) -> None:
    """torchrun's way on several nodes, one `samebits verify fleet ... -- torchrun --nnodes 2
    --node-rank R` per node (two agents on this machine, each with its own report folder):
    node 0's holds rank 0 and writes the report of both ranks; node 1's says where it is,
    exit 0, and writes nothing."""
    port = str(free_port())
    procs = []
    for node in (0, 1):
        out = tmp_path / f"node{node}" / "fleet.json"
        procs.append(subprocess.Popen(
            fleet_command(torch_alone.prefix, out, "torchrun", "--nnodes", "2", "--node-rank",
                          str(node), "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
                          "--master-port", port),
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    (out0, err0), (out1, err1) = (p.communicate(timeout=600) for p in procs)
    assert [p.returncode for p in procs] == [0, 0], err0[-2000:] + err1[-2000:]
    report = json.loads((tmp_path / "node0" / "fleet.json").read_text())
    assert (report["verdict"], report["world_size"]) == ("consistent", 2)
    assert out1 == "" and list((tmp_path / "node1").iterdir()) == []
    assert ("no report here: rank 0 ran on 127.0.0.1, under another node's torchrun; that "
            "node's `samebits verify fleet` writes it") in err1


@pytest.mark.network
@pytest.mark.slow
def test_the_launcher_judges_the_ranks_preflight_and_signs(torch_alone: TorchAlone,
                                                           tmp_path: Path) -> None:
    """LD_LIBRARY_PATH outside the venv reaches both ranks (recorded in their facts); the
    launcher runs the preflight on what rank 0 hands it, the group is refused before any
    workload, and the launcher signs the report with --sign."""
    key = tmp_path / "keys" / "admin"
    _run(sys.executable, "-m", "samebits", "keygen", "--out", key)
    out = tmp_path / "report" / "fleet.json"
    cmd = fleet_command(torch_alone.prefix, out, "torchrun", "--standalone",
                        "--nproc-per-node", "2")
    cmd[cmd.index("--out"):cmd.index("--out")] = ["--sign", str(key)]
    res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "LD_LIBRARY_PATH": "/opt/elsewhere/lib"})
    assert res.returncode == 1, res.stderr[-3000:]
    assert "verdict: REFUSED" in res.stdout
    report = subprocess.run([sys.executable, "-m", "samebits", "verify", "fleet-report",
                             str(out), "--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(report.stdout)
    assert (report.returncode, doc["verdict"], doc["workloads"]) == (1, "refused", [])
    assert [(p["rank"], p["check"]) for p in doc["preflight"]] == [(0, "library-path"),
                                                                    (1, "library-path")]
    assert "/opt/elsewhere/lib" in doc["preflight"][0]["message"]
    assert doc["signed_by"] and len(doc["signed_by"]) == 1


# ------------------------------------------------------------------------------ under srun


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    require_slurm()
    got = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield got
    got.stop()


@pytest.mark.network
def test_a_fleet_runs_in_torch_alone_under_srun(cluster: SlurmCluster, torch_alone: TorchAlone,
                                               tmp_path: Path) -> None:
    """`samebits verify fleet LOCK --prefix VENV -- srun -n 2`: srun starts VENV's python on
    the rank program twice; rank 0 meets the launcher, which read the lock, through the folder
    beside the report; one consistent report; the venv untouched and its node gate healthy."""
    before = files_of(torch_alone.prefix)
    out = tmp_path / "report" / "fleet.json"
    res = cluster.run(*fleet_command(torch_alone.prefix, out, "srun", "-n", "2", "--time", "5",
                                     lock=torch_alone.lock),
                      check=False, timeout=600, cwd=tmp_path)
    check_fleet(res, out, torch_alone, before)
    report = json.loads(out.read_text())
    assert {r["host"] for r in report["ranks"]} == {cluster.node}
    assert f"running: srun -n 2 --time 5 {torch_alone.prefix}/bin/python " in res.stderr


@pytest.mark.network
@pytest.mark.requires("mpiexec")
def test_a_fleet_runs_in_torch_alone_under_mpiexec(torch_alone: TorchAlone,
                                                  tmp_path: Path) -> None:
    """`samebits verify fleet --prefix VENV -- mpiexec -n 2 -genv MASTER_ADDR 127.0.0.1 ...`
    (MPICH's Hydra, a PMI launcher): the same two consistent ranks in the venv."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    out = tmp_path / "fleet.json"
    res = subprocess.run(fleet_command(torch_alone.prefix, out, "mpiexec", "-n", "2", "-genv",
                                       "MASTER_ADDR", "127.0.0.1", "-genv", "MASTER_PORT",
                                       str(free_port())),
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads(out.read_text())
    assert (report["verdict"], report["world_size"]) == ("consistent", 2)
    assert [r["environment"] for r in report["ranks"]] == [
        {"tree": tree_digest(str(torch_alone.prefix))}] * 2


def _samebits_without_torch(tmp_path: Path) -> tuple[Path, Path]:
    """A venv holding samebits' own dependencies and no torch (links to this one's installed
    files, as tests/integration/test_fleet.py builds its numpy-less one); samebits on its
    PYTHONPATH."""
    from tests.integration.test_fleet import _closure

    venv = tmp_path / "samebits-venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    site = venv / "lib" / f"python{LINE}" / "site-packages"
    for top in _closure("samebits"):
        if top.exists() and not (site / top.name).exists():
            os.symlink(top, site / top.name)
    shim = tmp_path / "path"
    shim.mkdir()
    for pkg in ("samebits", "verify"):
        os.symlink(ROOT / pkg, shim / pkg)
    python = venv / "bin" / "python"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(shim)}
    assert subprocess.run([python, "-c", "import yaml, packaging, verify.fleet.cmd_fleet"],
                          capture_output=True, cwd=tmp_path, env=env).returncode == 0
    assert subprocess.run([python, "-c", "import torch"], capture_output=True,
                          cwd=tmp_path).returncode != 0
    return python, shim


def test_a_rank_of_samebits_own_venv_under_srun_says_which_python_it_needs(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    """`srun -n 2 SAMEBITS-VENV/bin/python -m verify fleet` where samebits has no torch: each
    rank says, in one line, which Python it is and the command that runs the environment's;
    not a traceback ending in "No module named 'torch'"."""
    python, path = _samebits_without_torch(tmp_path)
    res = cluster.run("env", f"PYTHONPATH={path}", "srun", "-n", "2", "--time", "5",
                      str(python), "-m", "verify", "fleet", "--device", "cpu", "--out",
                      str(tmp_path / "f.json"), check=False, timeout=300, cwd=tmp_path)
    assert res.returncode != 0
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert said == [f"error: this Python ({python}, Python {LINE}) {NO_TORCH}"] * 2, res.stderr
    assert "Traceback" not in res.stderr and "No module named" not in res.stderr


# ------------------------------------------------------------------- a Python without torch


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing in it: a Python without torch."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    return venv / "bin" / "python"


def test_a_rank_on_a_python_without_torch_says_which_python_it_needs(
        bare_python: Path, tmp_path: Path) -> None:
    """The rank program (rank.pyz, as the launcher writes it) started by srun's variables on a
    Python without torch: one line naming that Python and the command to run, exit 2."""
    program = tmp_path / "rank.pyz"
    program.write_bytes(rank_program())
    env = {"PATH": os.environ.get("PATH", ""), "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
           "SLURM_LOCALID": "1", "SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "n1"}
    res = subprocess.run([str(bare_python), str(program), "--device", "cpu", "--handoff",
                          str(tmp_path)], capture_output=True, text=True, env=env, cwd=tmp_path,
                         timeout=120)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"error: this Python ({bare_python}, Python {LINE}) {NO_TORCH}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank.pyz"]  # nothing handed off


def test_the_launcher_says_it_before_starting_any_rank(bare_python: Path,
                                                       tmp_path: Path) -> None:
    """`samebits verify fleet --workload-python PYTHON-WITHOUT-TORCH -- srun -n 2`: the same
    line, from the launcher, before srun runs; exit 2, no traceback, nothing written."""
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "fleet",
                          "--workload-python", str(bare_python), "--out",
                          str(tmp_path / "fleet.json"), "--", "srun", "-n", "2"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 2
    assert res.stderr == f"error: this Python ({bare_python}, Python {LINE}) {NO_TORCH}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--prefix", "/nonexistent/env", "--", "srun"],
     "error: --prefix /nonexistent/env: no such folder"),
    (["--prefix", str(ROOT)],
     "error: --prefix names the environment the ranks run in: give the launcher after --"),
    (["--", "no-such-launcher-here", "-n", "2"],
     'error: verify fleet: cannot run "no-such-launcher-here": No such file or directory'),
])
def test_bad_launcher_input_is_exit_2(argv: list[str], message: str, tmp_path: Path) -> None:
    """A prefix that is not there, a prefix without a launcher, a launcher that is not on
    PATH: one error line (and a hint), exit 2, no traceback."""
    res = subprocess.run([sys.executable, "-m", "samebits", "verify", "fleet", "--out",
                          str(tmp_path / "fleet.json"), *argv], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr

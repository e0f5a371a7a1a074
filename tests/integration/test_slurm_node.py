"""verify node as a real Slurm prolog: three named slurmd nodes on this one machine
(tests/fixtures/slurm_cluster.py, ``slurmd -N``), each with its own prefix installed from a
small real lock (one shared cache). A clean cluster runs a job on every node; one file of one
node's environment changed, the next job's prolog drains exactly that node with reason
``samebits: env-drift``, the job is requeued and runs on the healthy nodes; ``srun -N2 -n4
python -m verify fleet`` runs across the named nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.install import locked_wheel, wheel, write_lock
from tests.fixtures.slurm_cluster import SlurmCluster, require_slurm

pytestmark = pytest.mark.slow  # three installs, a cluster, jobs with a prolog: about a minute

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
NODES = ("n1", "n2", "n3")
SITE = f"lib/python{LINE}/site-packages"


def _install(lock: Path, target: Path, cache: Path, wheels: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "install", str(lock), "--target", str(target),
         "--platform", "linux-64", "--python", sys.executable, "--cache-dir", str(cache), "-q"],
        env={**os.environ, "SAMEBITS_FIND_LINKS": str(wheels)}, capture_output=True,
        text=True, timeout=600, cwd=lock.parent)
    assert proc.returncode == 0, proc.stderr + proc.stdout


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmCluster, Path]]:
    require_slurm()
    base = tmp_path_factory.mktemp("slurm-node")
    w1 = wheel(base / "wheels", "alpha", "1.0", {"alpha/__init__.py": b"A = 1\n",
                                                 "alpha/data.bin": bytes(range(256)) * 16})
    w2 = wheel(base / "wheels", "beta", "2.0", {"beta/__init__.py": b"from alpha import A\n"})
    lock = write_lock(base / "lockfiles" / "small.conda-lock.yml",
                      [locked_wheel(w1), locked_wheel(w2)], python=LINE).path
    for n in NODES:
        _install(lock, base / f"prefix-{n}", base / "cache", base / "wheels")
    prolog = base / "prolog.sh"
    (base / "nodes").mkdir()
    (base / "node-env").mkdir()
    prolog.write_text(
        "#!/bin/sh\n"
        "# samebits' node gate: a failing gate drains this node and fails the prolog\n"
        f"export PATH=/usr/bin:/bin SLURM_CONF={base / 'slurm' / 'slurm.conf'}\n"
        "CANARY=--no-canary\n"
        "# this node's own settings, as a site keeps them beside its slurmd (a test sets some)\n"
        f"[ -f {base}/node-env/$SLURMD_NODENAME ] && . {base}/node-env/$SLURMD_NODENAME\n"
        f"{sys.executable} -m verify node {lock} --prefix {base}/prefix-$SLURMD_NODENAME"
        f" --cache-dir {base / 'cache'} $CANARY --drain -q"
        f" --out {base}/gate-$SLURMD_NODENAME-$SLURM_JOB_ID.json"
        f" --prometheus {base}/prom-$SLURMD_NODENAME.prom"
        f" > {base}/gate-$SLURMD_NODENAME-$SLURM_JOB_ID.txt 2>&1\n"
        "rc=$?\n"
        "# and the latest statement of each node in one shared folder, for fleet-report\n"
        f"cp {base}/gate-$SLURMD_NODENAME-$SLURM_JOB_ID.json {base}/nodes/$SLURMD_NODENAME.json\n"
        "exit $rc\n")
    prolog.chmod(0o755)
    got = SlurmCluster.start(base / "slurm", cpus=2, nodes=NODES, extra=[
        f"Prolog={prolog}", "PrologFlags=Alloc",
        "SchedulerParameters=nohold_on_prolog_fail", "JobRequeue=1"])
    yield got, base
    got.stop()


def _wait_job(c: SlurmCluster, job: str, limit: float = 240) -> str:
    deadline = time.monotonic() + limit
    state = ""
    while time.monotonic() < deadline:
        res = c.run("scontrol", "show", "job", job, "-o", check=False)
        state = next((w.split("=", 1)[1] for w in res.stdout.split()
                      if w.startswith("JobState=")), "")
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            return state
        time.sleep(1)
    raise AssertionError(f"job {job} still {state} after {limit:g} s:\n"
                         + c.run("scontrol", "show", "job", job, check=False).stdout)


def _sbatch(c: SlurmCluster, out: Path, *args: str) -> str:
    res = c.run("sbatch", "--parsable", "-o", str(out), "--time", "5", *args,
                "--wrap", "srun printenv SLURMD_NODENAME", cwd=out.parent)
    return res.stdout.strip().split(";")[0]


def test_a_clean_cluster_runs_on_every_node(cluster: tuple[SlurmCluster, Path]) -> None:
    """Every node's prolog gate passes: the job runs on all three, each gate's statement says
    healthy with no drift, and each node's Prometheus file says healthy."""
    c, base = cluster
    job = _sbatch(c, base / "clean.out", "-N3")
    assert _wait_job(c, job) == "COMPLETED"
    assert sorted((base / "clean.out").read_text().split()) == list(NODES)
    for n in NODES:
        doc = json.loads((base / f"gate-{n}-{job}.json").read_text())
        pred = doc["predicate"]
        assert doc["predicateType"] == "https://samebits.dev/node/v1"
        assert (pred["host"], pred["healthy"], pred["env"]["drift"]) == (n, True, 0)
        assert pred["env"]["proven_by_identity"] > 0 and pred["env"]["proof"] == "seal"
        assert 'samebits_node_healthy{host="' + n + '"} 1' in \
            (base / f"prom-{n}.prom").read_text()
    assert set(c.states().values()) == {"idle"}


def test_a_changed_file_drains_exactly_that_node(cluster: tuple[SlurmCluster, Path]) -> None:
    """One file of n2's environment replaced: the next job's prolog on n2 drains n2 with
    reason "samebits: env-drift"; the job is requeued and runs on n1 and n3, which stay up."""
    c, base = cluster
    changed = base / "prefix-n2" / SITE / "beta" / "__init__.py"
    changed.unlink()  # a new file, not a write through the cache's shared inode
    changed.write_bytes(b"from alpha import A  # edited on the node\n")
    job = _sbatch(c, base / "drift.out", "--nodes=2-3")
    assert _wait_job(c, job) == "COMPLETED"
    reasons = c.run("sinfo", "-R", "-h", "-o", "%N|%E").stdout.strip().splitlines()
    assert reasons == ["n2|samebits: env-drift"]
    states = c.states()
    assert states["n2"] in ("drain", "drng") and states["n1"] == states["n3"] == "idle"
    assert sorted((base / "drift.out").read_text().split()) == ["n1", "n3"]
    gate = json.loads((base / f"gate-n2-{job}.json").read_text())["predicate"]
    assert gate["healthy"] is False
    assert [r["code"] for r in gate["reasons"]] == ["env-drift"]
    assert f"{SITE}/beta/__init__.py (modified)" in gate["reasons"][0]["detail"]
    assert (base / f"gate-n2-{job}.txt").read_text().count("Traceback") == 0
    c.run("scontrol", "update", "nodename=n2", "state=resume")


def test_srun_runs_a_fleet_across_named_nodes(cluster: tuple[SlurmCluster, Path],
                                              tmp_path: Path) -> None:
    """`srun -N2 -n4 python -m verify fleet`: four ranks on two named nodes (two each, their
    prologs gating both), one report. The node names share this one machine and resolve
    nowhere, so rank 0's address is given the way the launcher documents (MASTER_ADDR)."""
    c, base = cluster
    c.run("scontrol", "update", "nodename=n2", "state=drain", "reason=fleet test")
    out = tmp_path / "fleet.json"
    res = c.run("srun", "-N2", "-n4", "--time", "10", "--export=ALL,MASTER_ADDR=127.0.0.1",
                sys.executable, "-m", "verify", "fleet",
                "--device", "cpu", "--only", "sum_fp32", "--no-env-digest",
                "--rank-timeout", "300", "--out", str(out), check=False, timeout=600, cwd=ROOT)
    c.run("scontrol", "update", "nodename=n2", "state=resume")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["world_size"] == 4 and report["verdict"] == "consistent"
    assert [r["rank"] for r in report["ranks"]] == [0, 1, 2, 3]
    assert (base / "prom-n1.prom").exists() and (base / "prom-n3.prom").exists()


def test_a_lowered_cpu_capability_is_named_among_its_peers(
        cluster: tuple[SlurmCluster, Path], tmp_path: Path) -> None:
    """n3's prolog runs with ATEN_CPU_CAPABILITY=default (other bits on a vectorising CPU):
    after one `srun -N3 verify fleet` job, `verify fleet-report --node-statements` names n3 the
    suspect of the class all three share (the hardware), 2 peers agreeing, and its reason names
    the setting that explains it; the gate on n3 stays healthy (a warning, not a drain)."""
    c, base = cluster
    changed = base / "prefix-n2" / SITE / "beta" / "__init__.py"  # as it was installed
    changed.unlink()
    changed.write_bytes(b"from alpha import A\n")
    canary = f"CANARY='--workload-python {sys.executable}'\n"
    for n in NODES:
        (base / "node-env" / n).write_text(
            canary + ("export ATEN_CPU_CAPABILITY=default\n" if n == "n3" else ""))
    report = tmp_path / "fleet.json"
    try:
        res = c.run("srun", "-N3", "-n3", "--time", "10",
                    "--export=ALL,MASTER_ADDR=127.0.0.1", sys.executable, "-m", "verify",
                    "fleet", "--device", "cpu", "--only", "sum_fp32", "--no-env-digest",
                    "--rank-timeout", "300", "--out", str(report), check=False, timeout=600,
                    cwd=ROOT)
    finally:
        for n in NODES:
            (base / "node-env" / n).unlink()
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    preds = {n: json.loads((base / "nodes" / f"{n}.json").read_text())["predicate"]
             for n in NODES}
    assert {n: p["host"] for n, p in preds.items()} == {n: n for n in NODES}
    runs = {n: p["canary"][0] for n, p in preds.items()}
    if runs["n1"]["settings"]["cpu_capability"] == "DEFAULT":
        pytest.skip("this CPU has no vector capability ATen dispatches to")
    assert runs["n3"]["settings"]["cpu_capability"] == "DEFAULT"
    assert len({r["class"] for r in runs.values()}) == 1
    assert runs["n1"]["digest"] == runs["n2"]["digest"] != runs["n3"]["digest"]
    assert all(p["healthy"] for p in preds.values()), [p["reasons"] for p in preds.values()]
    proc = subprocess.run(
        [sys.executable, "-m", "verify", "fleet-report", str(report), "--node-statements",
         str(base / "nodes"), "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    nodes = json.loads(proc.stdout)["nodes"]
    [s] = nodes["suspects"]
    assert (s["host"], s["peers"], s["class_runs"]) == ("n3", 2, 3)
    native = runs["n1"]["settings"]["cpu_capability"]
    assert {d["setting"]: (d["value"], d["peers"]) for d in s["explained_by"]} == {
        "ATEN_CPU_CAPABILITY": ("default", None), "cpu_capability": ("DEFAULT", native)}
    assert s["reason"].startswith("explained by a different setting: ")
    assert "ATEN_CPU_CAPABILITY \"default\" (its peers unset)" in s["reason"]
    assert nodes["verdict"] == "suspects"

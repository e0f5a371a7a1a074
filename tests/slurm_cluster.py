"""A real one-machine Slurm cluster for tests: Debian's slurm-wlm and munge, private config,
state, ports and pid files under a temp folder (DESIGN.md "Slurm runs here").

``SlurmCluster.start(folder)`` starts munged (when no munged answers), slurmctld and one slurmd
named after this host, and waits (bounded) until ``sinfo`` shows the node idle; ``stop()``
ends the daemons it started, by their pid files. Every command run in it gets ``SLURM_CONF``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "srun", "sinfo", "scontrol", "munged")
START_LIMIT = 60.0


def missing_tools() -> list[str]:
    return [t for t in DAEMONS if shutil.which(t) is None
            and not Path("/usr/sbin", t).exists()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


@dataclass
class SlurmCluster:
    folder: Path
    node: str
    env: dict[str, str]
    pids: list[Path] = field(default_factory=list)
    started_munge: bool = False

    @classmethod
    def start(cls, folder: Path, *, cpus: int = 2) -> SlurmCluster:
        folder.mkdir(parents=True, exist_ok=True)
        node = socket.gethostname().split(".")[0]
        conf = folder / "slurm.conf"
        state, spool, log = folder / "state", folder / "spool", folder / "log"
        for d in (state, spool, log):
            d.mkdir(exist_ok=True)
        conf.write_text("\n".join([
            "ClusterName=samebits-test", f"SlurmctldHost={node}", "SlurmUser=root",
            "SlurmdUser=root", "AuthType=auth/munge", "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU", "MpiDefault=none", "ReturnToService=2",
            f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}",
            f"StateSaveLocation={state}", f"SlurmdSpoolDir={spool}",
            f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={folder / 'slurmd.pid'}",
            f"SlurmctldLogFile={log / 'slurmctld.log'}", f"SlurmdLogFile={log / 'slurmd.log'}",
            "SchedulerType=sched/backfill", "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            f"NodeName={node} CPUs={cpus} State=UNKNOWN",
            f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP", ""]))
        env = {**os.environ, "SLURM_CONF": str(conf)}
        cluster = cls(folder=folder, node=node, env=env)
        try:
            cluster._munge()
            for daemon, pid in (("slurmctld", "slurmctld.pid"), ("slurmd", "slurmd.pid")):
                subprocess.run([_tool(daemon)], env=env, check=True, timeout=30,
                               capture_output=True)
                cluster.pids.append(folder / pid)
            cluster._wait_idle()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _munge(self) -> None:
        if subprocess.run(["munge", "-n"], capture_output=True, timeout=10).returncode == 0:
            return
        for d in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
            Path(d).mkdir(parents=True, exist_ok=True)
        subprocess.run([_tool("munged"), "--force"], check=True, timeout=30,
                       capture_output=True)
        self.started_munge = True

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + START_LIMIT
        while time.monotonic() < deadline:
            res = self.run("sinfo", "-h", "-n", self.node, "-o", "%t", check=False)
            if res.stdout.strip() in ("idle", "mix"):
                return
            time.sleep(0.5)
        logs = "\n".join(p.read_text()[-1500:] for p in (self.folder / "log").glob("*.log"))
        raise RuntimeError(f"{self.node} did not come up idle within {START_LIMIT:g} s:\n{logs}")

    def run(self, *cmd: str, check: bool = True, timeout: float = 300,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([_tool(cmd[0]), *cmd[1:]], env=self.env, capture_output=True,
                             text=True, timeout=timeout, cwd=cwd)
        if check and res.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: exit {res.returncode}\n{res.stderr[-3000:]}")
        return res

    def stop(self) -> None:
        if self.started_munge:
            self.pids.append(Path("/run/munge/munged.pid"))
        for pid_file in self.pids:
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                continue
        deadline = time.monotonic() + 15
        for pid_file in self.pids:
            while time.monotonic() < deadline and pid_file.exists():
                time.sleep(0.2)

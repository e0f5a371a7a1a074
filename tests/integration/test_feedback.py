"""Feedback on long work, through the real CLI: one line per step on a pipe, a redrawn rich
display on a terminal, nothing with --quiet, and --json output that stays one document."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.lock import TmpProject, conda_spec
from tests.fixtures.render import RenderProject
from tests.fixtures.verify import Installed


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def run_in_pty(*args: str, cwd: Path) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a pseudo-terminal: (exit code, what it showed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "samebits", *args], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 300)
        if not ready:
            break
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


@pytest.fixture
def one_env(project: TmpProject) -> TmpProject:
    project.spec("env", conda_spec(generation="cpu", cuda=None, deps='"python 3.12.*"'))
    return project


def test_lock_piped_quiet_json_and_terminal(one_env: TmpProject) -> None:
    """lock: a line naming what it solves when piped; nothing with --quiet or --json (one
    JSON document on stdout); a spinner row on a terminal."""
    piped = run("lock", cwd=one_env.root)
    lockfile = "lockfiles/env.conda-lock.yml"
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "solving 1 environment: env ...\n"
    assert piped.stdout == f"env: created {lockfile} (linux-64: 1 package)\n"
    quiet = run("lock", "--quiet", cwd=one_env.root)
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert quiet.stdout == f"env: unchanged {lockfile} (linux-64: 1 package)\n"
    as_json = run("lock", "--json", cwd=one_env.root)
    assert (as_json.returncode, as_json.stderr) == (0, "")
    assert json.loads(as_json.stdout)["locked"]["env"]["packages"] == {"linux-64": 1}
    code, shown = run_in_pty("lock", cwd=one_env.root)
    assert code == 0
    assert "solving 1 environment: env" in shown and "\x1b[" in shown
    assert "solving 1 environment: env ..." not in shown
    assert f"env: unchanged {lockfile} (linux-64: 1 package)" in shown


def test_verify_env_piped_lines(pristine: Installed, tmp_path: Path) -> None:
    """verify env: one line for hashing and one for the linkage check; none with --quiet."""
    piped = run("verify", "env", "--prefix", str(pristine.prefix), cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    lines = piped.stderr.splitlines()
    assert len(lines) == 2
    assert re.fullmatch(rf"hashing [\d,]+ files of {re.escape(str(pristine.prefix))} "
                        r"\([\d,]+ MB\) \.\.\.", lines[0]), lines[0]
    assert lines[1] == "resolving every ELF file's shared libraries ..."
    quiet = run("verify", "env", "--prefix", str(pristine.prefix), "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stderr) == (0, "")
    assert quiet.stdout == piped.stdout


@pytest.mark.slow
def test_verify_gpu_probe_piped_quiet_json(tmp_path: Path) -> None:
    """verify gpu --probe: one line per phase (facts, workloads, probe); --json stays one
    document with nothing on stderr."""
    args = ("verify", "gpu", "--probe", "--only", "sum_fp32", "--device", "cpu", "--out",
            str(tmp_path / "a.json"))
    piped = run(*args, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == (
        "probing this machine (torch, CUDA, driver, GPU, CPU) ...\n"
        "running 1 workload on cpu ...\n"
        "probing 1 workload for stability: fresh processes under deterministic and default "
        "settings ...\n")
    as_json = run(*args, "--json", cwd=tmp_path)
    assert (as_json.returncode, as_json.stderr) == (0, "")
    assert json.loads(as_json.stdout)["probe"] is not None
    quiet = run(*args, "--quiet", cwd=tmp_path)
    assert (quiet.returncode, quiet.stderr) == (0, "")


@pytest.mark.slow
def test_attest_shows_whole_reasons(pristine: Installed, tmp_path: Path) -> None:
    """attest's workload lines give a reason whole (EFFICIENT_ATTENTION, not EFFICIENT_ATTENT)."""
    proc = run("attest", str(pristine.lockfile), "--prefix", str(pristine.prefix),
               "--workload-python", sys.executable, "--only", "sdpa_efficient,sum_fp32", "--device",
               "cpu", "--out", str(tmp_path / "a.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "attest: verify env ...\nattest: preflight ...\nattest: workloads ...\n"
    line = next(ln for ln in proc.stdout.splitlines() if "sdpa_efficient" in ln)
    assert line.split() == ["sdpa_efficient", "unavailable", "EFFICIENT_ATTENTION", "has", "no",
                            "CPU", "kernel"]


@pytest.mark.slow
def test_render_oci_steps(render_project: RenderProject, package_cache: Path,
                          tmp_path: Path) -> None:
    """render oci: one line per step when piped (install, verify env, each layer, the
    archive); with --json, stdout is one document and stderr is empty."""
    args = ("render", "oci", "venv", "--platform", "linux-aarch64", "--python", sys.executable,
            "--cache-dir", str(package_cache), "--root", str(render_project.root))
    piped = render_project.samebits(*args, "--out", str(tmp_path / "a"), "--archive",
                                    str(tmp_path / "a.tar"))
    assert piped.returncode == 0, piped.stderr
    lines = piped.stderr.splitlines()
    assert lines[:2] == ["venv: installing linux-aarch64 into a scratch prefix ...",
                         "venv: verify env on the scratch prefix ..."]
    assert lines[2].startswith("venv: layer env (") and lines[2].endswith(" bytes) ...")
    assert lines[3:] == [f"writing the oci-archive {tmp_path / 'a.tar'} ..."]
    as_json = render_project.samebits(*args, "--out", str(tmp_path / "b"), "--json")
    assert (as_json.returncode, as_json.stderr) == (0, "")
    assert json.loads(as_json.stdout)["layers"][0]["name"] == "env"

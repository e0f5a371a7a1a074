"""Foreign locks through the commands: install, verify env and lock diff take uv.lock,
pylock.toml and a hashed requirements.txt written by uv and pip-compile (tests/data/foreign)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.fixtures.render import run_cli

PYPI = Path(__file__).parents[1] / "data" / "foreign" / "pypi"
LINE = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.mark.slow
@pytest.mark.network
def test_three_formats_install_the_same_environment(tmp_path: Path) -> None:
    """uv.lock, pylock.toml and requirements.txt for the same requirements, each installed by
    `samebits install` into the same path: verify env identical against each, one packages
    digest and one environment digest."""
    prefix = tmp_path / "env"
    cache = tmp_path / "cache"
    digests = {}
    for name in ("uv.lock", "pylock.toml", "requirements.txt"):
        proc = run_cli("install", str(PYPI / name), "--target", str(prefix), "--platform",
                       "linux-64", "--python", sys.executable, "--cache-dir", str(cache),
                       "--replace", "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        doc = json.loads(proc.stdout)
        assert doc["identical"] is True, doc["verify"]
        assert doc["pip"] == ["idna==3.10", "python-dateutil==2.9.0.post0", "six==1.17.0"]
        assert doc["conversion"]["format"] == name
        assert doc["conversion"]["choices"]["python"] == ".".join(
            map(str, sys.version_info[:3]))
        assert "read as" in proc.stderr
        digests[name] = doc["verify"]["digests"]
    assert len({d["packages"] for d in digests.values()}) == 1, digests
    assert len({d["environment"] for d in digests.values()}) == 1, digests
    # and a standalone verify env against a lock of another format than the one installed
    proc = run_cli("verify", "env", str(PYPI / "uv.lock"), "--prefix", str(prefix),
                   "--no-linkage", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"note: lockfile read as uv.lock (python {LINE}, glibc 2.28, groups dev)" \
        in proc.stdout


def test_lock_diff_across_formats(tmp_path: Path) -> None:
    """`samebits lock diff` of uv.lock and pylock.toml: identical, exit 0, formats named."""
    proc = run_cli("lock", "diff", str(PYPI / "uv.lock"), str(PYPI / "pylock.toml"),
                   "--lock-python", "3.12", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["identical"] is True
    assert doc["formats"] == {"old": "uv.lock", "new": "pylock.toml"}
    assert sorted(doc["platforms"]) == ["linux-64", "linux-aarch64"]


def test_lock_diff_explicit_against_its_lock(tmp_path: Path) -> None:
    """conda-lock's explicit rendering of the cpu lock against the lock: identical on linux-64;
    against the pylock fixture, every package added and removed."""
    root = Path(__file__).resolve().parents[2]
    explicit = Path(__file__).parents[1] / "data" / "foreign" / "explicit" / \
        "cpu-linux-64.explicit.txt"
    same = run_cli("lock", "diff", str(explicit), str(root / "lockfiles/cpu.conda-lock.yml"),
                   "--platform", "linux-64", cwd=tmp_path)
    assert (same.returncode, same.stdout) == (0, "no package differs\n"), same.stderr
    other = run_cli("lock", "diff", str(explicit), str(PYPI / "pylock.toml"), "--platform",
                    "linux-64", "--lock-python", "3.12", cwd=tmp_path)
    assert other.returncode == 1
    assert other.stdout.splitlines()[0] == "linux-64: 3 added, 32 removed, 0 changed"
    assert "  + six 1.17.0 (pip)" in other.stdout.splitlines()


def test_install_conda_explicit_of_a_lock(tmp_path: Path) -> None:
    """conda-lock's explicit rendering of a conda+PyPI lock installs through samebits install
    to the same packages as the lock itself (local channel and wheels: offline)."""
    import subprocess

    from tests.fixtures.fakechannel import build_cuda_channel
    from tests.fixtures.fakewheels import write_wheels
    from tests.fixtures.render import render_wheels, write_project

    project = write_project(tmp_path / "proj", build_cuda_channel(tmp_path / "channel"),
                            write_wheels(tmp_path / "wheels", render_wheels()))
    proc = subprocess.run([sys.executable, "-m", "conda_lock", "render", "--kind", "explicit",
                           "-p", "linux-64", "--filename-template", "gpu-{platform}.txt",
                           str(project.lockfile("gpu"))], cwd=tmp_path, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    digests = []
    for source in (str(project.lockfile("gpu")), str(tmp_path / "gpu-linux-64.txt")):
        proc = run_cli("install", source, "--target", str(tmp_path / "env"), "--platform",
                       "linux-64", "--cache-dir", str(tmp_path / "cache"), "--replace",
                       "--find-links", str(tmp_path), "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        doc = json.loads(proc.stdout)
        assert doc["identical"] is True, doc["verify"]
        digests.append(doc["verify"]["digests"])
    assert digests[0] == digests[1]


PIXI_V6 = Path(__file__).parents[1] / "data" / "foreign" / "pixi" / "v6.pixi.lock"
REFERENCE = Path(__file__).parents[2] / "examples" / "paper" / "reference.attestation.json"


@pytest.mark.parametrize("command", [
    ["attest", "--out", "att.json"],
    ["audit", "--attestation", str(REFERENCE), "--out", "audit", "--no-workloads"],
])
def test_attest_and_audit_read_a_pixi_environment_by_flag(tmp_path: Path,
                                                          command: list[str]) -> None:
    """attest and audit take --lock-env: an unknown environment is named with the known
    ones (exit 2); a known one is read and the command goes on to the prefix."""
    (tmp_path / "empty").mkdir()
    base = [*command, str(PIXI_V6), "--prefix", str(tmp_path / "empty"),
            "--platform", "linux-64"]
    proc = run_cli(*base, "--lock-env", "nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"error: {PIXI_V6}: no environment 'nope' (it has default, docs)" in proc.stderr
    proc = run_cli(*base, "--lock-env", "docs", cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path / 'empty'}: not an environment" in proc.stderr
    assert not (tmp_path / "att.json").exists() and not (tmp_path / "audit").exists()

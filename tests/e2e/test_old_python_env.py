"""samebits' in-environment code on real torch 1.13.1 from PyPI, on Python 3.9 (and 3.8: slow).

A 2021-22 paper pinning transformers 4.2.1 (tokenizers 0.9.4: cp39 wheels at most) gets a
Python 3.9 environment; torch 1.13 runs on 3.7 to 3.10. The session's fixture makes such an
environment the way samebits' users get one, with real tools: ``uv pip compile`` of
``torch==1.13.1`` into a hashed requirements.txt (the lock: torch and its four nvidia-*-cu11
wheels, about 2 GB, CUDA builds that run on a CPU), a stdlib venv of pyenv's Python, and ``uv
pip install --require-hashes`` of that lock into it (its own uv cache under the session's
temporary folder: nothing is reused across sessions). Then, in that interpreter:

    attest      ``samebits attest`` of a tiny paper folder (one command that saves a tensor
                and writes a metric): verify env, preflight, the command under the settings
                hook (``sitecustomize``), its tensor records by the error-statistics worker,
                the facts probe and two workloads: exit 0, and the attestation says so
    suite       the whole CPU suite through the worker (``samebits_app.audit.runtime``): no
                workload an error; the error statistics of its saved outputs
    canary      ``samebits verify node``'s known-answer canary

``network`` (PyPI), and not ``slow`` for 3.9: about 90 s on a 2-core machine. Python 3.8 (the
same again, another 1 GB torch wheel) is ``slow``. Static checks that need no torch (every
in-environment module compiles and imports on real 3.8 and 3.9): tests/integration/
test_inenv_pythons.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.pythons import pyenv_python, skip_reason

TORCH = "1.13.1"
ROOT = Path(__file__).resolve().parents[2]
SUBSET = "gemm_fp32,sum_fp32"

MANIFEST = """\
format = 1
title = "torch 1.13 on an older Python"
lockfile = "requirements.txt"
attestation = "reference.attestation.json"
outputs = "outputs"

[run]
deterministic = true
timeout = 300

[[commands]]
name = "tiny"
run = "python tiny.py"

[[commands.outputs]]
path = "w.pt"
kind = "tensors"

[[commands.outputs]]
path = "metrics.json"
kind = "metrics"
"""

TINY = """\
import json
import torch

g = torch.Generator().manual_seed(0)
w = torch.randn(8, 8, generator=g) @ torch.randn(8, 8, generator=g)
torch.save({"w": w}, "w.pt")
with open("metrics.json", "w") as f:
    json.dump({"sum": float(w.sum())}, f)
"""


@dataclass(frozen=True)
class OldEnv:
    line: str  # "3.9"
    prefix: Path
    lock: Path  # the hashed requirements.txt the prefix was installed from

    @property
    def python(self) -> str:
        return str(self.prefix / "bin" / "python")


@pytest.fixture(scope="session", params=["3.9", pytest.param("3.8", marks=pytest.mark.slow)])
def old_env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> OldEnv:
    """A venv of pyenv's Python ``line`` holding torch 1.13.1 from PyPI, installed from a
    hashed lock by uv."""
    from samebits.solve.pypi import uv_binary

    line = request.param
    base = pyenv_python(line)
    if base is None:
        pytest.skip(skip_reason(line))
    root = tmp_path_factory.mktemp(f"torch{TORCH}-py{line}")
    uv, cache = uv_binary(), str(root / "uv-cache")
    (root / "in.txt").write_text(f"torch=={TORCH}\n")
    lock = root / "requirements.txt"
    subprocess.run([uv, "pip", "compile", "in.txt", "--generate-hashes", "--python-version",
                    line, "--python-platform", "x86_64-manylinux_2_28", "--no-header",
                    "--cache-dir", cache, "-q", "-o", str(lock)],
                   cwd=root, check=True, timeout=300)
    prefix = root / "venv"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(prefix)], check=True,
                   timeout=120)
    subprocess.run([uv, "pip", "install", "--python", str(prefix / "bin" / "python"),
                    "--require-hashes", "--no-deps", "-r", str(lock), "--cache-dir", cache,
                    "-q"], check=True, timeout=900)
    (prefix / ".lock").unlink(missing_ok=True)  # uv's lock of the venv, not an installed file
    return OldEnv(line=line, prefix=prefix, lock=lock)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cwd / "cache")}
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.network
def test_attest_a_paper_on_an_older_python(old_env: OldEnv, tmp_path: Path) -> None:
    """samebits attest of a tiny paper in the torch 1.13.1 environment: exit 0; the facts
    name that Python, the workloads ran, the command ran under the settings hook and its
    tensors were read by the worker."""
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "samebits-paper.toml").write_text(MANIFEST)
    (paper / "tiny.py").write_text(TINY)
    (paper / "requirements.txt").write_bytes(old_env.lock.read_bytes())
    attest = _cli("attest", "paper", "--prefix", str(old_env.prefix), "--device", "cpu",
                  "--only", SUBSET, "--json", cwd=tmp_path)
    assert attest.returncode == 0, attest.stderr[-3000:]
    predicate = json.loads((paper / "reference.attestation.json").read_text())["predicate"]
    facts = predicate["facts"]
    assert facts["python"].startswith(f"CPython {old_env.line}.")
    assert facts["torch"]["version"].startswith(f"{TORCH}+")
    assert {n: w["status"] for n, w in predicate["workloads"].items()} == {
        "gemm_fp32": "ok", "sum_fp32": "ok"}
    command = predicate["paper"]["commands"]["tiny"]
    assert (command["status"], command["exit_code"]) == ("ok", 0)
    assert command["torch_settings"]["deterministic_algorithms"] is True  # the hook ran
    tensors, metrics = command["outputs"]
    assert list(tensors["tensors"]) == ["w"] and tensors["tensors"]["w"]["shape"] == [8, 8]
    assert list(metrics["values"]) == ["sum"]


@pytest.mark.network
def test_suite_errorstats_and_canary_on_an_older_python(old_env: OldEnv,
                                                        tmp_path: Path) -> None:
    """The whole CPU suite, the error statistics of its saved outputs and the node canary in
    the torch 1.13.1 environment's own interpreter: nothing an error, what 1.13 lacks
    unavailable with the reason."""
    from samebits_app.audit.runtime import Interpreter
    from verify.gpu.workloads import NAMES
    from verify.gpu.workloads.settings import DETERMINISTIC
    from verify.node.canary import run_canary

    runtime = Interpreter(old_env.python)
    measured = runtime.run(device="cpu", settings=DETERMINISTIC, names=NAMES,
                           save_outputs=tmp_path / "outputs")
    assert measured.facts.python.startswith(f"CPython {old_env.line}.")
    statuses = {n: r["status"] for n, r in measured.workloads.items()}
    assert set(statuses) == set(NAMES) and "error" not in statuses.values(), measured.workloads
    assert measured.workloads["sdpa_math"] == {
        "status": "unavailable", "detail": f"MATH: torch {measured.facts.torch.version} has "
        "no torch.nn.functional.scaled_dot_product_attention"}
    assert statuses["gemm_fp32"] == statuses["train_transformer_adamw"] == "ok"
    assert runtime.output_errors(tmp_path / "outputs", tmp_path / "outputs") == {}
    canary = run_canary(old_env.python, "cpu")
    assert "error" not in canary, canary
    assert canary["settings"]["torch"].startswith(f"{TORCH}+") and len(canary["digest"]) == 64

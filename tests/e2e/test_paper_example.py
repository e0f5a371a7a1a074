"""examples/paper as committed: its lock, its reference attestation and saved outputs, and
the reviewer's quickstart (install the lock, audit against the reference) on this machine."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from samebits_app.paper.manifest import read_manifest
from samebits_app.paper.runner import saved_path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "paper"
TORCH_URL = ("https://download.pytorch.org/whl/cpu/"
             "torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl")
TORCH_SHA256 = "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b"
LOCAL_WHEEL = Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")


def samebits(*args: str, cwd: Path = ROOT, timeout: float = 300,
             env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=env)


def test_example_lock() -> None:
    """The paper's lock is the project's lock of environments/examples/paper-cpu.toml, fresh, read
    by conda-lock's own parser, with torch at PyTorch's official URL and its sha256."""
    from conda_lock.lockfile import parse_conda_lock_file

    lock_text = (EXAMPLE / "conda-lock.yml").read_bytes()
    assert lock_text == (ROOT / "lockfiles/examples/paper-cpu.conda-lock.yml").read_bytes()
    proc = samebits("lock", "--check", "examples/paper-cpu")
    assert (proc.returncode, proc.stdout.strip()) == (0, "examples/paper-cpu: fresh"), proc.stderr
    parse_conda_lock_file(EXAMPLE / "conda-lock.yml")
    lock = parse_lock(EXAMPLE / "conda-lock.yml")
    (torch,) = [p for p in lock.packages if p.name == "torch"]
    assert (torch.version, torch.url, torch.sha256, lock.meta("python")) == (
        "2.13.0+cpu", TORCH_URL, TORCH_SHA256, "3.11")
    assert all(p.sha256 for p in lock.packages)


def test_reference_attestation_and_outputs() -> None:
    """The committed attestation names the lock and records the command; every shipped output
    is the file it attests (its sha256); no host path is in it."""
    text = (EXAMPLE / "reference.attestation.json").read_text()
    doc = json.loads(text)
    names = {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}
    assert names["conda-lock.yml"] == hashlib.sha256(
        (EXAMPLE / "conda-lock.yml").read_bytes()).hexdigest()
    rec = doc["predicate"]["paper"]["commands"]["train"]
    assert rec["run"] == ["python", "train.py", "--steps", "200", "--out", "out"]
    manifest = read_manifest(EXAMPLE)
    for o in rec["outputs"]:
        path = saved_path(manifest.outputs / "commands", "train", rec["cwd"], o)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == o["sha256"], path
    # the paper's code and inputs as attested are the files committed here
    from samebits_app.paper.inputs import against_attested, check_inputs
    from samebits_app.paper.tree import check, parse_tree

    attested = parse_tree(doc["predicate"]["paper"].get("tree"))
    assert attested is not None and "train.py" in attested.paths
    assert check(attested, manifest).differences == ()
    assert {n for n in names if n.startswith("input/")} == {"input/data/stripes.json"}
    assert against_attested(check_inputs(manifest), doc["predicate"]["paper"]["inputs"]) == []
    paper = json.dumps(doc["predicate"]["paper"])
    for host_path in ("/tmp/", "/work/", "/root/", "/home/", str(ROOT)):
        assert host_path not in paper
    assert "/tmp/" not in text and str(ROOT) not in text


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.skipif(not LOCAL_WHEEL.is_file(),
                    reason=f"{LOCAL_WHEEL} is absent: this test does not download 192 MB")
def test_quickstart_on_this_machine(tmp_path: Path) -> None:
    """`samebits audit examples/paper --target DIR`: the lock installed (torch from the cache,
    hash-checked; the small wheels from PyPI), then audited against the committed reference:
    exit 0; bit-identical where this machine is in the reference's equivalence class."""
    cache = tmp_path / "cache"
    dest = cache / "archives" / TORCH_SHA256
    dest.mkdir(parents=True)
    os.symlink(LOCAL_WHEEL, dest / TORCH_URL.rsplit("/", 1)[1])
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = samebits("audit", "examples/paper", "--target", str(tmp_path / "env"),
                    "--cache-dir", str(cache), "--out", str(tmp_path / "out"), timeout=1800,
                    env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    compare = next(s for s in doc["steps"] if s["name"] == "compare")
    (train,) = doc["paper"]["commands"]
    if "same equivalence class" in compare["summary"]:
        assert doc["verdict"]["level"] == "bit-identical", doc["verdict"]
        assert train["level"] == "bit-identical"
    else:
        # another class: the bits may still all agree, else they differ within tolerance
        # or by recorded facts
        assert doc["verdict"]["level"] in ("bit-identical", "within-tolerance", "explained"), \
            doc["verdict"]

"""``samebits paper init`` end to end: small real papers written here, run three times by the
console command in the sandbox attest uses, their manifest written, then attested and audited.

The environment is ``tests.fixtures.verify``' pristine prefix and its lock; it has no torch, so
the commands run on this interpreter (``--workload-python sys.executable``: its folder is first
on the command's PATH, so ``python`` is this interpreter, with torch and numpy), as
tests/fixtures/paper.py does for attest. ``OMP_NUM_THREADS=2`` is set, so run 3 is one thread
against two whatever the machine's cores.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from samebits_app.paper.draft import SYSTEM
from samebits_app.paper.manifest import read_manifest
from tests.fixtures.audit import environ
from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    Installed,
    elves,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

ROOT = Path(__file__).resolve().parents[2]


# a file outside the paper folder that the paper reads; named unless the checkout lies under a
# system folder such as /tmp (a fresh clone there), which the sandbox also hides: the paper
# tries the read all the same, and the open is seen
OUTSIDE = ROOT / "pyproject.toml"

# A small paper: reads its data, writes tensors, metrics, a JSON-lines curve, a text file, a
# cache and a temporary file, prints a log; one sum depends on the thread count, as real
# reductions do.
TRAIN = """import json, pathlib, sys
import torch
torch.manual_seed(0)
scale = float(pathlib.Path("data/scale.txt").read_text())
try:  # the sandbox hides a file under the caller's /tmp; the open is seen all the same
    pathlib.Path(sys.argv[1]).read_bytes()
except OSError:
    pass
out = pathlib.Path("out")
(out / ".cache").mkdir(parents=True, exist_ok=True)
(out / ".cache" / "blob").write_text("cached")
(out / "part.tmp").write_text("scratch")
x = torch.randn(1 << 20) * scale
w = torch.randn(8, 8)
with open(out / "log.jsonl", "w") as f:
    for step in range(1, 6):
        total = float((x * step).sum())
        f.write(json.dumps({"step": step, "total": total}) + "\\n")
        print(f"step {step} loss {total / 1e3:.7f}", flush=True)
torch.save({"w": w, "head": x[:4].clone()}, out / "model.pt")
(out / "metrics.json").write_text(json.dumps({"total": total, "steps": 5}))
(out / "notes.txt").write_text("trained\\n")
"""
EVAL = """import json, pathlib
m = json.loads(pathlib.Path("out/metrics.json").read_text())
pathlib.Path("out/eval.json").write_text(json.dumps({"score": m["seeded"] * 2}))
"""
UNSEEDED = """import json, pathlib, random
pathlib.Path("out").mkdir()
pathlib.Path("out/metrics.json").write_text(json.dumps({"seeded": 0.5, "r": random.random()}))
"""


def write_paper(folder: Path, installed: Installed, **files: str) -> Path:
    """A paper folder: its lock, ``data/scale.txt`` and ``data/README.txt``, and ``files``
    (name -> text; a ``__`` in a name is a ``/``)."""
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "scale.txt").write_text("1.5\n")
    (folder / "data" / "README.txt").write_text("how the data was made\n")
    for name, text in files.items():
        (folder / name.replace("__", "/")).write_text(text)
    shutil.copyfile(installed.lockfile, folder / "conda-lock.yml")
    return folder


def init(paper: Path, installed: Installed, *args: str, timeout: float = 600
         ) -> subprocess.CompletedProcess[str]:
    """``samebits paper init PAPER --prefix ENV ARGS`` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "samebits", "paper", "init", str(paper), "--prefix",
         str(installed.prefix), "--workload-python", sys.executable, *args],
        capture_output=True, text=True, timeout=timeout, cwd=paper.parent,
        env=environ(OMP_NUM_THREADS="2"))


@pytest.fixture
def trained(tmp_path: Path, pristine: Installed) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The small paper, after `paper init --json --input data/README.txt -- python train.py
    OUTSIDE`."""
    paper = write_paper(tmp_path / "paper", pristine, **{"train.py": TRAIN})
    proc = init(paper, pristine, "--json", "--input", "data/README.txt", "--", "python",
                "train.py", str(OUTSIDE))
    return paper, proc


def test_writes_the_manifest_it_measured(trained: tuple[Path, subprocess.CompletedProcess[str]],
                                         pristine: Installed) -> None:
    """Every output found and known by its content, caches left out by the rule, the thread
    count's difference measured and x10 rounded up as each tolerance with a comment, the data
    pinned, the outside file named; the real reader accepts what was written."""
    paper, proc = trained
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    kinds = {o["output"]: o["kind"] for o in doc["outputs"]}
    assert kinds == {"out/log.jsonl": "curve", "out/metrics.json": "metrics",
                     "out/model.pt": "tensors", "out/notes.txt": "file", "<stdout>": "curve"}
    left = {o["path"]: o["why"] for o in doc["not_outputs"]}
    assert left["out/.cache/blob"].startswith("under .cache/")
    assert left["out/part.tmp"].startswith("*.tmp")
    assert [r["run"] for r in doc["runs"]] == ["1/3", "2/3", "3/3"]
    assert doc["perturbation"] == "OMP_NUM_THREADS=1 MKL_NUM_THREADS=1"
    by = {o["output"]: o for o in doc["outputs"]}
    total = by["out/metrics.json"]
    assert total["alike"] is None and total["perturbed"]["max_abs"] > 0
    assert total["metrics"]["steps"] == 0.0 and total["metrics"]["total"] > 0
    assert by["<stdout>"]["captures"] == {"step": "1", "loss": by["<stdout>"]["captures"]["loss"]}
    assert [(i["path"], i["why"]) for i in doc["inputs"]] == [
        ("data/README.txt", "given with --input"), ("data/scale.txt", "read by train")]
    if not any(OUTSIDE.is_relative_to(s) for s in SYSTEM):  # the system's are never named
        assert str(OUTSIDE) in doc["outside"]
    text = (paper / "samebits-paper.toml").read_text()
    assert text.startswith("# The paper's manifest")
    assert 'run = "python train.py ' in text
    gap = total["perturbed"]["max_abs"]
    assert f"# OMP=1 vs 2: max |Δ| {gap:.1e} (rel " in text
    m = read_manifest(paper)
    assert m.lockfile == paper / "conda-lock.yml"
    (train,) = m.commands
    outs = {o.label: o for o in train.outputs}
    atol = dict(outs["out/metrics.json"].metrics)["total"].atol
    assert gap * 10 <= atol < gap * 20 and float(f"{atol:.0e}") == atol
    assert outs["out/notes.txt"].kind == "file"
    assert {i.path: i.sha256 for i in m.inputs} == {
        p: hashlib.sha256((paper / p).read_bytes()).hexdigest()
        for p in ("data/README.txt", "data/scale.txt")}


def test_twice_the_same_bytes(trained: tuple[Path, subprocess.CompletedProcess[str]],
                              pristine: Installed) -> None:
    """Run again on the same paper: refused without --replace (exit 2, nothing changed); with
    it, the same bytes, progress saying which run goes and how long the first took."""
    paper, proc = trained
    assert proc.returncode == 0, proc.stderr
    first = (paper / "samebits-paper.toml").read_bytes()
    args = ("--input", "data/README.txt", "--", "python", "train.py", str(OUTSIDE))
    refused = init(paper, pristine, *args)
    assert refused.returncode == 2
    assert "a command named 'train' is already declared" in refused.stderr
    assert "Traceback" not in refused.stderr
    again = init(paper, pristine, "--replace", *args)
    assert again.returncode == 0, again.stderr
    assert (paper / "samebits-paper.toml").read_bytes() == first
    for line in ("paper init: run 1/3 (as attest runs it) ...",
                 "paper init: run 2/3 (the same again) ...",
                 "paper init: run 3/3 (OMP_NUM_THREADS=1 MKL_NUM_THREADS=1) ..."):
        assert line in again.stderr
    assert "paper init: run 1/3 took " in again.stderr
    assert "output            kind     alike noise" in again.stdout
    assert "result: every output reproducible (exit 0)" in again.stdout


def test_unseeded_randomness_is_named(tmp_path: Path, pristine: Installed) -> None:
    """A value drawn from an unseeded generator: named with its first differing values and the
    usual cause, left out of the manifest, exit 1; declared with --accept-noise."""
    paper = write_paper(tmp_path / "paper", pristine, **{"noisy.py": UNSEEDED})
    proc = init(paper, pristine, "--json", "--", "python", "noisy.py")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    (out,) = doc["outputs"]
    (bad,) = out["not_reproducible"]
    assert bad["element"] == "r" and bad["first"].startswith("r: ") and " vs " in bad["first"]
    assert "unseeded randomness" in bad["cause"] and not bad["accepted"]
    assert out["metrics"] == {"seeded": 0.0}
    (cmd,) = read_manifest(paper).commands
    assert [m for m, _ in cmd.outputs[0].metrics] == ["seeded"]
    assert "# left out: r: " in (paper / "samebits-paper.toml").read_text()
    text = init(paper, pristine, "--replace", "--", "python", "noisy.py")
    assert text.returncode == 1
    assert "not reproducible on one machine (two alike runs differ):" in text.stdout
    assert "out/metrics.json: r: " in text.stdout
    accepted = init(paper, pristine, "--replace", "--accept-noise", "--", "python", "noisy.py")
    assert accepted.returncode == 0, accepted.stderr
    (cmd,) = read_manifest(paper).commands
    assert dict(cmd.outputs[0].metrics)["r"].atol > 0


def test_name_appends_a_second_command(tmp_path: Path, pristine: Installed) -> None:
    """A second command goes after the first, runs where the first's outputs are, and does
    not pin them as inputs."""
    paper = write_paper(tmp_path / "paper", pristine, **{
        "train.py": UNSEEDED.replace("random.random()", "0.25"), "eval.py": EVAL})
    assert init(paper, pristine, "--", "python", "train.py").returncode == 0
    proc = init(paper, pristine, "--name", "eval", "--", "python", "eval.py")
    assert proc.returncode == 0, proc.stderr
    assert "an earlier command, once" in proc.stderr
    m = read_manifest(paper)
    assert [(c.name, c.argv) for c in m.commands] == [("train", ("python", "train.py")),
                                                      ("eval", ("python", "eval.py"))]
    assert [o.label for o in m.commands[1].outputs] == ["out/eval.json"]
    assert m.inputs == ()


def test_a_failing_command_writes_nothing(tmp_path: Path, pristine: Installed) -> None:
    """A command that fails: exit 1, its last lines and a hint, no manifest, no traceback."""
    paper = write_paper(tmp_path / "paper", pristine, **{
        "train.py": "import sys\nprint('loading')\nsys.exit('no GPU found')\n"})
    proc = init(paper, pristine, "--", "python", "train.py")
    assert proc.returncode == 1
    assert "error: paper init: run 1/3: " in proc.stderr and "no GPU found" in proc.stderr
    assert "hint: " in proc.stderr and "Traceback" not in proc.stderr
    assert not (paper / "samebits-paper.toml").exists()


def test_a_command_that_changes_its_code_is_refused(tmp_path: Path, pristine: Installed) -> None:
    """A command that rewrites its own code: refused by name, nothing written."""
    paper = write_paper(tmp_path / "paper", pristine, **{
        "train.py": "open(__file__, 'a').write('# ran\\n')\n"})
    proc = init(paper, pristine, "--", "python", "train.py")
    assert proc.returncode == 1
    assert "changed the paper's own code: train.py" in proc.stderr
    assert not (paper / "samebits-paper.toml").exists()


def samebits(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", *args], capture_output=True,
                          text=True, timeout=900, cwd=cwd, env=environ(OMP_NUM_THREADS="2"))


def test_a_changed_input_is_named_by_the_audit(tmp_path: Path, pristine: Installed) -> None:
    """The data the command read is pinned; attest and audit under the written manifest are
    bit-identical; the data changed afterwards, the audit says the input differs."""
    paper = write_paper(tmp_path / "paper", pristine, **{
        "train.py": ("import json, pathlib\nscale = float(pathlib.Path('data/scale.txt')"
                     ".read_text())\npathlib.Path('out').mkdir()\npathlib.Path("
                     "'out/metrics.json').write_text(json.dumps({'loss': 0.25 * scale}))\n")})
    assert init(paper, pristine, "--", "python", "train.py").returncode == 0
    assert [i.path for i in read_manifest(paper).inputs] == ["data/scale.txt"]
    here = ["--prefix", str(pristine.prefix), "--workload-python", sys.executable, "--only",
            "gemm_fp32", "--device", "cpu"]
    attest = samebits("attest", str(paper), *here, cwd=tmp_path)
    assert attest.returncode == 0, attest.stderr[-3000:]
    same = samebits("audit", str(paper), *here[:4], "--out", str(tmp_path / "same"),
                    cwd=tmp_path)
    assert same.returncode == 0, same.stderr[-3000:]
    assert json.loads((tmp_path / "same" / "audit.json").read_text())["verdict"]["level"] == (
        "bit-identical")
    (paper / "data" / "scale.txt").write_text("2.5\n")
    changed = samebits("audit", str(paper), *here[:4], "--out", str(tmp_path / "changed"),
                       cwd=tmp_path)
    assert changed.returncode == 1
    doc = json.loads((tmp_path / "changed" / "audit.json").read_text())
    reason = doc["verdict"]["reasons"][0]
    assert reason["cause"] == "input"
    assert reason["text"].startswith("input differs: data/scale.txt (sha256 ")

"""The audit pipeline end to end with a fake runtime: the paper's code and inputs pinned, one
story per verdict, no section claiming a check that did not run, the paper before the suite.

The environment is ``tests.fixtures.verify``' pristine prefix and its lock (``verify env``
really runs); the paper's commands really run (``python`` is this interpreter, no torch
imported: ``deterministic = false``); only the suite and the error statistics are the fake's
(``Fake``), so each audit takes a second or two.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from samebits.errors import ToolError
from samebits_app.audit.attesting import AttestRequest, run_attest
from samebits_app.audit.document import build_document
from samebits_app.audit.pipeline import Audit, AuditRequest, run_audit
from samebits_app.audit.report_html import render_html
from samebits_app.audit.report_md import render_markdown
from samebits_app.audit.runtime import Measured
from samebits_app.paper.inputs import PaperInputError
from samebits_app.paper.manifest import read_manifest
from samebits_app.paper.sandbox import detect
from samebits_app.paper.session import PaperRunError
from tests.fixtures.samples import sample_facts
from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    Installed,
    elves,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from verify.gpu.workloads.settings import PROFILES

NAMES = ("gemm_fp32", "sum_fp32", "randn")
DATA = "1.5\n"
TRAIN = """import json, os, pathlib
scale = float(pathlib.Path("data/x.txt").read_text())
seed = int(os.environ["SEED"])
pathlib.Path("out").mkdir(exist_ok=True)
loss = 0.25 * scale + seed
pathlib.Path("out/metrics.json").write_text(json.dumps({"loss": loss}))
print("trained")
"""
EVAL = """import json, pathlib
loss = json.loads(pathlib.Path("out/metrics.json").read_text())["loss"]
pathlib.Path("out/eval.json").write_text(json.dumps({"score": 1.0 - loss}))
"""
MANIFEST = """format = 1
title = "A fake paper"
[run]
deterministic = false
env = {{ SEED = "0" }}

[[inputs]]
path = "data/x.txt"
sha256 = "{sha}"

[[commands]]
name = "train"
run = "python train.py"
[[commands.outputs]]
path = "out/metrics.json"
kind = "metrics"

[[commands]]
name = "eval"
run = "python eval.py"
[[commands.outputs]]
path = "out/eval.json"
kind = "metrics"
"""


def digest(name: str, salt: str = "") -> str:
    return hashlib.sha256(f"{name}{salt}".encode()).hexdigest()


@dataclass
class Fake:
    """The suite and the error statistics without torch: every workload gives a fixed digest
    (``salt`` changes them), on ``facts``; ``fail`` makes the suite fail; ``calls`` records
    what ran, commands included (``run`` of the paper shows in ``Fake.calls`` via progress)."""

    python: str
    salt: dict[str, str] = field(default_factory=dict)
    facts_changes: dict[str, Any] = field(default_factory=dict)
    fail: bool = False
    calls: list[str] = field(default_factory=list)

    def facts(self) -> Any:
        return sample_facts(**self.facts_changes)

    def run(self, *, device: str, settings: Any, names: Any, save_outputs: Any = None
            ) -> Measured:
        self.calls.append("suite")
        if self.fail:
            raise ToolError("the workload worker died (signal 9)")
        work = {n: {"status": "ok", "sha256": digest(n, self.salt.get(n, "")),
                    "outputs": [{"name": "out", "dtype": "float32", "shape": [4],
                                 "sha256": digest(n, self.salt.get(n, ""))}]} for n in names}
        return Measured(facts=self.facts(), settings={"profile": settings.profile,
                                                      **settings.to_dict()},
                        workloads=work)

    def output_errors(self, a: Path, b: Path) -> dict:
        return {}

    def errorstats(self, request: dict) -> dict:
        self.calls.append("errorstats")
        return {k: {} if k != "compare" else [] for k in request}


@dataclass(frozen=True)
class Authored:
    folder: Path
    installed: Installed


def write_paper(folder: Path, lockfile: Path) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "x.txt").write_text(DATA)
    (folder / "train.py").write_text(TRAIN)
    (folder / "eval.py").write_text(EVAL)
    (folder / "notes").mkdir()
    (folder / "notes" / "README.txt").write_text("how to run\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0cache")
    sha = hashlib.sha256(DATA.encode()).hexdigest()
    (folder / "samebits-paper.toml").write_text(MANIFEST.format(sha=sha))
    shutil.copyfile(lockfile, folder / "conda-lock.yml")
    return folder


def attest(folder: Path, prefix: Path, fake: Fake | None = None,
           progress: Any = lambda s: None) -> Any:
    manifest = read_manifest(folder)
    fake = fake or Fake(sys.executable)
    req = AttestRequest(out=manifest.attestation, lockfile=manifest.lockfile, prefix=prefix,
                        python=sys.executable, device="cpu", names=NAMES,
                        settings=PROFILES["deterministic"], paper=manifest)
    result = run_attest(req, runtime_for=lambda python: fake, progress=progress)
    manifest.attestation.write_bytes(result.data)
    return result


@pytest.fixture(scope="module")
def authored(tmp_path_factory: pytest.TempPathFactory, pristine: Installed) -> Authored:
    """The authors' paper folder, attested with the fake suite."""
    folder = write_paper(tmp_path_factory.mktemp("authors") / "paper", pristine.lockfile)
    attest(folder, pristine.prefix)
    return Authored(folder=folder, installed=pristine)


def copy_paper(authored: Authored, dest: Path) -> Path:
    shutil.copytree(authored.folder, dest)
    return dest


def audit(folder: Path, prefix: Path | None, out: Path, fake: Fake | None = None,
          **changes: Any) -> Audit:
    manifest = read_manifest(folder)
    kw: dict[str, Any] = dict(lockfile=manifest.lockfile, attestation=manifest.attestation,
                              out=out, prefix=prefix, python=sys.executable, device="auto",
                              paper=manifest)
    kw.update(changes)
    fake = fake or Fake(sys.executable)
    return run_audit(AuditRequest(**kw), runtime_for=lambda python: fake)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


# ------------------------------------------------------------------------------ the record

def test_attestation_records_the_tree_and_inputs(authored: Authored) -> None:
    """The attestation names every file of the paper's tree and every input as a subject,
    with its sha256; caches, the manifest, the lock, the attestation and the outputs are left
    out, and the rule that decides is recorded."""
    doc = json.loads((authored.folder / "reference.attestation.json").read_text())
    names = {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}
    paper = {k: v for k, v in names.items() if k.startswith(("paper/", "input/"))}
    folder = authored.folder
    assert paper == {
        "paper/eval.py": hashlib.sha256((folder / "eval.py").read_bytes()).hexdigest(),
        "paper/notes/README.txt": hashlib.sha256(b"how to run\n").hexdigest(),
        "paper/train.py": hashlib.sha256((folder / "train.py").read_bytes()).hexdigest(),
        "input/data/x.txt": hashlib.sha256(DATA.encode()).hexdigest()}
    tree = doc["predicate"]["paper"]["tree"]
    assert (tree["rule"], tree["git"]) == ("every file under the paper folder", None)
    assert "__pycache__/" in tree["left_out"] and "[[inputs]]" in tree["left_out"]
    assert len(tree["files"]["train.py"]["lines"]) == len(TRAIN.splitlines())
    assert doc["predicate"]["paper"]["inputs"] == [
        {"path": "data/x.txt", "sha256": hashlib.sha256(DATA.encode()).hexdigest(),
         "url": None}]


def test_same_tree_same_record(authored: Authored, tmp_path: Path) -> None:
    """Byte-stable: the paper attested again from a copy in another folder gives the same
    tree, inputs and subjects."""
    again = copy_paper(authored, tmp_path / "elsewhere" / "paper")
    attest(again, authored.installed.prefix)
    a = json.loads((authored.folder / "reference.attestation.json").read_text())
    b = json.loads((again / "reference.attestation.json").read_text())
    assert a["subject"] == b["subject"]
    assert a["predicate"]["paper"]["tree"] == b["predicate"]["paper"]["tree"]


def test_attest_runs_the_paper_first_and_fails_fast(authored: Authored, tmp_path: Path) -> None:
    """A typo in the paper's code fails attest before the suite runs: the first failing
    command stops the others, and its traceback keeps its lines."""
    folder = copy_paper(authored, tmp_path / "paper")
    edit(folder / "train.py", "loss = 0.25 * scale + seed", "loss = 0.25 * scale / 0")
    fake = Fake(sys.executable)
    steps: list[str] = []
    with pytest.raises(PaperRunError) as err:
        attest(folder, authored.installed.prefix, fake, progress=steps.append)
    assert "suite" not in fake.calls
    # where bubblewrap is absent or cannot run, the first line says the commands ran without a
    # sandbox (samebits_app.paper.sandbox.detect), on every machine the same way
    sandbox = detect()
    unsandboxed = [f"paper: {sandbox.warning}"] if sandbox.kind == "none" else []
    assert [s for s in steps if s.startswith("paper: ")] == [
        *unsandboxed, "paper: train: python train.py"]
    message = err.value.message
    assert "train: `python train.py` failed (exit 1); its last lines:\n    Traceback (most " \
           "recent call last):\n" in message
    assert message.rstrip().endswith("    ZeroDivisionError: float division by zero")
    assert " | " not in message


@pytest.mark.parametrize(("change", "text"), [
    (("data/x.txt", "1.5", "2.5"), "input differs: data/x.txt (sha256 "),
    (("data/x.txt", None, None), "input missing: data/x.txt (no such file in "),
])
def test_attest_checks_inputs_before_anything(authored: Authored, tmp_path: Path,
                                              change: tuple, text: str) -> None:
    """An input that is not its pinned sha256 refuses the attestation before anything runs."""
    folder = copy_paper(authored, tmp_path / "paper")
    path, old, new = change
    if old is None:
        (folder / path).unlink()
    else:
        edit(folder / path, old, new)
    fake = Fake(sys.executable)
    with pytest.raises(PaperInputError, match=re.escape(text)):
        attest(folder, authored.installed.prefix, fake)
    assert fake.calls == []


# ------------------------------------------------------------------------------ the story

def reasons(a: Audit) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.cause, r.text, r.explains) for r in a.verdict.reasons]


def test_same_paper_is_bit_identical(authored: Authored, tmp_path: Path) -> None:
    """The authors' own folder, audited: every step ok, bit-identical; the commands ran
    before the suite."""
    fake = Fake(sys.executable)
    a = audit(authored.folder, authored.installed.prefix, tmp_path / "out", fake)
    assert a.verdict.level == "bit-identical", a.verdict
    steps = [(s.name, s.status) for s in a.steps]
    assert steps == [("lockfile", "ok"), ("code", "ok"), ("inputs", "ok"),
                     ("preflight", "ok"), ("environment", "ok"), ("verify-env", "ok"),
                     ("paper", "ok"), ("workloads", "ok"), ("compare", "ok")]
    code = next(s for s in a.steps if s.name == "code")
    assert code.summary == "3 files, each the authors' sha256 (every file under the paper folder)"


def test_outputs_as_attest_saves_them_by_default(authored: Authored, tmp_path: Path) -> None:
    """--outputs naming the paper's outputs folder as attest writes it by default (the
    commands' outputs, no workload outputs.json): the audit runs and says what is missing
    (issue 45: it stopped with `no outputs.json there`, and the shipped example has none)."""
    outputs = tmp_path / "outputs" / "commands"
    outputs.mkdir(parents=True)
    a = audit(authored.folder, authored.installed.prefix, tmp_path / "out",
              outputs=tmp_path / "outputs")
    assert a.verdict.level == "bit-identical", a.verdict
    compare = next(s for s in a.steps if s.name == "compare")
    assert compare.notes[-1] == (
        f"--outputs {tmp_path / 'outputs'} holds no workload outputs (no outputs.json: "
        "`samebits attest --save-outputs DIR` writes them), so each workload's difference is "
        "bounded by its fingerprints alone, not by the authors' tensors")


def test_code_change_is_the_first_reason(authored: Authored, tmp_path: Path) -> None:
    """One character of train.py changed: not reproduced; the first reason names train.py and
    the line, and the divergences of both commands are listed under it, not beside it."""
    folder = copy_paper(authored, tmp_path / "paper")
    edit(folder / "train.py", "0.25 * scale", "0.26 * scale")
    a = audit(folder, authored.installed.prefix, tmp_path / "out")
    assert a.verdict.level == "not-reproduced"
    (cause, text, explains), *rest = reasons(a)
    assert cause == "code" and rest == []
    assert re.fullmatch(r"code differs: train\.py \(sha256 [0-9a-f]{12}, the authors' "
                        r"[0-9a-f]{12}\): 1 line changed \(at line 5\)", text), text
    assert [e.split(":")[0] for e in explains] == ["train diverged", "eval diverged"]
    assert "no recorded fact" not in " ".join(explains)


def test_input_change_names_the_input(authored: Authored, tmp_path: Path) -> None:
    """A changed input (its manifest pin updated too): the reason names the input, with the
    outputs it moved under it."""
    folder = copy_paper(authored, tmp_path / "paper")
    (folder / "data" / "x.txt").write_text("2.5\n")
    edit(folder / "samebits-paper.toml", hashlib.sha256(DATA.encode()).hexdigest(),
         hashlib.sha256(b"2.5\n").hexdigest())
    a = audit(folder, authored.installed.prefix, tmp_path / "out")
    (cause, text, explains), *rest = reasons(a)
    assert (cause, rest) == ("input", [])
    assert re.fullmatch(r"input differs: data/x\.txt \(sha256 [0-9a-f]{12}, the authors' "
                        r"[0-9a-f]{12}; the manifest here pins [0-9a-f]{12}\)", text), text
    assert [e.split(":")[0] for e in explains] == ["train diverged", "eval diverged"]


def test_changed_seed_is_one_reason(authored: Authored, tmp_path: Path) -> None:
    """SEED changed in the manifest's [run] env: one reason, the changed setting of both
    commands, with the diverged outputs of train and of eval under it."""
    folder = copy_paper(authored, tmp_path / "paper")
    edit(folder / "samebits-paper.toml", 'SEED = "0"', 'SEED = "1"')
    a = audit(folder, authored.installed.prefix, tmp_path / "out")
    (cause, text, explains), *rest = reasons(a)
    assert rest == [] and cause == "manifest"
    assert text == ("train, eval: the commands are not the ones the authors ran: env SEED = "
                    "'1' (attested: '0')")
    assert [e.split(":")[0] for e in explains] == ["train diverged", "eval diverged"]


def test_failed_command_stops_the_rest(authored: Authored, tmp_path: Path) -> None:
    """A command that fails: the reason quotes its last line and sits under the code change
    that explains it; the command after it is not run, and says so."""
    folder = copy_paper(authored, tmp_path / "paper")
    edit(folder / "train.py", "seed = int(", "seed = itn(")
    a = audit(folder, authored.installed.prefix, tmp_path / "out")
    ((cause, _, explains),) = reasons(a)
    assert cause == "code"
    assert re.fullmatch(r"train: `python train\.py` failed \(exit 1\): NameError: name 'itn' "
                        r"is not defined.* \(\d+ lines of its output in audit\.json\)",
                        explains[0]), explains
    assert a.paper is not None
    assert [(v.name, v.level) for v in a.paper] == [("train", "failed"), ("eval", "not-run")]
    assert a.paper[0].tail[0] == "Traceback (most recent call last):"


def test_unexplained_divergence_stands_alone(authored: Authored, tmp_path: Path) -> None:
    """A workload that differs in the same class, with nothing else different: one reason, its
    cause none found, worded as such."""
    a = audit(authored.folder, authored.installed.prefix, tmp_path / "out",
              Fake(sys.executable, salt={"randn": "x"}))
    ((cause, text, explains),) = reasons(a)
    assert (cause, explains) == ("none", ())
    assert text.startswith("different bits with no recorded fact to explain them: randn")


# ------------------------------------------------------------------------------ no claims

# What each report section says only when its check passed.
CLAIMS = {
    "environment": ("identical to the lock",),
    "drift": ("every file is the one the lock's packages recorded",),
    "workloads": ("ran on both sides", "same bits"),
    "facts": ("No recorded fact differs",),
    "paper": ("bit-identical (",),
    "code": ("each the authors' sha256",),
}
SECTIONS = {"environment": "## Environment", "drift": "## Drift",
            "workloads": "## Workloads × machines", "facts": "## Machines",
            "paper": "## The paper's commands"}


def md_sections(md: str) -> dict[str, str]:
    parts = re.split(r"(?m)^(?=## )", md)
    return {p.splitlines()[0]: p for p in parts if p.startswith("## ")}


def failing(step: str, authored: Authored, root: Path) -> Audit:
    """An audit of the paper in which ``step`` fails (the others as the pipeline makes them)."""
    prefix = authored.installed.prefix
    out = root / "out"
    folder = copy_paper(authored, root / "paper")
    if step == "signature":
        from samebits.dsse import generate_keypair, load_public_key

        (root / "key.pub").write_bytes(generate_keypair()[1])
        return audit(folder, prefix, out, trust=load_public_key(root / "key.pub"))
    if step == "lockfile":
        with open(folder / "conda-lock.yml", "a") as f:
            f.write("# edited after the attestation\n")
    elif step == "code":
        edit(folder / "eval.py", "1.0 - loss", "2.0 - loss")
    elif step == "inputs":
        (folder / "data" / "x.txt").write_text("9\n")
    elif step == "environment":
        bad = root / "bad-lock.yml"
        shutil.copyfile(folder / "conda-lock.yml", bad)
        text = bad.read_text()
        bad.write_text(re.sub(r"file://[^\s]+?/([^/\s]+\.(?:conda|tar\.bz2|whl))",
                              r"file:///nonexistent/\1", text))
        return audit(folder, None, out, lockfile=bad, install=root / "env")
    elif step == "preflight":  # a library preloaded into every process: other bits
        return audit(folder, prefix, out, Fake(sys.executable, facts_changes={
            "env": (("LD_PRELOAD", "/opt/hook.so"),)}))
    elif step == "verify-env":
        copy = root / "env"
        shutil.copytree(prefix, copy, symlinks=True)
        (copy / "share" / "vfa" / "data.txt").write_text("changed\n")
        return audit(folder, copy, out)
    elif step == "paper":
        edit(folder / "samebits-paper.toml", 'run = "python eval.py"', 'run = "python nope.py"')
    elif step == "workloads":
        return audit(folder, prefix, out, Fake(sys.executable, fail=True))
    elif step == "compare":
        return audit(folder, prefix, out, Fake(sys.executable, salt={"sum_fp32": "x"}))
    return audit(folder, prefix, out)


STEPS = ("signature", "lockfile", "code", "inputs", "environment", "preflight", "verify-env",
         "paper", "workloads", "compare")


@pytest.mark.parametrize("step", STEPS)
def test_no_section_claims_an_unchecked_step(step: str, authored: Authored,
                                             tmp_path: Path) -> None:
    """Each step's failure in turn: the step fails and the verdict is not reproduced; every
    section of audit.json/md/html whose step did not run says "not checked" and why, and no
    section makes the claim it makes when its check passed."""
    a = failing(step, authored, tmp_path)
    status = {s.name: s.status for s in a.steps}
    assert status[step] == "failed", (step, [(s.name, s.status, s.summary) for s in a.steps])
    assert a.verdict.level == "not-reproduced"
    doc = build_document(a)
    md, html = render_markdown(doc), render_html(doc)
    sections = md_sections(md)
    assert "`—`" not in md and "<code>-</code>" not in html
    for name, check in doc["checks"].items():
        if check["checked"]:
            continue
        assert check["why"], name
        heading = SECTIONS.get(name)
        if heading is not None and (check["applies"] or name not in ("paper",)):
            assert "Not checked" in sections[heading] or "not recorded" in sections[heading], \
                (name, sections[heading])
        for claim in CLAIMS.get(name, ()):
            body = sections.get(heading, "") if heading else md
            assert claim not in body, (name, claim)
        if name in ("environment", "drift", "workloads"):
            assert "Not checked" in html or "not-checked" in html

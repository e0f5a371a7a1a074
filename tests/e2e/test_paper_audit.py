"""The paper audit end to end: the example's own command attested, then audited as a reviewer
would, in fresh processes (see tests/fixtures/paper.py); the HTML looked at in Chromium."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from samebits_app.paper.svg import AUTHORS, FIRST_DIFF, REVIEWER
from tests.fixtures.audit import Run
from tests.fixtures.browser import chromium, png_pixels, rgb
from tests.fixtures.paper import (  # noqa: F401  (fixtures)
    PaperFolder,
    elves,
    paper,
    paper_audits,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

# the paper's commands attested and audited end to end: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow


def command(run: Run, name: str = "train") -> dict:
    doc = run.doc()
    return next(c for c in doc["paper"]["commands"] if c["name"] == name)


def test_attest_records_the_command(paper: PaperFolder) -> None:
    """The attestation records the command, its cwd, every variable it was given (host paths
    as placeholders), the settings torch read back, and each output's digest and values; the
    outputs are saved where the manifest says."""
    pred = json.loads(paper.attestation.read_text())["predicate"]
    rec = pred["paper"]["commands"]["train"]
    assert (rec["run"], rec["cwd"], rec["status"]) == (
        ["python", "train.py", "--steps", "200", "--out", "out"], ".", "ok")
    assert {k: rec["env"][k] for k in ("PATH", "PYTHONHASHSEED", "SEED", "OMP_NUM_THREADS",
                                       "OMP_WAIT_POLICY", "CUBLAS_WORKSPACE_CONFIG")} == {
        "PATH": "$BIN:/usr/local/bin:/usr/bin:/bin", "PYTHONHASHSEED": "0", "SEED": "0",
        "OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert "OMP_NUM_THREADS" in rec["inherited"] and "SEED" not in rec["inherited"]
    assert rec["torch_settings"]["deterministic_algorithms"] is True
    outputs = {o["output"]: o for o in rec["outputs"]}
    assert sorted(outputs) == ["<stdout>", "out/logits.npy", "out/metrics.json", "out/model.pt",
                               "out/train_log.jsonl"]
    assert len(outputs["out/train_log.jsonl"]["curve"]["steps"]) == 200
    assert set(outputs["out/metrics.json"]["values"]) == {"test_accuracy", "test_loss",
                                                          "train_loss"}
    assert "head.weight" in outputs["out/model.pt"]["tensors"]
    assert set(pred["fingerprints"]) == {"gemm_fp32", "sum_fp32", "randn"}
    saved = paper.folder / "outputs" / "commands" / "train"
    assert sorted(str(p.relative_to(saved)) for p in saved.rglob("*") if p.is_file()) == [
        "files/out/logits.npy", "files/out/metrics.json", "files/out/model.pt",
        "files/out/train_log.jsonl", "stdout.txt"]
    assert "paper command train: `python train.py --steps 200 --out out` in .: 5 output(s) " \
           "recorded" in paper.stdout
    doc = json.loads(paper.attestation.read_text())
    subjects = {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}
    assert {k for k in subjects if k.startswith(("paper/", "input/"))} == {
        "paper/train.py", "input/data/stripes.json"}
    assert pred["paper"]["tree"]["rule"] == "every file under the paper folder"
    assert pred["paper"]["inputs"] == [{"path": "data/stripes.json", "sha256": subjects[
        "input/data/stripes.json"], "url": None}]


def test_same_machine_is_bit_identical(paper_audits: dict[str, Run]) -> None:
    """Same machine, same settings: every output the same bytes; bit-identical, exit 0."""
    run = paper_audits["same"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] == "bit-identical"
    c = command(run)
    assert c["level"] == "bit-identical"
    assert [o["level"] for o in c["outputs"]] == ["bit-identical"] * 5
    assert "paper command train: bit-identical (`python train.py --steps 200 --out out`)" \
        in run.stdout
    reviewer = json.loads(run.file("reviewer.attestation.json").read_text())["predicate"]
    assert reviewer["paper"]["commands"]["train"]["outputs"] == \
        json.loads((Path(doc["inputs"]["attestation"]["path"])).read_text())[
            "predicate"]["paper"]["commands"]["train"]["outputs"]


def test_reports_are_byte_stable(paper_audits: dict[str, Run]) -> None:
    """The same audit from another folder writes the same bytes."""
    for name in ("audit.json", "audit.md", "audit.html", "reviewer.attestation.json"):
        assert paper_audits["same"].file(name).read_bytes() == \
            paper_audits["same-again"].file(name).read_bytes(), name


def test_thread_count_within_tolerance_with_numbers(paper_audits: dict[str, Run]) -> None:
    """OMP_NUM_THREADS=1 against the authors' 2: the curves differ from an early step on;
    within the stated tolerance or explained by the thread count, with numbers either way."""
    run = paper_audits["threads"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] in ("within-tolerance", "explained")
    c = command(run)
    assert c["facts"][:1] == ["env.OMP_NUM_THREADS"] or "env.OMP_NUM_THREADS" in c["facts"]
    log = next(o for o in c["outputs"] if o["output"] == "out/train_log.jsonl")
    assert log["level"] in ("within-tolerance", "beyond-tolerance")
    loss = next(r for r in log["rows"] if r["series"] == "loss")
    assert loss["first_diff"] is not None and 1 <= loss["first_diff"] <= 200
    assert re.search(r"loss: first differs at step \d+, max \|Δ\| [0-9.e-]+ at step \d+, "
                     r"final \|Δ\| [0-9.e-]+ at step 200", log["summary"])
    notes = " ".join(doc["verdict"]["notes"])
    assert "sum_fp32 (" in notes and "max |Δ|" in notes  # the suite's difference, with size
    # a CPU audit's explanations name no CUDA setting, each says why it is plausible
    said = json.dumps([notes, c["facts"], c["notes"], [w["attributed_to"] + w["why"]
                                                       for w in doc["workloads"]]])
    assert "cuda" not in said.lower() and "cublas" not in said.lower()
    assert "threads.intra_op 2 → 1: " in notes


def test_html_draws_both_curves(paper_audits: dict[str, Run], tmp_path: Path) -> None:
    """Chromium renders the paper section: each curve an SVG with the authors' and the
    reviewer's polylines and the first differing step marked; the colours are on screen."""
    run = paper_audits["threads"]
    html = run.file("audit.html").read_text()
    assert "<script" not in html and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    shot = tmp_path / "paper.png"
    dom = chromium(run.file("audit.html"), shot)
    section = re.search(r'<section id="paper">(.*?)</section>', dom, re.S)
    assert section is not None
    figures = re.findall(r'<figure data-series="([^"]+)">(.*?)</figure>', section.group(1),
                         re.S)
    assert {name for name, _ in figures} == {"loss", "grad_norm"}
    for _, body in figures:
        assert len(re.findall(r'<polyline class="authors"', body)) == 1
        assert len(re.findall(r'<polyline class="reviewer"', body)) == 1
        marker = re.search(r'class="first-diff-label"[^>]*>first differs: step (\d+)<', body)
        assert marker is not None
    width, height, rows = png_pixels(shot.read_bytes(), rows=1600)
    pixels = {row[i:i + 3] for row in rows for i in range(0, len(row), 3)}
    for colour in (AUTHORS, REVIEWER, FIRST_DIFF):
        assert any(sum(abs(p - q) for p, q in zip(px, rgb(colour), strict=True)) < 24
                   for px in pixels), f"{colour} is not on screen"


def test_require_bit_identical(paper_audits: dict[str, Run]) -> None:
    """--require bit-identical: a within-tolerance (or explained) audit exits 1."""
    run = paper_audits["strict"]
    assert run.rc == 1
    assert run.doc()["verdict"]["level"] in ("within-tolerance", "explained")


def test_perturbed_seed_is_not_reproduced(paper_audits: dict[str, Run]) -> None:
    """Another seed through the manifest's environment: not reproduced, exit 1; one reason,
    the changed variable, with the outputs beyond their tolerance listed under it (the metric,
    the step the curve leaves it), not beside it."""
    run = paper_audits["seed"]
    assert run.rc == 1, run.stderr
    v = run.doc()["verdict"]
    assert v["level"] == "not-reproduced"
    (reason,) = v["reasons"]
    assert (reason["cause"], reason["text"]) == (
        "manifest", "train: the command is not the one the authors ran: env SEED = '1' "
        "(attested: '0')")
    under = "\n".join(reason["explains"])
    assert re.search(r"train diverged: out/metrics\.json: .*test_loss = [0-9.e-]+, "
                     r"the authors' [0-9.e-]+ \(\|Δ\| ", under)
    assert re.search(r"out/train_log\.jsonl: grad_norm: first differs at step 1, .*"
                     r"beyond tolerance from step \d+", under)
    assert "no recorded fact" not in json.dumps(v)
    assert command(run)["level"] == "diverged"
    assert "reason (a manifest setting): train: the command is not the one the authors ran: " \
           "env SEED = '1'" in run.stdout
    assert "    which explains: train diverged: " in run.stdout


def test_code_change_names_the_file(paper_audits: dict[str, Run]) -> None:
    """One character of train.py changed (lr=0.01 -> 0.02): not reproduced; the first reason
    is the code, naming train.py and the line, with the diverged outputs under it."""
    run = paper_audits["code"]
    assert run.rc == 1, run.stderr
    v = run.doc()["verdict"]
    (reason,) = v["reasons"]
    assert reason["cause"] == "code"
    assert re.fullmatch(r"code differs: train\.py \(sha256 [0-9a-f]{12}, the authors' "
                        r"[0-9a-f]{12}\): 1 line changed \(at line \d+\)", reason["text"])
    assert reason["explains"] and all(e.startswith("train diverged: ")
                                      for e in reason["explains"])
    assert "no recorded fact" not in json.dumps(v)


def test_input_change_names_the_input(paper_audits: dict[str, Run]) -> None:
    """Another noise level in data/stripes.json: not reproduced; the first reason names the
    input, with the diverged outputs under it."""
    run = paper_audits["input"]
    assert run.rc == 1, run.stderr
    steps = {s["name"]: s for s in run.doc()["steps"]}
    assert steps["code"]["status"] == "ok" and steps["inputs"]["status"] == "failed"
    (reason,) = run.doc()["verdict"]["reasons"]
    assert reason["cause"] == "input"
    assert re.fullmatch(r"input differs: data/stripes\.json \(sha256 [0-9a-f]{12}, the "
                        r"authors' [0-9a-f]{12}\)", reason["text"])
    assert all(e.startswith("train diverged: ") for e in reason["explains"])


def test_signed_paper_trusted_and_countersigned(paper_audits: dict[str, Run]) -> None:
    """The authors' signed attestation of a paper, audited with --trust and --sign: the
    signature step is ok, the commands rerun bit-identical, and the reviewer's attestation is
    an envelope the reviewer's key verifies whose Statement records the rerun commands."""
    from samebits import dsse

    run = paper_audits["trusted"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    keys = run.out.parent / "keys"
    authors = dsse.load_public_key(keys / "authors.pub")
    steps = {s["name"]: s for s in doc["steps"]}
    assert (doc["verdict"]["level"], steps["signature"]["status"], steps["paper"]["status"]) \
        == ("bit-identical", "ok", "ok")
    assert f"signed by keyid {authors.keyid} (trusted key {keys / 'authors.pub'})" in \
        steps["signature"]["summary"]
    source = str(run.file("reviewer.attestation.json"))
    envelope = dsse.parse_envelope(json.loads(run.file("reviewer.attestation.json")
                                              .read_text()), source=source)
    dsse.verify(envelope, dsse.load_public_key(keys / "reviewer.pub"), source=source)
    statement = dsse.statement_of(envelope, source=source)
    assert statement["predicate"]["paper"]["commands"]["train"]["status"] == "ok"


def test_without_manifest_commands_are_not_rerun(paper_audits: dict[str, Run]) -> None:
    """Auditing by a LOCK and --attestation alone: the paper step is skipped and says the
    attestation records commands that did not run."""
    run = paper_audits["no-manifest"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    step = next(s for s in doc["steps"] if s["name"] == "paper")
    assert (step["status"], step["notes"]) == ("skipped", [
        "the attestation records the paper's commands (train); audit the paper folder "
        "(samebits-paper.toml) to rerun them"])


def test_attest_refuses_a_failing_command(paper_audits: dict[str, Run],
                                          paper: PaperFolder) -> None:
    """A paper command that fails: attest exits 1 with its last lines; no attestation is
    written and the outputs saved before are as they were."""
    run = paper_audits["broken"]
    assert run.rc == 1
    assert "1 problem(s) running the paper's commands:\n  train: `python train.py --steps oops " \
           "--out out` failed (exit 2); its last lines:\n    usage: train.py " in run.stderr
    assert "\n    train.py: error: argument --steps: invalid int value: 'oops'" in run.stderr
    assert "attest: workloads" not in run.stderr  # the paper runs first, and fails fast
    assert not run.out.exists()
    saved = Path("outputs/commands/train/files/out/model.pt")
    assert (run.out.parent / saved).read_bytes() == (paper.folder / saved).read_bytes()
    assert [p.name for p in (run.out.parent / "outputs").iterdir()] == ["commands"]

"""samebits attest and samebits audit end to end: a real environment, lock and attestation,
audited as a reviewer would, in fresh processes (see tests/fixtures/audit.py)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import lock_digest
from samebits_app.cli import main
from tests.fixtures.audit import (  # noqa: F401  (fixtures)
    SUBSET,
    TAMPERED,
    Paper,
    Run,
    audits,
    elves,
    paper,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from verify.gpu.attest import read_attestation

REPORT_FILES = ("audit.json", "audit.md", "audit.html", "sbom.cdx.json",
                "reviewer.attestation.json", "outputs/outputs.json")


def steps(doc: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in doc["steps"]}


def cells(doc: dict) -> dict[str, str]:
    return {w["name"]: w["cell"] for w in doc["workloads"]}


@pytest.mark.slow
def test_attest_names_environment_lock_and_bits(paper: Paper) -> None:
    """attest writes verify gpu's Statement: the environment, packages and lock as subjects."""
    att = read_attestation(paper.attestation)
    names = [n for n, _ in att.subjects]
    assert names == ["environment", "packages", "conda-lock.yml"]
    assert dict(att.subjects)["conda-lock.yml"] == lock_digest(paper.lockfile)
    assert att.lock is not None and att.lock["sha256"] == lock_digest(paper.lockfile)
    assert (att.device, sorted(att.workloads)) == ("cpu", sorted(SUBSET.split(",")))
    assert all(w["status"] == "ok" for w in att.workloads.values())
    assert att.settings["profile"] == "deterministic"
    assert dict(att.facts.env)["OMP_NUM_THREADS"] == "2"
    saved = json.loads((paper.outputs / "outputs.json").read_text())
    assert sorted(saved["workloads"]) == sorted(SUBSET.split(","))


@pytest.mark.reads("identical")
@pytest.mark.slow
def test_identical_audit(audits: dict[str, Run]) -> None:
    """The same machine and settings: bit-identical, exit 0, every report written."""
    run = audits["identical"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] == "bit-identical" and doc["verdict"]["reasons"] == []
    assert steps(doc) == dict.fromkeys(
        ["lockfile", "preflight", "environment", "verify-env", "workloads", "compare"], "ok")
    assert [s["name"] for s in doc["steps"]] == ["lockfile", "preflight", "environment",
                                                 "verify-env", "workloads", "compare"]
    assert cells(doc) == dict.fromkeys(["gemm_fp32", "sum_fp32", "randn"], "same")
    assert not any(f["differs"] for f in doc["facts"])
    assert "environment digest equal to the authors'" in doc["verdict"]["notes"][0]
    for name in REPORT_FILES:
        assert run.file(name).is_file(), name
    assert run.stdout.startswith("verdict: bit-identical: Reproduced: runtime bit-identical")


@pytest.mark.reads("identical", "identical-again")
@pytest.mark.slow
def test_reports_are_byte_stable(audits: dict[str, Run]) -> None:
    """The same audit run twice (from two folders) writes byte-identical files."""
    a, b = audits["identical"], audits["identical-again"]
    assert b.rc == 0, b.stderr
    for name in REPORT_FILES:
        assert a.file(name).read_bytes() == b.file(name).read_bytes(), name


@pytest.mark.reads("threads")
@pytest.mark.slow
def test_thread_count_is_explained(audits: dict[str, Run]) -> None:
    """OMP_NUM_THREADS=1 against 2: sum_fp32 differs, attributed to the thread count, with
    its max error from the saved outputs; the verdict is explained (exit 0)."""
    run = audits["threads"]
    assert run.rc == 0, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] == "explained"
    row = next(w for w in doc["workloads"] if w["name"] == "sum_fp32")
    assert row["cell"] == "explained"
    assert {"threads.intra_op", "env.OMP_NUM_THREADS"} <= set(row["attributed_to"])
    (err,) = row["errors"]
    assert err["output"] == "sum" and err["max_ulp"] >= 1 and 0 < err["max_abs"] < 1e-2
    differ = {f["key"]: f for f in doc["facts"] if f["differs"]}
    assert set(differ) == {"threads.intra_op", "env.OMP_NUM_THREADS"}
    assert differ["threads.intra_op"]["class"] is True
    assert (differ["threads.intra_op"]["authors"], differ["threads.intra_op"]["reviewer"]) == \
        (2, 1)


@pytest.mark.reads("tampered-file")
@pytest.mark.slow
def test_tampered_file_is_named(audits: dict[str, Run]) -> None:
    """One changed file: not reproduced, exit 1, the file named in the verdict and the drift
    list, however good the rest is."""
    run = audits["tampered-file"]
    assert run.rc == 1, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] == "not-reproduced"
    reasons = [r["text"] for r in doc["verdict"]["reasons"]]
    assert reasons[0] == "environment drift: 1 finding against the lock (1 modified)"
    assert reasons[1].startswith(f"drift: modified        {TAMPERED} [conda:vfa-1.0-h0_0]")
    assert {r["cause"] for r in doc["verdict"]["reasons"]} == {"environment"}
    assert [f["path"] for f in doc["drift"]["findings"]] == [TAMPERED]
    assert steps(doc)["verify-env"] == "failed" and steps(doc)["lockfile"] == "ok"
    assert not run.file("reviewer.attestation.json").exists()
    assert "reason (an environment file): environment drift" in run.stdout


@pytest.mark.reads("tampered-digest")
@pytest.mark.slow
def test_forged_digest_is_unexplained(audits: dict[str, Run]) -> None:
    """An attestation whose sum_fp32 digest was edited: same class, different bits."""
    run = audits["tampered-digest"]
    assert run.rc == 1, run.stderr
    doc = run.doc()
    assert doc["verdict"]["level"] == "not-reproduced"
    assert doc["verdict"]["reasons"] == [{
        "cause": "none", "explains": [],
        "text": "different bits with no recorded fact to explain them: sum_fp32 (same "
        "equivalence class as the authors' run: suspect a hardware fault or undeclared drift)"}]
    assert cells(doc) == {"gemm_fp32": "same", "sum_fp32": "unexplained", "randn": "same"}
    assert steps(doc)["lockfile"] == "ok" and steps(doc)["verify-env"] == "ok"


@pytest.mark.reads("installed")
@pytest.mark.slow
def test_install_then_audit_paper_folder(audits: dict[str, Run]) -> None:
    """`audit PAPER --target DIR --no-workloads`: the lock installed by samebits install is
    the lock's, file for file; the verdict stops at environment-identical (exit 0)."""
    run = audits["installed"]
    assert run.rc == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["verdict"]["level"] == "environment-identical" and doc["exit_code"] == 0
    assert [s["name"] for s in doc["steps"]][:3] == ["lockfile", "environment", "preflight"]
    assert steps(doc) == {"lockfile": "ok", "environment": "ok", "preflight": "skipped",
                          "verify-env": "ok", "workloads": "skipped", "compare": "skipped"}
    assert doc["inputs"]["outputs"].endswith("paper/outputs")  # found in the folder
    assert (run.out.parent / "installed-env" / "conda-meta").is_dir()
    assert set(cells(doc).values()) == {"skipped"}
    assert doc["files"]["sbom"].endswith("sbom.cdx.json")
    assert "reviewer.attestation.json" not in "".join(doc["files"].values())


@pytest.mark.reads("attest-drift")
@pytest.mark.slow
def test_attest_refuses_drift(audits: dict[str, Run]) -> None:
    """attest of an environment that is not its lock's: exit 1, the file named, nothing written."""
    run = audits["attest-drift"]
    assert run.rc == 1
    assert "is not the environment of" in run.stderr and TAMPERED in run.stderr
    assert "hint: reinstall it" in run.stderr
    assert not run.out.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["audit"], "error: audit needs a LOCK and --attestation"),
    (["audit", "nope.conda-lock.yml", "--attestation", "{att}"],
     "error: nope.conda-lock.yml: no such lockfile"),
    (["audit", "{lock}", "--attestation", "nope.json"],
     "error: nope.json: no such attestation"),
    (["audit", "{lock}", "--attestation", "{att}", "--prefix", "{env}",
      "--target", "x"], "error: --prefix and --target: pass one"),
    (["audit", "{lock}", "--attestation", "{att}", "--platform", "linux-ppc64le"],
     "error: {lock}: no platform linux-ppc64le (it has linux-64)"),
    (["audit", "{lock}", "--attestation", "{att}", "--outputs", "nowhere"],
     "error: --outputs nowhere: no such folder"),
    (["audit", "{folder}/outputs"], "expected one lockfile"),
    (["attest", "--only", "gemm_fp64"], "error: unknown workload 'gemm_fp64'"),
])
def test_bad_input_exits_2(argv: list[str], message: str, paper: Paper,
                           capsys: pytest.CaptureFixture[str]) -> None:
    """Bad input is refused before any step, with exit 2 and one error line."""
    fill = {"lock": str(paper.lockfile), "att": str(paper.attestation),
            "env": str(paper.prefix), "folder": str(paper.folder)}
    assert main([a.format(**fill) for a in argv]) == 2
    assert message.format(**fill) in capsys.readouterr().err


def test_workers_need_only_torch() -> None:
    """What runs in the audited environment imports no samebits dependency beyond torch."""
    code = ("import sys, verify.gpu.workloads.__main__, verify.gpu.compare, verify.gpu.errorstats; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'yaml', 'conda_lock', "
            "'rattler', 'rich', 'packaging', 'cyclonedx', 'torch', 'elftools'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2], check=True)
    assert proc.stdout.strip() == "[]"


@pytest.mark.slow
def test_interpreter_missing(paper: Paper, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """An interpreter that is not there: the preflight fails, named with a hint; the
    environment is still checked, the workloads are skipped; not reproduced (exit 1)."""
    rc = main(["audit", str(paper.lockfile), "--attestation",
               str(paper.attestation), "--prefix", str(paper.prefix), "--workload-python",
               "/nonexistent/python", "--out", str(tmp_path / "out"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert (rc, doc["exit_code"], doc["verdict"]["level"]) == (1, 1, "not-reproduced")
    assert [r["text"] for r in doc["verdict"]["reasons"]] == [
        "preflight: /nonexistent/python: no such interpreter"]
    assert "pass --workload-python with the environment's interpreter" in \
        doc["verdict"]["notes"]
    assert steps(doc) == {"lockfile": "ok", "preflight": "failed", "environment": "ok",
                          "verify-env": "ok", "workloads": "skipped", "compare": "skipped"}
    assert (tmp_path / "out" / "audit.html").is_file()


@pytest.mark.slow
def test_verify_env_api_matches_subprocess(paper: Paper) -> None:
    """The running environment's path (verify env's Python API) and another prefix's
    (`python -m verify env --json`) give the same report."""
    from samebits_app.audit.envcheck import Located, verify_env

    api = verify_env(Located(prefix=paper.prefix, running=True, how="running"),
                     paper.lockfile, "linux-64")
    sub = verify_env(Located(prefix=paper.prefix, running=False, how="located"),
                     paper.lockfile, "linux-64")
    assert api["identical"] is True and api == sub

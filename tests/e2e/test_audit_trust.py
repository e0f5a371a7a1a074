"""attest --sign, audit --trust and audit --sign: the authors' signature is part of the verdict."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from samebits import dsse
from samebits_app.cli import main
from tests.fixtures.audit import (  # noqa: F401  (fixtures)
    Paper,
    elves,
    environ,
    paper,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from tests.fixtures.intoto import in_toto_verifies
from verify.gpu.attest import statement_bytes

# signed attestations and audits end to end: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, paper: Paper) -> dict[str, Path]:
    """`samebits attest --sign KEY` of the paper's environment (randn only), and the keys."""
    root = tmp_path_factory.mktemp("signed")
    for name in ("authors", "other", "reviewer"):
        subprocess.run([sys.executable, "-m", "samebits", "keygen", "--out", str(root / name)],
                       check=True, capture_output=True)
    att = root / "signed.attestation.json"
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "attest", str(paper.lockfile),
         "--prefix", str(paper.prefix), "--workload-python", sys.executable, "--only", "randn",
         "--device", "cpu", "--sign", str(root / "authors"), "--out", str(att)],
        capture_output=True, text=True, env=environ(OMP_NUM_THREADS="2"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {"attestation": att, "root": root, **{n: root / n for n in ("authors", "other",
                                                                       "reviewer")}}


def keyid(key: Path) -> str:
    return dsse.load_public_key(Path(f"{key}.pub")).keyid


def audit(paper: Paper, attestation: Path, out: Path, *extra: str) -> tuple[int, dict]:
    """`samebits audit ... --no-workloads --json` in this process: (exit code, document)."""
    rc = main(["audit", str(paper.lockfile), "--attestation", str(attestation),
               "--prefix", str(paper.prefix), "--workload-python", sys.executable, "--no-workloads",
               "--out", str(out), "--quiet", *extra])
    return rc, json.loads((out / "audit.json").read_text())


def step(doc: dict, name: str) -> dict:
    return next(s for s in doc["steps"] if s["name"] == name)


def test_attest_sign_writes_an_envelope_in_toto_verifies(signed: dict[str, Path]) -> None:
    """attest --sign: a DSSE envelope that in-toto and `verify attestation` accept."""
    att, key = signed["attestation"], signed["authors"]
    assert in_toto_verifies(att, Path(f"{key}.pub"))
    assert main(["verify", "attestation", str(att), "--trust", f"{key}.pub"]) == 0


def test_trusted_signature_is_shown_with_its_keyid(paper: Paper, signed: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """--trust with the authors' key: the signature step is ok and every report names the key."""
    key = signed["authors"]
    rc, doc = audit(paper, signed["attestation"], tmp_path, "--trust", f"{key}.pub")
    assert (rc, doc["verdict"]["level"]) == (0, "environment-identical")
    assert step(doc, "signature") == {
        "name": "signature", "status": "ok", "reasons": [], "notes": [],
        "summary": f"{signed['attestation']}: signed by keyid {keyid(key)} (trusted key "
        f"{key}.pub)"}
    for name in ("audit.md", "audit.html"):
        assert keyid(key) in (tmp_path / name).read_text()


@pytest.mark.parametrize(("case", "reason"), [
    ("unsigned", "{att} is not signed: --trust {pub} needs a DSSE envelope signed by keyid "
                 "{keyid}"),
    ("other-key", "{att}: not signed by {pub} (keyid {keyid}); its signatures are by keyid "
                  "{authors}"),
    ("altered", "{att}: the signature by keyid {keyid} does not verify: the payload, its type "
                "or the signature changed after signing"),
])
def test_untrusted_attestation_is_not_reproduced(paper: Paper, signed: dict[str, Path],
                                                 tmp_path: Path, case: str, reason: str) -> None:
    """Unsigned, signed by another key, or altered after signing: a reason, not-reproduced."""
    authors = signed["authors"]
    trusted = signed["other"] if case == "other-key" else authors
    att = {"unsigned": paper.attestation, "other-key": signed["attestation"]}.get(case)
    if case == "altered":  # a workload digest edited inside the signed payload
        doc = json.loads(signed["attestation"].read_text())
        statement = json.loads(base64.b64decode(doc["payload"]))
        statement["predicate"]["workloads"]["randn"]["sha256"] = "0" * 64
        # written back as canonical JSON, as samebits writes it: a payload in any other form
        # is refused before its signature is weighed (test_dsse)
        doc["payload"] = base64.b64encode(statement_bytes(statement)).decode()
        att = tmp_path / "altered.json"
        att.write_text(json.dumps(doc))
    assert att is not None
    rc, doc = audit(paper, att, tmp_path / "out", "--trust", f"{trusted}.pub")
    assert (rc, doc["verdict"]["level"]) == (1, "not-reproduced")
    expected = reason.format(att=att, pub=f"{trusted}.pub", keyid=keyid(trusted),
                             authors=keyid(authors))
    assert [r["text"] for r in doc["verdict"]["reasons"]] == [expected]
    assert step(doc, "signature")["status"] == "failed"


def test_payload_altered_past_reading_is_a_signature_failure(
        paper: Paper, signed: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A signed payload altered so it is no longer JSON: with --trust, exit 1 naming the broken
    signature (not 'bad input')."""
    doc = json.loads(signed["attestation"].read_text())
    doc["payload"] = base64.b64encode(b"{" + base64.b64decode(doc["payload"])).decode()
    att = tmp_path / "broken.json"
    att.write_text(json.dumps(doc))
    key = signed["authors"]
    rc = main(["audit", str(paper.lockfile), "--attestation", str(att),
               "--prefix", str(paper.prefix), "--no-workloads", "--out", str(tmp_path / "o"),
               "--trust", f"{key}.pub"])
    assert rc == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: {att}: the signature by keyid {keyid(key)} does not verify: the payload, its "
        "type or the signature changed after signing")


def test_signed_without_trust_names_the_key_and_checks_nothing(
        paper: Paper, signed: dict[str, Path], tmp_path: Path) -> None:
    """No --trust: a signed attestation's step is skipped, naming the key; the verdict stands."""
    rc, doc = audit(paper, signed["attestation"], tmp_path)
    assert (rc, doc["verdict"]["level"]) == (0, "environment-identical")
    assert step(doc, "signature") == {
        "name": "signature", "status": "skipped", "reasons": [], "notes": [],
        "summary": f"{signed['attestation']}: signed by keyid {keyid(signed['authors'])}; not "
        "checked (pass --trust KEY.pub)"}


def test_reviewer_attestation_is_signed(paper: Paper, signed: dict[str, Path],
                                        tmp_path: Path) -> None:
    """audit --sign KEY: the reviewer's attestation is an envelope signed by the reviewer."""
    reviewer = signed["reviewer"]
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "audit", str(paper.lockfile),
         "--attestation", str(signed["attestation"]), "--prefix", str(paper.prefix),
         "--workload-python", sys.executable, "--trust", f"{signed['authors']}.pub",
         "--sign", str(reviewer), "--out", str(tmp_path)],
        capture_output=True, text=True, env=environ(OMP_NUM_THREADS="2"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("verdict: bit-identical")
    att = tmp_path / "reviewer.attestation.json"
    assert in_toto_verifies(att, Path(f"{reviewer}.pub"))
    assert main(["verify", "attestation", str(att), "--trust", f"{reviewer}.pub"]) == 0

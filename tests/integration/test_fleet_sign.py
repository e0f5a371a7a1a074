"""verify fleet --sign: the fleet report as a signed in-toto Statement, read back by
fleet-report and verified by in-toto's DSSE code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits import dsse
from samebits_app.cli import main
from tests.fixtures import ROOT
from tests.fixtures.intoto import in_toto_verifies

# torchrun with several ranks: slow, left out of CI's `nox -s tests`
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return dict(os.environ)


@pytest.mark.slow
def test_signed_fleet_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One gloo rank with --sign: an envelope in-toto verifies whose predicate is the report;
    fleet-report reads it as it reads the bare report."""
    key = tmp_path / "fleet-key"
    assert main(["keygen", "--out", str(key), "--quiet"]) == 0
    out = tmp_path / "fleet.intoto.json"
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
         "-m", "verify", "fleet", "--only", "randn", "--no-env-digest", "--sign-key", str(key),
         "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert res.returncode == 0, res.stderr[-3000:]
    pub = Path(f"{key}.pub")
    assert in_toto_verifies(out, pub)
    envelope = dsse.parse_envelope(json.loads(out.read_text()), source=str(out))
    statement = json.loads(envelope.payload)
    assert statement["predicateType"] == "https://samebits.dev/verify-fleet/v1"
    assert statement["predicate"]["verdict"] == "consistent"
    assert [s["name"] for s in statement["subject"]] == ["host"]
    assert main(["verify", "attestation", str(out), "--trust", str(pub)]) == 0
    capsys.readouterr()
    assert main(["verify", "fleet-report", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["signed_by"] == [dsse.load_public_key(pub).keyid]
    assert report["verdict"] == "consistent"

"""verify.gpu.attest: the in-toto Statement, its canonical bytes, and reading one back."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from samebits.errors import InputError
from tests.fixtures.samples import sample_facts
from verify.gpu.attest import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    LockInfo,
    build_statement,
    parse_attestation,
    read_attestation,
    statement_bytes,
)

ENV = {"environment": "e" * 64, "packages": "p" * 64}
LOCK = LockInfo(name="hopper.conda-lock.yml", sha256="l" * 64, environment="hopper",
                generation="hopper", cuda="13.0")
WORKLOADS = {
    "sum_fp32": {"status": "ok", "sha256": "a" * 64,
                 "outputs": [{"name": "sum", "dtype": "float32", "shape": [], "sha256": "a" * 64}]},
    "sdpa_cudnn": {"status": "unavailable", "detail": "CUDNN_ATTENTION has no CPU kernel"},
}
SETTINGS = {"profile": "deterministic", "deterministic_algorithms": True}
# Changing this digest is a deliberate, versioned break of the attestation format.
GOLDEN = "4296be1b910b6cd1c71cbccad054ec5ba8e11b70a7e6113292a80783ead98edb"


def statement(**changes) -> dict:
    kw = dict(facts=sample_facts(), device="cpu", settings=SETTINGS, workloads=WORKLOADS,
              suite_version=1, environment=ENV, lock=LOCK, samebits_version="0.0.0")
    kw.update(changes)
    return build_statement(**kw)


def test_statement_shape() -> None:
    """Subjects are the environment, the packages and the lockfile, each with a sha256."""
    doc = statement()
    assert doc["_type"] == STATEMENT_TYPE and doc["predicateType"] == PREDICATE_TYPE
    assert doc["subject"] == [
        {"name": "environment", "digest": {"sha256": "e" * 64}},
        {"name": "packages", "digest": {"sha256": "p" * 64}},
        {"name": "hopper.conda-lock.yml", "digest": {"sha256": "l" * 64}},
    ]
    pred = doc["predicate"]
    assert (pred["format"], pred["device"], pred["suite_version"]) == (1, "cpu", 1)
    assert set(pred) == {"format", "samebits", "device", "suite_version", "lock", "facts",
                         "settings", "workloads"}


def test_golden_digest() -> None:
    """The canonical bytes of a fixed statement are pinned."""
    data = statement_bytes(statement())
    assert data.endswith(b"\n") and json.loads(data) == statement()
    assert hashlib.sha256(data).hexdigest() == GOLDEN


def test_bytes_ignore_input_order() -> None:
    """Workloads and digests given in another order give the same bytes."""
    reordered = dict(reversed(list(WORKLOADS.items())))
    env = dict(reversed(list(ENV.items())))
    assert statement_bytes(statement(workloads=reordered, environment=env)) == \
        statement_bytes(statement())


def test_needs_a_subject() -> None:
    """Without an environment digest or a lockfile there is nothing to attest."""
    with pytest.raises(InputError, match="an attestation needs a subject"):
        statement(environment=None, lock=None)


def test_read_back(tmp_path: Path) -> None:
    """A written statement reads back with its facts, settings and workloads."""
    path = tmp_path / "a.json"
    path.write_bytes(statement_bytes(statement()))
    att = read_attestation(path)
    assert att.facts == sample_facts()
    assert att.subjects[2] == ("hopper.conda-lock.yml", "l" * 64)
    assert (att.device, att.device_type, att.suite_version) == ("cpu", "cpu", 1)
    assert att.workloads["sdpa_cudnn"]["status"] == "unavailable"


def _broken(path: str, value) -> dict:
    doc = copy.deepcopy(statement())
    keys = path.split(".")
    target = doc
    for k in keys[:-1]:
        target = target[k]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return doc


@pytest.mark.parametrize(("doc", "message"), [
    ([], "x.json: not an in-toto Statement (expected a JSON object)"),
    (_broken("_type", "https://in-toto.io/Statement/v0.1"),
     'x.json: _type = "https://in-toto.io/Statement/v0.1": expected '
     '"https://in-toto.io/Statement/v1"'),
    (_broken("predicateType", "https://slsa.dev/provenance/v1"),
     'x.json: predicateType = "https://slsa.dev/provenance/v1": samebits compares '
     '"https://samebits.dev/verify-gpu/v1" attestations'),
    (_broken("predicate.format", 2),
     "x.json: predicate.format = 2: this samebits reads format 1"),
    (_broken("predicate.facts.format", 9),
     "x.json: predicate.facts: format = 9: this samebits reads facts format 1"),
    (_broken("predicate.workloads", {"sum_fp32": {"sha256": "x"}}),
     "x.json: malformed attestation: ValueError('workloads: expected {name: {status, ...}}')"),
    (_broken("predicate.device", KeyError), "x.json: malformed attestation: KeyError('device')"),
])
def test_parse_rejects(doc, message: str) -> None:
    """Each malformed attestation is refused with a message naming the file and the key."""
    with pytest.raises(InputError) as err:
        parse_attestation(doc, source="x.json")
    assert err.value.message == message


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such attestation"),
    ("{not json", "not JSON"),
])
def test_read_rejects(tmp_path: Path, content, message: str) -> None:
    """A missing file or one that is not JSON is bad input, not a traceback."""
    path = tmp_path / "a.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message):
        read_attestation(path)

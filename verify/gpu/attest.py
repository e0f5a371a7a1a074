"""Attestations: an in-toto Statement v1 whose predicate is this machine's facts and bits.

    {
      "_type": "https://in-toto.io/Statement/v1",
      "subject": [{"name": "environment", "digest": {"sha256": ...}},   # verify env's digest
                  {"name": "packages", "digest": {"sha256": ...}},
                  {"name": "<lockfile name>", "digest": {"sha256": ...}},    # with a LOCK
                  {"name": "paper/<path>", ...}, {"name": "input/<path>", ...}],  # a paper
      "predicateType": "https://samebits.dev/verify-gpu/v1",
      "predicate": {"format": 1, "device": "cpu" | "cuda:0", "suite_version": 1,
                    "samebits": "0.1.0", "lock": {...} | null,
                    "facts": {...}, "settings": {...}, "workloads": {name: {...}},
                    "coverage": {"runs_on", "libraries", "stack", "this_gpu"},  # verify gpu
                    "fingerprints": {workload: {output: {...}}},   # optional (samebits attest)
                    "paper": {...}}                                # optional (a paper manifest)
    }

The optional keys are written only when given, so a statement without them is byte for byte
what it was before they existed. ``coverage``: which GPU generations the environment's
kernels run on (``verify gpu``). ``fingerprints``: a few sampled values per workload
output (``verify.gpu.errorstats.tensors.fingerprint``), so a reviewer can put a number on a
difference without the authors' saved outputs. ``paper``: the paper's commands, the
environment each was given and each output's digest and comparable values
(``samebits_app.paper.record``). They are opaque here: their writers and readers check them.

``build_statement`` is pure: digests come in as data. ``statement_bytes`` is canonical JSON,
so equal results give equal bytes (no timestamps, no host names, no absolute paths).
``read_attestation`` checks the envelope and the predicate's format and returns an
``Attestation`` for ``verify.gpu.compare``. A file may hold the bare Statement or a DSSE envelope
around it (``samebits.dsse``, what ``--sign KEY`` writes): the Statement is read from the
envelope, which stays on ``Attestation.envelope`` for whoever checks its signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits import __version__
from samebits._io import canonical_json, read_json
from samebits.dsse import Envelope, open_document
from samebits.errors import InputError, clip, quote
from verify.gpu.facts import Facts

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://samebits.dev/verify-gpu/v1"
PREDICATE_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class LockInfo:
    """The lockfile a run was checked against, as the attestation names it."""

    name: str  # the file's name, not its path: the bytes must not depend on the cwd
    sha256: str
    environment: str | None
    generation: str | None
    cuda: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "environment": self.environment,
                "generation": self.generation, "cuda": self.cuda}


@dataclass(frozen=True, slots=True, kw_only=True)
class Attestation:
    source: str
    subjects: tuple[tuple[str, str], ...]  # (name, sha256)
    device: str
    suite_version: int
    samebits: str
    lock: Mapping[str, Any] | None
    facts: Facts
    settings: Mapping[str, Any]
    workloads: Mapping[str, Mapping[str, Any]]
    fingerprints: Mapping[str, Any] | None = None
    paper: Mapping[str, Any] | None = None
    envelope: Envelope | None = None  # the DSSE envelope the Statement came in, if signed

    @property
    def device_type(self) -> str:
        return self.device.split(":", 1)[0]


def build_statement(*, facts: Facts, device: str, settings: Mapping[str, Any],
                    workloads: Mapping[str, Mapping[str, Any]], suite_version: int,
                    environment: Mapping[str, str] | None = None,
                    lock: LockInfo | None = None,
                    samebits_version: str = __version__,
                    fingerprints: Mapping[str, Any] | None = None,
                    paper: Mapping[str, Any] | None = None,
                    coverage: Mapping[str, Any] | None = None,
                    artifacts: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Statement as a dict. ``environment`` is ``verify.env.digest.prefix_digests``'s answer;
    ``coverage`` (``verify.kernels.report.summary``) what the environment's kernels run on;
    ``artifacts`` more subjects, name -> sha256 (a paper's files and inputs), sorted."""
    subjects = [{"name": name, "digest": {"sha256": digest}}
                for name, digest in sorted((environment or {}).items())]
    if lock is not None:
        subjects.append({"name": lock.name, "digest": {"sha256": lock.sha256}})
    subjects += [{"name": name, "digest": {"sha256": digest}}
                 for name, digest in sorted((artifacts or {}).items())]
    if not subjects:
        raise InputError("an attestation needs a subject: the environment digest or a lockfile",
                         hint="pass the LOCK, or run inside an environment `verify env` reads")
    predicate: dict[str, Any] = {
        "format": PREDICATE_FORMAT,
        "samebits": samebits_version,
        "device": device,
        "suite_version": suite_version,
        "lock": lock.to_dict() if lock is not None else None,
        "facts": facts.to_dict(),
        "settings": dict(settings),
        "workloads": {name: dict(rec) for name, rec in sorted(workloads.items())},
    }
    if fingerprints is not None:
        predicate["fingerprints"] = dict(fingerprints)
    if paper is not None:
        predicate["paper"] = dict(paper)
    if coverage is not None:
        predicate["coverage"] = dict(coverage)
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def statement_bytes(statement: Mapping[str, Any]) -> bytes:
    return canonical_json(statement)


def parse_attestation(doc: Any, *, source: str) -> Attestation:
    """Validate a Statement produced by ``build_statement``; every error names ``source``."""
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: not an in-toto Statement (expected a JSON object)")
    if doc.get("_type") != STATEMENT_TYPE:
        raise InputError(f"{source}: _type = {quote(doc.get('_type'))}: "
                         f"expected {quote(STATEMENT_TYPE)}")
    if doc.get("predicateType") != PREDICATE_TYPE:
        raise InputError(f"{source}: predicateType = {quote(doc.get('predicateType'))}: samebits "
                         f"compares {quote(PREDICATE_TYPE)} attestations",
                         hint="make one with `samebits verify gpu --out FILE`")
    pred = doc.get("predicate")
    if not isinstance(pred, Mapping):
        raise InputError(f"{source}: predicate: expected an object")
    if pred.get("format") != PREDICATE_FORMAT:
        raise InputError(f"{source}: predicate.format = {quote(pred.get('format'))}: this samebits "
                         f"reads format {PREDICATE_FORMAT}",
                         hint="re-run `samebits verify gpu` with this samebits version")
    try:
        subjects = tuple((s["name"], s["digest"]["sha256"]) for s in doc["subject"])
        workloads = pred["workloads"]
        if not isinstance(workloads, Mapping) or not all(
                isinstance(w, Mapping) and "status" in w for w in workloads.values()):
            raise ValueError("workloads: expected {name: {status, ...}}")
        return Attestation(
            source=source, subjects=subjects, device=str(pred["device"]),
            suite_version=int(pred["suite_version"]), samebits=str(pred["samebits"]),
            lock=pred.get("lock"),
            facts=Facts.from_dict(pred["facts"], where=f"{source}: predicate.facts"),
            settings=dict(pred["settings"]), workloads=dict(workloads),
            fingerprints=_optional(pred, "fingerprints"), paper=_optional(pred, "paper"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a list for a table
        raise InputError(f"{source}: malformed attestation: {clip(repr(exc), 200)}") from None


def _optional(pred: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = pred.get(key)
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"predicate.{key}: expected an object")
    return value


def read_attestation(path: Path) -> Attestation:
    doc = read_json(path, what="attestation", unique=True,
                    hint="make one with `samebits verify gpu --out FILE`")
    statement, envelope = open_document(doc, source=str(path))
    attestation = parse_attestation(statement, source=str(path))
    return attestation if envelope is None else replace(attestation, envelope=envelope)

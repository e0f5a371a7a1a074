"""The audit's ``signature`` step: is the authors' attestation signed by the key trusted?

    --trust KEY.pub, signed by that key       ok: "signed by keyid K (trusted key KEY.pub)"
    --trust KEY.pub, unsigned or another key   failed: a reason, so the verdict is not-reproduced
    no --trust, a signed attestation           skipped: the key ids named, nothing checked
    no --trust, a bare Statement               no step

``signature_step`` is pure: the envelope comes in on ``Attestation.envelope``, the key is
loaded at the edge (``samebits.dsse.load_public_key``). ``read_authors`` reads the attestation;
with a trusted key, a signed payload altered so far that it no longer reads as a Statement is
reported as the broken signature it is (exit 1), not as bad input.
"""

from __future__ import annotations

from pathlib import Path

from samebits._io import read_json
from samebits.dsse import PublicKey, SignatureError, is_envelope, parse_envelope, verify
from samebits.errors import InputError
from samebits_app.audit.verdict import Step, failed
from verify.gpu.attest import Attestation, read_attestation


def read_authors(path: Path, trusted: PublicKey | None) -> Attestation:
    try:
        return read_attestation(path)
    except InputError:
        doc = read_json(path, unique=True) if trusted is not None else None
        if is_envelope(doc):
            assert trusted is not None
            verify(parse_envelope(doc, source=str(path)), trusted, source=str(path))
        raise


def signature_step(authors: Attestation, trusted: PublicKey | None) -> Step | None:
    envelope = authors.envelope
    if trusted is None:
        if envelope is None:
            return None
        return Step(name="signature", status="skipped",
                    summary=f"{authors.source}: signed by keyid {', '.join(envelope.keyids)}; "
                    "not checked (pass --trust KEY.pub)")
    if envelope is None:
        return failed("signature", f"{authors.source} is not signed: --trust {trusted.source} "
                      f"needs a DSSE envelope signed by keyid {trusted.keyid}")
    try:
        signature = verify(envelope, trusted, source=authors.source)
    except SignatureError as exc:
        return failed("signature", exc.message)
    return Step(name="signature", status="ok",
                summary=f"{authors.source}: signed by keyid {signature.keyid or trusted.keyid} "
                f"(trusted key {trusted.source})")

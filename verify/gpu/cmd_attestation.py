"""``samebits verify attestation FILE --trust KEY.pub``: is this attestation signed by that key?

Reads a DSSE envelope (``samebits.dsse``: what ``attest --sign``, ``verify gpu --sign``,
``verify fleet --sign`` and ``audit --sign`` write), checks the Ed25519 signature over the
payload with the public key given, then reads the payload as an in-toto Statement. Exit 0 good
signature, 1 not signed by that key or altered since signing (each case named), 2 unreadable
(no such file, not JSON, not a DSSE envelope, a signed payload that is not an in-toto
Statement).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samebits._io import read_json
from samebits.cli import options
from samebits.dsse import (
    SignatureError,
    is_envelope,
    load_public_key,
    parse_envelope,
    statement_of,
    verify,
)
from samebits.errors import EXIT_OK, InputError
from samebits.ui import Output

STATEMENT_TYPES = ("https://in-toto.io/Statement/v1", "https://in-toto.io/Statement/v0.1")


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    p = sub.add_parser(
        "attestation", parents=parents, help="check a signed attestation against a public key",
        description="Check that FILE is a DSSE envelope signed by KEY.pub (Ed25519) and that "
        "its payload is the in-toto Statement that was signed: one changed byte of the "
        "payload, its type or the signature, or a signature by another key, fails.",
        epilog="exit codes: 0 good signature; 1 not signed by this key, or altered after "
        "signing; 2 unreadable (not JSON, not a DSSE envelope, not in-toto)")
    p.add_argument("file", type=Path, metavar="FILE", help="the signed attestation")
    options.add_trust(p, what="the key FILE must be signed by (required)", default=None)
    options.deprecated(p, "--key", dest="trust", type=Path,
                       instead="pass --trust PUB (the signer's public key)")
    p.set_defaults(func=run_attestation)


def run_attestation(args: argparse.Namespace, out: Output) -> int:
    trusted = options.need(args.trust, "verify attestation needs --trust PUB: the public key "
                           "the attestation must be signed by",
                           hint="samebits verify attestation FILE --trust KEY.pub")
    key = load_public_key(trusted)
    source = str(args.file)
    doc = read_json(args.file, what="attestation", unique=True)
    if isinstance(doc, Mapping) and not is_envelope(doc):
        raise SignatureError(f"{source}: not signed: a bare JSON document, no DSSE envelope",
                             hint="sign it when writing it: `samebits attest --sign KEY` or "
                             "`samebits verify gpu --sign KEY`")
    envelope = parse_envelope(doc, source=source)
    signature = verify(envelope, key, source=source)
    statement = statement_of(envelope, source=source)
    subjects = _subjects(statement, source)
    payload: dict[str, Any] = {
        "file": source, "verified": True, "keyid": key.keyid, "key": str(trusted),
        "signature_keyid": signature.keyid, "payloadType": envelope.payload_type,
        "statement": {"_type": statement["_type"],
                      "predicateType": statement.get("predicateType"),
                      "subject": [{"name": n, "digest": d} for n, d in subjects]},
    }
    lines = [f"{source}: good signature by keyid {key.keyid} ({trusted})",
             f"statement: {statement['_type']}, predicateType "
             f"{statement.get('predicateType')}",
             *(f"  subject {n}  " + " ".join(f"{a}:{v}" for a, v in sorted(d.items()))
               for n, d in subjects)]
    out.emit(payload, "\n".join(lines))
    return EXIT_OK


def _subjects(statement: Any, source: str) -> list[tuple[str, dict[str, str]]]:
    if not isinstance(statement, Mapping) or statement.get("_type") not in STATEMENT_TYPES:
        kind = statement.get("_type") if isinstance(statement, Mapping) else None
        raise InputError(f"{source}: the signed payload is not an in-toto Statement "
                         f"(_type = {kind!r})")
    subjects = statement.get("subject")
    if not isinstance(subjects, list) or not all(
            isinstance(s, Mapping) and isinstance(s.get("digest"), Mapping) for s in subjects):
        raise InputError(f"{source}: the signed Statement has no subject list")
    return [(str(s.get("name", "")), {str(k): str(v) for k, v in s["digest"].items()})
            for s in subjects]

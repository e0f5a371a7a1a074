"""Signed attestations: DSSE envelopes with Ed25519 keys, the format in-toto and cosign use.

    {"payload": "<base64 of the in-toto Statement, canonical JSON>",
     "payloadType": "application/vnd.in-toto+json",
     "signatures": [{"keyid": "<sha256 hex of the raw 32-byte public key>",
                     "sig": "<base64 of the Ed25519 signature of PAE(payloadType, payload)>"}]}

PAE, the DSSE v1 pre-authentication encoding that is signed (LEN: the byte count in ASCII
decimal): ``"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload``.

Keys are the files ``openssl genpkey -algorithm ed25519`` and ``openssl pkey -pubout`` write:
a PKCS#8 PEM private key (``samebits keygen`` writes it with mode 0600, unencrypted) and a
SubjectPublicKeyInfo PEM public key. A key's id is the sha256 of its raw 32 bytes, in hex:
``openssl pkey -pubin -in K.pub -outform DER | tail -c 32 | sha256sum``.

Verification is strict, so that one changed byte anywhere is caught: no field beyond the
spec's, a signature counts only when its ``keyid`` is the key's (or empty or absent, as cosign
writes it), base64 must be canonical (standard or URL-safe alphabet, padded or not, no stray
bits), the Ed25519 signature must verify over the PAE of the decoded payload and the
payloadType as written, and so must every other signature the envelope carries (one bogus
signature beside a good one fails it). The payload must be canonical JSON, no key twice in
an object, so that every reader of the signed bytes reads the one document samebits read.
The envelope bytes are canonical JSON and Ed25519 is deterministic: the same Statement and key
give the same file.

Failures (``samebits.errors`` for the rest):

    InputError            exit 2: unreadable key or envelope, not a DSSE envelope
    └── SignatureError    exit 1: not signed by this key, a signature that does not verify,
        │                 a payload or signature that is not the base64 that was signed
        │                 (bad input too, so every reader's ``except InputError`` holds)
        └── PayloadError  exit 1: a signed payload with a key twice in an object, or not
                          canonical JSON: two readers could read two statements
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import canonical_json, unique_keys
from samebits.errors import EXIT_DIFFERENT, InputError

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
ENVELOPE_KEYS = ("payload", "payloadType", "signatures")
SIGNATURE_KEYS = ("keyid", "sig")


class SignatureError(InputError):
    """A signed document whose signature does not hold for the key given."""

    exit_code = EXIT_DIFFERENT
    kind = "signature"


class PayloadError(SignatureError):
    """A signed payload that does not read one way: a key twice in an object, or bytes that
    are not the canonical JSON of what they hold."""

    kind = "payload"


@dataclass(frozen=True, slots=True, kw_only=True)
class Signature:
    keyid: str
    sig: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Envelope:
    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...]

    @property
    def keyids(self) -> tuple[str, ...]:
        return tuple(s.keyid for s in self.signatures)

    def to_json(self) -> dict[str, Any]:
        return {"payload": base64.b64encode(self.payload).decode(),
                "payloadType": self.payload_type,
                "signatures": [{"keyid": s.keyid, "sig": base64.b64encode(s.sig).decode()}
                               for s in self.signatures]}


@dataclass(frozen=True, slots=True, kw_only=True)
class PublicKey:
    key: Any  # cryptography's Ed25519PublicKey
    keyid: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SigningKey:
    key: Any  # cryptography's Ed25519PrivateKey
    public: PublicKey

    @property
    def keyid(self) -> str:
        return self.public.keyid


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1's pre-authentication encoding: what the signature covers."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def keyid_of(public: Any) -> str:
    """sha256 hex of the raw 32-byte Ed25519 public key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return hashlib.sha256(public.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()


def generate_keypair() -> tuple[bytes, bytes]:
    """A new key pair as (PKCS#8 PEM private key, SubjectPublicKeyInfo PEM public key)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return private, public


def _read_pem(path: Path, what: str) -> bytes:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what}",
                         hint="make a key pair with `samebits keygen --out KEY`") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if b"-----BEGIN " not in data:
        raise InputError(f"{path}: not a PEM {what} (no -----BEGIN line)",
                         hint="samebits keygen writes KEY (private) and KEY.pub (public)")
    return data


def load_public_key(path: Path) -> PublicKey:
    """The Ed25519 public key in ``path`` (PEM); InputError naming the file otherwise."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = _read_pem(path, "public key")
    if b"PRIVATE KEY-----" in data:
        raise InputError(f"{path}: is a private key; pass the public key (its .pub file)",
                         hint="the private key signs; keep it to yourself")
    try:
        key = load_pem_public_key(data)
    except ValueError as exc:
        raise InputError(f"{path}: not a readable PEM public key: {str(exc)[:80]}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{path}: not an Ed25519 key: samebits signs and verifies with "
                         "Ed25519 keys only",
                         hint="make one with `samebits keygen --out KEY`")
    return PublicKey(key=key, keyid=keyid_of(key), source=str(path))


def load_signing_key(path: Path) -> SigningKey:
    """The Ed25519 private key in ``path`` (PKCS#8 PEM, unencrypted)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data = _read_pem(path, "private key")
    if b"PRIVATE KEY-----" not in data:
        raise InputError(f"{path}: not a private key; --sign takes the private key "
                         "(KEY, not KEY.pub)")
    if b"ENCRYPTED PRIVATE KEY" in data:
        raise InputError(f"{path}: an encrypted private key: samebits reads unencrypted "
                         "PKCS#8 keys only",
                         hint=f"openssl pkey -in {path} -out KEY.plain (keep it 0600)")
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InputError(f"{path}: not a readable PEM private key: {str(exc)[:80]}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{path}: not an Ed25519 key: samebits signs with Ed25519 keys "
                         "only",
                         hint="make one with `samebits keygen --out KEY`")
    public = key.public_key()
    return SigningKey(key=key, public=PublicKey(key=public, keyid=keyid_of(public),
                                                source=f"{path}.pub"))


def sign(payload: bytes, key: SigningKey, *,
         payload_type: str = IN_TOTO_PAYLOAD_TYPE) -> Envelope:
    sig = key.key.sign(pae(payload_type, payload))
    return Envelope(payload_type=payload_type, payload=payload,
                    signatures=(Signature(keyid=key.keyid, sig=sig),))


def envelope_bytes(envelope: Envelope) -> bytes:
    """The envelope as samebits writes it: canonical JSON, so byte-stable."""
    return canonical_json(envelope.to_json())


def signed_bytes(statement_bytes: bytes, key: SigningKey | None) -> bytes:
    """What ``--sign KEY`` writes in place of a Statement: its envelope; without a key, the
    Statement as it was."""
    return statement_bytes if key is None else envelope_bytes(sign(statement_bytes, key))


def is_envelope(doc: Any) -> bool:
    return isinstance(doc, Mapping) and "payloadType" in doc and "signatures" in doc


def _b64decode(text: str) -> bytes:
    """Canonical base64 (either alphabet, padding optional) or ValueError."""
    urlsafe = "-" in text or "_" in text
    padded = text + "=" * (-len(text) % 4)
    try:
        data = (base64.urlsafe_b64decode(padded.encode()) if urlsafe
                else base64.b64decode(padded.encode(), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(str(exc)) from None
    again = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()
    if again.rstrip("=") != text.rstrip("=") or (text.endswith("=") and again != text):
        raise ValueError("not canonical base64")
    return data


def parse_envelope(doc: Any, *, source: str) -> Envelope:
    """A DSSE envelope from its JSON; InputError for a broken shape, SignatureError for a
    payload or signature that is not the base64 written at signing."""
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: not a DSSE envelope (expected a JSON object)")
    missing = [k for k in ENVELOPE_KEYS if k not in doc]
    if missing:
        raise InputError(f"{source}: not a DSSE envelope: no {', '.join(missing)}")
    kind, payload, sigs = doc["payloadType"], doc["payload"], doc["signatures"]
    if not isinstance(kind, str) or not isinstance(payload, str):
        raise InputError(f"{source}: payloadType and payload must be strings")
    if not isinstance(sigs, list) or not all(
            isinstance(s, Mapping) and isinstance(s.get("sig"), str)
            and isinstance(s.get("keyid", ""), str) for s in sigs):
        raise InputError(f"{source}: signatures: expected a list of {{keyid, sig}} objects")
    unknown = sorted(str(k) for k in doc if k not in ENVELOPE_KEYS)
    unknown += sorted(f"signatures[{i}].{k}" for i, s in enumerate(sigs)
                      for k in s if k not in SIGNATURE_KEYS)
    if unknown:
        raise InputError(f"{source}: not a DSSE envelope: unknown field "
                         f"{', '.join(unknown)[:80]}")
    try:
        body = _b64decode(payload)
    except ValueError as exc:
        raise SignatureError(f"{source}: payload is not the base64 that was signed ({exc}): "
                             "the envelope was altered") from None
    out = []
    for i, s in enumerate(sigs):
        try:
            out.append(Signature(keyid=s.get("keyid", ""), sig=_b64decode(s["sig"])))
        except ValueError as exc:
            raise SignatureError(f"{source}: signatures[{i}].sig is not base64 ({exc}): the "
                                 "envelope was altered") from None
    return Envelope(payload_type=kind, payload=body, signatures=tuple(out))


def verify(envelope: Envelope, key: PublicKey, *, source: str) -> Signature:
    """The signature by ``key`` that holds over the envelope; SignatureError naming what is
    wrong (signed by another key, or a payload/signature changed since signing).

    Every signature the envelope carries must hold: one that does not (a second, bogus
    signature under the same key id, in either order) or one by a key this check cannot
    verify fails the envelope, so one changed byte anywhere is caught."""
    from cryptography.exceptions import InvalidSignature

    mine = [s for s in envelope.signatures if s.keyid in (key.keyid, "")]
    if not mine:
        others = ", ".join(s.keyid for s in envelope.signatures) or "none"
        raise SignatureError(f"{source}: not signed by {key.source} (keyid {key.keyid}); "
                             f"its signatures are by keyid {others}",
                             hint="another key signed it, or the keyid was altered")
    message = pae(envelope.payload_type, envelope.payload)
    bad = []
    for i, s in enumerate(envelope.signatures):
        if s.keyid not in (key.keyid, ""):
            bad.append(f"signatures[{i}] is by keyid {s.keyid}, which {key.source} cannot "
                       "check")
            continue
        try:
            key.key.verify(s.sig, message)
        except InvalidSignature:
            bad.append(f"signatures[{i}] does not verify")
    if not bad:
        return mine[0]
    if len(envelope.signatures) == 1:
        raise SignatureError(f"{source}: the signature by keyid {key.keyid} does not verify: "
                             "the payload, its type or the signature changed after signing")
    raise SignatureError(f"{source}: {len(envelope.signatures)} signatures, and not every one "
                         f"holds for keyid {key.keyid}: {'; '.join(bad)}; an envelope "
                         "verifies only when each signature it carries does",
                         hint="a signature was added or altered after signing")


def statement_of(envelope: Envelope, *, source: str) -> Any:
    """The in-toto Statement an envelope carries (its signature is not checked here): JSON
    with no key twice in an object that re-serialises to the payload's own bytes
    (``canonical_json``), so every reader of the signed bytes reads the same document."""
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE:
        raise InputError(f'{source}: payloadType "{envelope.payload_type[:80]}": not an '
                         f"in-toto attestation (expected {IN_TOTO_PAYLOAD_TYPE})")
    return canonical_payload(envelope.payload, source=source)


def canonical_payload(payload: bytes, *, source: str) -> Any:
    """The document a signed payload holds, when it is canonical JSON; ``PayloadError``
    otherwise (InputError when it is not JSON at all)."""
    try:
        doc = json.loads(payload.decode(), object_pairs_hook=unique_keys)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{source}: the signed payload is not JSON: {exc}") from None
    except ValueError as exc:  # unique_keys: a key twice
        raise PayloadError(f"{source}: the signed payload has a {exc} in one object: readers "
                           "that keep the first and readers that keep the last see different "
                           "statements") from None
    try:
        again = canonical_json(doc)
    except ValueError:  # NaN or infinity, which canonical JSON does not write
        again = b""
    if again != payload:
        raise PayloadError(f"{source}: the signed payload is not canonical JSON (sorted "
                           "keys, two-space indent, a final newline, as samebits writes "
                           "it): its bytes are not the one way to write the document")
    return doc


def open_document(doc: Any, *, source: str) -> tuple[Any, Envelope | None]:
    """(the Statement, its envelope) for a DSSE envelope; (doc, None) for a bare Statement.
    What every reader of attestations calls first."""
    if not is_envelope(doc):
        return doc, None
    envelope = parse_envelope(doc, source=source)
    return statement_of(envelope, source=source), envelope

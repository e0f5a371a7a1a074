"""Signed attestations: DSSE envelopes that samebits and the in-toto library both verify."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    PrivateFormat,
    PublicFormat,
)

from samebits import dsse
from samebits.errors import InputError
from samebits_app.cli import main
from tests.fixtures.intoto import in_toto_verifies
from tests.fixtures.samples import sample_facts
from verify.gpu.attest import build_statement, read_attestation, statement_bytes

WORKLOADS = {"sum_fp32": {"status": "ok", "sha256": "a" * 64, "outputs": []}}


def statement(digest: str = "e" * 64) -> dict:
    return build_statement(facts=sample_facts(), device="cpu", settings={"profile": "x"},
                           workloads=WORKLOADS, suite_version=1,
                           environment={"environment": digest}, samebits_version="0.0.0")


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """Two key pairs made by `samebits keygen`: (KEY, OTHER); their .pub beside them."""
    for name in ("key", "other"):
        assert main(["keygen", "--out", str(tmp_path / name), "--quiet"]) == 0
    return tmp_path / "key", tmp_path / "other"


def signed(tmp_path: Path, key: Path, doc: dict | None = None) -> Path:
    data = dsse.signed_bytes(statement_bytes(doc or statement()), dsse.load_signing_key(key))
    out = tmp_path / "signed.intoto.json"
    out.write_bytes(data)
    return out


def check(path: Path, pub: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`samebits verify attestation PATH --trust PUB`: (exit code, stdout + stderr)."""
    rc = main(["verify", "attestation", str(path), "--trust", str(pub)])
    got = capsys.readouterr()
    return rc, got.out + got.err


def test_pae_is_the_dsse_spec_encoding() -> None:
    """PAE gives the DSSE v1 spec's own example bytes."""
    got = dsse.pae("http://example.com/HelloWorld", b"hello world")
    assert got == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_signed_here_verifies_with_in_toto_and_samebits(
        tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """An envelope signed by samebits verifies with in-toto's DSSE code and with samebits."""
    key, _ = keys
    path = signed(tmp_path, key)
    assert in_toto_verifies(path, Path(f"{key}.pub"))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert rc == 0, out
    keyid = dsse.load_public_key(Path(f"{key}.pub")).keyid
    assert out.splitlines()[0] == f"{path}: good signature by keyid {keyid} ({key}.pub)"
    doc = json.loads(path.read_text())
    assert (doc["payloadType"], doc["signatures"][0]["keyid"]) == (
        "application/vnd.in-toto+json", keyid)
    assert base64.b64decode(doc["payload"]) == statement_bytes(statement())


@pytest.mark.requires("openssl")
def test_keyid_is_sha256_of_raw_public_key_as_openssl_sees_it(keys: tuple[Path, Path]) -> None:
    """The documented recipe (openssl DER, last 32 bytes, sha256) gives samebits' key id."""
    key, _ = keys
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", f"{key}.pub", "-outform", "DER"],
                         capture_output=True, check=True).stdout
    assert hashlib.sha256(der[-32:]).hexdigest() == dsse.load_public_key(Path(f"{key}.pub")).keyid
    # and OpenSSL reads the private key samebits wrote
    subprocess.run(["openssl", "pkey", "-in", str(key), "-noout"], check=True)


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1:]


@pytest.mark.parametrize(("where", "message"), [
    ("payload", "the signature by keyid {keyid} does not verify: the payload, its type or the "
                "signature changed after signing"),
    ("sig", "the signature by keyid {keyid} does not verify: the payload, its type or the "
            "signature changed after signing"),
    ("payloadType", "the signature by keyid {keyid} does not verify: the payload, its type or "
                    "the signature changed after signing"),
    ("keyid", "not signed by {pub} (keyid {keyid}); its signatures are by keyid {flipped}"),
])
def test_flipped_byte_fails_both(tmp_path: Path, keys: tuple[Path, Path], where: str,
                                 message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One byte flipped in the payload, signature, payload type or key id: both verifiers fail,
    samebits with exit 1 and the reason."""
    key, _ = keys
    path = signed(tmp_path, key)
    data = path.read_bytes()
    value = json.loads(data)
    text = {"payload": value["payload"], "payloadType": value["payloadType"],
            "sig": value["signatures"][0]["sig"], "keyid": value["signatures"][0]["keyid"]}[where]
    index = data.index(text.encode()) + len(text) // 2
    if where in ("payload", "sig"):  # a base64 letter that stays a base64 letter
        while chr(data[index] ^ 0x01) not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
            index += 1
    path.write_bytes(_flip(data, index))
    pub = Path(f"{key}.pub")
    assert not in_toto_verifies(path, pub)
    rc, out = check(path, pub, capsys)
    keyid = dsse.load_public_key(pub).keyid
    flipped = json.loads(path.read_bytes())["signatures"][0]["keyid"]
    assert (rc, out.splitlines()[0]) == (
        1, f"error: {path}: " + message.format(keyid=keyid, pub=pub, flipped=flipped))


def test_another_key_fails_both(tmp_path: Path, keys: tuple[Path, Path],
                                capsys: pytest.CaptureFixture[str]) -> None:
    """Checked against another public key, or re-signed by another key: both fail, named."""
    key, other = keys
    path = signed(tmp_path, key)
    assert not in_toto_verifies(path, Path(f"{other}.pub"))
    rc, out = check(path, Path(f"{other}.pub"), capsys)
    mine, theirs = (dsse.load_public_key(Path(f"{k}.pub")).keyid for k in (key, other))
    assert (rc, out.splitlines()[0]) == (
        1, f"error: {path}: not signed by {other}.pub (keyid {theirs}); its signatures are by "
        f"keyid {mine}")
    # the other key's signature swapped in under this key's id: the signature does not verify
    doc = json.loads(path.read_text())
    (tmp_path / "forged").mkdir()
    forged = json.loads(signed(tmp_path / "forged", other).read_text())
    doc["signatures"][0]["sig"] = forged["signatures"][0]["sig"]
    path.write_text(json.dumps(doc))
    assert not in_toto_verifies(path, Path(f"{key}.pub"))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert rc == 1 and "does not verify" in out


def test_every_single_byte_change_is_caught(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """Each byte of a signed attestation flipped in turn: never a good signature; exit 1 when a
    signed value changed, exit 2 when the JSON no longer reads as an envelope."""
    key, _ = keys
    small = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "p",
             "subject": [{"name": "environment", "digest": {"sha256": "e" * 64}}],
             "predicate": {}}
    data = dsse.signed_bytes(json.dumps(small).encode(), dsse.load_signing_key(key))
    public = dsse.load_public_key(Path(f"{key}.pub"))
    value = json.loads(data)
    spans = [(data.index(v.encode()), data.index(v.encode()) + len(v))
             for v in (value["payload"], value["payloadType"], value["signatures"][0]["sig"],
                       value["signatures"][0]["keyid"])]
    codes = {}
    for i in range(len(data)):
        try:
            doc = json.loads(_flip(data, i))
            env = dsse.parse_envelope(doc, source="f")
            dsse.verify(env, public, source="f")
            dsse.statement_of(env, source="f")
            codes[i] = 0
        except dsse.SignatureError:
            codes[i] = 1
        except (InputError, ValueError):
            codes[i] = 2
    assert 0 not in codes.values()
    assert all(codes[i] == 1 for a, b in spans for i in range(a, b))


def test_signing_is_byte_stable(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    """The same Statement and key give the same envelope bytes (Ed25519, canonical JSON)."""
    key, _ = keys
    first = signed(tmp_path, key).read_bytes()
    assert signed(tmp_path, key).read_bytes() == first


def test_readers_accept_the_envelope(tmp_path: Path, keys: tuple[Path, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """compare reads a signed attestation as it reads the bare Statement."""
    key, _ = keys
    path = signed(tmp_path, key)
    bare = tmp_path / "bare.json"
    bare.write_bytes(statement_bytes(statement()))
    att = read_attestation(path)
    assert att.envelope is not None and att.envelope.keyids == (
        dsse.load_public_key(Path(f"{key}.pub")).keyid,)
    assert att.subjects == read_attestation(bare).subjects
    assert main(["verify", "compare", str(path), str(bare)]) == 0
    assert "IDENTICAL" in capsys.readouterr().out


def test_unsigned_statement_is_refused(tmp_path: Path, keys: tuple[Path, Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A bare Statement checked for a signature: exit 1, 'not signed'."""
    key, _ = keys
    bare = tmp_path / "bare.json"
    bare.write_bytes(statement_bytes(statement()))
    rc, out = check(bare, Path(f"{key}.pub"), capsys)
    assert (rc, out.splitlines()[0]) == (
        1, f"error: {bare}: not signed: a bare JSON document, no DSSE envelope")


def _other_keys(tmp_path: Path) -> dict[str, Path]:
    ec = generate_private_key(SECP256R1())
    files = {
        "ec.pub": ec.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo),
        "ec": ec.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                               BestAvailableEncryption(b"pw")).replace(
            b"ENCRYPTED PRIVATE KEY", b"PRIVATE KEY"),
        "ec.enc": ec.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                   BestAvailableEncryption(b"pw")),
        "garbage.pub": b"-----BEGIN PUBLIC KEY-----\nnot base64\n-----END PUBLIC KEY-----\n",
        "text.pub": b"ssh-ed25519 AAAA user@host\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in files}


@pytest.mark.parametrize(("args", "message"), [
    (["--trust", "{d}/missing.pub"], "{d}/missing.pub: no such public key"),
    (["--trust", "{d}/text.pub"], "{d}/text.pub: not a PEM public key (no -----BEGIN line)"),
    (["--trust", "{d}/key"], "{d}/key: is a private key; pass the public key (its .pub file)"),
    (["--trust", "{d}/ec.pub"], "{d}/ec.pub: not an Ed25519 key: samebits signs and verifies "
                              "with Ed25519 keys only"),
])
def test_bad_keys_are_named(tmp_path: Path, keys: tuple[Path, Path], args: list[str],
                            message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """An unusable --key: exit 2 and the file named, before anything is read."""
    _other_keys(tmp_path)
    att = signed(tmp_path, keys[0])
    argv = ["verify", "attestation", str(att), *(a.format(d=tmp_path) for a in args)]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines()[0] == "error: " + message.format(d=tmp_path)


@pytest.mark.parametrize(("name", "message"), [
    ("key.pub", "{d}/key.pub: not a private key; --sign takes the private key (KEY, not "
                "KEY.pub)"),
    ("ec", "{d}/ec: not a readable PEM private key: "),
    ("ec.enc", "{d}/ec.enc: an encrypted private key: samebits reads unencrypted PKCS#8 keys "
               "only"),
    ("garbage.pub", "{d}/garbage.pub: not a private key; --sign takes the private key (KEY, not "
                    "KEY.pub)"),
])
def test_bad_signing_keys_are_named(tmp_path: Path, keys: tuple[Path, Path], name: str,
                                    message: str) -> None:
    """An unusable --sign key: InputError naming the file."""
    _other_keys(tmp_path)
    with pytest.raises(InputError) as exc:
        dsse.load_signing_key(tmp_path / name)
    assert exc.value.message.startswith(message.format(d=tmp_path))


def test_keygen_writes_a_pair_and_never_overwrites(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """keygen: KEY 0600 and KEY.pub 0644; a second keygen to the same path is refused."""
    key = tmp_path / "k"
    assert main(["keygen", "--out", str(key), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (key.stat().st_mode & 0o777, Path(f"{key}.pub").stat().st_mode & 0o777) == (
        0o600, 0o644)
    assert doc["keyid"] == dsse.load_signing_key(key).keyid == dsse.load_public_key(
        Path(f"{key}.pub")).keyid
    before = key.read_bytes()
    assert main(["keygen", "--out", str(key)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: {key}: already exists; samebits never overwrites a key")
    assert key.read_bytes() == before


@pytest.mark.parametrize(("text", "message", "code"), [
    ("[]", "not a DSSE envelope (expected a JSON object)", 2),
    ('{"payloadType": "x", "signatures": []}', "not a DSSE envelope: no payload", 2),
    ('{"payload": "e30=", "payloadType": "x", "signatures": [{"sig": 3}]}',
     "signatures: expected a list of {keyid, sig} objects", 2),
    ('{"payload": "e30", "payloadType": "x", "signatures": []}', "not signed by", 1),
    ('{"payload": "e31=", "payloadType": "x", "signatures": []}',
     "payload is not the base64 that was signed (not canonical base64): the envelope was "
     "altered", 1),
    ('{"payload": "e30=", "payloadType": "x", "signatures": [{"keyid": "", "sig": "!!"}]}',
     "signatures[0].sig is not base64", 1),
])
def test_malformed_envelopes(tmp_path: Path, keys: tuple[Path, Path], text: str, message: str,
                             code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Broken envelopes: exit 2 when unreadable, 1 when a signed value is not what was signed."""
    path = tmp_path / "e.json"
    path.write_text(text)
    rc, out = check(path, Path(f"{keys[0]}.pub"), capsys)
    assert rc == code and out.startswith(f"error: {path}: {message}"), out


def test_verify_gpu_sign_writes_a_verifiable_envelope(
        tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """`verify gpu --sign KEY` writes the envelope; verify attestation and compare read it."""
    key, _ = keys
    out = tmp_path / "gpu.intoto.json"
    assert main(["verify", "gpu", "--only", "randn", "--sign", str(key), "--out", str(out),
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    keyid = dsse.load_public_key(Path(f"{key}.pub")).keyid
    assert doc["attestation"]["signed_by"] == keyid
    assert in_toto_verifies(out, Path(f"{key}.pub"))
    assert check(out, Path(f"{key}.pub"), capsys)[0] == 0
    assert read_attestation(out).workloads["randn"]["status"] == "ok"


def test_verify_gpu_bad_key_fails_before_running(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A --sign key that cannot sign: exit 2 before any workload runs, nothing written."""
    out = tmp_path / "gpu.intoto.json"
    assert main(["verify", "gpu", "--sign", str(tmp_path / "nokey"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: {tmp_path}/nokey: no such private key")
    assert not out.exists()


@pytest.mark.requires("openssl")
def test_openssl_made_keys_sign_and_verify(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A key pair made by `openssl genpkey -algorithm ed25519` signs and verifies."""
    key = tmp_path / "ossl"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", f"{key}.pub"],
                   check=True)
    path = signed(tmp_path, key)
    assert in_toto_verifies(path, Path(f"{key}.pub"))
    assert check(path, Path(f"{key}.pub"), capsys)[0] == 0


# ------------------------------------------------------------- payloads that read two ways

def _signed_payload(tmp_path: Path, key: Path, payload: bytes) -> Path:
    envelope = dsse.sign(payload, dsse.load_signing_key(key))
    out = tmp_path / "crafted.intoto.json"
    out.write_bytes(dsse.envelope_bytes(envelope))
    return out


def _first_wins(text: str) -> dict:
    def first(pairs: list) -> dict:
        out: dict = {}
        for k, v in pairs:
            out.setdefault(k, v)
        return out
    return json.loads(text, object_pairs_hook=first)


def _twice(doc: dict, key: str, value: object) -> bytes:
    """The canonical bytes of ``doc`` with a second ``key`` written before the real one."""
    text = statement_bytes(doc).decode()
    extra = json.dumps(value, sort_keys=True, indent=2).replace("\n", "\n  ")
    return text.replace("{\n", f'{{\n  "{key}": {extra},\n', 1).encode()


def test_a_payload_with_a_key_twice_is_refused(tmp_path: Path, keys: tuple[Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Two "subject" keys, validly signed: in-toto's verifier accepts the signature and reads
    one subject, a first-wins reader another; samebits refuses it (exit 1), naming the key."""
    key, _ = keys
    doc = statement("e" * 64)
    forged = [{"name": "environment", "digest": {"sha256": "f" * 64}}]
    payload = _twice(doc, "subject", forged)
    path = _signed_payload(tmp_path, key, payload)
    assert in_toto_verifies(path, Path(f"{key}.pub"))   # the signature itself holds
    assert json.loads(payload)["subject"] != _first_wins(payload.decode())["subject"]
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert (rc, out.splitlines()[0]) == (
        1, f"error: {path}: the signed payload has a duplicate key 'subject' in one object: "
        "readers that keep the first and readers that keep the last see different statements")
    with pytest.raises(dsse.PayloadError):
        read_attestation(path)


def test_a_payload_that_is_not_canonical_json_is_refused(
        tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """The same statement signed as compact JSON: not the bytes samebits writes, refused."""
    key, _ = keys
    path = _signed_payload(tmp_path, key, json.dumps(statement()).encode())
    assert in_toto_verifies(path, Path(f"{key}.pub"))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert rc == 1 and "the signed payload is not canonical JSON" in out.splitlines()[0]


@pytest.mark.parametrize("order", ["good first", "bogus first"])
def test_one_bogus_signature_beside_a_good_one_fails(
        tmp_path: Path, keys: tuple[Path, Path], order: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A second signature under the same key id that does not verify fails the envelope in
    either order, as in-toto's reader refuses it ("Multiple signatures found for keyid")."""
    key, _ = keys
    path = signed(tmp_path, key)
    doc = json.loads(path.read_bytes())
    good = doc["signatures"][0]
    bogus = {"keyid": good["keyid"], "sig": base64.b64encode(b"\0" * 64).decode()}
    doc["signatures"] = [good, bogus] if order == "good first" else [bogus, good]
    path.write_text(json.dumps(doc))
    assert not in_toto_verifies(path, Path(f"{key}.pub"))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    i = 1 if order == "good first" else 0
    assert (rc, out.splitlines()[0]) == (
        1, f"error: {path}: 2 signatures, and not every one holds for keyid {good['keyid']}: "
        f"signatures[{i}] does not verify; an envelope verifies only when each signature it "
        "carries does")
    with pytest.raises(dsse.SignatureError):
        dsse.verify(read_attestation(path).envelope, dsse.load_public_key(Path(f"{key}.pub")),
                    source=str(path))


def test_a_second_good_signature_by_another_key_is_not_checked_so_fails(
        tmp_path: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """Good signature plus one by another key: this key cannot check it, so it fails."""
    key, other = keys
    path = signed(tmp_path, key)
    (tmp_path / "o").mkdir()
    theirs = json.loads(signed(tmp_path / "o", other).read_bytes())["signatures"][0]
    doc = json.loads(path.read_bytes())
    doc["signatures"].append(theirs)
    path.write_text(json.dumps(doc))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert rc == 1 and (f"signatures[1] is by keyid {theirs['keyid']}, which {key}.pub cannot "
                        "check") in out


def test_an_envelope_with_a_key_twice_is_refused(tmp_path: Path, keys: tuple[Path, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Two "payload" keys in the envelope itself: refused before any signature is read."""
    key, _ = keys
    path = signed(tmp_path, key)
    text = path.read_text()
    path.write_text(text.replace('{\n', '{\n  "payload": "e30=",\n', 1))
    rc, out = check(path, Path(f"{key}.pub"), capsys)
    assert (rc, out.splitlines()[0]) == (
        2, f"error: {path}: not JSON that reads one way: duplicate key 'payload'")

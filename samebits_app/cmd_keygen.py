"""``samebits keygen --out KEY``: an Ed25519 key pair for signing attestations.

    KEY       the private key, PKCS#8 PEM, unencrypted, mode 0600: `--sign KEY` uses it
    KEY.pub   the public key, SubjectPublicKeyInfo PEM: `verify attestation --trust KEY.pub`
              and `audit --trust KEY.pub` check signatures with it; publish it

The formats are OpenSSL's (``openssl genpkey -algorithm ed25519``); ``samebits.dsse`` has the
envelope and the key id. Existing files are never overwritten.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from samebits._io import atomic_write
from samebits.cli import options
from samebits.errors import EXIT_OK, UsageError
from samebits.ui import Output


def add_parser(sub: argparse._SubParsersAction, parents: list) -> None:
    k = sub.add_parser(
        "keygen", parents=parents, help="make an Ed25519 key pair for signing attestations",
        description="Write a new Ed25519 key pair: KEY (private, PKCS#8 PEM, mode 0600) and "
        "KEY.pub (public, PEM). Sign with `samebits attest --sign KEY` or `samebits verify gpu "
        "--sign KEY`; check with `samebits verify attestation FILE --trust KEY.pub` or "
        "`samebits audit --trust KEY.pub`.",
        epilog="exit codes: 0 written; 2 bad input (KEY or KEY.pub already exists). "
        "The key id is the sha256 of the raw public key, in hex.")
    options.add_out_file(k, what="the private key (the public key goes to FILE.pub)",
                         default="required", required=True)
    k.set_defaults(func=run_keygen)


def run_keygen(args: argparse.Namespace, out: Output) -> int:
    from samebits.dsse import generate_keypair, load_public_key

    private_path = Path(args.out)
    public_path = private_path.with_name(private_path.name + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise UsageError(f"{path}: already exists; samebits never overwrites a key",
                             hint="pick another --out, or move the old pair away first")
    private, public = generate_keypair()
    atomic_write(private_path, private, mode=0o600)
    try:
        atomic_write(public_path, public, mode=0o644)
    except BaseException:
        private_path.unlink()  # a pair or nothing
        raise
    keyid = load_public_key(public_path).keyid
    payload = {"private_key": str(private_path), "public_key": str(public_path),
               "keyid": keyid, "algorithm": "ed25519"}
    out.emit(payload, "\n".join([
        f"{private_path}: private key (ed25519, mode 0600): keep it secret",
        f"{public_path}: public key, keyid {keyid}: publish it",
        f"sign:   samebits attest --sign {private_path} ...",
        f"verify: samebits verify attestation FILE --trust {public_path}"]))
    return EXIT_OK

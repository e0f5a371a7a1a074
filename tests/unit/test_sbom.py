"""samebits_app.audit.sbom: a valid CycloneDX 1.6 document, every package hashed, byte-stable."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timezone

import pytest

from samebits.lock.model import LockedPackage
from samebits_app.audit.sbom import SERIAL_NAMESPACE, render_sbom, sbom_timestamp

CHANNEL = "https://conda.anaconda.org/conda-forge"
LOCKED = (
    LockedPackage(name="python", version="3.12.7", manager="conda", platform="linux-64",
                  url=f"{CHANNEL}/linux-64/python-3.12.7-h0_0_cpython.conda",
                  md5="1" * 32, sha256="2" * 64, build="h0_0_cpython",
                  dependencies=(("libzlib", ">=1.3"),)),
    LockedPackage(name="libzlib", version="1.3.1", manager="conda", platform="linux-64",
                  url=f"{CHANNEL}/linux-64/libzlib-1.3.1-hb9d3cd8_2.conda",
                  md5="3" * 32, sha256="4" * 64, build="hb9d3cd8_2"),
    LockedPackage(name="Typing_Extensions", version="4.12.2", manager="pip",
                  platform="linux-64", sha256="5" * 64,
                  url="https://files.pythonhosted.org/t/typing_extensions-4.12.2-py3-none-any.whl"),
)
INSTALLED = [
    {"id": "conda:python-3.12.7-h0_0_cpython", "manager": "conda", "name": "python",
     "version": "3.12.7", "build": "h0_0_cpython", "md5": "1" * 32, "sha256": "2" * 64,
     "subdir": "linux-64", "record": "conda-meta/python-3.12.7-h0_0_cpython.json"},
    {"id": "conda:libzlib-1.3.1-hb9d3cd8_2", "manager": "conda", "name": "libzlib",
     "version": "1.3.1", "build": "hb9d3cd8_2", "md5": "3" * 32, "sha256": "4" * 64,
     "subdir": "linux-64", "record": "conda-meta/libzlib-1.3.1-hb9d3cd8_2.json"},
    {"id": "pip:typing_extensions-4.12.2", "manager": "pip", "name": "typing_extensions",
     "version": "4.12.2", "tags": ["py3-none-any"],
     "record": "lib/python3.12/site-packages/typing_extensions-4.12.2.dist-info/RECORD"},
]
REPORT = {"prefix": "/opt/env", "identical": True, "packages": INSTALLED,
          "digests": {"environment": "e" * 64, "packages": "p" * 64}}
# Changing this digest is a deliberate break of the SBOM's bytes (or a new cyclonedx-python-lib).
GOLDEN = "c5ef87bacb0e3f4752ab64d615d2da1813543ddf701fa8c22ccb7eb3b95411ac"


def sbom(**changes) -> bytes:
    kw = dict(name="hopper", env_report=REPORT, locked=LOCKED, lock_sha256="l" * 64,
              platform="linux-64", timestamp=None)
    kw.update(changes)
    return render_sbom(**kw)


def test_valid_cyclonedx() -> None:
    """cyclonedx-python-lib's strict validator accepts it as CycloneDX 1.6."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom().decode()) is None


def test_components_carry_hashes_and_purls() -> None:
    """conda: MD5 + SHA-256 and a conda purl; PyPI: the locked wheel's SHA-256."""
    doc = json.loads(sbom())
    comps = {c["name"]: c for c in doc["components"]}
    assert set(comps) == {"python", "libzlib", "typing_extensions"}
    py = comps["python"]
    assert {h["alg"]: h["content"] for h in py["hashes"]} == {"MD5": "1" * 32,
                                                               "SHA-256": "2" * 64}
    assert py["purl"] == (f"pkg:conda/python@3.12.7?build=h0_0_cpython&channel={CHANNEL}"
                          "&subdir=linux-64&type=conda")
    assert py["bom-ref"] == py["purl"]
    te = comps["typing_extensions"]
    assert te["purl"] == "pkg:pypi/typing-extensions@4.12.2"
    assert te["hashes"] == [{"alg": "SHA-256", "content": "5" * 64}]
    assert te["externalReferences"][0]["url"].endswith("py3-none-any.whl")
    deps = {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}
    assert deps[py["bom-ref"]] == [comps["libzlib"]["bom-ref"]]
    assert len(deps["environment"]) == 3
    props = {p["name"]: p["value"] for p in doc["metadata"]["component"]["properties"]}
    assert props["samebits:environment-digest"] == "e" * 64
    assert props["samebits:verify-env"] == "identical"


def test_byte_stable_and_pinned() -> None:
    """No randomness, no clock: the same input gives the same bytes, pinned here."""
    first = sbom()
    assert first == sbom()
    assert hashlib.sha256(first).hexdigest() == GOLDEN


def test_serial_is_derived_from_content() -> None:
    """serialNumber is a UUIDv5 of the document without it; another package, another serial."""
    doc = json.loads(sbom())
    serial = doc.pop("serialNumber")
    from samebits._io import compact_json, sha256_hex

    assert serial == uuid.uuid5(SERIAL_NAMESPACE, sha256_hex(compact_json(doc))).urn
    changed = {**REPORT, "packages": INSTALLED[:2]}
    assert json.loads(sbom(env_report=changed))["serialNumber"] != serial
    assert "timestamp" not in doc["metadata"]


@pytest.mark.parametrize(("meta", "environ", "expected"), [
    ("2026-11-29T00:00:00Z", {"SOURCE_DATE_EPOCH": "0"}, "2026-11-29T00:00:00+00:00"),
    (None, {"SOURCE_DATE_EPOCH": "1700000000"}, "2023-11-14T22:13:20+00:00"),
    (None, {}, None),
    ("not a date", {}, None),
])
def test_timestamp(meta: str | None, environ: dict, expected: str | None) -> None:
    """The lock's exclude-newer, else SOURCE_DATE_EPOCH, else none: never the clock."""
    got = sbom_timestamp(meta, environ)
    assert (got.isoformat() if got else None) == expected


def test_timestamp_written() -> None:
    """A given timestamp is the document's metadata.timestamp."""
    when = datetime(2026, 11, 29, tzinfo=timezone.utc)
    assert json.loads(sbom(timestamp=when))["metadata"]["timestamp"] == \
        "2026-11-29T00:00:00+00:00"

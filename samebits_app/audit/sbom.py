"""A CycloneDX 1.6 SBOM of the verified environment (cyclonedx-python-lib), byte-stable.

One component per installed package as ``verify env`` read it (conda-meta, dist-info), with
the archive hashes: conda packages carry the MD5 and SHA-256 their record and the lock give;
PyPI packages the SHA-256 of the locked wheel (the installed record keeps none unless pip
wrote ``direct_url.json``). Each has a purl (``pkg:conda/...?build=&subdir=``,
``pkg:pypi/...``), the lock's URL as its distribution reference, and ``samebits:*``
properties. The metadata component is the environment: its two ``verify env`` digests, the
lockfile's sha256, the platform, and whether it matched the lock.

Nothing random and nothing "now": every bom-ref is the package's purl; ``serialNumber`` is a
UUIDv5 of the document's own canonical bytes (without the serial); ``metadata.timestamp`` is
given by the caller (the lock's ``exclude-newer``, else ``SOURCE_DATE_EPOCH``) or left out.
``render_sbom`` is pure and returns canonical JSON bytes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from samebits import __version__
from samebits._io import canonical_json, compact_json, sha256_hex
from samebits.lock.model import LockedPackage

SERIAL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://samebits.dev/sbom")


def _canonical(manager: str, name: str) -> str:
    from verify.env.records import canonical_name

    return canonical_name(name) if manager == "pip" else name


def _purl(pkg: Mapping[str, Any], locked: LockedPackage | None) -> Any:
    from packageurl import PackageURL

    if pkg["manager"] == "pip":
        return PackageURL(type="pypi", name=_canonical("pip", pkg["name"]),
                          version=pkg["version"])
    qualifiers = {k: v for k, v in (("build", pkg.get("build")),
                                    ("subdir", pkg.get("subdir"))) if v}
    if locked is not None:
        fname = locked.filename
        qualifiers["type"] = "conda" if fname.endswith(".conda") else "tar.bz2"
        qualifiers["channel"] = locked.url.rsplit("/", 2)[0]
    return PackageURL(type="conda", name=pkg["name"], version=pkg["version"],
                      qualifiers=qualifiers or None)


def component_of(pkg: Mapping[str, Any], locked: LockedPackage | None) -> Any:
    """One installed package (``verify env``'s ``packages`` entry) as a CycloneDX component."""
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        Property,
        XsUri,
    )
    from cyclonedx.model.component import Component, ComponentType

    same = locked is not None and locked.version == pkg["version"]
    md5 = pkg.get("md5") or (locked.md5 if same and locked else None)
    sha = pkg.get("sha256") or (locked.sha256 if same and locked else None)
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=sha)] if sha else []
    if md5:
        hashes.append(HashType(alg=HashAlgorithm.MD5, content=md5))
    purl = _purl(pkg, locked)
    props = [Property(name="samebits:manager", value=pkg["manager"]),
             Property(name="samebits:record", value=pkg.get("record") or ""),
             Property(name="samebits:locked", value="yes" if same else "no")]
    if pkg.get("tags"):
        props.append(Property(name="samebits:wheel-tags", value=" ".join(pkg["tags"])))
    refs = [ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(locked.url))
            ] if same and locked else []
    return Component(type=ComponentType.LIBRARY, name=pkg["name"], version=pkg["version"],
                     bom_ref=purl.to_string(), purl=purl, hashes=hashes,
                     external_references=refs, properties=props)


def render_sbom(*, name: str, env_report: Mapping[str, Any], locked: Sequence[LockedPackage],
                lock_sha256: str, platform: str, timestamp: datetime | None = None) -> bytes:
    """The SBOM of the environment ``env_report`` describes, as canonical JSON bytes."""
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6

    by_key = {(p.manager, _canonical(p.manager, p.name)): p for p in locked}
    bom = Bom(serial_number=uuid.UUID(int=0))
    # None: no timestamp at all (cyclonedx types the setter as datetime, accepts None)
    bom.metadata.timestamp = timestamp  # type: ignore[assignment]
    digests = env_report.get("digests") or {}
    bom.metadata.component = Component(
        type=ComponentType.APPLICATION, name=name, bom_ref="environment",
        description=f"the environment at {env_report.get('prefix')} as `samebits verify env` "
        "read it",
        properties=[
            Property(name="samebits:environment-digest", value=digests.get("environment", "")),
            Property(name="samebits:packages-digest", value=digests.get("packages", "")),
            Property(name="samebits:lockfile-sha256", value=lock_sha256),
            Property(name="samebits:platform", value=platform),
            Property(name="samebits:verify-env",
                     value="identical" if env_report.get("identical") else "drift"),
        ])
    bom.metadata.tools.components.add(Component(type=ComponentType.APPLICATION,
                                                name="samebits", version=__version__,
                                                bom_ref="samebits"))
    comps: dict[tuple[str, str], Any] = {}
    lock_of: dict[tuple[str, str], LockedPackage] = {}
    for pkg in env_report.get("packages") or []:
        key = (pkg["manager"], _canonical(pkg["manager"], pkg["name"]))
        comp = component_of(pkg, by_key.get(key))
        if key not in comps:
            comps[key] = comp
            if key in by_key:
                lock_of[key] = by_key[key]
            bom.components.add(comp)
    # The dependency graph: the environment needs every package; each package what its lock
    # entry depends on, among the installed ones.
    bom.register_dependency(bom.metadata.component, comps.values())
    for key, comp in comps.items():
        lp = lock_of.get(key)
        deps = [comps[(key[0], _canonical(key[0], d))] for d, _ in (lp.dependencies if lp else ())
                if (key[0], _canonical(key[0], d)) in comps]
        if deps:
            bom.register_dependency(comp, deps)
    doc = json.loads(JsonV1Dot6(bom).output_as_string())
    doc.pop("serialNumber", None)
    serial = uuid.uuid5(SERIAL_NAMESPACE, sha256_hex(compact_json(doc)))
    doc["serialNumber"] = serial.urn
    return canonical_json(doc)


def sbom_timestamp(lock_meta: str | None, environ: Mapping[str, str]) -> datetime | None:
    """The lock's ``exclude-newer`` (the instant its view of the indexes is pinned to), else
    ``SOURCE_DATE_EPOCH``, else none (the SBOM then has no timestamp)."""
    from datetime import timezone

    if lock_meta:
        try:
            return datetime.fromisoformat(lock_meta.replace("Z", "+00:00"))
        except ValueError:
            pass
    epoch = environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return None

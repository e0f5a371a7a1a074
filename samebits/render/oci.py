"""OCI image layout: the base image read and checked by digest; config, manifest, index built.

A base is named ``oci:PATH@sha256:HEX``: a local OCI image layout (``skopeo copy
docker://python:3.12-slim@sha256:... oci:PATH`` makes one) and the digest of the manifest (or of
a multi-platform index, from which the target platform's manifest is taken). Every blob read
from it is hashed again; a digest that is not in the layout, or a blob whose bytes do not hash to
its name, is refused before anything is written.

The image JSON is built here, purely: config (the base's, with ``PATH`` led by the prefix's bin,
``NVIDIA_VISIBLE_DEVICES=all`` and ``NVIDIA_DRIVER_CAPABILITIES=compute,utility`` for GPU locks,
labels, history, rootfs diff_ids), manifest (with the org.opencontainers.image.* annotations,
the lock's sha256 and the environment digest), index. Every blob is canonical JSON: sorted keys,
no whitespace, so equal inputs give equal digests.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samebits._io import compact_json, sha256_file
from samebits.errors import InputError, UsageError

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
# Docker media types a base layout copied from a registry may use, and their OCI twins.
DOCKER_TO_OCI = {
    "application/vnd.docker.distribution.manifest.list.v2+json": MEDIA_INDEX,
    "application/vnd.docker.distribution.manifest.v2+json": MEDIA_MANIFEST,
    "application/vnd.docker.container.image.v1+json": MEDIA_CONFIG,
    "application/vnd.docker.image.rootfs.diff.tar.gzip": MEDIA_LAYER_GZIP,
}
IMAGE_FORMAT = "1"  # bump when the same inputs give a different image
ARCH = {"linux-64": ("amd64", None), "linux-aarch64": ("arm64", "v8")}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GPU_ENV = {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
_REF = re.compile(r"^oci:(?P<path>.+)@(?P<digest>sha256:[0-9a-f]{64})$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    platform: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest,
                               "size": self.size}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.platform:
            out["platform"] = dict(self.platform)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseRef:
    text: str
    layout: Path
    digest: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseImage:
    ref: BaseRef
    manifest_digest: str
    config: Mapping[str, Any]
    layers: tuple[Descriptor, ...]
    name: str | None


def parse_base_ref(text: str) -> BaseRef:
    m = _REF.match(text.strip())
    if not m:
        raise UsageError(f'--base "{text}": expected oci:PATH@sha256:<64 hex digits>',
                         hint="make a layout with `skopeo copy docker://IMAGE@sha256:... "
                         "oci:PATH` and name it by its manifest digest")
    return BaseRef(text=text, layout=Path(m["path"]), digest=m["digest"])


def platform_json(platform: str) -> dict[str, str]:
    arch, variant = ARCH[platform]
    return {"architecture": arch, "os": "linux", **({"variant": variant} if variant else {})}


def _blob_path(layout: Path, digest: str) -> Path:
    algo, _, hexd = digest.partition(":")
    return layout / "blobs" / algo / hexd


def read_blob(layout: Path, digest: str, *, what: str) -> bytes:
    """A blob's bytes, refused unless they hash to ``digest``."""
    path = _blob_path(layout, digest)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{layout}: no blob {digest} ({what})") from None
    check_digest(data, digest, layout=layout, what=what)
    return data


def check_digest(data: bytes, digest: str, *, layout: Path, what: str) -> None:
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != digest:
        raise InputError(f"{layout}: blob {digest} ({what}) holds bytes with digest {got}",
                         hint="the layout was changed after it was pinned; copy the base again")


def file_digest(path: Path) -> str:
    return f"sha256:{sha256_file(path)}"


def _platform_matches(desc: Mapping[str, Any], platform: str) -> bool:
    want = platform_json(platform)
    got = desc.get("platform") or {}
    return got.get("os") == "linux" and got.get("architecture") == want["architecture"]


def read_base(ref: BaseRef, platform: str) -> BaseImage:
    """Read and check the base named by ``ref`` for ``platform`` (every blob re-hashed)."""
    layout = ref.layout
    if not (layout / "oci-layout").is_file() or not (layout / "index.json").is_file():
        raise InputError(f"{layout}: not an OCI image layout (no oci-layout / index.json)")
    try:
        index = json.loads((layout / "index.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{layout}/index.json: unreadable: {exc}") from None
    named = [m.get("digest") for m in index.get("manifests", [])]
    if not _blob_path(layout, ref.digest).exists():
        raise InputError(f"{layout}: the base is pinned to {ref.digest}, which this layout does "
                         f"not hold (its index names {', '.join(map(str, named)) or 'nothing'})",
                         hint="pin the digest the layout really has, or copy the pinned image")
    doc = json.loads(read_blob(layout, ref.digest, what="the pinned manifest"))
    kind = DOCKER_TO_OCI.get(doc.get("mediaType", ""), doc.get("mediaType", MEDIA_MANIFEST))
    manifest_digest = ref.digest
    if kind == MEDIA_INDEX or "manifests" in doc:
        match = [m for m in doc.get("manifests", []) if _platform_matches(m, platform)]
        if not match:
            have = ", ".join(f"{(m.get('platform') or {}).get('architecture')}"
                             for m in doc.get("manifests", []))
            raise InputError(f"{ref.text}: no manifest for {platform} in the pinned index "
                             f"(it has {have or 'none'})")
        manifest_digest = match[0]["digest"]
        doc = json.loads(read_blob(layout, manifest_digest, what=f"the {platform} manifest"))
    config_desc = doc.get("config") or {}
    config = json.loads(read_blob(layout, config_desc.get("digest", ""), what="the config"))
    arch = ARCH[platform][0]
    if config.get("architecture") != arch or config.get("os", "linux") != "linux":
        raise InputError(f"{ref.text}: the base is {config.get('os')}/"
                         f"{config.get('architecture')}, not linux/{arch} ({platform})")
    layers = []
    for i, layer in enumerate(doc.get("layers", [])):
        digest = layer.get("digest", "")
        path = _blob_path(layout, digest)
        if not path.is_file():
            raise InputError(f"{layout}: no blob {digest} (base layer {i})")
        got = file_digest(path)
        if got != digest:
            raise InputError(f"{layout}: blob {digest} (base layer {i}) holds bytes with digest "
                             f"{got}", hint="the layout was changed after it was pinned; copy "
                             "the base again")
        media = DOCKER_TO_OCI.get(layer.get("mediaType", ""), layer.get("mediaType", ""))
        layers.append(Descriptor(media_type=media, digest=digest, size=int(layer.get("size", 0))))
    name = next((m.get("annotations", {}).get("org.opencontainers.image.ref.name")
                 for m in index.get("manifests", []) if m.get("digest") == ref.digest), None)
    return BaseImage(ref=ref, manifest_digest=manifest_digest, config=config,
                     layers=tuple(layers), name=name)


def created_text(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def merged_env(base_env: Sequence[str], *, prefix: str, gpu: bool) -> list[str]:
    """The base's environment with PATH led by ``prefix``/bin and, for GPU images, NVIDIA's."""
    env = {k: v for k, _, v in (item.partition("=") for item in base_env)}
    path = env.get("PATH", DEFAULT_PATH)
    parts = [p for p in path.split(":") if p and p != f"{prefix}/bin"]
    env["PATH"] = ":".join([f"{prefix}/bin", *parts])
    if gpu:
        env.update(GPU_ENV)
    return [f"{k}={v}" for k, v in sorted(env.items())]


def image_config(*, base: Mapping[str, Any] | None, platform: str, prefix: str, gpu: bool,
                 diff_ids: Sequence[str], history: Sequence[str], created: str,
                 labels: Mapping[str, str]) -> dict[str, Any]:
    """The image config: the base's, extended by our layers; pure."""
    base = dict(base or {})
    config = dict(base.get("config") or {})
    config["Env"] = merged_env(config.get("Env") or [], prefix=prefix, gpu=gpu)
    config["Labels"] = {**(config.get("Labels") or {}), **labels}
    rootfs = base.get("rootfs") or {"type": "layers", "diff_ids": []}
    hist = list(base.get("history") or [])
    hist += [{"created": created, "created_by": text, "comment": "samebits render oci"}
             for text in history]
    out = {**{k: v for k, v in base.items() if k not in ("config", "rootfs", "history")},
           **platform_json(platform),
           "created": created,
           "config": config,
           "rootfs": {"type": "layers", "diff_ids": [*rootfs.get("diff_ids", []), *diff_ids]},
           "history": hist}
    out.pop("container_config", None)  # Docker's leftovers describe the base's last build step
    out.pop("container", None)
    return out


def manifest_json(config: Descriptor, layers: Sequence[Descriptor],
                  annotations: Mapping[str, str]) -> dict[str, Any]:
    return {"schemaVersion": 2, "mediaType": MEDIA_MANIFEST, "config": config.to_json(),
            "layers": [d.to_json() for d in layers], "annotations": dict(annotations)}


def index_json(manifest: Descriptor) -> dict[str, Any]:
    return {"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [manifest.to_json()]}


OCI_LAYOUT = compact_json({"imageLayoutVersion": "1.0.0"})


def blob(obj: Mapping[str, Any], media_type: str, **kw: Any) -> tuple[bytes, Descriptor]:
    """Canonical JSON bytes of ``obj`` and their descriptor."""
    data = compact_json(obj)
    return data, Descriptor(media_type=media_type, size=len(data),
                            digest="sha256:" + hashlib.sha256(data).hexdigest(), **kw)

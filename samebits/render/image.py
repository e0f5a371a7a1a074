"""``samebits render oci``: lock -> installed prefix -> verified -> layers -> OCI image layout.

    base     read and re-hash the pinned base layout (refused before anything is built)
    install  the lock's platform into a scratch prefix whose files name the final path
    verify   ``python -m verify env`` on that prefix; anything but "ok" stops the build
    layers   the prefix split by package group, each a deterministic tar, gzip (or zstd) on
             every core
    layout   base blobs copied (re-hashed), layers, config, manifest, index, oci-layout

Everything is written into a staging folder that ``samebits.staging`` renames into place,
so the output is the whole image or nothing. The image is a function of the lock, the base, the
prefix path, SOURCE_DATE_EPOCH, the compression and its library (zlib's deflate, libzstd): not
of the folder, umask, clock, time zone, core count or file times of the machine that builds it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samebits._io import compact_json
from samebits.errors import InputError, ToolError
from samebits.install import install_prefix
from samebits.install.sources import NO_SOURCES, Sources
from samebits.lock.read import LockedEnv
from samebits.render.compression import Name, compress_layer, compression
from samebits.render.layers import assign_layers, read_owners
from samebits.render.oci import (
    MEDIA_CONFIG,
    MEDIA_MANIFEST,
    OCI_LAYOUT,
    BaseImage,
    BaseRef,
    Descriptor,
    blob,
    created_text,
    image_config,
    index_json,
    manifest_json,
    platform_json,
    read_base,
)
from samebits.render.tarball import Entry, LayerDigests, scan_prefix, tar_chunks, tar_pieces

Verifier = Callable[[Path, Path, str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageRequest:
    env: LockedEnv
    platform: str
    prefix: str
    base: BaseRef | None
    interpreter: str | None
    cache: Path
    epoch: int
    tag: str
    compression: Name = "gzip"
    # where else a locked archive may be read from (the project's own folders and file://
    # channels, SAMEBITS_FIND_LINKS): the install's file:// rule (``samebits.install.fetch``)
    sources: Sources = NO_SOURCES


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageResult:
    manifest_digest: str
    config_digest: str
    tag: str
    env_digest: str
    base_digest: str | None
    layers: tuple[Mapping[str, Any], ...]
    verify: Mapping[str, Any]
    compression: Name = "gzip"
    interpreter: str | None = None   # the image's interpreter, when no layer provides it
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        how = compression(self.compression)
        return {"manifest_digest": self.manifest_digest, "config_digest": self.config_digest,
                "tag": self.tag, "env_digest": self.env_digest, "base_digest": self.base_digest,
                "layers": [dict(x) for x in self.layers], "compression": how.name,
                how.name: how.params, "interpreter_missing": self.interpreter,
                "warnings": list(self.warnings)}


def outside_interpreter(prefix_dir: Path, final: str) -> str | None:
    """The interpreter a venv prefix runs on when it lives outside the prefix (the absolute
    target of ``bin/python``, as it will be inside the image), else None: a conda prefix, or
    a venv whose interpreter was copied in."""
    cfg = prefix_dir / "pyvenv.cfg"
    if not cfg.is_file():
        return None
    link = prefix_dir / "bin" / "python"
    target = os.readlink(link) if link.is_symlink() else None
    if target is None:
        return None
    if not os.path.isabs(target):
        target = os.path.normpath(os.path.join(final, "bin", target))
    return None if target.startswith(final.rstrip("/") + "/") else target


def _layers_provide(base: BaseImage, path: str) -> bool:
    """Whether a base layer holds ``path`` (a file or a link; whiteouts are not followed)."""
    import tarfile

    want = path.strip("/")
    for d in base.layers:
        blob_path = base.ref.layout / "blobs" / d.digest.replace(":", "/", 1)
        try:
            with tarfile.open(blob_path, "r:*") as tar:
                if any(m.name.lstrip("./") == want for m in tar):
                    return True
        except (OSError, tarfile.TarError):
            continue
    return False


def _copy_blob(src_layout: Path, digest: str, dest_layout: Path, what: str) -> None:
    """Copy one base blob, re-hashing it on the way; a mismatch is refused."""
    algo, _, hexd = digest.partition(":")
    src = src_layout / "blobs" / algo / hexd
    dest = dest_layout / "blobs" / algo / hexd
    sha = hashlib.sha256()
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        while chunk := fin.read(1 << 20):
            sha.update(chunk)
            fout.write(chunk)
    if f"sha256:{sha.hexdigest()}" != digest:
        raise InputError(f"{src_layout}: blob {digest} ({what}) holds bytes with digest "
                         f"sha256:{sha.hexdigest()}",
                         hint="the layout was changed after it was pinned; copy the base again")


def _write_blob(layout: Path, data: bytes, digest: str) -> None:
    path = layout / "blobs" / "sha256" / digest.split(":", 1)[1]
    path.write_bytes(data)


def _env_digest(report: Mapping[str, Any]) -> str:
    """verify env's digest of the prefix's files (``files_digest``, sha256 hex): for a conda
    prefix its environment digest; for a venv that digest without the interpreter it runs on,
    which belongs to the host that built the image, not to the image."""
    value = report.get("files_digest")
    if isinstance(value, str) and value:
        return value
    raise ToolError("verify env reported no digest of the prefix's files (files_digest)")


def write_layer_blob(layout: Path, prefix_dir: Path, entries: tuple[Entry, ...], *, root: str,
                     epoch: int, pool: ThreadPoolExecutor, compression: Name = "gzip",
                     workers: int | None = None) -> LayerDigests:
    """One layer (tar of ``entries`` under ``root``; gzip blocks on ``pool``, or zstd with
    ``workers`` threads, default one per core) as a blob of ``layout``."""
    blobs = layout / "blobs" / "sha256"
    fd, tmp = tempfile.mkstemp(prefix=".layer.", dir=blobs)
    try:
        with os.fdopen(fd, "wb") as out:
            # gzip needs content-defined blocks; zstd takes the stream as it comes
            cut = tar_chunks if compression == "gzip" else tar_pieces
            digests = compress_layer(compression,
                                     cut(prefix_dir, entries, root=root, mtime=epoch),
                                     out, pool=pool, workers=workers or os.cpu_count() or 2)
        os.replace(tmp, blobs / digests.digest.split(":", 1)[1])
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return digests


def image_annotations(req: ImageRequest, *, env_digest: str, base: BaseImage | None,
                created: str) -> dict[str, str]:
    env = req.env
    out = {
        "org.opencontainers.image.title": env.name,
        "org.opencontainers.image.description":
            f"samebits environment {env.name} ({req.platform}) at {req.prefix}",
        "org.opencontainers.image.created": created,
        "io.samebits.image-format": "1",
        "io.samebits.environment": env.name,
        "io.samebits.platform": req.platform,
        "io.samebits.prefix": req.prefix,
        "io.samebits.lockfile": env.origin,
        "io.samebits.lock.sha256": env.digest,
        "io.samebits.env.digest": env_digest,
    }
    how = compression(req.compression)
    out[how.annotation] = how.params
    if base is not None:
        out["org.opencontainers.image.base.digest"] = base.manifest_digest
        if base.name:
            out["org.opencontainers.image.base.name"] = base.name
    return out


def build_image(req: ImageRequest, layout: Path, *, work: Path,
                verify: Verifier, workers: int | None = None,
                progress: Callable[[str], None] = lambda _: None) -> ImageResult:
    """Build the image for ``req`` into the empty folder ``layout``; ``verify(prefix, lockfile,
    platform)`` is verify env's report on the scratch prefix (the composition's
    ``samebits_app.verifyrun.run_verify_env``: the core does not run verify)."""
    env = req.env
    env.check_platform(req.platform)
    base = read_base(req.base, req.platform) if req.base else None
    created = created_text(req.epoch)
    with tempfile.TemporaryDirectory(prefix=".samebits-prefix.", dir=work) as tmp:
        prefix_dir = Path(tmp) / "prefix"
        progress(f"{env.name}: installing {req.platform} into a scratch prefix")
        report = install_prefix(env, req.platform, prefix_dir, final=req.prefix,
                                cache=req.cache, interpreter=req.interpreter,
                                sources=req.sources)
        progress(f"{env.name}: verify env on the scratch prefix")
        verdict = dict(verify(prefix_dir, env.path, req.platform))
        if verdict.get("ok") is not True:
            raise ToolError(f"the prefix built for {env.name} ({req.platform}) does not verify "
                            "against its lock; no image was written",
                            hint=f"run `samebits install {env.name} --target DIR` and "
                            "`python -m verify env` on it to see the drift")
        env_digest = _env_digest(verdict)
        missing = outside_interpreter(prefix_dir, req.prefix)
        if missing is not None and base is not None and _layers_provide(base, missing):
            missing = None
        entries = scan_prefix(prefix_dir, links_out=report.links_out)
        layers = assign_layers(entries, read_owners(prefix_dir))
        (layout / "blobs" / "sha256").mkdir(parents=True)
        if base is not None:
            for i, d in enumerate(base.layers):
                _copy_blob(base.ref.layout, d.digest, layout, f"base layer {i}")
        descs: list[Descriptor] = []
        diff_ids: list[str] = []
        summary: list[dict[str, Any]] = []
        root = req.prefix.strip("/")
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2) as pool:
            for layer in layers:
                progress(f"{env.name}: layer {layer.name} ({layer.size:,} bytes)")
                digests = write_layer_blob(layout, prefix_dir, layer.entries, root=root,
                                           epoch=req.epoch, pool=pool,
                                           compression=req.compression, workers=workers)
                descs.append(Descriptor(media_type=compression(req.compression).media_type,
                                        digest=digests.digest,
                                        size=digests.size,
                                        annotations={"io.samebits.layer": layer.name}))
                diff_ids.append(digests.diff_id)
                summary.append({"name": layer.name, "digest": digests.digest,
                                "diff_id": digests.diff_id, "size": digests.size,
                                "files": sum(e.kind != "dir" for e in layer.entries),
                                "bytes": layer.size, "packages": list(layer.packages)})
    notes = image_annotations(req, env_digest=env_digest, base=base, created=created)
    warnings: tuple[str, ...] = ()
    if missing is not None:
        notes["io.samebits.interpreter"] = f"missing: {missing}"
        warnings = (f"the image cannot run its Python: {req.prefix}/bin/python points at "
                    f"{missing}, which {'no layer of the base' if base else 'no layer'} "
                    "provides (pass --base an image that has it)",)
    history = [f"samebits render oci: {s['name']} layer ({len(s['packages'])} packages)"
               for s in summary]
    config = image_config(base=base.config if base else None, platform=req.platform,
                          prefix=req.prefix, gpu=bool(env.cuda), diff_ids=diff_ids,
                          history=history, created=created, labels=notes)
    config_bytes, config_desc = blob(config, MEDIA_CONFIG)
    _write_blob(layout, config_bytes, config_desc.digest)
    base_layers = list(base.layers) if base else []
    manifest = manifest_json(config_desc, [*base_layers, *descs], notes)
    manifest_bytes, manifest_desc = blob(manifest, MEDIA_MANIFEST,
                                         platform=platform_json(req.platform),
                                         annotations={"org.opencontainers.image.ref.name":
                                                      req.tag})
    _write_blob(layout, manifest_bytes, manifest_desc.digest)
    (layout / "index.json").write_bytes(compact_json(index_json(manifest_desc)))
    (layout / "oci-layout").write_bytes(OCI_LAYOUT)
    return ImageResult(manifest_digest=manifest_desc.digest, config_digest=config_desc.digest,
                       tag=req.tag, env_digest=env_digest,
                       base_digest=base.manifest_digest if base else None,
                       layers=tuple(summary), verify=verdict, compression=req.compression,
                       interpreter=missing, warnings=warnings)

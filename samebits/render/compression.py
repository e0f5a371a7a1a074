"""How a layer's tar is compressed: gzip (the default, every runtime reads it) or zstd.

zstd (``zstd_layer``): one zstd frame written by libzstd's multi-threaded compressor (python-
zstandard), level 3, with a content checksum and no content size. libzstd's multi-threaded
output is a function of the input, the level and the library: the same for any number of
worker threads >= 1 and for any way the input is cut into writes, so a 2-core and a 64-core
machine write the same bytes (single-threaded mode, workers = 0, would not: it is never used).
The bytes can change with the zstd library's version, so it is recorded beside the digests
(``Compression.params``), as zlib's is for gzip.

Which runtimes read ``application/vnd.oci.image.layer.v1.tar+zstd``: see docs/how-to/render-oci.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import IO, BinaryIO, Literal, cast

from samebits.render.tarball import GZIP_PARAMS, LayerDigests, gzip_layer

Name = Literal["gzip", "zstd"]
NAMES: tuple[Name, ...] = ("gzip", "zstd")
MEDIA = {"gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
         "zstd": "application/vnd.oci.image.layer.v1.tar+zstd"}
ZSTD_LEVEL = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Compression:
    name: Name
    media_type: str
    params: str  # what the bytes depend on, for the manifest annotation io.samebits.<name>

    @property
    def annotation(self) -> str:
        return f"io.samebits.{self.name}"


def compression(name: Name) -> Compression:
    if name == "gzip":
        return Compression(name="gzip", media_type=MEDIA["gzip"], params=GZIP_PARAMS)
    return Compression(name="zstd", media_type=MEDIA["zstd"], params=zstd_params())


def zstd_params(level: int = ZSTD_LEVEL) -> str:
    import zstandard

    lib = ".".join(map(str, zstandard.ZSTD_VERSION))
    return (f"zstd {lib} (python-zstandard {zstandard.__version__}), level {level}, "
            "multi-threaded frame, content checksum, no content size")


class _Hashing:
    """A write-only file that hashes and counts what passes through to ``out``."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def zstd_layer(chunks: Iterable[bytes], out: BinaryIO, *, threads: int,
               level: int = ZSTD_LEVEL) -> LayerDigests:
    """Compress ``chunks`` into ``out`` with ``threads`` zstd workers; both streams' digests."""
    import zstandard

    params = zstandard.ZstdCompressionParameters.from_level(
        level, threads=max(1, threads), write_checksum=True, write_content_size=False,
        write_dict_id=False)
    sink = _Hashing(out)
    raw_sha = hashlib.sha256()
    raw_size = 0
    writer = zstandard.ZstdCompressor(compression_params=params).stream_writer(
        cast(IO[bytes], sink), closefd=False, write_return_read=True)
    with writer:
        for chunk in chunks:
            raw_sha.update(chunk)
            raw_size += len(chunk)
            writer.write(chunk)
    return LayerDigests(digest=f"sha256:{sink.sha.hexdigest()}",
                        diff_id=f"sha256:{raw_sha.hexdigest()}", size=sink.size,
                        tar_size=raw_size)


def compress_layer(name: Name, chunks: Iterable[bytes], out: BinaryIO, *, pool: Executor,
                   workers: int) -> LayerDigests:
    """``chunks`` compressed the ``name`` way: gzip blocks on ``pool``, or zstd workers."""
    if name == "zstd":
        return zstd_layer(chunks, out, threads=workers)
    return gzip_layer(chunks, out, pool=pool)

"""A wheel's core metadata (``*.dist-info/METADATA``) read over HTTP range requests.

What uv and pip do for an index that publishes no PEP 658 ``.metadata`` file: read the zip's
end (the central directory) and then the one member, a few small requests instead of the whole
wheel. A server that ignores ``Range`` sends the whole file; that works too, once.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Mapping

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from samebits import net

TAIL = 64 * 1024  # the first read: the end of central directory and, mostly, the directory
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


class BadWheel(ValueError):
    """A wheel whose metadata cannot be read (not a zip, no METADATA, an odd server)."""


class RangeReader(io.RawIOBase):
    """A read-only, seekable file over HTTP ``Range`` requests (what ``zipfile`` needs)."""

    def __init__(self, url: str, *, timeout: float, headers: Mapping[str, str]) -> None:
        super().__init__()
        self.url = url
        self.timeout = timeout
        self.headers = dict(headers)
        self.requests = 0
        self._pos = 0
        self._segments: list[tuple[int, bytes]] = []
        status, data, content_range = self._get(f"bytes=-{TAIL}")
        if status == 200:  # no range support: the whole file
            self.size = len(data)
            self._segments.append((0, data))
        else:
            m = _CONTENT_RANGE.fullmatch(content_range or "")
            if not m:
                raise BadWheel(f"{url}: answered 206 without a usable Content-Range")
            self.size = int(m[3])
            self._segments.append((int(m[1]), data))

    def _get(self, byte_range: str) -> tuple[int, bytes, str | None]:
        self.requests += 1
        reply = net.get(self.url, timeout=self.timeout,
                        headers={**self.headers, "Range": byte_range})
        if reply.status == 416:  # a file shorter than TAIL is answered whole on a plain GET
            reply = net.get(self.url, timeout=self.timeout, headers=self.headers)
            if reply.status == 200:
                return 200, reply.body, None
        if reply.status not in (200, 206):
            raise BadWheel(f"{net.public_url(self.url)}: HTTP {reply.status}")
        return reply.status, reply.body, reply.headers.get("Content-Range")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        want = min(len(buffer), max(0, self.size - self._pos))
        if want == 0:
            return 0
        data = self._slice(self._pos, want)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def _slice(self, start: int, length: int) -> bytes:
        for seg_start, seg in self._segments:
            if seg_start <= start and start + length <= seg_start + len(seg):
                return seg[start - seg_start: start - seg_start + length]
        end = min(self.size, start + max(length, TAIL)) - 1
        status, data, _ = self._get(f"bytes={start}-{end}")
        if status == 200:
            self._segments.append((0, data))
            return data[start: start + length]
        self._segments.append((start, data))
        return data[:length]


def metadata_member(names: list[str], filename: str) -> str:
    """The ``<name>-<version>.dist-info/METADATA`` member of the wheel ``filename``."""
    found = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(found) == 1:
        return found[0]
    try:
        name, version, _, _ = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise BadWheel(f"{filename}: {exc}") from None
    for n in found:
        stem = n.split("/", 1)[0].removesuffix(".dist-info")
        dist, _, ver = stem.rpartition("-")
        if canonicalize_name(dist) == name and ver == str(version):
            return n
    raise BadWheel(f"{filename}: {len(found)} *.dist-info/METADATA members, none for "
                   f"{name} {version}")


def wheel_metadata(url: str, filename: str, *, timeout: float,
                   headers: Mapping[str, str]) -> bytes:
    """The METADATA file of the wheel at ``url``; BadWheel or OSError on failure."""
    reader = RangeReader(url, timeout=timeout, headers=headers)
    try:
        with zipfile.ZipFile(io.BufferedReader(reader, buffer_size=TAIL)) as zf:
            return zf.read(metadata_member(zf.namelist(), filename))
    except (zipfile.BadZipFile, KeyError, EOFError) as exc:
        raise BadWheel(f"{filename}: not a readable wheel: {exc}") from None

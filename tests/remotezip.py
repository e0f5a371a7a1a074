"""Reading one small member of a wheel on PyPI with HTTP range requests (the central directory,
then the member), for network tests that need a header, not a 600 MB wheel. zipfile checks the
member's CRC-32; the archive's own sha256 cannot be checked without all of it, so tests that
need the whole archive use ``samebits.install.fetch_all`` instead."""

from __future__ import annotations

import io
import urllib.request
import zipfile


class RangeFile(io.RawIOBase):
    """A seekable, read-only file over an HTTP(S) URL that answers Range requests."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.pos = 0
        req = urllib.request.Request(url, method="HEAD")
        with urllib.request.urlopen(req, timeout=60) as resp:
            self.size = int(resp.headers["Content-Length"])

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
        if self.pos >= self.size or not len(buf):
            return 0
        end = min(self.size, self.pos + len(buf)) - 1
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            data = resp.read()
        buf[:len(data)] = data
        self.pos += len(data)
        return len(data)


def read_member(url: str, name: str) -> bytes:
    """The bytes of member ``name`` of the zip at ``url``."""
    raw = io.BufferedReader(RangeFile(url), buffer_size=1 << 16)
    with zipfile.ZipFile(raw) as z:
        return z.read(name)

"""Hostile archives: refused by the installer before anything is written."""

from __future__ import annotations

import bz2
import hashlib
import io
import os
import struct
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from samebits.archives import MAX_MEMBER_BYTES
from samebits.errors import InputError
from samebits.install import fetch_all
from samebits.install.sources import Sources
from samebits.lock.model import LockedPackage


def conda_archive(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("info/index.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
        tar.addfile(member, io.BytesIO(data) if data else None)
    return bz2.compress(buf.getvalue())


def special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info


def huge(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = MAX_MEMBER_BYTES + 1   # the header claims it; no data follows
    return info


def zip_bomb() -> bytes:
    """A wheel whose central directory claims a member inflates to ~4 GB from a few bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb/__init__.py", b"\0" * 10)
    data = bytearray(buf.getvalue())
    at = data.rfind(b"PK\x01\x02")          # the member's central directory header
    data[at + 24:at + 28] = struct.pack("<I", 0xFFFFFFFE)
    return bytes(data)


CASES = {
    "character device": ("dev-1-0.tar.bz2", conda_archive(special("lib/null", tarfile.CHRTYPE)),
                         "lib/null: device, fifo or other special file"),
    "block device": ("dev-1-0.tar.bz2", conda_archive(special("lib/sda", tarfile.BLKTYPE)),
                     "lib/sda: device, fifo or other special file"),
    "fifo": ("dev-1-0.tar.bz2", conda_archive(special("lib/pipe", tarfile.FIFOTYPE)),
             "lib/pipe: device, fifo or other special file"),
    "absurd declared size": ("big-1-0.tar.bz2", conda_archive(huge("lib/libhuge.so")),
                             f"lib/libhuge.so: declared size {MAX_MEMBER_BYTES + 1} bytes is "
                             f"absurd (limit {MAX_MEMBER_BYTES})"),
    "zip bomb": ("bomb-1.0-py3-none-any.whl", zip_bomb(),
                 "bomb/__init__.py: inflates"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_archive_refused_before_writing(case: str, tmp_path: Path) -> None:
    """Device files, absurd sizes and zip bombs are named before anything is installed."""
    filename, data, expected = CASES[case]
    src = tmp_path / "src" / filename
    src.parent.mkdir()
    src.write_bytes(data)
    pkg = LockedPackage(name="bad", version="1", platform="linux-64",
                        manager="pip" if filename.endswith(".whl") else "conda",
                        url=src.as_uri(), sha256=hashlib.sha256(data).hexdigest(),
                        md5=hashlib.md5(data).hexdigest())
    cache = tmp_path / "cache"
    with pytest.raises(InputError) as err:
        fetch_all([pkg], cache, sources=Sources(file_roots=(tmp_path,)))
    assert f"linux-64: bad 1: {filename}: {expected}" in err.value.message


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_archive_never_reaches_the_cache_or_a_prefix(case: str, tmp_path: Path) -> None:
    """Through `install`: the same problem is named, no cache entry is published and the
    prefix stays empty."""
    from samebits.install import install_prefix
    from samebits.install.cache import UNPACKED
    from tests.fixtures.install import write_lock

    filename, data, expected = CASES[case]
    src = tmp_path / "src" / filename
    src.parent.mkdir()
    src.write_bytes(data)
    pkg = LockedPackage(name="bad", version="1", platform="linux-64",
                        manager="pip" if filename.endswith(".whl") else "conda",
                        url=src.as_uri(), sha256=hashlib.sha256(data).hexdigest(),
                        md5=hashlib.md5(data).hexdigest(),
                        build=None if filename.endswith(".whl") else "0")
    env = write_lock(tmp_path / "h.conda-lock.yml", [pkg], python="3.12")
    cache, prefix = tmp_path / "cache", tmp_path / "env"
    with pytest.raises(InputError) as err:
        install_prefix(env, "linux-64", prefix, final=str(prefix), cache=cache,
                       interpreter=sys.executable)
    assert f"linux-64: bad 1: {filename}: {expected}" in err.value.message
    assert err.value.hint.startswith("nothing was installed")
    assert not prefix.exists() or not any(prefix.iterdir())
    assert not (cache / UNPACKED).exists() or os.listdir(cache / UNPACKED) == []

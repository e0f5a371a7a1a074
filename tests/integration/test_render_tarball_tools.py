"""The layers samebits compresses, read by the reference tools: gzip -t and the zstd CLI decode
what gzip_layer and zstd_layer write, multi-threaded (the in-process rules:
tests/unit/test_render_tarball.py)."""

from __future__ import annotations

import io
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from samebits.render.compression import zstd_layer
from samebits.render.tarball import gzip_layer


def _data(n: int) -> bytes:
    rnd = random.Random(7)
    return b"".join(rnd.choice([b"torch ", b"cuda ", bytes([rnd.randrange(256)])])
                    for _ in range(n))


def test_gzip_reads_the_parallel_gzip() -> None:
    """Four threads' gzip member: gzip -t finds it valid and gzip -dc gives the input back."""
    data = _data(400_000)
    out = io.BytesIO()
    with ThreadPoolExecutor(4) as pool:
        gzip_layer([data[i:i + 65536] for i in range(0, len(data), 65536)], out, pool=pool)
    assert subprocess.run(["gzip", "-t"], input=out.getvalue(), timeout=120).returncode == 0
    res = subprocess.run(["gzip", "-dc"], input=out.getvalue(), capture_output=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == data


@pytest.mark.requires("zstd")
def test_zstd_cli_reads_the_multithreaded_frame() -> None:
    """libzstd's multi-threaded frame, decoded by the reference CLI: the input back."""
    data = _data(3_000_000)
    out = io.BytesIO()
    zstd_layer([data[i:i + 12345] for i in range(0, len(data), 12345)], out, threads=3)
    res = subprocess.run(["zstd", "-d", "-c"], input=out.getvalue(), capture_output=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == data

"""Deterministic tar + parallel gzip or zstd, archive path rules, layer assignment: the pure
parts."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import random
import tarfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samebits.archives import link_problem, path_problem
from samebits.errors import InputError
from samebits.render.compression import compression, zstd_layer
from samebits.render.layers import assign_layers, group_of
from samebits.render.tarball import (
    Entry,
    LayerDigests,
    gzip_layer,
    normalised_mode,
    scan_prefix,
    source_date_epoch,
    tar_chunks,
    tar_header,
)


@pytest.mark.parametrize(("name", "expected"), [
    ("lib/libfoo.so", None),
    ("./lib/x", None),
    ("/etc/passwd", "absolute path"),
    ("C:/x", "absolute path"),
    ("../x", "'..' in path"),
    ("lib/../../x", "'..' in path"),
    ("a..b/c", None),
    ("", "empty path"),
])
def test_path_problem(name: str, expected: str | None) -> None:
    """Member names that would land outside the prefix are named, and only those."""
    assert path_problem(name) == expected


@pytest.mark.parametrize(("name", "target", "expected"), [
    ("lib/libfoo.so", "libfoo.so.1", None),
    ("bin/python", "python3.12", None),
    ("lib/a/b", "../../bin/x", None),
    ("lib/a", "../../etc/passwd", "link escaping the prefix (../../etc/passwd)"),
    ("x", "/usr/bin/python3", "link to an absolute path (/usr/bin/python3)"),
    ("x", "", "link with an empty target"),
])
def test_link_problem(name: str, target: str, expected: str | None) -> None:
    """Symlinks may point anywhere inside the prefix and nowhere outside it."""
    assert link_problem(name, target) == expected


@pytest.mark.parametrize(("mode", "expected"), [
    (0o100644, 0o644), (0o100600, 0o644), (0o100700, 0o755), (0o104755, 0o755),
    (0o100777, 0o755), (0o040700, 0o755), (0o120777, 0o777),
])
def test_normalised_mode(mode: int, expected: int) -> None:
    """Modes keep only whether a file is executable: umask and setuid do not reach the image."""
    assert normalised_mode(mode) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, 0), ("", 0), ("1700000000", 1700000000), (" 5 ", 5),
])
def test_source_date_epoch(value: str | None, expected: int) -> None:
    """Every entry's mtime is SOURCE_DATE_EPOCH as a whole number, else 0."""
    assert source_date_epoch({} if value is None else {"SOURCE_DATE_EPOCH": value}) == expected


@pytest.mark.parametrize("value", ["1.5", "yesterday", "-3"])
def test_source_date_epoch_rejects(value: str) -> None:
    """A SOURCE_DATE_EPOCH that is not whole seconds is refused, naming the value."""
    with pytest.raises(InputError, match=f'SOURCE_DATE_EPOCH = "{value}": must be a whole'):
        source_date_epoch({"SOURCE_DATE_EPOCH": value})


def _gz(data: bytes, block: int, workers: int) -> tuple[bytes, object]:
    out = io.BytesIO()
    chunks = [data[i:i + block] for i in range(0, len(data), block)]
    with ThreadPoolExecutor(workers) as pool:
        digests = gzip_layer(chunks, out, pool=pool)
    return out.getvalue(), digests


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=300_000), block=st.sampled_from([1024, 4096, 65536, 1 << 20]))
def test_gzip_round_trip(data: bytes, block: int) -> None:
    """Any bytes, any block size: one valid gzip member that decompresses to the input."""
    gz, digests = _gz(data, block, 2)
    assert gzip.decompress(gz) == data
    assert digests.diff_id == "sha256:" + hashlib.sha256(data).hexdigest()
    assert digests.digest == "sha256:" + hashlib.sha256(gz).hexdigest()
    assert gz[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"


def test_gzip_same_bytes_whatever_the_threads() -> None:
    """The compressed bytes do not depend on how many threads compress them."""
    rnd = random.Random(7)
    data = b"".join(rnd.choice([b"torch ", b"cuda ", bytes([rnd.randrange(256)])])
                    for _ in range(400_000))
    one, _ = _gz(data, 65536, 1)
    four, _ = _gz(data, 65536, 4)
    assert one == four


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small prefix: folders, an executable, a hardlink pair, an internal symlink."""
    root = tmp_path / "prefix"
    (root / "lib" / "python3.12").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "tool").write_text("#!/bin/sh\n")
    os.chmod(root / "bin" / "tool", 0o700)
    (root / "lib" / "libz.so.1").write_bytes(b"z" * 3000)
    os.link(root / "lib" / "libz.so.1", root / "lib" / "libz-copy.so.1")
    os.symlink("libz.so.1", root / "lib" / "libz.so")
    (root / "lib-extra").mkdir()
    return root


def _members(prefix: Path, mtime: int = 0) -> list[tarfile.TarInfo]:
    raw = b"".join(tar_chunks(prefix, scan_prefix(prefix), root="opt/env", mtime=mtime,
                              block=1000))
    return tarfile.open(fileobj=io.BytesIO(raw)).getmembers()


def test_tar_entries(tree: Path) -> None:
    """Parents first, sorted by component; uid/gid 0; one mtime; hardlinks as regular files."""
    members = _members(tree, mtime=1234)
    assert [m.name for m in members] == [
        "opt", "opt/env", "opt/env/bin", "opt/env/bin/tool", "opt/env/lib",
        "opt/env/lib/libz-copy.so.1", "opt/env/lib/libz.so", "opt/env/lib/libz.so.1",
        "opt/env/lib/python3.12", "opt/env/lib-extra"]
    by = {m.name: m for m in members}
    assert by["opt/env/lib/libz-copy.so.1"].isfile() and by["opt/env/lib/libz-copy.so.1"].size
    assert by["opt/env/lib/libz.so"].issym() and by["opt/env/lib/libz.so"].linkname == "libz.so.1"
    assert by["opt/env/bin/tool"].mode == 0o755 and by["opt/env/lib/libz.so.1"].mode == 0o644
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 1234)}
    assert not any(m.pax_headers for m in members)


def test_tar_ignores_umask_and_times(tree: Path, tmp_path: Path) -> None:
    """The same tree with other file times and permissions gives the same tar bytes."""
    first = b"".join(tar_chunks(tree, scan_prefix(tree), root="opt/env", mtime=0))
    for path in tree.rglob("*"):
        if not path.is_symlink():
            os.utime(path, (1, 999_999))
            os.chmod(path, (path.stat().st_mode & 0o111 and 0o750) or 0o600)
    second = b"".join(tar_chunks(tree, scan_prefix(tree), root="opt/env", mtime=0))
    assert first == second


def test_scan_prefix_lists_every_escape(tree: Path) -> None:
    """Links out of the prefix and special files are all listed; nothing is tarred."""
    os.symlink("../../etc/passwd", tree / "lib" / "evil")
    os.symlink("/usr/lib/libcuda.so.1", tree / "lib" / "abs")
    os.mkfifo(tree / "fifo")
    with pytest.raises(InputError) as err:
        scan_prefix(tree)
    msg = err.value.message
    assert msg.startswith("3 entries cannot go into an image:")
    assert "lib/evil: link escaping the prefix (../../etc/passwd)" in msg
    assert "lib/abs: link to an absolute path (/usr/lib/libcuda.so.1)" in msg
    assert "fifo: device, fifo or socket" in msg


def test_scan_prefix_allows_the_venv_interpreter(tree: Path) -> None:
    """The one link a venv has out of itself (bin/python) passes when it is declared."""
    os.symlink("/usr/local/bin/python3.12", tree / "bin" / "python")
    entries = {e.path: e for e in scan_prefix(tree, links_out=("bin/python",))}
    assert entries["bin/python"].linkname == "/usr/local/bin/python3.12"


@pytest.mark.parametrize(("package", "layer"), [
    ("nvidia-cudnn-cu12", "cudnn"), ("cudnn", "cudnn"), ("nvidia_nccl_cu13", "nccl"),
    ("nccl", "nccl"), ("nvidia-cublas", "cublas"), ("libcublas", "cublas"),
    ("nvidia-cuda-runtime", "cuda"), ("cuda-cudart", "cuda"), ("cuda-version", "cuda"),
    ("libcufft", "cuda"), ("torch", "torch"), ("pytorch", "torch"), ("triton", "torch"),
    ("numpy", "env"), ("python", "env"), ("torchvision", "env"),
])
def test_group_of(package: str, layer: str) -> None:
    """Each large GPU library has its layer; the rest shares one."""
    assert group_of(package) == layer


def _e(path: str, kind: str = "file") -> Entry:
    return Entry(path=path, kind=kind, mode=0o755 if kind == "dir" else 0o644, size=1)


def test_assign_layers() -> None:
    """Files follow their owners; folders go wherever something lies under them."""
    entries = [_e("conda-meta", "dir"), _e("conda-meta/cudnn-9.json"), _e("conda-meta/history"),
               _e("lib", "dir"), _e("lib/libcudnn.so.9"), _e("lib/libpython.so"),
               _e("share", "dir")]
    owners = {"conda-meta/cudnn-9.json": "cudnn", "lib/libcudnn.so.9": "cudnn",
              "lib/libpython.so": "python"}
    layers = {layer.name: layer for layer in assign_layers(entries, owners)}
    assert list(layers) == ["cudnn", "env"]
    assert [e.path for e in layers["cudnn"].entries] == [
        "conda-meta", "conda-meta/cudnn-9.json", "lib", "lib/libcudnn.so.9"]
    assert [e.path for e in layers["env"].entries] == [
        "conda-meta", "conda-meta/history", "lib", "lib/libpython.so", "share"]
    assert layers["cudnn"].packages == ("cudnn",)


@pytest.mark.parametrize("path", ["lib/libcuda.so.1", "lib/libcuda.so", "lib/libnvidia-ml.so.1",
                                  "lib/python3.12/site-packages/x/libcuda.so.580.65.06"])
def test_driver_libraries_refused(path: str) -> None:
    """A prefix carrying the driver's libcuda / libnvidia-ml is refused, naming the file."""
    with pytest.raises(InputError, match=f"ships the NVIDIA driver's libraries: {path}"):
        assign_layers([_e(path)], {})


def test_driver_stubs_allowed() -> None:
    """Link-time stubs (lib/stubs/libcuda.so) are not the driver and may stay."""
    assert assign_layers([_e("lib/stubs/libcuda.so")], {})[0].name == "env"


# Golden digests: changing one is a deliberate, versioned break (io.samebits.image-format).
GOLDEN_TAR = "sha256:2e86e197977c7b39983e468696630ac4561c72ecac64ffd7833403446994ebbb"
GOLDEN_GZIP = {"1.2.13": "sha256:737dd0e413809636d359328a5687b0875472334b2c584e1715d1933b1e718bde"}


def _golden_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tool").write_bytes(b"#!/bin/sh\necho tool\n")
    os.chmod(root / "bin" / "tool", 0o755)
    (root / "lib").mkdir()
    (root / "lib" / "libx.so.1").write_bytes(bytes(range(256)) * 4000)
    os.symlink("libx.so.1", root / "lib" / "libx.so")
    return root


def test_golden_layer_digests(tmp_path: Path) -> None:
    """A fixed tree always gives the same tar digest, and with this zlib the same gzip digest."""
    root = _golden_tree(tmp_path / "p")
    out = io.BytesIO()
    with ThreadPoolExecutor(2) as pool:
        digests = gzip_layer(tar_chunks(root, scan_prefix(root), root="opt/env", mtime=0,
                                        block=65536), out, pool=pool)
    assert digests.diff_id == GOLDEN_TAR
    if zlib.ZLIB_RUNTIME_VERSION not in GOLDEN_GZIP:
        pytest.skip(f"no golden gzip digest recorded for zlib {zlib.ZLIB_RUNTIME_VERSION}")
    assert digests.digest == GOLDEN_GZIP[zlib.ZLIB_RUNTIME_VERSION]


def _zst(data: bytes, block: int, threads: int) -> tuple[bytes, LayerDigests]:
    out = io.BytesIO()
    digests = zstd_layer([data[i:i + block] for i in range(0, len(data), block)], out,
                         threads=threads)
    return out.getvalue(), digests


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=300_000), block=st.sampled_from([1024, 65536, 1 << 20]))
def test_zstd_round_trip(data: bytes, block: int) -> None:
    """Any bytes, any chunking: one zstd frame, checksummed, that decompresses to the input."""
    import zstandard

    zst, digests = _zst(data, block, 2)
    assert zstandard.ZstdDecompressor().decompressobj().decompress(zst) == data
    params = zstandard.get_frame_parameters(zst)
    assert params.has_checksum and params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert digests.diff_id == "sha256:" + hashlib.sha256(data).hexdigest()
    assert digests.digest == "sha256:" + hashlib.sha256(zst).hexdigest()
    assert digests.size == len(zst) and digests.tar_size == len(data)


def test_zstd_same_bytes_whatever_the_threads_and_chunks() -> None:
    """libzstd's multi-threaded frame depends on neither the thread count nor the chunking."""
    rnd = random.Random(7)
    data = b"".join(rnd.choice([b"torch ", b"cuda ", bytes([rnd.randrange(256)])])
                    for _ in range(3_000_000))
    outputs = {_zst(data, block, threads)[0]
               for block, threads in ((1 << 20, 1), (65536, 2), (12345, 3), (1 << 22, 8))}
    assert len(outputs) == 1


@pytest.mark.parametrize(("name", "media", "params"), [
    ("gzip", "application/vnd.oci.image.layer.v1.tar+gzip", "zlib "),
    ("zstd", "application/vnd.oci.image.layer.v1.tar+zstd", "zstd 1."),
])
def test_compression_names(name: str, media: str, params: str) -> None:
    """Each compression has its OCI media type and records what its bytes depend on."""
    how = compression(name)  # type: ignore[arg-type]
    assert (how.media_type, how.annotation) == (media, f"io.samebits.{name}")
    assert how.params.startswith(params)
    if name == "zstd":
        assert ", level 3, multi-threaded frame, content checksum, no content size" in how.params


GOLDEN_ZSTD = {"1.5.7": "sha256:b4dcbe6c3e1fb4b25f3c24243cbb094f278d5074132e02079fc66aa0dac651f8"}


def test_golden_zstd_digest(tmp_path: Path) -> None:
    """A fixed tree gives the same zstd layer digest with this libzstd, on any core count."""
    import zstandard

    root = _golden_tree(tmp_path / "p")
    out = io.BytesIO()
    digests = zstd_layer(tar_chunks(root, scan_prefix(root), root="opt/env", mtime=0,
                                    block=65536), out, threads=2)
    assert digests.diff_id == GOLDEN_TAR
    lib = ".".join(map(str, zstandard.ZSTD_VERSION))
    if lib not in GOLDEN_ZSTD:
        pytest.skip(f"no golden zstd digest recorded for libzstd {lib}")
    assert digests.digest == GOLDEN_ZSTD[lib]


_NAMES = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1,
                 max_size=120)


@settings(max_examples=300, deadline=None)
@given(name=_NAMES, kind=st.sampled_from(["dir", "file", "symlink"]),
       mode=st.sampled_from([0o755, 0o644, 0o777]), size=st.integers(0, 8 ** 11 + 5),
       link=_NAMES, mtime=st.integers(0, 8 ** 11 + 5))
def test_tar_header_is_tarfiles(name: str, kind: str, mode: int, size: int, link: str,
                                mtime: int) -> None:
    """The directly built ustar header is byte for byte the one tarfile writes (and past the
    ustar limits tarfile's PAX header is used)."""
    entry = Entry(path=name, kind=kind, mode=mode,  # type: ignore[arg-type]
                  size=size if kind == "file" else 0,
                  linkname=link if kind == "symlink" else "")
    info = tarfile.TarInfo(name)
    info.type = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "symlink": tarfile.SYMTYPE}[kind]
    info.mode, info.size, info.linkname, info.mtime = mode, entry.size, entry.linkname, mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    assert tar_header(name, entry, mtime) == info.tobuf(tarfile.PAX_FORMAT, "utf-8",
                                                        "surrogateescape")

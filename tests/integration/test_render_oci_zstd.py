"""render oci --compression zstd: the same digest anywhere, the same tars as gzip, skopeo reads
and copies it, the layers unpack to a prefix verify env finds identical; and what cannot read
zstd layers (umoci 0.4.7, docker-archive:) says so, as docs/how-to/render-oci.md states."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from samebits.render.compression import compression
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    BaseLayout,
    RenderProject,
    base_layout,
    module_package_cache,
    need,
    package_cache,
    render,
    render_project,
    render_wheel_dir,
    tree_digest,
)

ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"


@pytest.fixture(scope="module")
def zstd_image(render_project: RenderProject, base_layout: BaseLayout, module_package_cache: Path,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The gpu environment on the umoci-made (gzip) base, zstd layers, with an oci-archive."""
    out = tmp_path_factory.mktemp("zimage") / "gpu"
    proc = render(render_project, "gpu", out, "--base", base_layout.ref, "--archive",
                  str(out.parent / "gpu.tar"), "--cache-dir", str(module_package_cache),
                  "--compression", "zstd")
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":")[1]).read_bytes()


def _manifest(layout: Path, result: dict) -> dict:
    return json.loads(_blob(layout, result["manifest_digest"]))


def test_zstd_same_digest_anywhere(render_project: RenderProject, base_layout: BaseLayout,
                                   zstd_image: tuple[Path, dict], tmp_path: Path) -> None:
    """Another folder, cwd, umask, TZ and a fresh cache: the same zstd image, byte for byte."""
    layout, first = zstd_image
    elsewhere = tmp_path / "x" / "y"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = render(render_project, "gpu", elsewhere, "--base", base_layout.ref,
                  "--cache-dir", str(tmp_path / "fresh-cache"), "--compression", "zstd",
                  cwd=cwd, umask=0o077, extra_env={"TZ": "America/St_Johns"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["manifest_digest"] == first["manifest_digest"]
    assert tree_digest(elsewhere) == tree_digest(layout)


def test_zstd_manifest(render_project: RenderProject, base_layout: BaseLayout,
                       zstd_image: tuple[Path, dict], package_cache: Path,
                       tmp_path: Path) -> None:
    """Our layers are tar+zstd, the base's stay gzip; libzstd and the level are recorded; the
    tars (diff_ids) are the gzip image's: only the compression differs."""
    layout, result = zstd_image
    manifest = _manifest(layout, result)
    assert [x["mediaType"] for x in manifest["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar+gzip", *[ZSTD] * len(result["layers"])]
    notes = manifest["annotations"]
    assert notes["io.samebits.zstd"] == compression("zstd").params
    assert "io.samebits.gzip" not in notes
    assert result["compression"] == "zstd" and result["zstd"] == notes["io.samebits.zstd"]
    proc = render(render_project, "gpu", tmp_path / "gz", "--base", base_layout.ref,
                  "--cache-dir", str(package_cache))
    assert proc.returncode == 0, proc.stderr
    gz = json.loads(proc.stdout)
    assert [x["diff_id"] for x in gz["layers"]] == [x["diff_id"] for x in result["layers"]]
    assert [x["digest"] for x in gz["layers"]] != [x["digest"] for x in result["layers"]]
    assert sum(x["size"] for x in result["layers"]) < sum(x["size"] for x in gz["layers"])


def test_skopeo_reads_and_copies_zstd(zstd_image: tuple[Path, dict], tmp_path: Path) -> None:
    """skopeo inspects the layout and the archive and copies the image unchanged."""
    skopeo = need("skopeo")
    layout, result = zstd_image
    for ref in (f"oci:{layout}:gpu", f"oci-archive:{layout.parent / 'gpu.tar'}"):
        proc = subprocess.run([skopeo, "inspect", ref], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        info = json.loads(proc.stdout)
        assert info["Digest"] == result["manifest_digest"]
        assert len(info["Layers"]) == 1 + len(result["layers"])
        raw = subprocess.run([skopeo, "inspect", "--raw", ref], capture_output=True, text=True)
        layers = json.loads(raw.stdout)["layers"]
        assert [x["mediaType"] for x in layers][1:] == [ZSTD] * len(result["layers"])
    copy = tmp_path / "copy"
    proc = subprocess.run([skopeo, "copy", f"oci:{layout}:gpu", f"oci:{copy}:gpu"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    index = json.loads((copy / "index.json").read_text())
    assert index["manifests"][0]["digest"] == result["manifest_digest"]


def _unpack(layout: Path, result: dict, rootfs: Path) -> None:
    """Our layers in order (the base's are not ours), decoded by the zstd CLI (an independent
    decoder) and unpacked with tarfile."""
    zstd_cli = need("zstd")
    layers = _manifest(layout, result)["layers"]
    assert [x["mediaType"] == ZSTD for x in layers] == [False] + [True] * len(result["layers"])
    for layer in layers[1:]:
        res = subprocess.run([zstd_cli, "-d", "-c"], input=_blob(layout, layer["digest"]),
                             capture_output=True)
        assert res.returncode == 0, res.stderr
        with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(rootfs, filter="tar")
            else:  # pragma: no cover (Python < 3.11.4)
                tar.extractall(rootfs)


def test_zstd_layers_unpack_to_an_identical_prefix(render_project: RenderProject,
                                                   zstd_image: tuple[Path, dict],
                                                   tmp_path: Path) -> None:
    """The layers, decoded by the zstd CLI and unpacked in order: verify env says identical,
    with the environment digest the manifest records."""
    layout, result = zstd_image
    rootfs = tmp_path / "rootfs"
    _unpack(layout, result, rootfs)
    check = subprocess.run([sys.executable, "-m", "verify", "env",
                            str(render_project.lockfile("gpu")), "--prefix",
                            str(rootfs / "opt" / "env"), "--platform", "linux-64", "--json"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr
    assert json.loads(check.stdout)["digests"]["environment"] == result["env_digest"]


@pytest.mark.parametrize("tool", ["umoci", "docker-archive"])
def test_what_cannot_read_zstd_says_so(zstd_image: tuple[Path, dict], tmp_path: Path,
                                       tool: str) -> None:
    """umoci 0.4.7 and skopeo's docker-archive: transport refuse zstd layers
    (docs/how-to/render-oci.md says so; gzip stays the default for them)."""
    layout, _ = zstd_image
    if tool == "umoci":
        cmd = [need("umoci"), "unpack", "--image", f"{layout}:gpu", str(tmp_path / "bundle")]
    else:
        cmd = [need("skopeo"), "copy", f"oci:{layout}:gpu",
               f"docker-archive:{tmp_path / 'd.tar'}:gpu:latest"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "zstd" in (proc.stdout + proc.stderr).lower()

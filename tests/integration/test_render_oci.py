"""render oci: the same lock gives the same image anywhere; skopeo reads it, umoci unpacks it,
verify env finds the unpacked prefix identical; bad bases are refused with nothing written."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def gpu_image(render_project: RenderProject, base_layout: BaseLayout, module_package_cache: Path,
              tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The gpu environment rendered once on the umoci-made base, with an oci-archive."""
    out = tmp_path_factory.mktemp("image") / "gpu"
    proc = render(render_project, "gpu", out, "--base", base_layout.ref, "--archive",
                  str(out.parent / "gpu.tar"), "--cache-dir", str(module_package_cache))
    assert proc.returncode == 0, proc.stderr
    return out, json.loads(proc.stdout)


@pytest.mark.requires("umoci")
def test_same_digest_anywhere(render_project: RenderProject, base_layout: BaseLayout,
                              gpu_image: tuple[Path, dict], tmp_path: Path) -> None:
    """Another folder, cwd, umask, TZ, a fresh cache (new file times): the same bytes."""
    layout, first = gpu_image
    elsewhere = tmp_path / "deep" / "other" / "place"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = render(render_project, "gpu", elsewhere, "--base", base_layout.ref,
                  "--cache-dir", str(tmp_path / "fresh-cache"), cwd=cwd, umask=0o077,
                  extra_env={"TZ": "Pacific/Kiritimati", "LC_ALL": "C"})
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)
    assert second["manifest_digest"] == first["manifest_digest"]
    assert tree_digest(elsewhere) == tree_digest(layout)
    assert (elsewhere / "index.json").read_bytes() == (layout / "index.json").read_bytes()


@pytest.mark.requires("skopeo", "umoci")
def test_skopeo_reads_it(gpu_image: tuple[Path, dict], base_layout: BaseLayout) -> None:
    """skopeo inspects the layout and the oci-archive: digest, platform, env, labels, layers."""
    skopeo = need("skopeo")
    layout, result = gpu_image
    for ref in (f"oci:{layout}:gpu", f"oci-archive:{layout.parent / 'gpu.tar'}"):
        proc = subprocess.run([skopeo, "inspect", ref], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        info = json.loads(proc.stdout)
        assert info["Digest"] == result["manifest_digest"]
        assert (info["Architecture"], info["Os"]) == ("amd64", "linux")
        assert "NVIDIA_VISIBLE_DEVICES=all" in info["Env"]
        assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in info["Env"]
        assert "LANG=C.UTF-8" in info["Env"]  # the base's
        path = next(e for e in info["Env"] if e.startswith("PATH="))
        assert path.startswith("PATH=/opt/env/bin:")
        labels = info["Labels"]
        assert labels["io.samebits.environment"] == "gpu"
        assert labels["org.opencontainers.image.base.digest"] == base_layout.digest
        assert labels["io.samebits.env.digest"] == result["env_digest"]
        assert len(info["Layers"]) == 1 + len(result["layers"])


@pytest.mark.requires("umoci")
def test_manifest_content(render_project: RenderProject, gpu_image: tuple[Path, dict],
                          base_layout: BaseLayout) -> None:
    """Canonical JSON blobs; base layers first; one layer per GPU library group."""
    layout, result = gpu_image
    index = (layout / "index.json").read_bytes()
    assert index == json.dumps(json.loads(index), sort_keys=True, separators=(",", ":")).encode()
    digest = result["manifest_digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / digest).read_bytes())
    base = json.loads((base_layout.path / "blobs" / "sha256" /
                       base_layout.digest.split(":")[1]).read_bytes())
    assert manifest["layers"][0]["digest"] == base["layers"][0]["digest"]
    assert [x["annotations"]["io.samebits.layer"] for x in manifest["layers"][1:]] == [
        "cuda", "cudnn", "nccl", "torch", "env"]
    notes = manifest["annotations"]
    lock = render_project.lockfile("gpu")
    assert notes["io.samebits.lock.sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert notes["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"
    assert notes["io.samebits.gzip"].startswith("zlib ")
    assert result["compression"] == "gzip"  # the default: every runtime reads it
    assert {x["mediaType"] for x in manifest["layers"]} == {
        "application/vnd.oci.image.layer.v1.tar+gzip"}
    layers = {x["name"]: x["packages"] for x in result["layers"]}
    assert layers["cudnn"] == ["cudnn", "nvidia-cudnn-cu12"]
    assert layers["torch"] == ["pytorch"]


@pytest.mark.requires("umoci")
def test_umoci_unpacks_and_verify_env_agrees(render_project: RenderProject,
                                             gpu_image: tuple[Path, dict],
                                             tmp_path: Path) -> None:
    """umoci unpacks the image; verify env on the unpacked prefix: identical, same digest."""
    umoci = need("umoci")
    layout, result = gpu_image
    bundle = tmp_path / "bundle"
    rootless = [] if os.geteuid() == 0 else ["--rootless"]
    proc = subprocess.run([umoci, "unpack", *rootless, "--image", f"{layout}:gpu", str(bundle)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rootfs = bundle / "rootfs"
    assert (rootfs / "etc" / "os-release").exists()  # the base is under it
    assert not (rootfs / "opt" / "env" / "bin" / "tinyapp").is_symlink()
    check = subprocess.run([sys.executable, "-m", "verify", "env",
                            str(render_project.lockfile("gpu")), "--prefix",
                            str(rootfs / "opt" / "env"), "--platform", "linux-64", "--json"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr
    report = json.loads(check.stdout)
    assert report["identical"] is True
    assert report["digests"]["environment"] == result["env_digest"]


@pytest.mark.requires("umoci")
def test_lock_update_reuses_layers(render_project: RenderProject, base_layout: BaseLayout,
                                   gpu_image: tuple[Path, dict], package_cache: Path,
                                   tmp_path: Path) -> None:
    """Only tinyapp changed (gpu2): every GPU library layer keeps its digest."""
    _, first = gpu_image
    proc = render(render_project, "gpu2", tmp_path / "gpu2", "--base", base_layout.ref,
                  "--cache-dir", str(package_cache))
    assert proc.returncode == 0, proc.stderr
    second = json.loads(proc.stdout)
    before = {x["name"]: x["digest"] for x in first["layers"]}
    after = {x["name"]: x["digest"] for x in second["layers"]}
    assert [n for n in before if before[n] == after[n]] == ["cuda", "cudnn", "nccl", "torch"]
    assert before["env"] != after["env"]


@pytest.mark.slow
def test_aarch64_and_venv(render_project: RenderProject, package_cache: Path,
                          tmp_path: Path) -> None:
    """A PyPI-only lock for aarch64, no base: an arm64 venv image on the named interpreter."""
    proc = render(render_project, "venv", tmp_path / "venv", "--python", sys.executable,
                  "--cache-dir", str(package_cache), platform="linux-aarch64")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["platform"] == {"architecture": "arm64", "os": "linux", "variant": "v8"}
    digest = result["manifest_digest"].split(":")[1]
    manifest = json.loads((tmp_path / "venv" / "blobs" / "sha256" / digest).read_bytes())
    config = json.loads((tmp_path / "venv" / "blobs" / "sha256" /
                         manifest["config"]["digest"].split(":")[1]).read_bytes())
    assert config["architecture"] == "arm64"
    assert not any(e.startswith("NVIDIA_") for e in config["config"]["Env"])  # a cpu lock
    assert [x["name"] for x in result["layers"]] == ["env"]


@pytest.mark.requires("umoci")
@pytest.mark.parametrize("case", ["wrong digest", "tampered blob", "wrong arch", "not pinned"])
def test_bad_base_refused(render_project: RenderProject, base_layout: BaseLayout,
                          tmp_path: Path, case: str) -> None:
    """A base that is not what was pinned is refused with a clear error; nothing is written."""
    import shutil

    layout = tmp_path / "base"
    shutil.copytree(base_layout.path, layout)
    ref = f"oci:{layout}@{base_layout.digest}"
    if case == "wrong digest":
        ref = f"oci:{layout}@sha256:{'1' * 64}"
        expected = f"{layout}: the base is pinned to sha256:{'1' * 64}, which this layout"
    elif case == "tampered blob":
        manifest = json.loads((layout / "blobs" / "sha256" /
                               base_layout.digest.split(":")[1]).read_bytes())
        blob = layout / "blobs" / "sha256" / manifest["layers"][0]["digest"].split(":")[1]
        blob.write_bytes(blob.read_bytes() + b"\0")
        expected = f"{layout}: blob {manifest['layers'][0]['digest']} (base layer 0) " \
                   "holds bytes with digest sha256:"
    elif case == "wrong arch":
        expected = f"oci:{layout}@{base_layout.digest}: the base is linux/amd64, not " \
                   "linux/arm64 (linux-aarch64)"
    else:
        ref = f"oci:{layout}:base"
        expected = f'--base "{ref}": expected oci:PATH@sha256:<64 hex digits>'
    out = tmp_path / "out"
    proc = render(render_project, "gpu", out, "--base", ref,
                  platform="linux-aarch64" if case == "wrong arch" else "linux-64")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["error"]["message"].startswith(expected)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base"]


@pytest.mark.requires("umoci")
def test_epoch_changes_digest(render_project: RenderProject, gpu_image: tuple[Path, dict],
                              base_layout: BaseLayout, package_cache: Path,
                              tmp_path: Path) -> None:
    """SOURCE_DATE_EPOCH is an input: another value, another digest (and created time)."""
    _, first = gpu_image
    proc = render(render_project, "gpu", tmp_path / "o", "--base", base_layout.ref,
                  "--cache-dir", str(package_cache), extra_env={"SOURCE_DATE_EPOCH": "0"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["manifest_digest"] != first["manifest_digest"]


def test_changed_archive_writes_nothing(render_project: RenderProject, tmp_path: Path) -> None:
    """An archive that is not the locked one stops the build: no layout, no leftovers."""
    import shutil
    import zipfile

    # the wheels beside the lock: its own folder is one whose file:// URLs may be read
    wheels = tmp_path / "lockfiles" / "wheels"
    shutil.copytree(render_project.wheels, wheels)
    lock = tmp_path / "lockfiles" / "changed.conda-lock.yml"
    lock.write_text(render_project.lockfile("gpu").read_text()
                    .replace(render_project.wheels.as_uri(), wheels.as_uri()))
    with zipfile.ZipFile(wheels / "tinyapp-1.0-py3-none-any.whl", "a") as zf:
        zf.writestr("tinyapp/extra.py", "")
    out = tmp_path / "build" / "image"
    proc = render(render_project, str(lock), out, "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 2, proc.stdout
    message = json.loads(proc.stdout)["error"]["message"]
    assert message.startswith("linux-64: tinyapp 1.0: sha256 of tinyapp-1.0-py3-none-any.whl is ")
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == []


def test_venv_image_without_a_base_warns_it_cannot_run(render_project: RenderProject,
                                                       package_cache: Path,
                                                       tmp_path: Path) -> None:
    """A PyPI-only lock rendered with no base: its /opt/env/bin/python points at an interpreter
    no layer provides. One warning line, and the image's labels say so."""
    proc = render(render_project, "venv", tmp_path / "venv", "--python", sys.executable,
                  "--cache-dir", str(package_cache))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    missing = result["interpreter_missing"]
    assert missing and not missing.startswith("/opt/env/")
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: the image cannot run its Python: /opt/env/bin/python points "
                        f"at {missing}, which no layer provides (pass --base an image that "
                        "has it)"]
    digest = result["manifest_digest"].split(":")[1]
    manifest = json.loads((tmp_path / "venv" / "blobs" / "sha256" / digest).read_bytes())
    assert manifest["annotations"]["io.samebits.interpreter"] == f"missing: {missing}"

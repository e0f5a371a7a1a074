"""render containerfile: the text, line by line (no daemon here to build it)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

from pathlib import Path

import pytest

from samebits.lock.read import LockedEnv, load_lock
from samebits.render.containerfile import containerfile_files, render_containerfile
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    render_project,
    render_wheel_dir,
)

REPO = Path(__file__).parents[2]
PINNED = "docker.io/library/python:3.12-slim-bookworm@sha256:" + "ab" * 32


def curated(name: str) -> LockedEnv:
    return load_lock(REPO / "lockfiles" / f"{name}.conda-lock.yml", name=name, root=REPO)


def instructions(text: str) -> list[str]:
    """The Containerfile's instructions, continuation lines joined, comments dropped."""
    out: list[str] = []
    joined = ""
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        joined += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            out.append(" ".join(joined.split()))
            joined = ""
    return out


@pytest.mark.parametrize(("name", "gpu"), [("hopper", True), ("volta", True), ("cpu", False)])
def test_curated_pip_only(name: str, gpu: bool) -> None:
    """A PyPI-only lock: venv on the base's Python, wheels by hash, verify env last."""
    env = curated(name)
    steps = instructions(render_containerfile(env))
    assert steps[0] == ("ARG BASE_IMAGE=docker.io/library/python:3.12-slim-bookworm@sha256:"
                        + "0" * 64)
    assert steps[1] == "FROM ${BASE_IMAGE}"
    assert (("NVIDIA_VISIBLE_DEVICES=all" in steps[3]) and
            ("NVIDIA_DRIVER_CAPABILITIES=compute,utility" in steps[3])) is gpu
    install = next(s for s in steps if "--require-hashes" in s)
    assert "python3.12 -m venv --without-pip /opt/env" in install
    assert ("python3.12 -m pip --python /opt/env/bin/python install --no-cache-dir --no-deps "
            "--require-hashes --only-binary=:all: --no-compile "
            "-r /opt/samebits/$platform.requirements.txt") in install
    for plat, arch in (("linux-64", "amd64"), ("linux-aarch64", "arm64")):
        assert (f"{arch}) platform={plat} ;;" in install) is (plat in env.platforms)
    assert steps[-1].startswith("RUN set -eu; python3.12 -m venv /opt/samebits/tools;")
    assert ("/opt/samebits/tools/bin/pip install --no-cache-dir --quiet --no-deps "
            "--require-hashes --only-binary=:all: -r /opt/samebits/verifier.requirements.txt; "
            "PYTHONPATH=/opt/samebits/src /opt/samebits/tools/bin/python -m verify env "
            "/opt/samebits/lock.conda-lock.yml --prefix /opt/env --platform "
            "\"$(cat /opt/samebits/platform)\"; rm -rf /opt/samebits/tools /opt/samebits/src"
            ) in steps[-1]
    assert "COPY containers/verifier.requirements.txt /opt/samebits/" in steps
    assert not any("pip install" in s and "--require-hashes" not in s for s in steps)


def test_the_verifier_is_installed_by_hash() -> None:
    """containers/verifier.requirements.txt pins every dependency of samebits (pyproject.toml)
    to one version with hashes, and is fresh: its header's inputs digest is pyproject's today
    (else: `nox -s verifier-lock`)."""
    import re

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from samebits.render.containerfile import VERIFIER_REQUIREMENTS, verifier_inputs

    text = (REPO / VERIFIER_REQUIREMENTS).read_text()
    when = re.search(r"^# resolved by uv .* as of (\S+)$", text, re.M)
    digest = re.search(r"^# inputs sha256: ([0-9a-f]{64})$", text, re.M)
    assert when and digest, text[:400]
    pyproject = (REPO / "pyproject.toml").read_text()
    assert digest[1] == verifier_inputs(pyproject, when[1]), (
        f"{VERIFIER_REQUIREMENTS} is stale: pyproject.toml's dependencies changed; run "
        "`nox -s verifier-lock`")
    blocks = re.split(r"\n(?=[a-z0-9])", text.split("\n", 4)[4])
    pins = {}
    for b in blocks:
        head = b.split(" \\", 1)[0].split(";", 1)[0].strip()
        name, _, version = head.partition("==")
        assert version and "--hash=sha256:" in b, b[:200]
        pins.setdefault(str(canonicalize_name(name)), set()).add(version.strip())
    from samebits.render.containerfile import tomllib

    for dep in tomllib.loads(pyproject)["project"]["dependencies"]:
        req = Requirement(dep)
        if req.marker is None or req.marker.evaluate({"python_version": "3.10"}):
            assert str(canonicalize_name(req.name)) in pins, req.name


@pytest.mark.parametrize(("base", "expected"), [
    (None, "Base image: NOT pinned: the digest below is a placeholder (all zeros)"),
    (PINNED, f"Base image: pinned by digest at render time: {PINNED}."),
])
def test_base_pinning_is_said(base: str | None, expected: str) -> None:
    """The header says whether the base is pinned, and never claims it when it is not."""
    text = render_containerfile(curated("hopper"), base=base)
    header = " ".join(ln[2:] for ln in text.splitlines() if ln.startswith("# "))
    assert expected in header
    assert "Not built by samebits' CI, which has no container daemon" in header
    assert f"ARG BASE_IMAGE={base or 'docker.io/library/python:3.12-slim-bookworm@sha256:'}" in text


def test_requirements_pin_every_wheel() -> None:
    """Each platform's requirements name every locked wheel by URL and sha256, nothing more."""
    env = curated("hopper")
    files = containerfile_files(env)
    assert sorted(files) == ["Containerfile", "linux-64.requirements.txt",
                             "linux-aarch64.requirements.txt"]
    for plat in env.platforms:
        lines = [ln for ln in files[f"{plat}.requirements.txt"].splitlines()
                 if not ln.startswith("#")]
        assert lines == [f"{p.name} @ {p.url} --hash=sha256:{p.sha256}"
                         for p in sorted(env.pip(plat), key=lambda p: p.name)]


def test_conda_lock_uses_micromamba(render_project: RenderProject) -> None:
    """A lock with a conda part: micromamba creates it from the explicit file (md5-checked)."""
    env = load_lock(render_project.lockfile("gpu"), name="gpu", root=render_project.root)
    files = containerfile_files(env)
    assert sorted(files) == ["Containerfile", "linux-64.explicit.txt",
                             "linux-64.requirements.txt", "linux-aarch64.explicit.txt",
                             "linux-aarch64.requirements.txt"]
    steps = instructions(files["Containerfile"])
    assert steps[:3] == [
        f"ARG BASE_IMAGE=docker.io/library/debian:bookworm-slim@sha256:{'0' * 64}",
        f"ARG MICROMAMBA_IMAGE=docker.io/mambaorg/micromamba:2-bookworm-slim@sha256:{'0' * 64}",
        "FROM ${MICROMAMBA_IMAGE} AS conda"]
    assert any("micromamba create --yes --prefix /opt/env "
               "--file /opt/samebits/$platform.explicit.txt" in s for s in steps)
    assert "COPY --from=conda /opt/env /opt/env" in steps
    install = next(s for s in steps if "--require-hashes" in s)
    assert "/tmp/pip/bin/python -m pip --python /opt/env/bin/python install" in install
    assert steps[-1].startswith("RUN set -eu; /opt/env/bin/python -m venv /opt/samebits/tools;")
    assert ("/opt/samebits/tools/bin/python -m verify env /opt/samebits/lock.conda-lock.yml "
            "--prefix /opt/env") in steps[-1]


@pytest.mark.parametrize("flag", ["--base", "--micromamba"])
def test_cli_refuses_unpinned_base(render_project: RenderProject, flag: str) -> None:
    """A base named by tag alone is refused: pinned by digest, or the placeholder says so."""
    proc = render_project.samebits("render", "containerfile", "gpu", flag, "python:3.12-slim")
    assert proc.returncode == 2
    assert f'error: {flag} "python:3.12-slim": pin it by digest' in proc.stderr


def test_cli_writes_files(render_project: RenderProject, tmp_path: Path) -> None:
    """render containerfile writes the Containerfile and what it copies; --check agrees."""
    out = tmp_path / "containers"
    proc = render_project.samebits("render", "containerfile", "venv", "--out", str(out),
                                   "--base", PINNED)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "venv").iterdir()) == [
        "Containerfile", "linux-64.requirements.txt", "linux-aarch64.requirements.txt"]
    assert PINNED in (out / "venv" / "Containerfile").read_text()
    again = render_project.samebits("render", "containerfile", "venv", "--out", str(out),
                                    "--base", PINNED, "--check")
    assert again.returncode == 0, again.stdout

"""Fixtures for the render / install tests: small real locks, a base image, helpers.

``render_project`` is one throwaway samebits project, locked once per session by the real
``samebits lock``: its specs point ``[conda] channels`` at the local CUDA-like test channel and
``[pypi] index`` at a folder of small wheels built here. Environments:

    gpu     conda python 3.12 + pytorch (CUDA 12.4 build: cuda-cudart, cudnn, nccl, numpy) and
            typing-extensions (noarch: python), plus two wheels (tinyapp with a console script
            and its dependency tinylib) and a cuDNN-named wheel
    gpu2    the same spec but tinyapp 1.1: a lock update that leaves the CUDA stack alone
    venv    PyPI only, Python of this interpreter: installs as a venv on it, so its console
            script really runs here

Import the fixtures explicitly in each test module: ``from tests.render_fixtures import ...``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakewheels import Wheel, write_wheels

HOST_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

SPEC = """\
format = 1
generation = "{generation}"
python = "{python}"
{cuda}
[platforms.linux-64]
glibc = "2.28"
[platforms.linux-aarch64]
glibc = "2.28"
{conda}
[pypi]
index = "{wheels}"
requirements = [{requirements}]
"""


def spec_text(*, channel: str, wheels: str, python: str = "3.12", generation: str = "hopper",
              cuda: str | None = "12.4", conda: tuple[str, ...] = (),
              requirements: tuple[str, ...] = ()) -> str:
    conda_table = ""
    if conda:
        deps = ", ".join(f'"{d}"' for d in conda)
        conda_table = f'[conda]\nchannels = ["{channel}"]\ndependencies = [{deps}]'
    return SPEC.format(generation=generation, python=python, wheels=wheels,
                       cuda=f'[cuda]\nversion = "{cuda}"' if cuda else "",
                       conda=conda_table,
                       requirements=", ".join(f'"{r}"' for r in requirements))


def render_wheels() -> list[Wheel]:
    app = "from tinylib import X\n\n\ndef main():\n    print('tinyapp', X)\n"
    out = [Wheel(name="tinylib", version="1.2", files={"tinylib/__init__.py": b"X = 42\n"}),
           Wheel(name="nvidia-cudnn-cu12", version="9.1.0.70",
                 files={"nvidia/cudnn/lib/libcudnn_ops.so.9": b"cudnn ops\n"})]
    for version in ("1.0", "1.1"):
        out.append(Wheel(
            name="tinyapp", version=version, requires=("tinylib>=1",),
            files={"tinyapp/__init__.py": f"{app}VERSION = '{version}'\n".encode(),
                   f"tinyapp-{version}.dist-info/entry_points.txt":
                   b"[console_scripts]\ntinyapp = tinyapp:main\n"}))
    return out


GPU_CONDA = ("python 3.12.*", "pytorch 2.4.* cuda*", "typing-extensions")


@dataclass(frozen=True)
class RenderProject:
    root: Path
    channel: Path
    wheels: Path

    def lockfile(self, env: str) -> Path:
        return self.root / "lockfiles" / f"{env}.conda-lock.yml"

    def samebits(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                 umask: int | None = None) -> subprocess.CompletedProcess[str]:
        """The real CLI in a subprocess, with --root pointing at this project."""
        return run_cli(*args, cwd=cwd or self.root, env=env, umask=umask)


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None,
            umask: int | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent),
                                              full_env.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    def pre() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env=full_env,
                          preexec_fn=pre if umask is not None else None)


def write_project(root: Path, channel: Path, wheels: Path) -> RenderProject:
    envs = {
        "gpu": spec_text(channel=channel.as_uri(), wheels=wheels.as_uri(), conda=GPU_CONDA,
                         requirements=("tinyapp==1.0", "nvidia-cudnn-cu12==9.1.0.70")),
        "gpu2": spec_text(channel=channel.as_uri(), wheels=wheels.as_uri(), conda=GPU_CONDA,
                          requirements=("tinyapp==1.1", "nvidia-cudnn-cu12==9.1.0.70")),
        "venv": spec_text(channel=channel.as_uri(), wheels=wheels.as_uri(), python=HOST_PYTHON,
                          generation="cpu", cuda=None, requirements=("tinyapp==1.0",)),
    }
    (root / "environments").mkdir(parents=True)
    for name, text in envs.items():
        (root / "environments" / f"{name}.toml").write_text(text)
    proc = run_cli("lock", "--root", str(root), cwd=root)
    assert proc.returncode == 0, proc.stderr
    return RenderProject(root=root, channel=channel, wheels=wheels)


@pytest.fixture(scope="session")
def render_wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder of small wheels (read by uv as --find-links)."""
    return write_wheels(tmp_path_factory.mktemp("render-wheels"), render_wheels())


@pytest.fixture(scope="session")
def render_project(tmp_path_factory: pytest.TempPathFactory, cuda_channel: Path,
                   render_wheel_dir: Path) -> RenderProject:
    """A project with the gpu, gpu2 and venv environments, locked by `samebits lock`."""
    return write_project(tmp_path_factory.mktemp("render-project"), cuda_channel,
                         render_wheel_dir)


@pytest.fixture(scope="session")
def package_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One archive + package cache shared by the tests that install (as users share one)."""
    return tmp_path_factory.mktemp("cache")


def need(tool: str) -> str:
    """The path of an outside program, or skip (the reason from tests/conftest.py)."""
    from tests.conftest import require

    return require(tool)


@dataclass(frozen=True)
class BaseLayout:
    path: Path
    digest: str  # the manifest digest

    @property
    def ref(self) -> str:
        return f"oci:{self.path}@{self.digest}"


def make_base_layout(folder: Path, *, arch: str = "amd64") -> BaseLayout:
    """A one-layer base image written by umoci (not by samebits): etc/os-release in it."""
    umoci = need("umoci")
    layout = folder / "base"
    content = folder / "content"
    (content / "etc").mkdir(parents=True)
    (content / "etc" / "os-release").write_text('ID=samebits-test-base\n')
    for cmd in (["init", "--layout", str(layout)],
                ["new", "--image", f"{layout}:base"],
                ["config", "--image", f"{layout}:base", "--architecture", arch,
                 "--config.env", "LANG=C.UTF-8", "--config.cmd", "/bin/sh"],
                ["insert", "--image", f"{layout}:base", str(content / "etc"), "/etc"]):
        subprocess.run([umoci, *cmd], check=True, capture_output=True)
    index = json.loads((layout / "index.json").read_text())
    digests = [m["digest"] for m in index["manifests"]
               if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "base"]
    return BaseLayout(path=layout, digest=digests[-1])


@pytest.fixture(scope="session")
def base_layout(tmp_path_factory: pytest.TempPathFactory) -> BaseLayout:
    """A local OCI base layout (amd64) and its manifest digest."""
    return make_base_layout(tmp_path_factory.mktemp("base"))

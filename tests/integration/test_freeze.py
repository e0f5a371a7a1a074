"""samebits freeze: an installed environment -> a spec and a lock that verify env calls identical
and `samebits lock` re-solves to the same packages. Prefixes are made by the real installers:
`samebits install` (py-rattler + pypa/installer), `python -m venv` + pip, virtualenv + pip -e."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    module_package_cache,
    package_cache,
    render_project,
    render_wheel_dir,
    run_cli,
)

CLEAN_PIP = {"PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "", "PIP_INDEX_URL": "",
             "PIP_EXTRA_INDEX_URL": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _install(project: RenderProject, env: str, prefix: Path, cache: Path) -> None:
    proc = project.samebits("install", env, "--target", str(prefix), "--platform", "linux-64",
                            "--python", sys.executable, "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stderr


def _freeze(prefix: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    root.mkdir(parents=True, exist_ok=True)
    return run_cli("freeze", "--prefix", str(prefix), "--root", str(root), "--json", *args,
                   cwd=root)


def _verify(prefix: Path, lockfile: Path) -> dict:
    proc = run_cli("verify", "env", "--prefix", str(prefix), str(lockfile),
                   "--no-linkage", "--json", cwd=lockfile.parent)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _ident(lockfile: Path) -> list[tuple]:
    return sorted((p.platform, p.manager, p.name, p.version, p.build, p.url, p.md5, p.sha256)
                  for p in parse_lock(lockfile).packages)


@pytest.fixture(scope="module")
def gpu_prefix(render_project: RenderProject, module_package_cache: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `gpu` lock (conda python + CUDA pytorch, three wheels) installed by samebits."""
    prefix = tmp_path_factory.mktemp("frozen-gpu") / "env"
    _install(render_project, "gpu", prefix, module_package_cache)
    return prefix


def test_freeze_samebits_install_verifies_and_relocks(render_project: RenderProject,
                                                      gpu_prefix: Path, tmp_path: Path) -> None:
    """Freeze an installed conda+PyPI lock: verify env identical; lock --check fresh; a re-lock
    of the frozen spec (local channel and wheels: offline) gives the same packages."""
    root = tmp_path / "proj"
    proc = _freeze(gpu_prefix, root, "--name", "paper", "--generation", "hopper",
                   "--index", render_project.wheels.as_uri())
    assert proc.returncode == 0, proc.stderr + proc.stdout
    doc = json.loads(proc.stdout)
    assert doc["complete"] is True and doc["findings"] == []
    assert doc["facts"] == {"kind": "conda", "python": "3.12.7", "platform": "linux-64",
                            "glibc": "2.17", "cuda": "12.4",
                            "torch": "pytorch 2.4.0 cuda124_py312h0_101",
                            "generation": "hopper"}
    lockfile = root / "lockfiles" / "paper.conda-lock.yml"
    frozen = _ident(lockfile)
    installed = [p for p in _ident(render_project.lockfile("gpu")) if p[0] == "linux-64"]
    assert frozen == installed  # the installed platform of the lock, recovered exactly
    report = _verify(gpu_prefix, lockfile)
    assert report["identical"] is True, report["findings"]
    spec = (root / "environments" / "paper.toml").read_text()
    assert 'generation = "hopper"' in spec and '[cuda]\nversion = "12.4"' in spec
    assert '    "pytorch ==2.4.0 cuda124_py312h0_101",\n' in spec
    assert '    "tinyapp==1.0",\n' in spec
    check = run_cli("lock", "--check", "paper", "--root", str(root), cwd=root)
    assert check.returncode == 0, check.stdout + check.stderr
    relock = run_cli("lock", "paper", "--root", str(root), cwd=root)
    assert relock.returncode == 0, relock.stderr
    assert _ident(lockfile) == frozen


def test_freeze_cuda_needs_generation(gpu_prefix: Path, tmp_path: Path) -> None:
    """A CUDA runtime without --generation: exit 2, the CUDA line and the choices named."""
    proc = _freeze(gpu_prefix, tmp_path, "--index", str(tmp_path))
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["message"] == (
        "the environment has a CUDA 12.4 runtime (pytorch 2.4.0 cuda124_py312h0_101): pass "
        "--generation, the GPUs it is for (ada, ampere, blackwell, hopper, volta), or "
        "--generation cpu where it runs without a GPU")
    assert not (tmp_path / "environments").exists()


@pytest.mark.slow
def test_freeze_is_byte_stable_across_paths(render_project: RenderProject, package_cache: Path,
                                            tmp_path: Path) -> None:
    """The same lock installed in two folders, frozen twice: the same spec and lock bytes."""
    outs = []
    for n in (1, 2):
        prefix = tmp_path / f"place{n}" / "venv"
        _install(render_project, "venv", prefix, package_cache)
        root = tmp_path / f"root{n}"
        proc = _freeze(prefix, root, "--name", "v", "--index", render_project.wheels.as_uri())
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert _verify(prefix, root / "lockfiles" / "v.conda-lock.yml")["identical"] is True
        outs.append(((root / "environments" / "v.toml").read_bytes(),
                     (root / "lockfiles" / "v.conda-lock.yml").read_bytes()))
    assert outs[0] == outs[1]


def test_freeze_refuses_to_overwrite(gpu_prefix: Path, tmp_path: Path) -> None:
    """An existing spec is never overwritten without --replace."""
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "env.toml").write_text("# mine\n")
    proc = _freeze(gpu_prefix, tmp_path, "--generation", "hopper")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["message"] == (
        f"{tmp_path / 'environments' / 'env.toml'}: already exist(s)")
    assert (tmp_path / "environments" / "env.toml").read_text() == "# mine\n"


def test_freeze_names_what_cannot_be_pinned(render_wheel_dir: Path, tmp_path: Path) -> None:
    """An editable install (virtualenv + pip -e) and a wheel the index lacks: findings, exit 1,
    left out of the lock; a local wheel pip recorded with its hash is pinned by file URL."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", "--no-periodic-update",
                    str(venv)], check=True, capture_output=True)
    proj = tmp_path / "edproj"
    (proj / "edpkg").mkdir(parents=True)
    (proj / "edpkg" / "__init__.py").write_text("X = 1\n")
    (proj / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "edpkg"\nversion = "0.1"\n')
    env = {**os.environ, **CLEAN_PIP}
    for args in (["-e", str(proj)], [str(render_wheel_dir / "tinylib-1.2-py3-none-any.whl")]):
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index",
                               "--no-build-isolation", *args], capture_output=True, text=True,
                              env=env)
        assert proc.returncode == 0, proc.stderr
    empty = tmp_path / "empty-index"
    empty.mkdir()
    proc = _freeze(venv, tmp_path / "root", "--index", str(empty))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    findings = {f["package"]: f["reason"] for f in doc["findings"]}
    assert findings["pip:edpkg==0.1"] == (f"an editable install of {proj.as_uri()}: built "
                                          "from source, no archive to pin")
    pip_version = next(k for k in findings if k.startswith("pip:pip=="))
    assert findings[pip_version].startswith(f"no wheel of pip=={pip_version[9:]} with its tags "
                                            "(py3-none-any) on file://")
    locked = {p.name: p for p in parse_lock(Path(doc["lockfile"])).packages}
    assert "edpkg" not in locked
    assert locked["tinylib"].url == (render_wheel_dir / "tinylib-1.2-py3-none-any.whl").as_uri()


def test_freeze_bad_prefix(tmp_path: Path) -> None:
    """Not an environment: exit 2 naming the folder."""
    proc = _freeze(tmp_path, tmp_path)
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["message"].startswith(
        f"{tmp_path}: not an environment")


@pytest.mark.slow
@pytest.mark.network
def test_freeze_real_venv_verifies_and_relocks(tmp_path: Path) -> None:
    """`python -m venv` + pip from PyPI: frozen from PyPI's own files, verify env identical,
    and `samebits lock` of the frozen spec (real PyPI) reproduces every wheel and hash."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, **CLEAN_PIP, "PIP_INDEX_URL": "https://pypi.org/simple"}
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "six==1.17.0",
                           "idna==3.10", "python-dateutil==2.9.0.post0"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "root"
    proc = _freeze(venv, root, "--name", "mine")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lockfile = root / "lockfiles" / "mine.conda-lock.yml"
    frozen = _ident(lockfile)
    assert {p[2] for p in frozen} >= {"six", "idna", "python-dateutil", "pip"}
    assert all(p[5].startswith("https://files.pythonhosted.org/") and p[7] for p in frozen)
    assert _verify(venv, lockfile)["identical"] is True
    relock = run_cli("lock", "mine", "--root", str(root), cwd=root)
    assert relock.returncode == 0, relock.stderr
    assert _ident(lockfile) == frozen

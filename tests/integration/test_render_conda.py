"""render conda: explicit files equal conda-lock's, environment.yml pinned, --check, errors."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hypothesis
import hypothesis.strategies
import pytest
import yaml

from samebits.lock.read import load_lock
from samebits.render.conda import render_environment_yml, render_explicit
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    render_project,
    render_wheel_dir,
    run_cli,
)

REPO = Path(__file__).parents[2]
CURATED = ("volta", "ampere", "ada", "hopper", "blackwell", "cpu")


def conda_lock_render(lockfile: Path, kind: str, platforms: tuple[str, ...],
                      tmp: Path) -> dict[str, str]:
    """What `conda-lock render` itself writes, per platform."""
    plats = [arg for p in platforms for arg in ("-p", p)]
    proc = subprocess.run([sys.executable, "-m", "conda_lock", "render", "--kind", kind, *plats,
                           "--filename-template", str(tmp / "out-{platform}"), str(lockfile)],
                          capture_output=True, text=True, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    suffix = ".yml" if kind == "env" else ""
    return {p: (tmp / f"out-{p}{suffix}").read_text() for p in platforms}


@pytest.fixture(scope="module")
def conda_lock_says(render_project: RenderProject,
                    tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """conda-lock's own renderings of the gpu lock: kind -> platform -> text."""
    tmp = tmp_path_factory.mktemp("conda-lock-render")
    return {kind: conda_lock_render(render_project.lockfile("gpu"), kind,
                                    ("linux-64", "linux-aarch64"), tmp)
            for kind in ("explicit", "env")}


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_explicit_equals_conda_lock(render_project: RenderProject, platform: str,
                                    conda_lock_says: dict[str, dict[str, str]]) -> None:
    """Our explicit file is `conda-lock render --kind explicit` line for line."""
    env = load_lock(render_project.lockfile("gpu"), name="gpu", root=render_project.root)
    ours = render_explicit(env, platform)
    assert ours.splitlines() == conda_lock_says["explicit"][platform].splitlines()
    assert "@EXPLICIT" in ours and "# pip tinyapp @ file://" in ours


def _conda_lock_written(path: Path) -> Path:
    """A lockfile written by conda-lock's own writer (v1 on disk), with a dev package."""
    from conda_lock.lockfile import write_conda_lock_file
    from conda_lock.lockfile.v2prelim.models import (
        HashModel,
        LockedDependency,
        Lockfile,
        LockMeta,
    )

    def conda(name: str, version: str, deps: dict[str, str], cat: str = "main") -> LockedDependency:
        return LockedDependency(
            name=name, version=version, manager="conda", platform="linux-64",
            dependencies=deps, url=f"https://conda.anaconda.org/conda-forge/linux-64/"
            f"{name}-{version}-h0_0.conda", hash=HashModel(md5="0" * 31 + "1", sha256="a" * 64),
            categories={cat})

    packages = [
        conda("zlib", "1.3.1", {}),
        conda("python", "3.12.7", {"zlib": ">=1.3", "pip": "*", "__glibc": ">=2.17"}),
        conda("pip", "24.2", {"python": ">=3.8"}),
        conda("attrs", "24.2.0", {"python": ">=3.8"}),
        conda("pytest", "8.3.3", {"python": ">=3.8", "attrs": "*"}, cat="dev"),
        LockedDependency(name="requests", version="2.32.3", manager="pip", platform="linux-64",
                         dependencies={"urllib3": "*"}, url="https://files.example/requests.whl",
                         hash=HashModel(sha256="b" * 64), categories={"main"}),
        LockedDependency(name="urllib3", version="2.2.3", manager="pip", platform="linux-64",
                         dependencies={}, url="https://files.example/urllib3.whl",
                         hash=HashModel(sha256="c" * 64), categories={"main"}),
    ]
    meta = LockMeta(content_hash={"linux-64": "d" * 64}, channels=["conda-forge"],
                    platforms=["linux-64"], sources=["environment.yml"])
    write_conda_lock_file(Lockfile(package=packages, metadata=meta), path, None)
    return path


def test_explicit_equals_conda_lock_for_its_own_files(tmp_path: Path) -> None:
    """For a lockfile conda-lock wrote (dev category, pip part), the same lines as conda-lock."""
    lockfile = _conda_lock_written(tmp_path / "conda-lock.yml")
    env = load_lock(lockfile, name="x", root=tmp_path)
    ours = render_explicit(env, "linux-64")
    assert ours.splitlines() == conda_lock_render(lockfile, "explicit", ("linux-64",),
                                                  tmp_path)["linux-64"].splitlines()
    assert ours.index("zlib-1.3.1") < ours.index("python-3.12.7") < ours.index("pytest-8.3.3")


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_environment_yml_pins_what_conda_lock_pins(
        render_project: RenderProject, platform: str,
        conda_lock_says: dict[str, dict[str, str]]) -> None:
    """environment.yml lists conda-lock's `--kind env` dependencies, under a name and header."""
    env = load_lock(render_project.lockfile("gpu"), name="gpu", root=render_project.root)
    ours = yaml.safe_load(render_environment_yml(env, platform))
    theirs = yaml.safe_load(conda_lock_says["env"][platform])
    assert ours["dependencies"] == theirs["dependencies"]
    assert ours["channels"] == theirs["channels"]
    assert ours["name"] == "gpu"
    pins = [d for d in ours["dependencies"] if isinstance(d, str)]
    assert all(d.count("=") == 2 for d in pins)  # name=version=build, every one


def test_environment_yml_pip_only(render_project: RenderProject) -> None:
    """A PyPI-only lock gets python and pip, marked as not in the lock, and hashed wheels."""
    env = load_lock(render_project.lockfile("venv"), name="venv", root=render_project.root)
    text = render_environment_yml(env, "linux-64")
    assert "  - pip  # not in the lock: installs the pip section below" in text
    pip = yaml.safe_load(text)["dependencies"][-1]["pip"]
    assert [p.split(" ==")[0] for p in pip] == ["tinyapp", "tinylib"]
    assert all(" --hash=sha256:" in p for p in pip)


def test_cli_writes_then_checks(render_project: RenderProject, tmp_path: Path) -> None:
    """render conda writes per platform; --check passes, then fails on an edited file."""
    out = tmp_path / "containers"
    args = ("render", "conda", "gpu", "--out", str(out), "--json")
    proc = render_project.samebits(*args)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["files"][str(out / "gpu")]
    assert sorted(Path(p).name for p in report) == [
        "linux-64.environment.yml", "linux-64.explicit.txt",
        "linux-aarch64.environment.yml", "linux-aarch64.explicit.txt"]
    assert set(report.values()) == {"created"}
    assert render_project.samebits(*args, "--check").returncode == 0
    (out / "gpu" / "linux-64.explicit.txt").write_text("# edited\n")
    proc = render_project.samebits("render", "conda", "gpu", "--out", str(out), "--check")
    assert proc.returncode == 1
    assert f"{out}/gpu/linux-64.explicit.txt: stale" in proc.stdout
    assert (out / "gpu" / "linux-64.explicit.txt").read_text() == "# edited\n"


@pytest.mark.parametrize(("args", "code", "message"), [
    (("render", "conda", "nosuch"), 2, "error: unknown environment 'nosuch'"),
    (("render", "conda", "gpu", "--platform", "osx-arm64"), 2,
     "error: lockfiles/gpu.conda-lock.yml: no platform 'osx-arm64' in this lock "
     "(it has linux-64, linux-aarch64)"),
    (("render", "conda", "missing.conda-lock.yml"), 2,
     "error: missing.conda-lock.yml: no such lockfile"),
])
def test_cli_bad_input(render_project: RenderProject, args: tuple[str, ...], code: int,
                       message: str) -> None:
    """Unknown environments, platforms and files are errors with the value named."""
    proc = render_project.samebits(*args)
    assert proc.returncode == code
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["conda", "containerfile"])
def test_committed_containers_are_fresh(kind: str) -> None:
    """containers/ holds exactly what the committed lockfiles render to."""
    proc = run_cli("render", kind, *CURATED, "--check", cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


GEOAPPS = REPO / "tests" / "data" / "foreign" / "condalock" / "geoapps-py-3.12.conda-lock.yml.gz"


@pytest.fixture(scope="module")
def geoapps_lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real conda-lock file (MiraGeoscience/geoapps): git dependencies, whose commit conda-lock
    writes as hash.sha256, and an optional extra category (webview)."""
    import gzip

    path = tmp_path_factory.mktemp("geoapps") / "py-3.12.conda-lock.yml"
    path.write_bytes(gzip.decompress(GEOAPPS.read_bytes()))
    return path


@pytest.mark.parametrize("kind", ["explicit", "env"])
def test_real_lock_with_git_dependencies_renders_as_conda_lock(geoapps_lock: Path, kind: str,
                                                               tmp_path: Path) -> None:
    """The VCS packages are read (their commit as a commit, never as a sha256) and both renders
    are conda-lock's own, the extra-only packages left out as conda-lock leaves them."""
    env = load_lock(geoapps_lock, name="geoapps", root=geoapps_lock.parent)
    vcs = [p for p in env.pip("linux-64") if p.vcs]
    assert len(vcs) == 7 and all(p.sha256 is None and len(p.commit or "") == 40 for p in vcs)
    theirs = conda_lock_render(geoapps_lock, kind, ("linux-64",), tmp_path)["linux-64"]
    if kind == "explicit":
        assert render_explicit(env, "linux-64").splitlines() == theirs.splitlines()
    else:
        ours = yaml.safe_load(render_environment_yml(env, "linux-64"))
        assert ours["dependencies"] == yaml.safe_load(theirs)["dependencies"]


def test_real_lock_with_git_dependencies_install_refuses_them_first(geoapps_lock: Path,
                                                                    tmp_path: Path) -> None:
    """install names every VCS package (and the sdist with no recorded build) and stops
    before anything is downloaded."""
    cache = tmp_path / "cache"
    proc = run_cli("install", str(geoapps_lock), "--target", str(tmp_path / "env"),
                   "--platform", "linux-64", "--cache-dir", str(cache), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "8 locked packages install cannot place" in proc.stderr  # 7 VCS, 1 sdist
    assert "scikit_image-0.26.0.tar.gz: an sdist, and the lock records no build" in proc.stderr
    assert "linux-64: curve-apps 0.4.0b2.dev1+cee15f1: git+https://github.com/MiraGeoscience/" \
           "curve-apps.git@cee15f1251aed6997f38f007906a6eb6eaadb1a4: a VCS checkout, which " \
           "install cannot build yet" in proc.stderr
    assert "nothing was downloaded" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (cache / "archives").exists() and not (tmp_path / "env").exists()


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(hypothesis.strategies.dictionaries(
    hypothesis.strategies.sampled_from(["python", "pip", "a", "b", "c", "d", "libz", "__glibc"]),
    hypothesis.strategies.sets(hypothesis.strategies.sampled_from(
        ["python", "pip", "a", "b", "c", "d", "libz", "__glibc", "__cuda"])),
    max_size=8))
def test_conda_order_is_conda_locks(deps: dict[str, set[str]]) -> None:
    """Our twenty lines give the order of conda-lock's vendored conda toposort (the reader of
    record) on any graph: chains, cycles, self-loops, python<->pip, names only depended on."""
    from conda_lock.interfaces.vendored_conda import toposort

    from samebits.render.conda import conda_order

    assert conda_order(deps) == toposort({k: set(v) for k, v in deps.items()})

"""Sdists whose backend asks for more than ``[build-system] requires`` (PEP 517's dynamic build
requirements, ``get_requires_for_build_wheel``): `samebits lock` asks the backend in a venv of
exactly the locked static environment, resolves both together into the recorded build
environment, and `samebits install` builds with all of it.

Real uv, real pyproject_hooks, a real PEP 517 backend whose hook asks for a wheel and whose
build imports it (tests/fixtures/dynsdists.py, over fakesdists.py's tinyback, shipped as wheels
in a local find-links index) and, in the network test, PyPI's real ``lit`` sdists, whose
setuptools asks for ``wheel`` (triton 2.0's dependency: every torch 2.0.x environment).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from samebits.lock.builds import BuildRecord, builds_of
from samebits.lock.model import parse_lock
from tests.fixtures.dynsdists import DYNBACK_WHEEL, EXTRA_WHEEL, DynSdist, write_dyn_index
from tests.fixtures.fakesdists import BACKEND_WHEEL, SpecFolder

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
SPEC = """\
generation = "cpu"
python = "{py}"
exclude-newer = "{instant}"
[platforms.linux-64]
glibc = "2.28"
[pypi]
{index}requirements = [{reqs}]
"""


class Project(SpecFolder):
    """A project folder: environments/env.toml, a find-links index, its own cache."""

    def __init__(self, root: Path, *sdists: DynSdist, index: bool = True,
                 instant: str = "2026-01-02T03:04:06Z", reqs: str = '"tinypkg==1.0"') -> None:
        self.root = root
        line = ""
        if index:
            line = f'index = "{write_dyn_index(root / "index", *sdists).as_uri()}"\n'
        (root / "environments").mkdir()
        (root / "environments" / "env.toml").write_text(
            SPEC.format(py=PY, instant=instant, index=line, reqs=reqs))

    def record(self) -> BuildRecord:
        (record,) = builds_of(parse_lock(self.lockfile).custom,
                              file=str(self.lockfile)).values()
        return record


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lock_records_what_the_backend_asked_for(tmp_path: Path) -> None:
    """The backend's hook asks for tinyextra, which its build imports: the lock resolves it
    with the static requirements (dynback and its tinyback), records all three by URL and
    sha256 and what the backend asked for, and builds the wheel with them; a second lock on
    the same cache asks the backend nothing and writes the same bytes."""
    p = Project(tmp_path, DynSdist("tinypkg", "1.0"))
    log = tmp_path / "hook.log"
    res = p.run("lock", DYNBACK_LOG=str(log))
    assert res.returncode == 0, res.stderr
    record = p.record()
    index = tmp_path / "index"
    assert [(r.name, r.version, r.url, r.sha256) for r in record.requires] == [
        (w.name, w.version, (index / w.filename).as_uri(), sha(index / w.filename))
        for w in (DYNBACK_WHEEL, BACKEND_WHEEL, EXTRA_WHEEL)]
    assert (record.backend, record.dynamic) == ("dynback", ("tinyextra==1.0",))
    assert record.wheel == "tinypkg-1.0-py3-none-any.whl"
    text = parse_lock(p.lockfile).custom[record.key]
    assert '"dynamic":["tinyextra==1.0"]' in text
    built = tmp_path / "cache" / "samebits" / "archives" / record.sha256 / record.wheel
    assert sha(built) == record.sha256
    asked = log.read_text()
    assert asked  # samebits' venv, then uv's two builds
    first = p.lockfile.read_bytes()
    p.lockfile.unlink()
    assert p.run("lock", DYNBACK_LOG=str(log)).returncode == 0
    assert p.lockfile.read_bytes() == first
    assert log.read_text() == asked


@pytest.mark.slow
def test_install_builds_with_what_the_backend_asked_for(tmp_path: Path) -> None:
    """With an empty cache, install builds the sdist again in the whole recorded environment
    (without tinyextra its build would fail), gets the recorded bytes, and verify env finds
    the prefix identical; the build's requirements are not installed."""
    p = Project(tmp_path, DynSdist("tinypkg", "1.0"))
    assert (res := p.run("lock")).returncode == 0, res.stderr
    prefix = tmp_path / "env"
    res = p.run("install", "env", "--target", str(prefix), "--no-bytecode",
                "--python", sys.executable, "--json", cache="other-cache")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "tinypkg" / "__init__.py").is_file()
    assert not (site / "tinyextra").exists()
    built = tmp_path / "other-cache" / "samebits" / "archives" / p.record().sha256
    assert sha(built / p.record().wheel) == p.record().sha256


@pytest.mark.parametrize(("hook", "said"), [
    ("fail", "dynback's get_requires_for_build_wheel of tinypkg-1.0 failed (exit 1):\n"),
    ("not-a-list", "dynback's get_requires_for_build_wheel of tinypkg-1.0 returned "
                   "'tinyextra': not a list of requirement strings"),
], ids=["raises", "answers-a-string"])
def test_a_backend_hook_that_fails_is_a_failed_build(tmp_path: Path, hook: str,
                                                     said: str) -> None:
    """A hook that raises, or answers what is not a list of requirements: exit 5 (as for a
    failed build), naming the sdist, the platform and the backend, quoting what it printed;
    nothing is written."""
    p = Project(tmp_path, DynSdist("tinypkg", "1.0", hook=hook))
    res = p.run("lock")
    assert res.returncode == 5, res.stderr
    assert ("error: environments/env.toml: [pypi] tinypkg 1.0 on linux-64 (an sdist only): "
            + said) in res.stderr
    if hook == "fail":
        assert "  dynback: cannot work out what tinypkg needs\n" in res.stderr
        assert "  RuntimeError: no requirements today\n" in res.stderr
        assert "hint: it ran offline, in a venv of exactly the locked [build-system] " \
            "requires" in res.stderr
    assert not p.lockfile.exists()


def test_a_hook_that_never_returns_is_stopped(tmp_path: Path) -> None:
    """A hook that waits forever is killed after the timeout, a BuildFailed (exit 5) naming
    the backend and the tree."""
    from samebits.install.build import BuildFailed, build_system, unpack_sdist
    from samebits.install.buildhooks import dynamic_requires
    from samebits.lock.builds import BuildRequirement

    sdist = DynSdist("tinypkg", "1.0", hook="hang")
    index = write_dyn_index(tmp_path / "index", sdist)
    tree = unpack_sdist(index / sdist.filename, tmp_path / "src")
    held = [(BuildRequirement(name=w.name, version=w.version,
                              url=(index / w.filename).as_uri(), sha256=sha(index / w.filename)),
             index / w.filename) for w in (DYNBACK_WHEEL, BACKEND_WHEEL)]
    with pytest.raises(BuildFailed) as err:
        dynamic_requires(tree, build_system(tree), python=sys.executable, requires=held,
                         epoch=315532800, work=tmp_path / "work", timeout=2)
    assert err.value.message == (
        "dynback's get_requires_for_build_wheel of tinypkg-1.0 ran past 2 s")
    assert err.value.exit_code == 5


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(("lit", "instant", "setuptools"), [
    ("16.0.6", "2023-06-26T13:26:26Z", "68.0.0"),  # torch 2.0.1's triton 2.0.0, June 2023
    ("18.1.1", "2024-03-13T00:00:00Z", "69.1.1"),
], ids=["lit-16.0.6", "lit-18.1.1"])
def test_real_lit_sdist_locks_and_installs_from_an_empty_cache(
        tmp_path: Path, lit: str, instant: str, setuptools: str) -> None:
    """PyPI's lit sdists say ``requires = ["setuptools"]``; that setuptools (< 70.1) asks for
    ``wheel`` from get_requires_for_build_wheel. From an empty cache the lock records both
    (wheel as what the backend asked for), and an install into a prefix with another empty
    cache builds the same bytes and verify env finds it identical."""
    p = Project(tmp_path, index=False, instant=instant, reqs=f'"lit=={lit}"')
    assert (res := p.run("lock")).returncode == 0, res.stderr
    (pkg,) = parse_lock(p.lockfile).packages_for("linux-64", "pip")
    assert pkg.filename == f"lit-{lit}.tar.gz"
    record = p.record()
    assert (record.backend, record.dynamic) == ("setuptools.build_meta", ("wheel",))
    names = {r.name: r.version for r in record.requires}
    assert names["setuptools"] == setuptools
    assert "wheel" in names
    assert all(r.url.startswith("https://files.pythonhosted.org/") for r in record.requires)
    assert record.wheel == f"lit-{lit}-py3-none-any.whl"
    res = p.run("install", "env", "--target", str(tmp_path / "env"), "--no-bytecode",
                "--python", sys.executable, "--json", cache="fresh")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True


def test_an_in_tree_backend_is_asked_through_its_backend_path(tmp_path: Path) -> None:
    """A backend in the tree itself (``backend-path``, PEP 517) is found there and asked; the
    UserWarning it raises (as distutils does for an unknown setup() option) is not repeated
    here (pytest would make it an error)."""
    from samebits.install.build import build_system
    from samebits.install.buildhooks import run_hook

    tree = tmp_path / "intree-1.0"
    (tree / "_build").mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = '
                                         '"inback"\nbackend-path = ["_build"]\n')
    (tree / "_build" / "inback.py").write_text(
        "import warnings\n\n\ndef get_requires_for_build_wheel(config_settings=None):\n"
        "    warnings.warn(\"Unknown distribution option: 'x'\")\n"
        "    return ['tinyextra==1.0']\n")
    assert run_hook(tree, build_system(tree), python=sys.executable,
                    epoch=315532800) == ("tinyextra==1.0",)

"""Foreign locks read into samebits' Lock: pixi.lock, uv.lock, pylock.toml, requirements.txt,
conda explicit files. Every file here was written by the real tool (tests/data/foreign/README.md)
or is written by it during the test (uv, pip-compile, conda-lock)."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samebits.errors import LockfileError, UsageError
from samebits.foreign.model import ReadOptions
from samebits.foreign.target import Target
from samebits.lock.model import parse_lock
from samebits.lock.read import load_lock, lock_format
from tests.fixtures.render import (  # noqa: F401  (fixtures)
    RenderProject,
    render_project,
    render_wheel_dir,
    run_cli,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parents[1] / "data" / "foreign"
PYPI = DATA / "pypi"
SHARED_PIXI = ROOT.parent / "shared" / "fixtures" / "pixi" / "esmvalcore.pixi.lock.gz"
LINUX = ReadOptions(platforms=("linux-64",), python="3.12")


@pytest.fixture(scope="module")
def esm_pixi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real pixi.lock (version 7) of ESMValCore, unpacked."""
    if not SHARED_PIXI.exists():
        pytest.skip(f"{SHARED_PIXI} is not here (the shared fixtures travel beside the repo)")
    out = tmp_path_factory.mktemp("pixi") / "esmvalcore.pixi.lock"
    out.write_bytes(gzip.decompress(SHARED_PIXI.read_bytes()))
    return out


def _pixi_truth(path: Path, env: str, platform: str) -> tuple[dict, list]:
    """The file's own entries, read with plain YAML: url -> entry, and the env's list."""
    doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    entries = {e.get("conda") or e.get("pypi"): e for e in doc["packages"]}
    return entries, doc["environments"][env]["packages"][platform]


@pytest.mark.parametrize("env", ["default", "test-py312"])
def test_real_pixi_v7_keeps_every_hash(esm_pixi: Path, env: str) -> None:
    """Every conda package of the env keeps URL, sha256 and md5; the local project is dropped."""
    loaded = load_lock(esm_pixi, ReadOptions(environment=env))
    assert loaded.format == "pixi.lock v7"
    assert loaded.lock.platforms == ("linux-64", "osx-arm64")
    for platform in loaded.lock.platforms:
        entries, listed = _pixi_truth(esm_pixi, env, platform)
        conda_urls = [x["conda"] for x in listed if "conda" in x]
        got = {p.url: p for p in loaded.lock.packages_for(platform, "conda")}
        assert sorted(got) == sorted(conda_urls)
        for url in conda_urls:
            assert (got[url].sha256, got[url].md5) == (entries[url]["sha256"],
                                                       entries[url]["md5"]), url
        pypi = [x["pypi"] for x in listed if "pypi" in x]
        assert pypi == ["."]
    assert [(d.platform, d.name, d.source) for d in loaded.conversion.dropped] == [
        ("linux-64", "esmvalcore", "."), ("osx-arm64", "esmvalcore", ".")]
    assert loaded.conversion.dropped[0].reason == ("a local path: built from source, no "
                                                   "artifact is locked")


@pytest.mark.parametrize("env", ["default", "test"])
def test_real_pixi_v6_keeps_every_hash(env: str) -> None:
    """A pixi.lock version 6 written by pixi itself (its own test project, with PyPI wheels and
    a git dependency): every conda package keeps URL, sha256 and md5, every PyPI wheel its URL
    and sha256, and the git checkout is named as not carried, per platform."""
    path = DATA / "pixi" / "pixi-test-project-export.pixi.lock"
    loaded = load_lock(path, ReadOptions(environment=env))
    assert loaded.format == "pixi.lock v6"
    assert loaded.lock.platforms == ("linux-64", "osx-64", "osx-arm64")
    for platform in loaded.lock.platforms:
        entries, listed = _pixi_truth(path, env, platform)
        conda = {p.url: p for p in loaded.lock.packages_for(platform, "conda")}
        assert sorted(conda) == sorted(x["conda"] for x in listed if "conda" in x)
        for url, p in conda.items():
            assert (p.sha256, p.md5) == (entries[url]["sha256"], entries[url]["md5"]), url
        wheels = [x["pypi"] for x in listed if x.get("pypi", "").startswith("https://")]
        pip = {p.url: p for p in loaded.lock.packages_for(platform, "pip")}
        assert sorted(pip) == sorted(wheels) and len(wheels) >= 3
        for url, p in pip.items():
            assert p.sha256 == entries[url]["sha256"], url
    dropped = [(d.platform, d.name) for d in loaded.conversion.dropped]
    assert dropped == [(plat, "test-git-subdir-roundtrip") for plat in loaded.lock.platforms]
    assert all("a VCS checkout" in d.reason for d in loaded.conversion.dropped)


def test_pixi_v6_pypi_wheels_keep_url_and_hash() -> None:
    """A v6 file: conda packages with both hashes, PyPI wheels with URL and sha256."""
    loaded = load_lock(DATA / "pixi" / "v6.pixi.lock")
    entries, _ = _pixi_truth(DATA / "pixi" / "v6.pixi.lock", "default", "linux-64")
    assert loaded.format == "pixi.lock v6"
    pip = {p.name: p for p in loaded.lock.packages_for("linux-64", "pip")}
    assert sorted(pip) == ["python-dateutil", "six"]
    for p in pip.values():
        assert p.sha256 == entries[p.url]["sha256"]
    assert pip["python-dateutil"].dependencies == (("six", "*"),)
    conda = {p.name: p for p in loaded.lock.packages_for("linux-64", "conda")}
    assert conda["_openmp_mutex"].build == "20_gnu"
    assert conda["_openmp_mutex"].dependencies == (("__glibc", ">=2.17,<3.0.a0"),
                                                   ("libgomp", ">=7.5.0"))
    assert [str(d) for d in loaded.conversion.dropped] == [
        "linux-64: mypaper (./src/mypaper): a local path: built from source, no "
        "artifact is locked"]
    docs = load_lock(DATA / "pixi" / "v6.pixi.lock", ReadOptions(environment="docs"))
    assert [p.name for p in docs.lock.packages] == ["tzdata"]


@pytest.mark.parametrize("version, message", [
    ("5", "pixi.lock version 5: samebits reads versions 6 and 7"),
    ("8", "pixi.lock version 8: samebits reads versions 6 and 7"),
])
def test_pixi_other_versions_refused_by_name(tmp_path: Path, version: str, message: str) -> None:
    """An older or newer pixi.lock is refused, naming its version and how to update it."""
    text = (DATA / "pixi" / "v6.pixi.lock").read_text().replace("version: 6", f"version: "
                                                                 f"{version}", 1)
    path = tmp_path / "pixi.lock"
    path.write_text(text)
    with pytest.raises(LockfileError) as err:
        load_lock(path)
    assert err.value.message == f"{path}: {message}"
    assert err.value.hint == ("rewrite it with a current pixi (`pixi lock`; pixi 0.68 and "
                              "later write version 7)")


def test_pixi_wheel_with_md5_only_is_carried_unhashed(tmp_path: Path) -> None:
    """A PyPI entry with an md5 and no sha256 (found by the fuzz test): carried without a
    sha256, so install refuses it, instead of py-rattler's AttributeError."""
    text = (DATA / "pixi" / "v6.pixi.lock").read_text().replace(
        "sha256: 4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274",
        "md5: 00000000000000000000000000000000")
    path = tmp_path / "pixi.lock"
    path.write_text(text)
    six = next(p for p in load_lock(path).lock.packages if p.name == "six")
    assert six.sha256 is None


def test_pixi_unknown_environment_lists_them() -> None:
    """--lock-env with a name the file lacks: a usage error naming every environment."""
    with pytest.raises(UsageError) as err:
        load_lock(DATA / "pixi" / "v6.pixi.lock", ReadOptions(environment="gpu"))
    assert err.value.message == (f"{DATA / 'pixi' / 'v6.pixi.lock'}: no environment 'gpu' "
                                 "(it has default, docs)")


def test_pixi_torn_file_is_named(tmp_path: Path) -> None:
    """A truncated pixi.lock is a lockfile error naming the file, not a traceback."""
    path = tmp_path / "pixi.lock"
    path.write_text((DATA / "pixi" / "v6.pixi.lock").read_text()[:900])
    with pytest.raises(LockfileError) as err:
        load_lock(path)
    assert err.value.message.startswith(f"{path}: not a readable pixi.lock v6: ")


def test_explicit_of_the_projects_cpu_lock_is_the_lock() -> None:
    """conda-lock's explicit rendering of lockfiles/cpu converts back to the same packages."""
    loaded = load_lock(DATA / "explicit" / "cpu-linux-64.explicit.txt")
    lock = parse_lock(ROOT / "lockfiles" / "cpu.conda-lock.yml")
    assert loaded.format == "conda explicit" and loaded.lock.platforms == ("linux-64",)

    def ident(packages):
        return sorted((p.manager, p.name, p.version, p.url, p.sha256) for p in packages)

    assert ident(loaded.lock.packages) == ident(lock.packages_for("linux-64"))


def test_explicit_rendered_by_conda_lock_keeps_conda_hashes(render_project: RenderProject,
                                                            tmp_path: Path) -> None:
    """`conda-lock render --kind explicit` of a lock with a conda part: url, md5, build kept."""
    lockfile = render_project.lockfile("gpu")
    proc = subprocess.run([sys.executable, "-m", "conda_lock", "render", "--kind", "explicit",
                           "-p", "linux-64", "--filename-template", "gpu-{platform}.txt",
                           str(lockfile)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = load_lock(tmp_path / "gpu-linux-64.txt")
    want = [p for p in parse_lock(lockfile).packages_for("linux-64")]
    got = {(p.manager, p.name): p for p in loaded.lock.packages}
    assert len(got) == len(want)
    for p in want:
        q = got[(p.manager, p.name)]
        assert (q.url, q.version, q.build if p.manager == "conda" else None, q.md5, q.sha256) \
            == (p.url, p.version, p.build if p.manager == "conda" else None,
                p.md5 if p.manager == "conda" else None,
                None if p.manager == "conda" else p.sha256)


@pytest.mark.parametrize("lines, message", [
    ("@EXPLICIT\nhttps://x/linux-64/a-1-0.conda#nothex\n",
     "line 2: 'https://x/linux-64/a-1-0.conda#nothex': not a hash (expected #<md5>, "
     "#sha256:<hex>)"),
    ("https://x/linux-64/a-1-0.conda\n@EXPLICIT\n",
     "line 1: 'https://x/linux-64/a-1-0.conda': before @EXPLICIT"),
    ("@EXPLICIT\nhttps://x/linux-64/notapackage.txt\n",
     "line 2: 'https://x/linux-64/notapackage.txt': not a conda package URL "
     "(…/name-version-build.conda or .tar.bz2)"),
])
def test_explicit_bad_lines_named(tmp_path: Path, lines: str, message: str) -> None:
    """A bad explicit line: the file, the line number and the line."""
    path = tmp_path / "env.txt"
    path.write_text(lines)
    with pytest.raises(LockfileError) as err:
        load_lock(path)
    assert err.value.message == f"{path}: {message}"


def test_explicit_sha256_fragment(tmp_path: Path) -> None:
    """conda's ``#sha256:`` fragment is read as the archive's sha256."""
    sha = "ab" * 32
    path = tmp_path / "env.txt"
    path.write_text(f"# platform: linux-aarch64\n@EXPLICIT\n"
                    f"https://c/linux-aarch64/zlib-1.3.1-h0_2.conda#sha256:{sha}\n")
    (p,) = load_lock(path).lock.packages
    assert (p.name, p.version, p.build, p.platform, p.sha256, p.md5) == (
        "zlib", "1.3.1", "h0_2", "linux-aarch64", sha, None)


def _ident(loaded) -> list[tuple[str, str, str, str, str | None]]:
    return sorted((p.platform, p.name, p.version, p.url, p.sha256)
                  for p in loaded.lock.packages)


def test_uv_lock_and_pylock_written_by_uv_agree() -> None:
    """The uv.lock and the pylock.toml uv exported from it give the same wheels and hashes."""
    uv = load_lock(PYPI / "uv.lock", LINUX)
    pylock = load_lock(PYPI / "pylock.toml", LINUX)
    assert (uv.format, pylock.format) == ("uv.lock", "pylock.toml")
    assert _ident(uv) == _ident(pylock)
    assert [p.name for p in uv.lock.packages] == ["idna", "python-dateutil", "six"]
    assert uv.conversion.notes == ("samebits-fixture is a virtual project: nothing of its own "
                                   "to install",)
    assert uv.lock.meta("python") == "3.12" and uv.lock.meta("__glibc.linux-64") == "2.28"


def test_universal_locks_default_to_both_linux_platforms() -> None:
    """With no platform named, uv.lock is converted for linux-64 and linux-aarch64."""
    loaded = load_lock(PYPI / "uv.lock", ReadOptions(python="3.12"))
    assert loaded.lock.platforms == ("linux-64", "linux-aarch64")
    assert len(loaded.lock.packages_for("linux-aarch64")) == 3


@pytest.fixture(scope="module")
def tools_project(tmp_path_factory: pytest.TempPathFactory, render_wheel_dir: Path) -> Path:
    """A project whose uv.lock, pylock.toml and requirements.txt the real uv and pip-compile
    write against a local folder of wheels (offline); the uv.lock forks: tinyapp 1.0 on Linux,
    1.1 on Windows."""
    root = tmp_path_factory.mktemp("tools")
    wheels = root / "wheels"
    shutil.copytree(render_wheel_dir, wheels)
    proj = root / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "fl"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        "dependencies = [\"tinyapp==1.0; sys_platform == 'linux'\", "
        "\"tinyapp==1.1; sys_platform == 'win32'\"]\n"
        '[tool.uv]\nno-index = true\nfind-links = ["../wheels"]\n')
    from samebits.solve.pypi import uv_binary

    env = {"PATH": "/usr/bin:/bin", "HOME": str(root)}  # no user uv.toml or pip.conf
    for cmd in (["lock", "--offline"],
                ["export", "--offline", "--format", "pylock.toml", "-o", "pylock.toml"]):
        proc = subprocess.run([uv_binary(), *cmd], cwd=proj, capture_output=True, text=True,
                              env=env)
        assert proc.returncode == 0, proc.stderr
    (proj / "requirements.in").write_text("tinyapp==1.0\n")
    proc = subprocess.run([sys.executable, "-m", "piptools", "compile", "--generate-hashes",
                           "--no-index", "--find-links", "../wheels", "requirements.in",
                           "-o", "requirements.txt"], cwd=proj, capture_output=True,
                          text=True, env={**env, "PIP_CONFIG_FILE": "/dev/null"})
    assert proc.returncode == 0, proc.stderr
    # pip-compile keeps --find-links but never writes --no-index; without it the file would
    # also ask PyPI (as `pip install -r` would), and this test stays offline
    reqs = proj / "requirements.txt"
    reqs.write_text("--no-index\n" + reqs.read_text())
    return proj


def test_local_tools_agree_and_markers_hold(tools_project: Path) -> None:
    """uv.lock, pylock.toml, requirements.txt from a local index: same wheels; of uv's fork,
    the Linux branch is taken; uv's unhashed local wheels are said so."""
    uv = load_lock(tools_project / "uv.lock", LINUX)
    pylock = load_lock(tools_project / "pylock.toml", LINUX)
    reqs = load_lock(tools_project / "requirements.txt", LINUX)
    assert [(p.name, p.version) for p in uv.lock.packages] == [("tinyapp", "1.0"),
                                                               ("tinylib", "1.2")]
    assert [(p.url, p.sha256) for p in pylock.lock.packages] == \
        [(p.url, p.sha256) for p in reqs.lock.packages]
    assert [p.url for p in uv.lock.packages] == [p.url for p in pylock.lock.packages]
    assert all(p.sha256 is None for p in uv.lock.packages)
    assert uv.conversion.notes[-1] == ("uv recorded no hash for tinyapp, tinylib (a local "
                                       "folder): install refuses them")


def test_requirements_hash_must_match_the_index(tools_project: Path, tmp_path: Path) -> None:
    """A requirements hash the index's file does not have: that package is dropped, named."""
    text = (tools_project / "requirements.txt").read_text()
    bad = tmp_path / "requirements.txt"
    good = text.split("--hash=sha256:")[1][:64]
    bad.write_text(text.replace(good, "0" * 64).replace("../wheels",
                                                         str(tools_project.parent / "wheels")))
    loaded = load_lock(bad, LINUX)
    assert [p.name for p in loaded.lock.packages] == ["tinylib"]
    (d,) = loaded.conversion.dropped
    assert d.reason == (f"no file of tinyapp==1.0 with one of its hashes on "
                        f"{tools_project.parent / 'wheels'}")
    assert loaded.conversion.choices[-1] == ("indexes", str(tools_project.parent / "wheels"))


def test_requirements_every_problem_listed(tmp_path: Path) -> None:
    """Unpinned, unhashed and unsupported lines are all listed, each with its line number."""
    path = tmp_path / "requirements.txt"
    path.write_text("six>=1 --hash=sha256:" + "a" * 64 + "\nidna==3.10\n-c constraints.txt\n"
                    "attrs==1 --hash=md5:abc\n")
    with pytest.raises(LockfileError) as err:
        load_lock(path)
    assert err.value.message == (
        "4 problems:\n"
        f"  {path}:1: 'six>=1': not pinned with == (pip's hash-checking mode needs an exact "
        "version)\n"
        f"  {path}:2: idna==3.10: no --hash (pip's hash-checking mode needs one on every "
        "requirement)\n"
        f"  {path}:3: option '-c' is not supported here\n"
        f"  {path}:4: attrs: --hash='md5:abc': samebits checks sha256 hashes only")


@pytest.mark.parametrize("name, text, fmt", [
    ("x.conda-lock.yml", "version: 1\nmetadata: {}\npackage: []\n", "conda-lock"),
    ("bad.yml", "version: 1\npackage: 3\n", "conda-lock"),  # conda-lock's parser says why
    ("pixi.lock", "version: 7\nenvironments: {}\npackages: []\n", "pixi.lock"),
    ("env.txt", "# platform: linux-64\n@EXPLICIT\n", "conda explicit"),
    ("uv.lock", 'version = 1\n[[package]]\nname = "a"\n', "uv.lock"),
    ("pylock.toml", 'lock-version = "1.0"\n', "pylock.toml"),
    ("reqs.txt", "a==1 --hash=sha256:" + "0" * 64 + "\n", "requirements.txt"),
])
def test_sniff(tmp_path: Path, name: str, text: str, fmt: str) -> None:
    """The format is told from the content."""
    path = tmp_path / name
    path.write_text(text)
    assert lock_format(path) == fmt


def test_unknown_format_named(tmp_path: Path) -> None:
    """A file in no format samebits reads: the error names it and lists what is read."""
    path = tmp_path / "notes.txt"
    path.write_text("numpy\n")
    with pytest.raises(LockfileError) as err:
        load_lock(path)
    assert err.value.message == f"{path}: not a lock samebits reads"
    assert err.value.hint.startswith("samebits reads a conda-lock file, pixi.lock (v6, v7)")


@pytest.mark.parametrize("glibc, platform, files, best", [
    ("2.28", "linux-64", ["a-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                          "a-1-cp312-cp312-manylinux_2_28_x86_64.whl"], 1),
    ("2.17", "linux-64", ["a-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                          "a-1-cp312-cp312-manylinux_2_28_x86_64.whl"], 0),
    ("2.28", "linux-aarch64", ["a-1-cp312-cp312-manylinux2014_aarch64.whl",
                               "a-1-py3-none-any.whl"], 0),
    ("2.28", "linux-64", ["a-1-cp311-cp311-manylinux_2_17_x86_64.whl", "a-1-py3-none-any.whl"],
     1),
    ("2.28", "linux-64", ["a-1-cp312-cp312-macosx_11_0_arm64.whl"], None),
])
def test_wheel_choice_follows_pip(glibc: str, platform: str, files: list[str],
                                  best: int | None) -> None:
    """The wheel chosen for a target is pip's: newest fitting manylinux, then pure Python."""
    target = Target(platform=platform, python="3.12", glibc=glibc)
    assert target.best(enumerate(files)) == best


@pytest.mark.slow
def test_render_conda_of_real_pixi(esm_pixi: Path, tmp_path: Path) -> None:
    """`samebits render conda` of the pixi.lock: one explicit line per conda package."""
    proc = run_cli("render", "conda", str(esm_pixi), "--platform", "linux-64", "--out",
                   str(tmp_path / "out"), "--root", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"{esm_pixi}: read as pixi.lock v7 (environment default)\n")
    explicit = (tmp_path / "out" / "esmvalcore" / "linux-64.explicit.txt").read_text()
    lines = [ln for ln in explicit.splitlines() if ln and not ln.startswith(("#", "@"))]
    entries, listed = _pixi_truth(esm_pixi, "default", "linux-64")
    want = sorted(f"{x['conda']}#{entries[x['conda']]['md5']}" for x in listed if "conda" in x)
    assert sorted(lines) == want


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["pixi.lock", "uv.lock", "pylock.toml", "requirements.txt",
                        "env.txt"]),
       st.sampled_from([
           (DATA / "pixi" / "v6.pixi.lock").read_text(), (PYPI / "uv.lock").read_text(),
           (PYPI / "pylock.toml").read_text(),
           "# platform: linux-64\n@EXPLICIT\nhttps://c/linux-64/a-1-h0_0.conda#" + "0" * 32]),
       st.integers(min_value=0, max_value=4000), st.text(max_size=40))
def test_readers_fail_only_with_named_errors(tmp_path: Path, name: str, base: str, cut: int,
                                             junk: str) -> None:
    """A cut and spliced lock of any format: a Lock, or an error naming the file; no crash."""
    path = tmp_path / name
    path.write_text(base[:cut] + junk + base[cut + len(junk):], encoding="utf-8")
    try:
        load_lock(path, ReadOptions(platforms=("linux-64",), python="3.12",
                                    environment=None))
    except (LockfileError, UsageError) as exc:
        assert str(path) in exc.message or exc.message.startswith(("platform", "--lock")), \
            exc.message

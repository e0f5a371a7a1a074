"""Sdist-only packages: `samebits lock` builds each into a wheel (twice) in a locked build
environment and records the build; `samebits install` builds it again (or takes the cached
wheel) and refuses other bytes; what install cannot place is refused before any download.

Real uv, a real PEP 517 backend (tests/fixtures/fakesdists.py, shipped as a wheel in a local
find-links index) and, in the network test, a real sdist-only package from PyPI.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from samebits.lock.builds import BuildRecord, builds_of
from samebits.lock.model import parse_lock
from tests.fixtures.fakesdists import BACKEND_WHEEL, Sdist, SpecFolder, write_index

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"
INSTANT = "2026-01-02T03:04:06Z"  # even: a zip entry holds 2-second steps
EPOCH = int(dt.datetime(2026, 1, 2, 3, 4, 6, tzinfo=dt.timezone.utc).timestamp())
SPEC = """\
generation = "cpu"
python = "{py}"
exclude-newer = "{instant}"
{platforms}
[pypi]
index = "{index}"
requirements = [{reqs}]
"""
LINUX_64 = '[platforms.linux-64]\nglibc = "2.28"'
BOTH = LINUX_64 + '\n[platforms.linux-aarch64]\nglibc = "2.28"'


class Project(SpecFolder):
    def __init__(self, root: Path, *sdists: Sdist) -> None:
        self.root = root
        self.index = write_index(root / "index", *sdists)
        (root / "environments").mkdir()

    def spec(self, reqs: str, *, platforms: str = LINUX_64, name: str = "env") -> None:
        (self.root / "environments" / f"{name}.toml").write_text(SPEC.format(
            py=PY, instant=INSTANT, platforms=platforms, index=self.index.as_uri(),
            reqs=reqs))

    def builds(self) -> dict[tuple[str, str], BuildRecord]:
        return builds_of(parse_lock(self.lockfile).custom, file=str(self.lockfile))


def pypi_project(root: Path, requirement: str, instant: str) -> Project:
    """A project in ``root`` whose one environment requires ``requirement`` from PyPI as of
    ``instant``."""
    (root / "environments").mkdir()
    (root / "environments" / "env.toml").write_text(
        f'generation = "cpu"\npython = "{PY}"\nexclude-newer = "{instant}"\n'
        f'{LINUX_64}\n[pypi]\nrequirements = ["{requirement}"]\n')
    p = Project.__new__(Project)
    p.root = root
    return p


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sdist_only_package_is_locked_with_its_build(tmp_path: Path) -> None:
    """The lock names the sdist (url + sha256) and records its build: the wheel's name and
    sha256, the build environment by URL and sha256, the Python and SOURCE_DATE_EPOCH (the
    spec's exclude-newer); conda-lock's own reader accepts the file."""
    from conda_lock.lockfile import parse_conda_lock_file

    p = Project(tmp_path, Sdist("tinypkg", "1.0"))
    p.spec('"tinypkg==1.0"', platforms=BOTH)
    res = p.run("lock")
    assert res.returncode == 0, res.stderr
    lock = parse_lock(p.lockfile)
    sdist = p.index / "tinypkg-1.0.tar.gz"
    for platform in ("linux-64", "linux-aarch64"):
        (pkg,) = lock.packages_for(platform, "pip")
        assert (pkg.url, pkg.sha256) == (sdist.as_uri(), sha(sdist))
        record = p.builds()[(platform, "tinypkg")]
        assert (record.sdist, record.wheel, record.python, record.source_date_epoch) == (
            sha(sdist), "tinypkg-1.0-py3-none-any.whl", PY, EPOCH)
        backend = p.index / BACKEND_WHEEL.filename
        assert [(r.name, r.version, r.url, r.sha256) for r in record.requires] == [
            ("tinyback", "1.0", backend.as_uri(), sha(backend))]
        assert record.backend == "tinyback"
    built = tmp_path / "cache" / "samebits" / "archives" / record.sha256 / record.wheel
    assert sha(built) == record.sha256  # filed in the cache: an install here builds nothing
    with zipfile.ZipFile(built) as zf:
        assert {i.date_time for i in zf.infolist()} == {
            dt.datetime.fromtimestamp(EPOCH, dt.timezone.utc).timetuple()[:6]}
    assert len(parse_conda_lock_file(p.lockfile).package) == 2


@pytest.mark.parametrize(("names", "message"), [
    ([":all:"], 'env.toml: pypi.no-binary = ":all:": must be a package name (pip\'s :all: is '
     "not taken: name each package)"),
    (["OpenCC", "opencc"], 'env.toml: pypi.no-binary = "opencc": is given twice'),
    ("opencc", 'env.toml: pypi.no-binary = "opencc": must be a list of non-empty strings'),
])
def test_a_bad_no_binary_is_named_by_key_and_value(names: object, message: str) -> None:
    from samebits.errors import SpecError
    from samebits.spec.model import EnvironmentSpec

    data = {"generation": "cpu", "python": "3.12", "platforms": {"linux-64": {"glibc": "2.28"}},
            "pypi": {"requirements": ["opencc"], "no-binary": names}}
    with pytest.raises(SpecError) as err:
        EnvironmentSpec.from_mapping(data, file="env.toml")
    assert str(err.value) == message


def test_no_binary_locks_the_sdist_where_a_wheel_is_there(tmp_path: Path) -> None:
    """``[pypi] no-binary`` (pip's ``--no-binary NAME``, GPT-SoVITS's ``--no-binary=opencc``):
    of a release with both a wheel and an sdist, the lock takes the sdist and records its
    build, where without it the wheel is taken; the spec's digest changes with it."""
    from tests.fixtures.fakewheels import Wheel, wheel_bytes_to

    p = Project(tmp_path, Sdist("tinypkg", "1.0"))
    wheel = wheel_bytes_to(p.index, Wheel(name="tinypkg", version="1.0",
                                         files={"tinypkg/__init__.py": b"X = 1\n"}))
    p.spec('"tinypkg==1.0"')
    assert (res := p.run("lock")).returncode == 0, res.stderr
    (pkg,) = parse_lock(p.lockfile).packages_for("linux-64", "pip")
    assert pkg.url == wheel.as_uri() and not p.builds()
    spec = p.root / "environments" / "env.toml"
    spec.write_text(spec.read_text() + 'no-binary = ["TinyPkg"]\n')
    assert (res := p.run("lock")).returncode == 0, res.stderr
    (pkg,) = parse_lock(p.lockfile).packages_for("linux-64", "pip")
    assert pkg.url == (p.index / "tinypkg-1.0.tar.gz").as_uri()
    assert p.builds()[("linux-64", "tinypkg")].wheel == "tinypkg-1.0-py3-none-any.whl"


@pytest.mark.slow
def test_install_builds_the_sdist_and_verify_env_is_identical(tmp_path: Path) -> None:
    """With an empty cache, install builds the sdist again from the locked inputs, gets the
    recorded bytes, installs the wheel (direct_url.json names the sdist, as pip writes it)
    and verify env finds the prefix identical to the lock."""
    p = Project(tmp_path, Sdist("tinypkg", "1.0"))
    p.spec('"tinypkg==1.0"')
    assert p.run("lock").returncode == 0
    prefix = tmp_path / "env"
    res = p.run("install", "env", "--target", str(prefix), "--no-bytecode",
                "--python", sys.executable, "--json", cache="other-cache")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True
    site = prefix / "lib" / f"python{PY}" / "site-packages"
    assert (site / "tinypkg" / "__init__.py").read_text() == "__version__ = '1.0'\n"
    sdist = p.index / "tinypkg-1.0.tar.gz"
    direct = json.loads((site / "tinypkg-1.0.dist-info" / "direct_url.json").read_text())
    assert (direct["url"], direct["archive_info"]["hashes"]["sha256"]) == (
        sdist.as_uri(), sha(sdist))


def _install(p: Project, prefix: Path, cache: Path) -> None:
    """install_prefix of the lock's linux-64 (no verify env: verify has tests of its own)."""
    from samebits.install import install_prefix
    from samebits.install.sources import Sources
    from samebits.lock.read import load_lock

    env = load_lock(p.lockfile, name="env", root=p.root)
    install_prefix(env, "linux-64", prefix, final=str(prefix), cache=cache,
                   interpreter=sys.executable, sources=Sources(file_roots=(p.root,)))


def test_install_rebuilds_refuses_other_bytes_and_takes_a_cached_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend whose output depends on the machine (here: a variable). The lock's two
    builds agree. With an empty cache, install builds the same bytes where the variable is
    the same; where it differs, other bytes, refused naming the package (the other wheel kept
    for a look); where the recorded wheel is in the cache, it is taken and nothing is built."""
    from samebits.lock.builds import BuildDiffersError

    p = Project(tmp_path, Sdist("tinypkg", "1.0", stamp_env="TINY_STAMP"))
    p.spec('"tinypkg==1.0"')
    assert p.run("lock", TINY_STAMP="locked").returncode == 0
    (record,) = p.builds().values()
    site = Path("lib", f"python{PY}", "site-packages", "tinypkg", "_stamp.py")
    monkeypatch.setenv("TINY_STAMP", "locked")
    _install(p, tmp_path / "a", tmp_path / "cold-a")
    assert (tmp_path / "a" / site).read_text() == "STAMP = 'locked'\n"
    monkeypatch.setenv("TINY_STAMP", "elsewhere")
    with pytest.raises(BuildDiffersError) as err:
        _install(p, tmp_path / "b", tmp_path / "cold-b")
    assert err.value.message.startswith(
        "linux-64: tinypkg 1.0: tinypkg-1.0.tar.gz built here into "
        "tinypkg-1.0-py3-none-any.whl with sha256 ")
    assert (f"the lock recorded tinypkg-1.0-py3-none-any.whl with sha256 {record.sha256}"
            in err.value.message)
    kept = next((tmp_path / "cold-b" / "builds" / "rejected").rglob("*.whl"))
    assert sha(kept) != record.sha256
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
    _install(p, tmp_path / "c", tmp_path / "cache" / "samebits")  # where the lock filed it
    assert (tmp_path / "c" / site).read_text() == "STAMP = 'locked'\n"


@pytest.mark.parametrize(("sdist", "platforms", "expected"), [
    (Sdist("tinypkg", "1.0", stamp_random=True), LINUX_64,
     "environments/env.toml: [pypi] tinypkg 1.0 on linux-64 (an sdist only): two builds of "
     "tinypkg-1.0.tar.gz gave different wheels"),
    (Sdist("tinypkg", "1.0", tag="py3-none-linux_x86_64"), BOTH,
     "environments/env.toml: [pypi] tinypkg 1.0 on linux-aarch64 (an sdist only): it builds "
     "into tinypkg-1.0-py3-none-linux_x86_64.whl, which does not fit linux-aarch64, Python "
     f"{PY}, glibc 2.28: install could not place it"),
], ids=["not-reproducible", "wheel-for-another-platform"])
def test_lock_refuses_a_build_install_could_not_place(tmp_path: Path, sdist: Sdist,
                                                      platforms: str, expected: str) -> None:
    """A build that differs from itself, or a wheel that does not fit a platform of the spec:
    the lock is refused (exit 2), naming the package and platform; nothing is written."""
    p = Project(tmp_path, sdist)
    p.spec('"tinypkg==1.0"', platforms=platforms)
    res = p.run("lock")
    assert res.returncode == 2, res.stderr
    assert expected in res.stderr
    assert not p.lockfile.exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("filename", "why"), [
    ("tinypkg-1.0.tar.gz", "an sdist, and the lock records no build of it"),
    ("tinypkg-1.0-py2.5.egg", "neither a wheel (.whl) nor an sdist (.tar.gz, .zip)"),
])
def test_install_refuses_what_it_cannot_place_before_any_download(
        tmp_path: Path, filename: str, why: str) -> None:
    """A lock naming an sdist without a recorded build (another tool's lock, say) or an egg:
    refused at once with exit 2, every such package named; its host is never asked (a closed
    port: asking would be 'unreachable', exit 4)."""
    from samebits.lock.model import LockedPackage
    from tests.fixtures.install import write_lock

    url = f"http://127.0.0.1:{_closed_port()}/files/{filename}"
    pkgs = [LockedPackage(name=n, version="1.0", manager="pip", platform="linux-64",
                          url=url.replace("tinypkg", n), sha256="a" * 64)
            for n in ("tinypkg", "otherpkg")]
    lock = tmp_path / "foreign.conda-lock.yml"
    write_lock(lock, pkgs, python=PY)
    res = subprocess.run([sys.executable, "-m", "samebits", "install", str(lock), "--target",
                          str(tmp_path / "env"), "--platform", "linux-64", "--python",
                          sys.executable, "--cache-dir", str(tmp_path / "cache")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert ("error: foreign.conda-lock.yml: 2 locked packages install cannot place:\n"
            f"  linux-64: otherpkg 1.0: {filename.replace('tinypkg', 'otherpkg')}: {why}\n"
            f"  linux-64: tinypkg 1.0: {filename}: {why}\n") in res.stderr
    assert "hint: nothing was downloaded" in res.stderr
    assert not (tmp_path / "cache" / "archives").exists()


KEY = "samebits.build.linux-64.tinypkg"
GOOD = BuildRecord(platform="linux-64", name="tinypkg", sdist="a" * 64,
                   wheel="tinypkg-1.0-py3-none-any.whl", sha256="b" * 64, python="3.12",
                   source_date_epoch=EPOCH, backend="tinyback")


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not JSON"),
    ('{"format": 2}', "not a build record of format 1"),
    (GOOD.to_text().replace('"sha256":"' + "b" * 64, '"sha256":"xyz'),
     "incomplete build record (ValueError: not a sha256: 'xyz')"),
])
def test_a_bad_build_record_is_named_by_file_key_and_value(text: str, message: str) -> None:
    """A record samebits did not write (edited, cut short) is a lockfile error quoting it."""
    from samebits.errors import LockfileError

    assert builds_of({GOOD.key: GOOD.to_text()}, file="l.yml") == {("linux-64", "tinypkg"): GOOD}
    with pytest.raises(LockfileError) as err:
        builds_of({KEY: text}, file="l.yml")
    assert err.value.message.startswith(f"l.yml: metadata.custom_metadata.{KEY} = ")
    assert err.value.message.endswith(f": {message}")


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize("instant", ["2026-11-01T00:00:00Z", "2023-05-08T17:28:03Z"],
                         ids=["today's setuptools", "setuptools 67, whose legacy backend asks "
                              "for wheel (triton 2.0.1's lit 16.0.3)"])
def test_real_sdist_only_package_from_pypi(tmp_path: Path, instant: str) -> None:
    """docopt 0.6.2 is an sdist only on PyPI, with no pyproject.toml: the lock builds it with
    PEP 517's default requires (setuptools>=40.8.0 and wheel, resolved from PyPI, recorded by
    URL and sha256) into a py2.py3 wheel; an install with an empty cache builds the same bytes
    and verify env finds the prefix identical."""
    root = tmp_path
    p = pypi_project(root, "docopt==0.6.2", instant)
    assert (res := p.run("lock")).returncode == 0, res.stderr
    (pkg,) = parse_lock(p.lockfile).packages_for("linux-64", "pip")
    assert pkg.filename == "docopt-0.6.2.tar.gz"
    (record,) = p.builds().values()
    assert record.wheel == "docopt-0.6.2-py2.py3-none-any.whl"
    assert {"setuptools", "wheel"} <= {r.name for r in record.requires}  # wheel: +packaging
    assert record.requires[0].url.startswith("https://files.pythonhosted.org/")
    res = p.run("install", "env", "--target", str(root / "env"), "--no-bytecode", "--python",
                sys.executable, cache="fresh")
    assert res.returncode == 0, res.stderr


def test_an_sdist_whose_build_needs_a_wheel_of_the_specs_python(tmp_path: Path) -> None:
    """uv builds an sdist for its metadata on the interpreter it is given: basicsr 1.4.2's
    build needs torch, which had no wheel for the Python running samebits, and a spec of
    another Python failed to lock (issue 41's corpus: Real-ESRGAN). The spec's own line is
    given to uv: a build requirement with a wheel for that Python alone locks."""
    from tests.fixtures.fakewheels import Wheel, wheel_bytes_to
    from tests.fixtures.pythons import pyenv_python, skip_reason

    other = "3.10" if PY != "3.10" else "3.12"
    if pyenv_python(other) is None:
        pytest.skip(skip_reason(other))
    tag = f"cp{other.replace('.', '')}"
    p = Project(tmp_path, Sdist("needsabi", "1.0", requires=("tinyback==1.0", "abionly==1.0")))
    wheel_bytes_to(p.index, Wheel(name="abionly", version="1.0", tag=f"{tag}-none-any"))
    (p.root / "environments" / "env.toml").write_text(SPEC.format(
        py=other, instant=INSTANT, platforms=LINUX_64, index=p.index.as_uri(),
        reqs='"needsabi==1.0"'))
    res = p.run("lock")
    assert res.returncode == 0, res.stderr
    (record,) = p.builds().values()
    assert [r.name for r in record.requires] == ["abionly", "tinyback"]
    assert record.python == other


def test_a_build_that_stamps_its_date_is_reproducible(tmp_path: Path) -> None:
    """A backend that writes time.asctime() into the wheel (basicsr 1.4.2's setup.py, a
    second between the builds): the date it reads is SOURCE_DATE_EPOCH, so the two builds
    agree and the lock records it (it was 'two builds ... gave different wheels'); install
    from another cache builds the same bytes."""
    p = Project(tmp_path, Sdist("tinypkg", "1.0", stamp_time=True))
    p.spec('"tinypkg==1.0"')
    res = p.run("lock")
    assert res.returncode == 0, res.stderr
    (record,) = p.builds().values()
    site = f"lib/python{PY}/site-packages/tinypkg/_stamp.py"
    _install(p, tmp_path / "env", tmp_path / "other-cache")  # built again, checked by hash
    assert (tmp_path / "env" / site).read_text() == "# TIME: Fri Jan  2 03:04:06 2026\n"
    assert record.source_date_epoch == EPOCH


def test_a_build_that_writes_its_folder_is_reproducible(tmp_path: Path) -> None:
    """A backend that writes the folder it builds in into the wheel (opencc 1.4.1's cmake
    install prefix, in GPT-SoVITS with --no-binary=opencc): every build of an sdist runs in
    one absolute folder named by the sdist's sha256, on every machine, so the lock's two
    builds agree (they were 'two builds ... gave different wheels') and an install from
    another cache builds the same bytes; the folder is gone after each build."""
    p = Project(tmp_path, Sdist("tinypkg", "1.0", stamp_path=True))
    p.spec('"tinypkg==1.0"')
    assert (res := p.run("lock")).returncode == 0, res.stderr
    sdist = sha(p.index / "tinypkg-1.0.tar.gz")
    folder = f"/tmp/samebits-build-{sdist[:32]}"
    _install(p, tmp_path / "env", tmp_path / "other-cache")  # built again, checked by hash
    site = tmp_path / "env" / f"lib/python{PY}/site-packages/tinypkg/_stamp.py"
    assert site.read_text().startswith(f"PREFIX = '{folder}/")
    assert not Path(folder).exists()


@pytest.mark.network
@pytest.mark.slow
def test_a_c_extension_sdist_builds_the_same_bytes_in_any_folder(tmp_path: Path) -> None:
    """pesq 0.0.4 (BigVGAN's metric) is an sdist only: Cython and C, compiled against the
    numpy headers of its build environment. Built twice by the lock and again by an install
    with an empty cache, it is the same wheel: the build's folder is written as /build and
    the build environment is in no debug info. The caller's CFLAGS
    (``-O0``: other code if it reached the compiler) do not reach the build."""
    root = tmp_path
    p = pypi_project(root, "pesq==0.0.4", "2023-01-01T00:00:00Z")
    assert (res := p.run("lock")).returncode == 0, res.stderr
    (record,) = p.builds().values()
    assert record.wheel == f"pesq-0.0.4-cp{PY.replace('.', '')}-cp{PY.replace('.', '')}" \
        "-linux_x86_64.whl"
    assert {"cython", "numpy"} <= {r.name for r in record.requires}
    res = p.run("install", "env", "--target", str(root / "env"), "--no-bytecode", "--python",
                sys.executable, "--json", cache="fresh", CFLAGS="-O0 -DSAMEBITS_CALLER=1",
                LDFLAGS="-Wl,--build-id=uuid")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True


@pytest.mark.network
@pytest.mark.slow
def test_a_cython_module_that_cimports_numpy_builds_the_same_bytes(tmp_path: Path) -> None:
    """pyopenjtalk 0.4.1 (GPT-SoVITS's requirements, the sweep's one divergence: pip
    installs it, samebits' lock refused it): its Cython module names numpy's
    ``__init__.cython-30.pxd`` by its path from the build's tree, which ran through the random
    folder of uv's own build environment (``../../tmp/.tmpXXXXXX/builds-v0/.tmpXXXXXX/...``),
    so two builds gave two wheels. The build environment is a venv at a fixed place beside the
    tree now: the lock's two builds agree, and an install from an empty cache builds the same
    bytes again."""
    root = tmp_path
    p = pypi_project(root, "pyopenjtalk==0.4.1", "2026-08-18T09:16:25Z")
    assert (res := p.run("lock")).returncode == 0, res.stderr
    records = p.builds()
    assert {"cython", "numpy"} <= {r.name for r in records[("linux-64", "pyopenjtalk")].requires}
    res = p.run("install", "env", "--target", str(root / "env"), "--no-bytecode", "--python",
                sys.executable, "--json", cache="fresh")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["verify"]["identical"] is True


def test_a_failed_build_shows_the_backends_own_words(tmp_path: Path) -> None:
    """A backend that fails (tokenizers' setuptools-rust without Rust) is named with the last
    lines it wrote, not only uv's summary."""
    from samebits.install.build import BuildFailed, build_tree

    tree = tmp_path / "needsrust-1.0"
    (tree / "_build").mkdir(parents=True)
    (tree / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = '
                                         '"rustback"\nbackend-path = ["_build"]\n')
    (tree / "_build" / "rustback.py").write_text(
        "import sys\n\n\ndef build_wheel(wheel_directory, config_settings=None, "
        "metadata_directory=None):\n"
        "    print('error: can\\'t find Rust compiler', file=sys.stderr)\n"
        "    raise SystemExit(1)\n")
    with pytest.raises(BuildFailed) as err:
        build_tree(tree, python=sys.executable, requires=[], epoch=315532800,
                   work=tmp_path / "work")
    assert "uv build of needsrust-1.0 failed (exit " in err.value.message
    assert "error: can't find Rust compiler" in err.value.message

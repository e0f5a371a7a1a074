"""samebits init: an author's file -> environments/NAME.toml that `samebits lock` locks.

Offline tests ask a real PEP 691 index on loopback (tests/fixtures/pypi_index.py: upload times, PEP
658
metadata) and lock with the real uv against it; the network tests run init on the real paper
inputs in tests/data/papers-inputs/ (untouched) against PyPI, and lock one of them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from samebits_app.cli import main
from tests.fixtures.fakewheels import Wheel, write_wheels
from tests.fixtures.pypi_index import LocalIndex, Serving

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PAPERS = Path(__file__).parents[1] / "data" / "papers-inputs"
ROOT = Path(__file__).resolve().parents[2]
LINUX = 'platform_system == "Linux"'
UPLOADS = {
    "numpy": "2023-06-26T13:22:33.184535Z",
    "torch": "2024-03-27T21:09:48.166504Z",
    "nvidia_cuda_runtime_cu12": "2023-04-19T15:55:20Z",
    "six-1.16.0": "2021-05-05T14:18:17Z",
    "six-1.17.0": "2024-12-04T17:35:26Z",  # after the pins: exclude-newer keeps it out
}
REQUIREMENTS = "numpy==1.24.4\ntorch==2.2.2\nsix  # not pinned\n"


def _wheels() -> list[Wheel]:
    out = [Wheel(name="numpy", version="1.24.4", tag=f"cp{v}-cp{v}-manylinux_2_17_x86_64")
           for v in ("310", "311")]
    out += [Wheel(name="torch", version="2.2.2", tag=f"cp{v}-cp{v}-manylinux1_x86_64",
                  requires=(f"nvidia-cuda-runtime-cu12==12.1.105; {LINUX}", "numpy"))
            for v in ("310", "311", "312")]
    out += [Wheel(name="nvidia-cuda-runtime-cu12", version="12.1.105",
                  tag="py3-none-manylinux1_x86_64"),
            Wheel(name="six", version="1.16.0"), Wheel(name="six", version="1.17.0")]
    return out


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = write_wheels(tmp_path_factory.mktemp("init-index"), _wheels())
    times = {w.name: next(t for k, t in UPLOADS.items() if w.name.startswith(k))
             for w in folder.glob("*.whl")}
    with Serving(LocalIndex(folder=folder, upload_times=times, pep658=True)) as url:
        yield url


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    rc = main([*args, "--json"])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def author_env(folder: Path, line: str) -> Path:
    """A venv of pyenv's Python ``line``: the environment an author ran the paper in, for
    --from-prefix (so a test's choice does not depend on the Python running the tests)."""
    import subprocess

    from tests.fixtures.pythons import pyenv_python, skip_reason

    python = pyenv_python(line)
    if python is None:
        pytest.skip(skip_reason(line))
    subprocess.run([str(python), "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    return folder


@pytest.fixture
def paper(tmp_path: Path) -> Path:
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "requirements.txt").write_text(REQUIREMENTS)
    return tmp_path


def _init(capsys: pytest.CaptureFixture[str], root: Path, index: str,
          *args: str) -> tuple[int, dict]:
    return run(capsys, "init", "kan", "--from", str(root / "paper" / "requirements.txt"),
               "--root", str(root), "--index", index, *args)


def test_cuda_torch_without_generation_says_which(capsys: pytest.CaptureFixture[str],
                                                  paper: Path, index: str) -> None:
    """torch 2.2.2's wheel requires CUDA 12.1's runtime: exit 2 naming the generations it
    serves and cpu; nothing is written."""
    rc, doc = _init(capsys, paper, index)
    assert rc == 2
    assert doc["error"]["message"] == (
        "torch==2.2.2 (its wheel requires nvidia-cuda-runtime-cu12 12.1.105) is a CUDA 12.1 "
        "build: pass --generation volta, ampere, ada or hopper (the GPUs CUDA 12.1 serves), or "
        "--generation cpu to run it without a GPU")
    assert not (paper / "environments").exists()


def test_init_writes_a_spec_that_locks(capsys: pytest.CaptureFixture[str], paper: Path,
                                       index: str) -> None:
    """Python 3.11 (numpy 1.24.4 has no cp312 wheel), exclude-newer one second after torch's
    upload, CUDA line and generation; `samebits lock` (real uv) keeps every pin and, at that
    instant, six 1.16.0 rather than the later 1.17.0."""
    env = author_env(paper / "env312", "3.12")
    rc, doc = _init(capsys, paper, index, "--generation", "ampere", "--from-prefix", str(env))
    assert rc == 0, doc
    assert doc["python"] == {"value": "3.11", "why": "the newest of 3.9, 3.10, 3.11, 3.12, "
                             "3.13 with a wheel of every pinned package, not --from-prefix's "
                             "Python (3.12) (no wheel of numpy==1.24.4)"}
    assert doc["exclude_newer"]["value"] == "2024-03-27T21:09:49Z"
    assert doc["generation"]["cuda"] == "12.1"
    spec = tomllib.loads((paper / "environments" / "kan.toml").read_text())
    assert spec == {
        "format": 1, "name": "kan", "description": "from requirements.txt by samebits init",
        "generation": "ampere", "python": "3.11", "exclude-newer": "2024-03-27T21:09:49Z",
        "platforms": {"linux-64": {"glibc": "2.28"}}, "cuda": {"version": "12.1"},
        "pypi": {"index": index, "requirements": ["numpy==1.24.4", "torch==2.2.2", "six"]}}
    assert main(["lock", "kan", "--root", str(paper), "--cache-dir",
                 str(paper / "cache")]) == 0
    capsys.readouterr()
    locked = {p.name: p.version for p in parse_lock(paper / "lockfiles" /
                                                     "kan.conda-lock.yml").packages}
    assert locked == {"numpy": "1.24.4", "torch": "2.2.2", "six": "1.16.0",
                      "nvidia-cuda-runtime-cu12": "12.1.105"}
    # and the lock itself is a FILE init reads: every wheel pinned by its URL (not PyPI's),
    # Python 3.11 from the lock, each wheel's tags checked against it
    rc, doc = run(capsys, "init", "again", "--from",
                  str(paper / "lockfiles" / "kan.conda-lock.yml"), "--root", str(paper),
                  "--generation", "ampere")
    assert rc == 0, doc
    assert doc["python"] == {"value": "3.11", "why": "the Python the file pins"}
    assert sorted(doc["pypi"]["requirements"]) == sorted(
        f"{p.name} @ {p.url}" for p in parse_lock(paper / "lockfiles" /
                                                   "kan.conda-lock.yml").packages)


@pytest.mark.parametrize("line", ["3.10", "3.11"])
def test_the_authors_python_first(capsys: pytest.CaptureFixture[str], paper: Path,
                                  index: str, line: str) -> None:
    """--from-prefix ENV whose Python has a wheel of every pin: that Python, not the newest
    (3.11), and the text's first line says so."""
    env = author_env(paper / f"env{line}", line)
    rc = main(["init", "kan", "--from", str(paper / "paper" / "requirements.txt"), "--root",
               str(paper), "--index", index, "--generation", "cpu", "--from-prefix", str(env)])
    assert rc == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (f"python {line}: --from-prefix's Python ({line}), and every pinned package "
                     "has a wheel for it")


def test_the_python_running_init_is_the_default(capsys: pytest.CaptureFixture[str],
                                                paper: Path, index: str) -> None:
    """Without --from-prefix, the interpreter running samebits is the author's: chosen where
    numpy 1.24.4 has its wheel (3.10, 3.11 in this index), else the newest that has, saying
    why not it."""
    rc, doc = _init(capsys, paper, index, "--generation", "cpu")
    assert rc == 0, doc
    line = f"{sys.version_info[0]}.{sys.version_info[1]}"
    runs = f"the Python you run ({line})"
    if line in ("3.10", "3.11"):
        assert doc["python"] == {"value": line, "why": f"{runs}, and every pinned package has "
                                 "a wheel for it"}
    else:
        assert doc["python"]["value"] == "3.11"
        assert doc["python"]["why"].endswith(f"not {runs} (no wheel of numpy==1.24.4)") or \
            doc["python"]["why"].endswith(f"not {runs} (samebits chooses from 3.9, 3.10, "
                                          "3.11, 3.12, 3.13)")


def test_a_from_prefix_whose_python_does_not_run(capsys: pytest.CaptureFixture[str],
                                                 paper: Path, index: str) -> None:
    """--from-prefix naming a folder without a Python that runs: exit 2 saying so, nothing
    written."""
    rc, doc = _init(capsys, paper, index, "--generation", "cpu", "--from-prefix",
                    str(paper / "paper"))
    assert rc == 2
    assert doc["error"]["message"].startswith(f"--from-prefix {paper / 'paper'}: "
                                              f"{paper / 'paper' / 'bin' / 'python'} does not run")
    assert not (paper / "environments").exists()


def test_python_without_wheels(capsys: pytest.CaptureFixture[str], paper: Path,
                               index: str) -> None:
    """--python-version 3.12: exit 2 naming numpy and the Pythons with its wheels; nothing
    written."""
    rc, doc = _init(capsys, paper, index, "--python-version", "3.12", "--generation", "cpu")
    assert rc == 2
    assert doc["error"] == {
        "kind": "no-wheel",
        "message": "--python-version 3.12: no wheel for linux-64 (glibc 2.28) of 1 pinned "
                   "package:\n"
                   f"  numpy==1.24.4 ({paper / 'paper' / 'requirements.txt'}:1): wheels for "
                   "Python 3.10, 3.11",
        "hint": "pass --python-version 3.11 (every pin has a wheel for 3.10, 3.11)"}
    assert not (paper / "environments").exists()


def test_existing_spec_needs_replace(capsys: pytest.CaptureFixture[str], paper: Path,
                                     index: str) -> None:
    """An existing spec is kept without --replace (before any index is asked); --replace
    writes the new one."""
    (paper / "environments").mkdir()
    (paper / "environments" / "kan.toml").write_text("# mine\n")
    rc, doc = _init(capsys, paper, "http://127.0.0.1:9/never-asked", "--generation", "cpu")
    assert (rc, doc["error"]["message"]) == (
        2, f"{paper / 'environments' / 'kan.toml'}: already exists")
    assert (paper / "environments" / "kan.toml").read_text() == "# mine\n"
    rc, doc = _init(capsys, paper, index, "--generation", "cpu", "--replace")
    assert rc == 0 and doc["generation"]["value"] == "cpu"
    assert "[cuda]" not in (paper / "environments" / "kan.toml").read_text()


def test_lock_of_an_authors_file_hints_init(capsys: pytest.CaptureFixture[str],
                                            paper: Path) -> None:
    """`samebits lock requirements.txt`: not a spec; the hint is the init command."""
    req = paper / "paper" / "requirements.txt"
    rc, doc = run(capsys, "lock", str(req), "--root", str(paper))
    assert rc == 2
    assert doc["error"]["hint"] == f"samebits init paper --from {req}"
    assert doc["error"]["message"] == (f"{req}: an author's requirements.txt, not a spec: a "
                                       "spec is drafted from it first")


def test_environment_yml_with_pip_part(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       index: str) -> None:
    """conda dependencies and channels, the file's Python, its pip: part pinned and checked
    for that Python; exclude-newer as given."""
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels:\n  - conda-forge\ndependencies:\n  - python=3.10\n"
                   "  - scipy=1.10\n  - pip:\n    - numpy==1.24.4\n    - -e .\n")
    rc, doc = run(capsys, "init", "x", "--from", str(env), "--root", str(tmp_path), "--index",
                  index, "--exclude-newer", "2024-01-01")
    assert rc == 0, doc
    spec = tomllib.loads((tmp_path / "environments" / "x.toml").read_text())
    assert spec["python"] == "3.10" and spec["exclude-newer"] == "2024-01-01"
    assert spec["conda"] == {"channels": ["conda-forge"],
                             "dependencies": ["python 3.10.*", "scipy 1.10.*"]}
    assert spec["pypi"]["requirements"] == ["numpy==1.24.4"]
    assert [x["text"] for x in doc["left"]] == ["-e ."]


def test_bad_file_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file with bad lines: every one named, exit 2, no spec."""
    req = tmp_path / "requirements.txt"
    req.write_text("numpy=1.2\n")
    rc, doc = run(capsys, "init", "x", "--from", str(req), "--root", str(tmp_path))
    assert rc == 2 and doc["error"]["kind"] == "source"
    assert doc["error"]["problems"][0]["key"] == "line 1"
    assert not (tmp_path / "environments").exists()


# ------------------------------------------------------------------ real papers, real PyPI

@pytest.mark.network
@pytest.mark.slow
def test_real_paper_requirements_lock_keeps_pins(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    """pykan's requirements.txt, untouched: Python 3.11 (numpy 1.24.4 has no cp312 wheel),
    CUDA 12.1 from torch 2.2.2's wheel, exclude-newer from torch's upload; `samebits lock`
    with real uv against PyPI keeps every pin."""
    source = PAPERS / "pykan" / "requirements.txt"
    rc, doc = run(capsys, "init", "kan", "--from", str(source), "--root", str(tmp_path),
                  "--generation", "ampere")
    assert rc == 0, doc
    assert doc["python"]["value"] == "3.11"
    assert doc["generation"]["cuda"] == "12.1"
    assert doc["exclude_newer"]["value"] == "2024-03-27T21:09:49Z"
    rc = main(["lock", "kan", "--root", str(tmp_path), "--cache-dir", str(tmp_path / "c")])
    capsys.readouterr()
    assert rc == 0
    locked = {p.name: p.version for p in parse_lock(tmp_path / "lockfiles" /
                                                     "kan.conda-lock.yml").packages}
    pins = {"matplotlib": "3.6.2", "numpy": "1.24.4", "scikit-learn": "1.1.3",
            "setuptools": "65.5.0", "sympy": "1.11.1", "torch": "2.2.2", "tqdm": "4.66.2",
            "pandas": "2.0.1"}
    assert {k: locked.get(k) for k in pins} == pins
    assert locked["nvidia-cuda-runtime-cu12"] == "12.1.105" and "seaborn" in locked


@pytest.mark.network
@pytest.mark.slow
def test_exclude_newer_moves_until_the_pins_resolve(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    """iTransformer's requirements.txt (torch==2.0.0, uploaded 2023-03-15): at one second after
    that upload the cp311 triton 2.0.0 wheel torch needs was not on PyPI yet (2023-03-20), so
    the spec would not lock; init moves exclude-newer 7 days on, says why, and it locks."""
    source = ROOT / "tests" / "papers" / "itransformer" / "requirements.txt"
    rc, doc = run(capsys, "init", "it", "--from", str(source), "--root", str(tmp_path),
                  "--generation", "cpu")
    assert rc == 0, doc
    assert doc["exclude_newer"]["value"] == "2023-03-22T16:01:04Z"
    assert "at 2023-03-15T16:01:04Z the index could not yet satisfy the pins" \
        in doc["exclude_newer"]["why"] and "triton" in doc["exclude_newer"]["why"]
    rc = main(["lock", "it", "--root", str(tmp_path), "--cache-dir", str(tmp_path / "c")])
    capsys.readouterr()
    assert rc == 0


@pytest.mark.network
def test_real_paper_python_312_names_numpy(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """pykan with --python-version 3.12: numpy 1.24.4 and the other pins without cp312 wheels named,
    each with the Pythons that have them."""
    rc, doc = run(capsys, "init", "kan", "--from", str(PAPERS / "pykan" / "requirements.txt"),
                  "--root", str(tmp_path), "--python-version", "3.12", "--generation", "cpu")
    assert rc == 2
    lines = doc["error"]["message"].splitlines()
    assert lines[0] == ("--python-version 3.12: no wheel for linux-64 (glibc 2.28) of 4 pinned "
                        "packages:")
    assert any(ln.startswith("  numpy==1.24.4 (") and ln.endswith(
        "): wheels for Python 3.8, 3.9, 3.10, 3.11") for ln in lines)


@pytest.mark.network
def test_real_simcse_gets_the_python_of_its_tokenizers(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """SimCSE's untouched requirements.txt as of its last commit: init resolves against PyPI
    and chooses Python 3.9, where transformers 4.2.1's tokenizers==0.9.4 has its newest wheel
    (it chose 3.10 before, and lock failed building tokenizers' Rust sdist)."""
    source = ROOT / "tests" / "papers" / "simcse" / "requirements.txt"
    rc, doc = run(capsys, "init", "simcse", "--from", str(source), "--root", str(tmp_path),
                  "--generation", "cpu", "--exclude-newer", "2022-06-26T19:02:14Z")
    assert rc == 0, doc
    assert doc["python"]["value"] == "3.9"
    assert "tokenizers==0.9.4 (via transformers)" in doc["python"]["why"]


@pytest.mark.network
@pytest.mark.parametrize(("source", "args", "python", "generation", "cuda", "extra"), [
    ("dinov2/requirements.txt", ("--generation", "ampere"), "3.10", "ampere", "11.7",
     ["https://download.pytorch.org/whl/cu117", "https://pypi.nvidia.com"]),
    # each resolves a whole paper's PyPI stack (about a minute each): slow, outside CI's time
    pytest.param("minigpt4/environment.yml", ("--generation", "volta"), "3.9", "volta", "11.7",
                 [], marks=pytest.mark.slow),
    pytest.param("flux/pyproject.toml", ("--extra", "torch", "--generation", "hopper"), "3.13",
                 "hopper", "12.4", [], marks=pytest.mark.slow),
])
def test_real_paper_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path, source: str,
                           args: tuple[str, ...], python: str, generation: str, cuda: str,
                           extra: list[str]) -> None:
    """DINOv2's requirements.txt (extra indexes download.pytorch.org and pypi.nvidia.com),
    MiniGPT-4's environment.yml (Python 3.9 by the file) and FLUX's pyproject.toml (--extra):
    each becomes a spec that the spec reader accepts, with the file's own facts."""
    env = author_env(tmp_path / "env313", "3.13")  # 3.13 where every pin has a wheel for it
    rc, doc = run(capsys, "init", "p", "--from", str(PAPERS / source), "--root",
                  str(tmp_path), "--from-prefix", str(env), *args)
    assert rc == 0, doc
    assert (doc["python"]["value"], doc["generation"]["value"], doc["generation"]["cuda"]) == \
        (python, generation, cuda)
    assert doc["pypi"]["extra_indexes"] == extra


def test_a_dependency_of_a_pin_with_older_wheels_moves_the_python(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """SimCSE's requirements pin ``transformers==4.2.1``, which pins ``tokenizers==0.9.4``:
    wheels for CPython 3.5-3.9 and an sdist that needs Rust. init chose the Python from the
    file's pins alone (3.11, the Python running it) and lock then failed to build tokenizers.
    Here ``tfm==4.2.1`` (any Python) pins ``tok==0.9.4`` (a cp39 wheel and an sdist): init
    resolves, sees tok built from its sdist at 3.11 where 3.9 has its wheel, and chooses 3.9,
    naming tok and what requires it; the lock then takes tok's wheel."""
    from tests.fixtures.fakesdists import BACKEND_WHEEL, Sdist, write_sdist

    folder = write_wheels(tmp_path / "index", [
        Wheel(name="tfm", version="4.2.1", requires=("tok==0.9.4",)),
        Wheel(name="tok", version="0.9.4", tag="cp39-cp39-manylinux2010_x86_64"),
        BACKEND_WHEEL])
    write_sdist(folder, Sdist(name="tok", version="0.9.4"))
    times = {p.name: "2021-01-05T10:00:00Z" for p in folder.iterdir()}
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "requirements.txt").write_text("tfm==4.2.1\n")
    with Serving(LocalIndex(folder=folder, upload_times=times, pep658=True)) as url:
        rc, doc = run(capsys, "init", "simcse", "--from",
                      str(tmp_path / "paper" / "requirements.txt"), "--root", str(tmp_path),
                      "--index", url, "--generation", "cpu")
        assert rc == 0, doc
        assert doc["python"]["value"] == "3.9"
        assert "no wheel of tok==0.9.4 (via tfm)" in doc["python"]["why"], doc["python"]
        assert main(["lock", "simcse", "--root", str(tmp_path)]) == 0
    capsys.readouterr()
    lock = parse_lock(tmp_path / "lockfiles" / "simcse.conda-lock.yml")
    tok = next(p for p in lock.packages if p.name == "tok")
    assert tok.filename == "tok-0.9.4-cp39-cp39-manylinux2010_x86_64.whl"

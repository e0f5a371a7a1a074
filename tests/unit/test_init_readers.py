"""The readers `samebits init` drafts a spec from: requirements.txt, environment.yml and
pyproject.toml text -> Declared, pure; the real paper inputs in tests/data/papers-inputs/ read
untouched; the choices (Python, exclude-newer, generation) as pure functions of index files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from samebits.errors import NoWheelError, SourceError, UsageError
from samebits.foreign.simpleindex import IndexFile
from samebits.foreign.sources import Requested, read_requirements, source_format
from samebits.foreign.sources_files import (
    conda_spec,
    declared_from_lock,
    pin_conda,
    read_environment_yml,
    read_pyproject,
)
from samebits.foreign.target import Target
from samebits.lock.model import Lock, LockedPackage
from samebits.spec.draft import (
    PYTHONS,
    Choice,
    PinWheels,
    applicable,
    choose_python,
    marker_lines,
    newest_upload,
    pytorch_index,
    range_pythons,
    wheel_pythons,
)
from samebits.spec.torchcuda import CudaEvidence, choose_generation, cuda_evidence

PAPERS = Path(__file__).parents[1] / "data" / "papers-inputs"


def _texts(declared) -> list[str]:  # noqa: ANN001
    return [r.text for r in declared.pypi]


# ------------------------------------------------------------------ requirements.txt

@pytest.mark.parametrize(("text", "texts", "pinned"), [
    ("numpy==1.24.4\n", ["numpy==1.24.4"], ["1.24.4"]),
    ("numpy>=1.20  # a comment\n", ["numpy>=1.20"], [None]),
    ("uvicorn[standard]==0.24.0\n", ["uvicorn[standard]==0.24.0"], ["0.24.0"]),
    ('pywin32==306; sys_platform == "win32"\n', ['pywin32==306; sys_platform == "win32"'],
     ["306"]),
    ("torch==2.0.1+cu118\n", ["torch==2.0.1+cu118"], ["2.0.1+cu118"]),
    ("numpy==1.*\n", ["numpy==1.*"], [None]),
    ("pkg @ https://example.org/pkg-1.0-py3-none-any.whl\n",
     ["pkg @ https://example.org/pkg-1.0-py3-none-any.whl"], [None]),
    ("six==1.16.0 \\\n    --hash=sha256:" + "a" * 64 + "\n", ["six==1.16.0"], ["1.16.0"]),
])
def test_requirement_lines(text: str, texts: list[str], pinned: list[str | None]) -> None:
    """Each requirement as packaging writes it back, markers and extras kept; == pins found."""
    got = read_requirements(text, source="requirements.txt")
    assert _texts(got) == texts
    assert [r.pinned for r in got.pypi] == pinned


@pytest.mark.parametrize(("line", "reason"), [
    ("-e .", "an editable install: built from source, nothing to lock"),
    ("-e git+https://github.com/a/b.git#egg=b",
     "an editable install: built from source, nothing to lock"),
    ("git+https://github.com/facebookincubator/submitit",
     "a VCS checkout: built from source, no archive to lock"),
    ("b @ git+https://github.com/a/b.git@v1", "a VCS checkout: built from source, no archive "
     "to lock"),
    ("./vendor/thing", "a local path: built from source, nothing to lock"),
    ("-c constraints.txt", "a constraints file: its pins are not carried over (move the ones "
     "that matter into the file)"),
    ("-f https://download.pytorch.org/whl/torch_stable.html",
     "a find-links page: specs take indexes ([pypi] extra-indexes); PyTorch's local versions "
     "get their download.pytorch.org index"),
    ("--no-binary :all:", "pip builds every package from its sdist; a spec names each "
     "package in [pypi] no-binary, and samebits locks the publisher's wheel of the others"),
    ("--only-binary :all:", "pip refuses these packages' sdists; samebits locks a wheel "
     "wherever one fits and builds an sdist only where none does"),
])
def test_left_out(line: str, reason: str) -> None:
    """What cannot become part of a spec is listed with its reason, never silently dropped."""
    got = read_requirements(f"numpy==1.26.4\n{line}\n", source="r.txt")
    assert _texts(got) == ["numpy==1.26.4"]
    assert [(x.where, x.reason) for x in got.left] == [("r.txt:2", reason)]


def test_no_binary_names_become_the_specs() -> None:
    """GPT-SoVITS's first line, ``--no-binary=opencc``: opencc is built from its sdist, as pip
    builds it (the spec's ``[pypi] no-binary``), not left out."""
    got = read_requirements("--no-binary=OpenCC\nopencc\n--no-binary a,b\n",
                            source="r.txt")
    assert got.no_binary == ("opencc", "a", "b") and not got.left


def test_indexes_and_includes() -> None:
    """-i and --extra-index-url become the spec's index and extra indexes; -r is read through
    the include callable, relative names and all."""
    files = {"base.txt": "--extra-index-url https://download.pytorch.org/whl/cu118\n"
                         "torch==2.0.1+cu118\n"}

    def include(including: str, value: str) -> tuple[str, str]:
        assert including == "requirements.txt"
        return value, files[value]

    got = read_requirements("-i https://mirror.example/simple\n-r base.txt\nnumpy==1.24.4\n",
                            source="requirements.txt", include=include)
    assert got.index == "https://mirror.example/simple"
    assert got.extra_indexes == ("https://download.pytorch.org/whl/cu118",)
    assert [(r.text, r.where) for r in got.pypi] == [("torch==2.0.1+cu118", "base.txt:2"),
                                                     ("numpy==1.24.4", "requirements.txt:3")]
    assert got.files == ("requirements.txt", "base.txt")


def test_bad_lines_all_reported() -> None:
    """Every bad line at once, each with file, line and text."""
    with pytest.raises(SourceError) as err:
        read_requirements("numpy=1.2\nok==1\n--frobnicate x\n", source="r.txt")
    assert err.value.message == (
        "r.txt: 2 problems:\n"
        '  line 1 = "numpy=1.2": not a PEP 508 requirement: Expected semicolon (after name '
        "with no version specifier) or end\n"
        '  line 3 = "--frobnicate x": option \'--frobnicate\' is not one samebits reads (-r, '
        "-i, --extra-index-url, -e, -c, -f)")


@pytest.mark.parametrize(("name", "text", "fmt"), [
    ("requirements.txt", "numpy\n", "requirements.txt"),
    ("requirements-dev.in", "numpy\n", "requirements.txt"),
    ("environment.yml", "name: x\ndependencies:\n  - numpy\n", "environment.yml"),
    ("conda.yaml", "channels: [conda-forge]\ndependencies: [numpy]\n", "environment.yml"),
    ("pyproject.toml", "[project]\nname = 'x'\n", "pyproject.toml"),
    ("env.conda-lock.yml", "version: 1\nmetadata: {}\npackage: []\n", None),
    ("explicit.txt", "@EXPLICIT\nhttps://x/y.conda#abc\n", None),
    ("pylock.toml", "lock-version = '1.0'\n", None),
])
def test_source_format(name: str, text: str, fmt: str | None) -> None:
    """The author's formats by name and content; a lock is left to the lock readers."""
    assert source_format(name, text) == fmt


# ------------------------------------------------------------------ environment.yml, pyproject

@pytest.mark.parametrize(("text", "spec"), [
    ("python=3.9", "python 3.9.*"),
    ("pytorch::pytorch=2.0.0", "pytorch::pytorch 2.0.0.*"),
    ("numpy>=1.2,<2", "numpy >=1.2,<2"),
    ("pytorch=1.12.1=py3.9_cuda11.3_cudnn8.3.2_0",
     'pytorch ==1.12.1[build="py3.9_cuda11.3_cudnn8.3.2_0"]'),
    ("pytorch=2.4.0=cuda124_py312h0_101", "pytorch ==2.4.0 cuda124_py312h0_101"),
    ("pip", "pip"),
])
def test_conda_specs(text: str, spec: str) -> None:
    """conda's environment-file syntax -> the strict form a spec takes (validated by rattler)."""
    got = conda_spec(text)
    assert not isinstance(got, str)
    assert got[0] == spec


@pytest.mark.parametrize(("build", "spec"), [
    ("cuda124_py312h0_101", "pytorch ==2.4.0 cuda124_py312h0_101"),
    ("py3.9_cuda11.3_cudnn8.3.2_0", 'pytorch ==2.4.0[build="py3.9_cuda11.3_cudnn8.3.2_0"]'),
    (None, "pytorch ==2.4.0"),
])
def test_pin_conda(build: str | None, spec: str) -> None:
    """An exact conda pin in a form strict parsing takes, dotted build strings included."""
    assert pin_conda("pytorch", "2.4.0", build) == spec


def test_environment_yml_minigpt4() -> None:
    """MiniGPT-4's environment.yml, untouched: conda python 3.9, channels (defaults named by its
    URL), and the pip: part with its pins."""
    source = str(PAPERS / "minigpt4" / "environment.yml")
    got = read_environment_yml((PAPERS / "minigpt4" / "environment.yml").read_text(),
                               source=source)
    assert got.python == "3.9"
    assert [c.spec for c in got.conda] == ["python 3.9.*", "cudatoolkit", "pip"]
    assert got.channels == ("pytorch", "https://repo.anaconda.com/pkgs/main", "anaconda")
    assert len(got.pypi) == 25 and len(got.pins) == 18
    assert got.pypi[0].text == "torch==2.0.0"
    assert got.pypi[0].where == f"{source}: dependencies[3].pip[0]"


def test_environment_yml_dinov2() -> None:
    """DINOv2's conda.yaml, untouched: channel-qualified specs, a pip: part with an extra index
    and a VCS checkout (left out)."""
    source = "conda.yaml"
    got = read_environment_yml((PAPERS / "dinov2" / "conda.yaml").read_text(), source=source)
    assert [c.spec for c in got.conda][:3] == ["python 3.9.*", "pytorch::pytorch 2.0.0.*",
                                               "pytorch::pytorch-cuda 11.7.0.*"]
    assert got.extra_indexes == ("https://pypi.nvidia.com",)
    assert _texts(got) == ["cuml-cu11"]
    assert [x.text for x in got.left] == ["git+https://github.com/facebookincubator/submitit"]


@pytest.mark.parametrize(("extras", "names"), [
    ((), ["accelerate", "einops", "fire", "huggingface-hub", "safetensors", "sentencepiece",
          "transformers", "tokenizers", "protobuf", "requests", "invisible-watermark", "ruff"]),
    (("torch",), ["torch", "torchvision"]),
    (("all",), ["gradio", "streamlit", "streamlit-drawable-canvas", "streamlit-keyup", "torch",
                "torchvision"]),
])
def test_pyproject_flux(extras: tuple[str, ...], names: list[str]) -> None:
    """FLUX's pyproject.toml, untouched: [project] dependencies (accelerate, listed twice, once),
    optional groups by --extra, a group naming the project's own extras (flux[torch])."""
    got = read_pyproject((PAPERS / "flux" / "pyproject.toml").read_text(),
                         source="pyproject.toml", extras=extras)
    base = 12 if extras else 0
    assert [r.name for r in got.pypi][base:] == (names if extras else names[base:])
    assert got.requires_python == ">=3.10"
    assert "pyproject.toml: project.dependencies[12]: accelerate repeats pyproject.toml: " \
        "project.dependencies[0]" in got.notes


def test_pyproject_unknown_extra() -> None:
    """--extra naming no group: a usage error listing the groups."""
    with pytest.raises(UsageError) as err:
        read_pyproject((PAPERS / "flux" / "pyproject.toml").read_text(),
                       source="pyproject.toml", extras=["nope"])
    assert err.value.message == ("--extra nope: pyproject.toml has no such optional-dependencies "
                                 "group (it has: all, gradio, streamlit, tensorrt, torch)")


def test_pyproject_dynamic_dependencies() -> None:
    """Dependencies computed by setup.py: said, with the key."""
    with pytest.raises(SourceError) as err:
        read_pyproject('[project]\nname = "x"\ndynamic = ["dependencies"]\n', source="p.toml")
    assert err.value.message == ('p.toml: project.dynamic = "dependencies": the dependencies are '
                                 "computed by the build backend (setup.py): nothing here to read")


def test_lock_becomes_pins() -> None:
    """A lock's packages for one platform, pinned: PyPI's by version, a PyTorch index's by
    version with that index as an extra index, anything else by URL; conda by version+build."""
    def pip(name: str, version: str, url: str) -> LockedPackage:
        return LockedPackage(name=name, version=version, manager="pip", platform="linux-64",
                             url=url, sha256="0" * 64)

    lock = Lock(platforms=("linux-64",), channels=("conda-forge",), sources=(),
                content_hash={}, custom={}, packages=(
                    LockedPackage(name="python", version="3.11.9", manager="conda",
                                  platform="linux-64", url="https://c/python.conda",
                                  md5="0" * 32, build="h1_0"),
                    pip("numpy", "1.26.4", "https://files.pythonhosted.org/p/numpy.whl"),
                    pip("torch", "2.13.0+cpu",
                        "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu.whl"),
                    pip("mine", "1.0", "https://example.org/mine-1.0-py3-none-any.whl")))
    got = declared_from_lock(lock, platform="linux-64", source="x.lock", fmt="conda-lock")
    assert [c.spec for c in got.conda] == ["python ==3.11.9 h1_0"]
    assert _texts(got) == ["numpy==1.26.4", "torch==2.13.0+cpu",
                           "mine @ https://example.org/mine-1.0-py3-none-any.whl"]
    assert got.extra_indexes == ("https://download.pytorch.org/whl/cpu",)
    assert got.python == "3.11"


# ------------------------------------------------------------------ the choices

def _f(filename: str, upload: str = "2024-01-01T00:00:00Z", rp: str | None = None) -> IndexFile:
    return IndexFile(filename=filename, url=f"https://files.example/{filename}", sha256="0" * 64,
                     upload_time=upload, requires_python=rp)


NUMPY = [_f(f"numpy-1.24.4-cp{v}-cp{v}-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "2023-06-26T13:22:33.184535Z") for v in ("38", "39", "310", "311")] + [
    _f("numpy-1.24.4.tar.gz", "2023-06-26T13:20:00Z"),
    _f("numpy-1.24.4-cp312-cp312-win_amd64.whl", "2024-01-01T00:00:00Z")]
TORCH = [_f(f"torch-2.2.2-cp{v}-cp{v}-manylinux1_x86_64.whl", "2024-03-27T21:09:48.166504Z",
            ">=3.8.0") for v in ("38", "39", "310", "311", "312")]
PURE = [_f("six-1.16.0-py2.py3-none-any.whl", "2021-05-05T14:18:17Z", ">=2.7")]


def _wheels(text: str, files: dict[str, list[IndexFile]]):  # noqa: ANN202
    got = read_requirements(text, source="requirements.txt")
    return [wheel_pythons(r, files.get(r.name, []), platforms=("linux-64",), glibc="2.28")
            for r in got.pins]


def test_python_is_newest_with_every_wheel() -> None:
    """numpy 1.24.4 has no cp312 wheel for Linux (a Windows one does not count): 3.11, and the
    reason names the package."""
    wheels = _wheels("numpy==1.24.4\ntorch==2.2.2\nsix==1.16.0\n",
                     {"numpy": NUMPY, "torch": TORCH, "six": PURE})
    got = choose_python(wheels, requested=None, pinned=None, requires_python=None,
                        where="linux-64")
    assert (got.value, got.why) == ("3.11", "the newest of 3.9, 3.10, 3.11, 3.12, 3.13 with a "
                                    "wheel of every pinned package (3.12: no wheel of "
                                    "numpy==1.24.4)")


@pytest.mark.parametrize(("runs", "value", "why"), [
    # the author's Python has a wheel of every pin: theirs, not the newest
    ("3.10", "3.10", "the Python you run (3.10), and every pinned package has a "
     "wheel for it"),
    # it has not: the newest that has, and why not theirs
    ("3.12", "3.11", "the newest of 3.9, 3.10, 3.11, 3.12, 3.13 with a wheel of every pinned "
     "package, not the Python you run (3.12) (no wheel of numpy==1.24.4)"),
    # one init does not choose from
    ("3.8", "3.11", "the newest of 3.9, 3.10, 3.11, 3.12, 3.13 with a wheel of every pinned "
     "package, not the Python you run (3.8) (samebits chooses from 3.9, 3.10, "
     "3.11, 3.12, 3.13)"),
])
def test_python_prefers_the_one_the_author_runs(runs: str, value: str, why: str) -> None:
    """A paper's numbers came from the author's Python: it is chosen when every pin has a
    wheel for it, and the line says why another was chosen when not."""
    wheels = _wheels("numpy==1.24.4\ntorch==2.2.2\nsix==1.16.0\n",
                     {"numpy": NUMPY, "torch": TORCH, "six": PURE})
    got = choose_python(wheels, requested=None, pinned=None, requires_python=None,
                        where="linux-64", preferred=Choice(
                            value=runs, why=f"the Python you run ({runs})"))
    assert (got.value, got.why) == (value, why)


TORCH_RANGE = [*TORCH, *(_f(f"torch-2.5.0-cp{v}-cp{v}-manylinux1_x86_64.whl",
                             "2024-10-17T16:38:59Z", ">=3.8.0") for v in ("311", "312", "313"))]


@pytest.mark.parametrize(("before", "python"), [(None, "3.13"), ("2024-07-03", "3.12")])
def test_unpinned_requirement_constrains_the_python(before: str | None, python: str) -> None:
    """torch>=2.2 as of 2024-07-03 has no cp313 wheel (2.5.0 came later): 3.12, not 3.13."""
    import datetime as dt

    (req,) = read_requirements("torch>=2.2\n", source="pyproject.toml").pypi
    cut = dt.datetime.fromisoformat(before).replace(tzinfo=dt.timezone.utc) if before else None
    got = range_pythons(req, TORCH_RANGE, platforms=("linux-64",), glibc="2.28", before=cut)
    assert got is not None
    chosen = choose_python([got], requested=None, pinned=None, requires_python=None,
                           where="linux-64")
    assert chosen.value == python


def test_python_without_wheel_names_package_and_pythons() -> None:
    """--python-version 3.12: NoWheelError naming numpy and the Pythons that have its wheels."""
    wheels = _wheels("numpy==1.24.4\ntorch==2.2.2\n", {"numpy": NUMPY, "torch": TORCH})
    with pytest.raises(NoWheelError) as err:
        choose_python(wheels, requested="3.12", pinned=None, requires_python=None,
                      where="linux-64 (glibc 2.28)")
    assert err.value.message == (
        "--python-version 3.12: no wheel for linux-64 (glibc 2.28) of 1 pinned package:\n"
        "  numpy==1.24.4 (requirements.txt:1): wheels for Python 3.8, 3.9, 3.10, 3.11")
    assert err.value.hint == ("pass --python-version 3.11 (every pin has a wheel for 3.9, 3.10, "
                              "3.11)")


def test_python_three_nine_where_nothing_newer_fits() -> None:
    """numpy 1.19.5's newest wheels are cp39 (a 2021-22 paper's pins): Python 3.9, the reason
    naming the pin that stops 3.10."""
    old = [_f("numpy-1.19.5-cp39-cp39-manylinux2010_x86_64.whl")]
    wheels = _wheels("numpy==1.19.5\n", {"numpy": old})
    got = choose_python(wheels, requested=None, pinned=None, requires_python=None, where="x")
    assert (got.value, got.why) == ("3.9", "the newest of 3.9, 3.10, 3.11, 3.12, 3.13 with a "
                                    "wheel of every pinned package (3.10: no wheel of "
                                    "numpy==1.19.5)")


def test_python_none_fits() -> None:
    """No Python of 3.9-3.13 fits every pin: each blocking pin named."""
    old = [_f("numpy-1.19.5-cp38-cp38-manylinux2010_x86_64.whl")]
    wheels = _wheels("numpy==1.19.5\n", {"numpy": old})
    with pytest.raises(NoWheelError) as err:
        choose_python(wheels, requested=None, pinned=None, requires_python=None, where="x")
    assert err.value.message == ("no Python of 3.9-3.13 has a wheel of every pinned package "
                                 "for x:\n  numpy==1.19.5 (requirements.txt:1): wheels for "
                                 "Python 3.8")


def test_sdist_only_and_requires_python() -> None:
    """A release with only an sdist constrains nothing; requires-python rules wheels out."""
    files = {"old": [_f("old-1.0.tar.gz")],
             "new": [_f("new-2.0-py3-none-any.whl", rp=">=3.12")]}
    wheels = _wheels("old==1.0\nnew==2.0\n", files)
    assert [w.state for w in wheels] == ["sdist-only", "wheels"]
    assert wheels[1].pythons == ("3.12", "3.13", "3.14")
    got = choose_python(wheels, requested=None, pinned=None, requires_python="<3.13", where="x")
    assert got.value == "3.12"


def test_exclude_newer_from_uploads() -> None:
    """One second after the newest upload among the files that fit the chosen target (the
    later Windows wheel of numpy does not count)."""
    wheels = _wheels("numpy==1.24.4\nsix==1.16.0\n", {"numpy": NUMPY, "six": PURE})
    got = newest_upload(wheels, [Target(platform="linux-64", python="3.11", glibc="2.28")])
    assert got == ("2023-06-26T13:22:34Z", "one second after the newest pinned release's "
                   "upload: numpy==1.24.4 (numpy-1.24.4-cp311-cp311-manylinux_2_17_x86_64."
                   "manylinux2014_x86_64.whl, 2023-06-26T13:22:33Z)")


@pytest.mark.parametrize(("text", "requires", "line"), [
    ("torch==2.0.1+cu118\n", None, "11.8"),
    ("torch==2.13.0+cpu\n", None, None),
    ("--extra-index-url https://download.pytorch.org/whl/cu117\ntorch==2.0.0\n", None, "11.7"),
    ("torch==2.2.2\n", ['nvidia-cuda-runtime-cu12==12.1.105; platform_system == "Linux"'],
     "12.1"),
    ("torch==2.7.1\n", None, "12.6"),  # the registry's PyPI line
    ("torch\nnvidia-cuda-runtime-cu12==12.4.127\n", None, "12.4"),
])
def test_cuda_evidence(text: str, requires: list[str] | None, line: str | None) -> None:
    """The CUDA line of the torch build, from whatever the file and the wheel say."""
    got = cuda_evidence(read_requirements(text, source="r.txt"), torch_requires=requires)
    assert got is not None and got.line == line


@pytest.mark.parametrize(("line", "requested", "expected"), [
    (None, None, ("cpu", None)),
    ("12.1", "cpu", ("cpu", None)),
    ("12.1", "hopper", ("hopper", "12.1")),
])
def test_generation_choice(line: str | None, requested: str | None,
                           expected: tuple[str, str | None]) -> None:
    """A CPU build: cpu; --generation cpu drops the CUDA line; a GPU keeps it."""
    ev = CudaEvidence(line=line, what="torch==x") if line else None
    gen, cuda, _ = choose_generation(ev, requested=requested, cuda=None, has_torch=True)
    assert (gen, cuda) == expected


def test_generation_says_which_to_pass() -> None:
    """A CUDA 12.1 build without --generation: the generations it serves, and cpu."""
    with pytest.raises(UsageError) as err:
        choose_generation(CudaEvidence(line="12.1", what="torch==2.2.2 from PyPI"),
                          requested=None, cuda=None, has_torch=True)
    assert err.value.message == (
        "torch==2.2.2 from PyPI is a CUDA 12.1 build: pass --generation volta, ampere, ada or "
        "hopper (the GPUs CUDA 12.1 serves), or --generation cpu to run it without a GPU")


@pytest.mark.parametrize(("name", "version", "index"), [
    ("torch", "2.0.1+cu118", "https://download.pytorch.org/whl/cu118"),
    ("torchvision", "0.15.2+cpu", "https://download.pytorch.org/whl/cpu"),
    ("torch", "2.0.1", None),
    ("numpy", "1.0+cpu", None),
])
def test_pytorch_index(name: str, version: str, index: str | None) -> None:
    """A PyTorch local version names its download.pytorch.org index."""
    assert pytorch_index(name, version) == index


def test_markers_false_on_linux_are_left_out() -> None:
    """LLMs-from-scratch style: one line per platform; the macOS line is left out, the other
    kept with its marker; two lines with other markers that both hold are an error."""
    text = ("torch>=2.2.2,<2.6; sys_platform == 'darwin' and platform_machine == 'x86_64'\n"
            "torch>=2.2.2; sys_platform != 'darwin' or platform_machine != 'x86_64'\n")
    reqs = read_requirements(text, source="r.txt").pypi
    targets = [Target(platform="linux-64", python="3.12", glibc="2.28")]
    kept, left = applicable(reqs, targets)
    assert [r.where for r in kept] == ["r.txt:2"]
    assert [x.where for x in left] == ["r.txt:1"]
    with pytest.raises(SourceError):
        applicable(read_requirements("torch>=2; python_version >= '3.8'\n"
                                     "torch<3; sys_platform == 'linux'\n", source="r.txt").pypi,
                   targets)


@pytest.mark.parametrize(("text", "merged", "pinned"), [
    # TinyLlama's requirements.txt, as pip takes it (init refused it before)
    ("lightning==2.1.2\nlightning[app]\n", "lightning[app]==2.1.2", "2.1.2"),
    ("sentencepiece\nsentencepiece==0.1.99\n", "sentencepiece==0.1.99", "0.1.99"),
    ("torch>=2\ntorch<3\n", "torch<3,>=2", None),
    ("numpy<2; python_version >= '3.8'\nnumpy>=1.20; python_version >= '3.8'\n",
     'numpy<2,>=1.20; python_version >= "3.8"', None),
])
def test_lines_of_one_package_merge_as_pip_takes_them(text: str, merged: str,
                                                      pinned: str | None) -> None:
    """Two lines of one package with the same marker: one requirement with every line's
    specifiers and extras, both lines named."""
    targets = [Target(platform="linux-64", python="3.12", glibc="2.28")]
    (got,), _ = applicable(read_requirements(text, source="r.txt").pypi, targets)
    assert (got.text, got.pinned, got.where) == (merged, pinned, "r.txt:1, r.txt:2")


def test_a_yanked_release_says_nothing_of_a_range() -> None:
    """torchvision's yanked, sdist-only 0.1.6 made an unpinned `torchvision` of 2023 say
    nothing (an sdist builds anywhere), and init chose 3.11, which no wheel of that time fits
    (Autoformer, in the sweep); a resolver takes a yanked release only when pinned."""
    import dataclasses
    import datetime as dt

    (req,) = read_requirements("torchvision\n", source="requirements.txt").pypi
    files = [dataclasses.replace(_f("torchvision-0.1.6.tar.gz", "2017-01-19T00:00:00Z"),
                                 yanked=True),
             *(_f(f"torchvision-0.14.1-cp{v}-cp{v}-manylinux1_x86_64.whl",
                  "2022-12-15T00:00:00Z", ">=3.7") for v in ("39", "310"))]
    cut = dt.datetime(2023, 2, 28, tzinfo=dt.timezone.utc)
    got = range_pythons(req, files, platforms=("linux-64",), glibc="2.28", before=cut)
    assert got is not None and got.pythons == ("3.9", "3.10")
    yanked_kept = [dataclasses.replace(f, yanked=False) for f in files]
    assert range_pythons(req, yanked_kept, platforms=("linux-64",), glibc="2.28",
                         before=cut) is None  # what the reader saw before


def test_the_index_says_which_files_are_yanked() -> None:
    """PEP 592 in PEP 691 JSON (false, true or a reason) and in PEP 503 HTML (data-yanked)."""
    import json as _json

    from samebits.foreign.simpleindex import _json_files, _page_files

    doc = {"files": [{"filename": f"t-{v}.tar.gz", "url": f"t-{v}.tar.gz", "yanked": y}
                     for v, y in (("1", False), ("2", True), ("3", "broken"))]}
    got = _json_files("https://i/simple/t/", _json.dumps(doc).encode())
    assert [f.yanked for f in got] == [False, True, True]
    html = ('<a href="t-1.tar.gz">t-1.tar.gz</a>'
            '<a href="t-2.tar.gz" data-yanked="">t-2.tar.gz</a>')
    assert [f.yanked for f in _page_files("https://i/simple/t/", html)] == [False, True]


def test_a_public_pin_takes_the_local_builds() -> None:
    """PEP 440: ``torch==2.13.0`` matches PyTorch's index's ``2.13.0+cpu`` files (pip and uv
    install them); ``torch==2.13.0+cu126`` matches that build alone."""
    local = [_f(f"torch-2.13.0+{b}-cp{v}-cp{v}-manylinux_2_28_x86_64.whl", rp=">=3.10")
             for b in ("cpu", "cu126") for v in ("310", "311")]
    (public,) = _wheels("torch==2.13.0\n", {"torch": local})
    assert (public.state, public.pythons) != ("not-found", ())
    assert "3.11" in public.pythons
    (cu,) = _wheels("torch==2.13.0+cu126\n", {"torch": local[2:3]})
    (other,) = _wheels("torch==2.13.0+cu126\n", {"torch": local[:2]})
    assert "3.10" in cu.pythons and other.state == "not-found"


def test_lines_for_other_pythons_wait_for_the_python_choice() -> None:
    """cleanrl's requirements.txt (uv pip compile for several Pythons, tests/papers/cleanrl):
    networkx pinned once per Python line by markers that never both hold. init refused it
    ('networkx is already asked for') once 3.9 was among the Pythons it chooses from; pip takes
    the line its Python matches. Both lines are kept until the Python is chosen, each pin
    constrains only the Pythons its marker holds on, and the chosen Python keeps its own."""
    text = ("networkx==3.1 ; python_full_version < '3.9'\n"
            "networkx==3.2.1 ; python_full_version == '3.9.*'\n"
            "networkx==3.4.2 ; python_full_version >= '3.10'\n")
    reqs = read_requirements(text, source="r.txt").pypi
    every = [Target(platform="linux-64", python=v, glibc="2.28") for v in PYTHONS]
    kept, left = applicable(reqs, every)
    assert [r.where for r in kept] == ["r.txt:2", "r.txt:3"]
    assert [x.where for x in left] == ["r.txt:1"]
    newer = PinWheels(pin=kept[1], state="wheels", pythons=("3.10", "3.11", "3.12", "3.13"))
    widened = marker_lines(newer, ["linux-64"], "2.28")
    assert "3.9" in widened.pythons and "3.10" in widened.pythons
    assert choose_python([widened], requested=None, pinned=None, requires_python=None,
                         where="linux-64", preferred=None).value == "3.13"
    assert choose_python([widened], requested="3.9", pinned=None, requires_python=None,
                         where="linux-64").value == "3.9"
    for line, want in (("3.9", "networkx==3.2.1"), ("3.11", "networkx==3.4.2")):
        (got,), _ = applicable(kept, [Target(platform="linux-64", python=line, glibc="2.28")])
        assert got.text.startswith(want), line


def test_no_python_with_every_wheel_builds_from_sdists_as_pip_does() -> None:
    """The sweep's revin-baselines (matplotlib==3.1.1, wheels for cp37 only, and an sdist):
    init refused every Python where pip on 3.9 builds it from the sdist. The oldest Python is
    chosen (the author's where it fits), the reason naming what is built; a pin with neither
    wheel nor sdist for a Python still refuses it."""
    old = Requested(text="matplotlib==3.1.1", name="matplotlib", pinned="3.1.1", where="r.txt:1")
    built = PinWheels(pin=old, state="wheels", pythons=("3.7",), sdist=True)
    got = choose_python([built], requested=None, pinned=None, requires_python=None,
                        where="linux-64")
    assert got.value == "3.9"
    assert "pip builds matplotlib==3.1.1 (wheels for 3.7) from the sdist" in got.why
    mine = choose_python([built], requested=None, pinned=None, requires_python=None,
                         where="linux-64", preferred=Choice(value="3.11",
                                                            why="the Python you run (3.11)"))
    assert mine.value == "3.11" and "the Python you run (3.11)" in mine.why
    with pytest.raises(NoWheelError):
        choose_python([replace(built, sdist=False)], requested=None, pinned=None,
                      requires_python=None, where="linux-64")

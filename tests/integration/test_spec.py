"""Spec validation: every problem is found, named by file, key and value, before solving."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from samebits.errors import SpecError
from samebits.spec.model import EnvironmentSpec, spec_digest
from samebits.spec.read import read_spec

GOOD: dict[str, Any] = {
    "generation": "hopper",
    "python": "3.12",
    "platforms": {"linux-64": {"glibc": "2.28"}},
    "cuda": {"version": "12.4"},
    "pypi": {"requirements": ["numpy>=2"]},
}


def problems(data: dict[str, Any]) -> list[str]:
    try:
        EnvironmentSpec.from_mapping(data, file="environments/x.toml")
    except SpecError as exc:
        return [str(p) for p in exc.problems]
    return []


def edited(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    for dotted, value in changes.items():
        cur = data
        *parents, last = dotted.split("__")
        for part in parents:
            cur = cur.setdefault(part, {})
        if value is DELETE:
            del cur[last]
        else:
            cur[last] = value
    return data


DELETE = object()
F = "environments/x.toml"

CASES = [
    ("unknown key with a near miss", edited(genration="hopper"),
     f'{F}: genration = "hopper": unknown key; did you mean \'generation\'?'),
    ("unknown key in a table", edited(cuda__versoin="12.4", cuda__version=DELETE),
     [f'{F}: cuda.versoin = "12.4": unknown key; did you mean \'version\'?',
      f'{F}: cuda.version: missing: the CUDA line, e.g. "12.8"']),
    ("unknown generation", edited(generation="hoper"),
     f'{F}: generation = "hoper": unknown generation (known: volta, ampere, ada, hopper, '
     "blackwell, cpu); did you mean 'hopper'?"),
    ("bad python", edited(python="3.x"),
     f'{F}: python = "3.x": must be a CPython version >= 3.9 like "3.12" or "3.12.7"'),
    ("python too old", edited(python="2.7"),
     f'{F}: python = "2.7": must be a CPython version >= 3.9 like "3.12" or "3.12.7"'),
    ("unknown platform", edited(platforms={"linux64": {"glibc": "2.28"}}),
     f"{F}: platforms.linux64 = {{'glibc': '2.28'}}: unknown platform (known: linux-64, "
     "linux-aarch64); did you mean 'linux-64'?"),
    ("glibc floor uv cannot target", edited(platforms={"linux-64": {"glibc": "2.29"}}),
     f'{F}: platforms.linux-64.glibc = "2.29": not a manylinux floor uv can target (2.17, 2.28, '
     "2.31, 2.32, 2.33, 2.34, 2.35, 2.36, 2.37, 2.38, 2.39, 2.40)"),
    ("glibc missing", edited(platforms={"linux-64": {}}),
     f'{F}: platforms.linux-64.glibc: missing: the glibc floor, e.g. "2.28"'),
    ("cuda missing on a GPU generation", edited(cuda=DELETE),
     f"{F}: cuda.version: missing: the hopper generation needs a CUDA line (>=11.8)"),
    ("cuda on the cpu generation", edited(generation="cpu"),
     f'{F}: cuda.version = "12.4": the cpu generation takes no CUDA line; remove [cuda]'),
    ("cuda line malformed", edited(cuda__version="12"),
     f'{F}: cuda.version = "12": must be a CUDA line "MAJOR.MINOR", e.g. "12.8"'),
    ("blackwell on an old CUDA line", edited(generation="blackwell"),
     f'{F}: cuda.version = "12.4": blackwell (sm_100, sm_120) needs CUDA >=12.8'),
    ("volta on CUDA 13", edited(generation="volta", cuda__version="13.0"),
     f'{F}: cuda.version = "13.0": volta (sm_70) needs CUDA >=9.0,<13.0; PyTorch\'s CUDA 12.8+ '
     "wheels start at sm_75 and cuDNN 9.11 dropped sm_70: pin a CUDA 12.6 line (torch <= 2.7.x "
     "on PyPI)"),
    ("bad PEP 508 requirement", edited(pypi__requirements=["numpy>=>2"]),
     f'{F}: pypi.requirements = "numpy>=>2": not a PEP 508 requirement: Expected semicolon '
     "(after name with no version specifier) or end"),
    ("duplicate requirement", edited(pypi__requirements=["numpy>=2", "NumPy<3"]),
     f'{F}: pypi.requirements = "NumPy<3": "numpy" is already given as "numpy>=2"'),
    ("index not a URL", edited(pypi__index="pypi.org/simple"),
     f'{F}: pypi.index = "pypi.org/simple": must be an http(s):// or file:// URL'),
    ("conda without channels", edited(conda={"dependencies": ["pytorch"]}),
     f"{F}: conda.channels: missing: conda dependencies need at least one channel"),
    ("duplicate conda dependency",
     edited(conda={"channels": ["c"], "dependencies": ["numpy", "numpy >=2"]}),
     f'{F}: conda.dependencies = "numpy >=2": "numpy" is already given as "numpy"'),
    ("list of non-strings", edited(pypi__requirements=["numpy", 3]),
     f"{F}: pypi.requirements = ['numpy', 3]: must be a list of non-empty strings"),
    ("nothing to lock", edited(pypi=DELETE), f"{F}: nothing to lock: add [conda] dependencies "
     "or [pypi] requirements"),
    ("unknown format", edited(format=2),
     f"{F}: format = 2: unknown spec format; this samebits reads format 1"),
    ("abstract spec locked", edited(abstract=True),
     f"{F}: abstract = True: this spec is a base for others to extend; lock those"),
    ("install find-links not a list", edited(install={"find-links": "wheels"}),
     f'{F}: install.find-links = "wheels": must be a list of non-empty strings'),
    ("install mirror not a URL", edited(install={"mirrors": {"https://a/": "b"}}),
     f'{F}: install.mirrors.https://a/ = "b": both sides must be http(s):// or file:// URLs'),
    ("bad exclude-newer", edited(**{"exclude-newer": "yesterday"}),
     f'{F}: exclude-newer = "yesterday": must be a date or UTC time like 2026-11-29 or '
     '"2026-11-29T00:00:00Z"'),
    ("volta with a torch PyPI builds without sm_70",
     edited(generation="volta", cuda__version="12.6", pypi__requirements=["torch==2.9.1"]),
     f'{F}: pypi.requirements = "torch==2.9.1": torch from PyPI for this range ships CUDA 12.8: '
     "sm_75, sm_80, sm_86, sm_90, sm_100, sm_120; volta needs sm_70 (PyTorch's CUDA 12.8+ wheels "
     "start at sm_75 and cuDNN 9.11 dropped sm_70: pin a CUDA 12.6 line (torch <= 2.7.x on "
     "PyPI))"),
    ("CUDA line torch was not built for",
     edited(cuda__version="12.6", pypi__requirements=["torch==2.13.0"]),
     f'{F}: cuda.version = "12.6": torch==2.13.0 from PyPI ships CUDA 13.0 builds, not CUDA 12.6'),
    ("aarch64 with a CPU-only PyPI torch",
     edited(cuda__version="12.8", pypi__requirements=["torch==2.9.1"],
            platforms={"linux-aarch64": {"glibc": "2.28"}}),
     f"{F}: platforms.linux-aarch64 = {{'glibc': '2.28'}}: torch==2.9.1 from PyPI is CPU-only on "
     "linux-aarch64; hopper on aarch64 needs torch >= 2.11"),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation_error(data: dict[str, Any], expected: str | list[str]) -> None:
    """Each bad value yields exactly one problem with this message."""
    assert problems(data) == (expected if isinstance(expected, list) else [expected])


def test_good_spec_validates() -> None:
    """The reference mapping has no problem."""
    spec = EnvironmentSpec.from_mapping(GOOD, file=F)
    assert (spec.name, spec.cuda, spec.platforms[0].uv_platform) == (
        "x", "12.4", "x86_64-manylinux_2_28")


def test_every_problem_is_reported_at_once() -> None:
    """Four independent mistakes give four problems, not the first one only."""
    data = edited(genration="x", python="3", cuda__version="1", pypi__index="nope")
    assert len(problems(data)) == 4


def test_digest_ignores_order_and_description() -> None:
    """The spec digest is over the merged meaning, not key order or prose."""
    reordered = dict(reversed(list(GOOD.items())))
    assert spec_digest(GOOD) == spec_digest(reordered) == spec_digest({**GOOD, "description": "x"})
    assert spec_digest(GOOD) != spec_digest(edited(python="3.11"))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_extends_merges_requirements_by_name(tmp_path: Path) -> None:
    """A child's requirement replaces the base's entry of the same name; others are kept."""
    envs = tmp_path / "environments"
    envs.mkdir()
    write(envs, "base.toml", 'abstract = true\npython = "3.12"\n[platforms.linux-64]\n'
          'glibc = "2.28"\n[pypi]\nrequirements = ["numpy>=2", "rich"]\n')
    child = write(envs, "cpu.toml", 'extends = "base.toml"\ngeneration = "cpu"\n'
                  '[pypi]\nrequirements = ["numpy==2.1.0"]\n')
    spec = read_spec(child, root=tmp_path)
    assert spec.pypi_requirements == ("rich", "numpy==2.1.0")
    assert spec.sources == ("environments/cpu.toml", "environments/base.toml")


def test_error_in_base_names_the_base_file(tmp_path: Path) -> None:
    """A bad value inherited from the base is reported against the base file."""
    envs = tmp_path / "environments"
    envs.mkdir()
    write(envs, "base.toml", 'abstract = true\npython = "three"\n[platforms.linux-64]\n'
          'glibc = "2.28"\n')
    child = write(envs, "cpu.toml", 'extends = "base.toml"\ngeneration = "cpu"\n'
                  '[pypi]\nrequirements = ["numpy"]\n')
    with pytest.raises(SpecError) as info:
        read_spec(child, root=tmp_path)
    assert [str(p) for p in info.value.problems] == [
        'environments/base.toml: python = "three": must be a CPython version >= 3.9 like '
        '"3.12" or "3.12.7"']


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.toml": 'extends = "a.toml"\n'},
     "environments/a.toml: extends = \"a.toml\": extends itself: environments/a.toml -> "
     "environments/a.toml"),
    ({"a.toml": 'extends = "missing.toml"\n'},
     'environments/a.toml: extends = "missing.toml": no such spec'),
    ({"a.toml": "generation = [\n"},
     "environments/a.toml: not valid TOML: Invalid value (at end of document)"),
])
def test_read_errors(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    """Broken files and extends chains are spec errors naming the file."""
    envs = tmp_path / "environments"
    envs.mkdir()
    for name, text in files.items():
        write(envs, name, text)
    with pytest.raises(SpecError) as info:
        read_spec(envs / "a.toml", root=tmp_path)
    assert info.value.message == expected


def test_curated_specs_all_validate() -> None:
    """Every spec shipped in environments/ validates."""
    root = Path(__file__).parents[2]
    for path in sorted((root / "environments").rglob("*.toml")):
        if path.name != "base.toml":
            assert read_spec(path, root=root).generation.name in path.stem


def test_ambiguous_conda_spec_is_caught_before_solving() -> None:
    """A match spec the solver would reject is a validation problem, with rattler's advice."""
    data = edited(conda={"channels": ["c"], "dependencies": ["pytorch 2.4.0 cuda*"]})
    assert problems(data) == [
        f'{F}: conda.dependencies = "pytorch 2.4.0 cuda*": not a conda match spec: missing '
        "range specifier for '2.4.0'. Did you mean '==2.4.0' or '2.4.0.*'?"]


MB = "x" * 1_000_000
MB_QUOTED = f'"{"x" * 75}..." (1,000,000 characters)'
HUGE = [
    ("a megabyte generation", edited(generation=MB),
     f"{F}: generation = {MB_QUOTED}: unknown generation (known: volta, ampere, ada, hopper, "
     "blackwell, cpu)"),
    ("a megabyte index", edited(pypi__index=MB),
     f"{F}: pypi.index = {MB_QUOTED}: must be an http(s):// or file:// URL"),
    ("a megabyte duplicate", edited(pypi__requirements=[MB, MB.upper()]),
     f'{F}: pypi.requirements = "{"X" * 75}..." (1,000,000 characters): {MB_QUOTED} is '
     f"already given as {MB_QUOTED}"),
    ("a megabyte key", edited(**{MB: 1}),
     f"{F}: {'x' * 157}... = 1: unknown key; known keys: format, name, description, extends, "
     "abstract, generation, python, platforms, cuda, conda, pypi, exclude-newer, install"),
    ("a megabyte list", edited(pypi__requirements=[MB, 3]),
     f"{F}: pypi.requirements = ['{'x' * 75}... (1,000,007 characters): must be a list of "
     "non-empty strings"),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in HUGE], ids=[c[0] for c in HUGE])
def test_huge_values_are_quoted_short(data: dict[str, Any], expected: str) -> None:
    """A megabyte value is quoted in at most ~80 characters, with its length said."""
    assert problems(data) == [expected]


def test_huge_value_through_the_cli(tmp_path: Path) -> None:
    """samebits lock on a spec with a megabyte value prints one short error, exit 2."""
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "big.toml").write_text(
        f'generation = "cpu"\npython = "3.12"\n[platforms.linux-64]\nglibc = "2.28"\n'
        f'[pypi]\nindex = "{MB}"\nrequirements = ["numpy"]\n')
    proc = subprocess.run([sys.executable, "-m", "samebits", "lock", "--offline", "--quiet"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"error: environments/big.toml: pypi.index = {MB_QUOTED}: must be an "
                           "http(s):// or file:// URL\nhint: fix the spec, then run `samebits "
                           "lock` again\n")


LOCK_PATH_HINT = ("\nhint: or give a lockfile's path (conda-lock, pixi.lock, uv.lock, "
                  "pylock.toml, requirements.txt with --hash, conda explicit): one that starts "
                  "with / or ./, or ends in .yml, .yaml, .lock, .toml or .txt")
UNKNOWN = [
    (["lock", "hoper", "--check"], "unknown environment 'hoper' (no environments/hoper.toml); "
     "known: ampere, blackwell, cpu, flavour/hopper, hopper; did you mean hopper?"),
    (["lock", "Blackwel", "--check"], "unknown environment 'Blackwel' (no "
     "environments/Blackwel.toml); known: ampere, blackwell, cpu, flavour/hopper, hopper; "
     "did you mean blackwell?"),
    (["lock", "nope", "--check"], "unknown environment 'nope' (no environments/nope.toml); "
     "known: ampere, blackwell, cpu, flavour/hopper, hopper"),
    (["render", "conda", "ampre", "--check"], "unknown environment 'ampre' (no "
     "lockfiles/ampre.conda-lock.yml); known: ampere, hopper; did you mean ampere?"
     + LOCK_PATH_HINT),
    (["install", "hoppr", "--target", "env"], "unknown environment 'hoppr' (no "
     "lockfiles/hoppr.conda-lock.yml); known: ampere, hopper; did you mean hopper?"
     + LOCK_PATH_HINT),
]


@pytest.mark.parametrize(("args", "message"), UNKNOWN, ids=[" ".join(u[0][:2]) for u in UNKNOWN])
def test_unknown_environment_lists_known_and_suggests(tmp_path: Path, args: list[str],
                                                      message: str) -> None:
    """An unknown name: exit 2, every known id, and the closest one when one is close."""
    for env_id in ("ampere", "blackwell", "hopper", "cpu", "flavour/hopper", "base"):
        spec = tmp_path / "environments" / f"{env_id}.toml"
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text("abstract = true\n" if env_id == "base" else 'generation = "cpu"\n')
    (tmp_path / "lockfiles").mkdir()
    for env_id in ("ampere", "hopper"):
        (tmp_path / "lockfiles" / f"{env_id}.conda-lock.yml").write_text("")
    proc = subprocess.run([sys.executable, "-m", "samebits", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: {message}\n")
    assert not (tmp_path / "env").exists()

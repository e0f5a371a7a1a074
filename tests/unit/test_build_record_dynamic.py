"""The build record's ``dynamic`` field (what a backend's get_requires_for_build_wheel asked for),
the checks on a hook's answer, the hook's offline environment and ``[build-system]`` parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from samebits._io import compact_json, sha256_hex
from samebits.errors import LockfileError
from samebits.install.build import BuildFailed, BuildSystem, build_system
from samebits.install.buildhooks import NO_NETWORK, checked, hook_environment
from samebits.lock.builds import BuildRecord, BuildRequirement, builds_of

KEY = "samebits.build.linux-64.lit"
SETUPTOOLS = BuildRequirement(
    name="setuptools", version="68.0.0",
    url="https://files.pythonhosted.org/packages/c7/42/be1c7bbdd83e1bfb160c94b9cafd8e25efc7400"
        "346cf7ccdbdb452c467fa/setuptools-68.0.0-py3-none-any.whl",
    sha256="11e52c67415a381d10d6b462ced9cfb97066179f0e871399e006c4ab101fc85f")
WHEEL = BuildRequirement(
    name="wheel", version="0.40.0",
    url="https://files.pythonhosted.org/packages/61/86/cc8d1ff2ca31a312a25a708c891cf9facbad4ea"
        "e493b3872638db6785eb5/wheel-0.40.0-py3-none-any.whl",
    sha256="d236b20e7cb522daf2390fa84c55eea81c5c30190f90f29ae2ca1ad8355bf247")
STATIC = BuildRecord(platform="linux-64", name="lit", sdist="a" * 64,
                     wheel="lit-16.0.6-py3-none-any.whl", sha256="b" * 64, python="3.11",
                     source_date_epoch=1687785986, backend="setuptools.build_meta",
                     requires=(SETUPTOOLS,), frontend="uv 0.13.9")
# written by samebits before the field existed (commit 25f20cc), with its cache key
BEFORE = ('{"backend":"setuptools.build_meta","format":1,"frontend":"uv 0.13.9","python":'
          '"3.11","requires":[["setuptools","68.0.0","' + SETUPTOOLS.url + '","'
          + SETUPTOOLS.sha256 + '"]],"sdist":"' + "a" * 64 + '","sha256":"' + "b" * 64
          + '","source-date-epoch":1687785986,"wheel":"lit-16.0.6-py3-none-any.whl"}')
BEFORE_KEY = "d6e3b5e043f1c20a481727a0ae1ddea3f24e3707253554faa37b7a8e827194f3"


def test_a_record_without_dynamic_requirements_reads_writes_and_hashes_as_before() -> None:
    """A record of a backend that asked for nothing: the same text and cache key as before
    the field existed, and an old record reads as one that asked for nothing."""
    assert STATIC.to_text() == BEFORE
    assert sha256_hex(compact_json(STATIC.inputs())) == BEFORE_KEY
    assert builds_of({KEY: BEFORE}, file="l.yml") == {("linux-64", "lit"): STATIC}


def test_dynamic_requirements_are_recorded_read_back_and_keyed() -> None:
    """``dynamic`` lists what the backend asked for, beside the whole environment in
    ``requires``; it reads back equal and is part of the cache key."""
    from dataclasses import replace

    record = replace(STATIC, requires=(SETUPTOOLS, WHEEL), dynamic=("wheel",))
    text = record.to_text()
    assert '"dynamic":["wheel"],"format":1,' in text
    assert builds_of({KEY: text}, file="l.yml") == {("linux-64", "lit"): record}
    assert record.inputs()["dynamic"] == ["wheel"]
    assert compact_json(record.inputs()) != compact_json(
        replace(record, dynamic=()).inputs())


def test_a_bad_dynamic_field_is_named_by_file_key_and_value() -> None:
    """A ``dynamic`` that is not a list of strings: a lockfile error quoting the record."""
    text = BEFORE.replace('"format":1', '"dynamic":"wheel","format":1')
    with pytest.raises(LockfileError) as err:
        builds_of({KEY: text}, file="l.yml")
    assert err.value.message.startswith(f"l.yml: metadata.custom_metadata.{KEY} = ")
    assert err.value.message.endswith(": incomplete build record (ValueError: dynamic = "
                                      "'wheel': not a list of requirement strings)")


@pytest.mark.parametrize(("answer", "expected"), [
    ([], ()),
    (["wheel"], ("wheel",)),
    (["cython>=0.29; python_version < '3.13'", "wheel"],
     ("cython>=0.29; python_version < '3.13'", "wheel")),
    ("wheel", "b's get_requires_for_build_wheel of t returned 'wheel': not a list of "
              "requirement strings"),
    ([1], "b's get_requires_for_build_wheel of t returned [1]: not a list of requirement "
          "strings"),
    (["wheel >"], "b's get_requires_for_build_wheel of t returned 'wheel >': not a "
                  "requirement ("),
], ids=["nothing", "wheel", "with-a-marker", "a-string", "not-strings", "not-pep-508"])
def test_a_hook_answer_is_a_list_of_requirements(answer: object,
                                                 expected: tuple[str, ...] | str) -> None:
    """The answer, in the backend's order; anything else is a failed build quoting it."""
    what = "b's get_requires_for_build_wheel of t"
    if isinstance(expected, tuple):
        assert checked(answer, what) == expected
        return
    with pytest.raises(BuildFailed) as err:
        checked(answer, what)
    assert err.value.message.startswith(expected)
    assert err.value.exit_code == 5


def test_the_hook_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable points at a closed local port, a proxy exemption is dropped, pip
    and uv are told to stay offline, and the build's epoch is set."""
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "*")
    env = hook_environment(1687785986)
    assert {k: env[k] for k in ("http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY")} == \
        dict.fromkeys(("http_proxy", "https_proxy", "HTTPS_PROXY", "ALL_PROXY"), NO_NETWORK)
    assert "NO_PROXY" not in env and "no_proxy" not in env
    assert (env["PIP_NO_INDEX"], env["UV_OFFLINE"], env["SOURCE_DATE_EPOCH"]) == (
        "1", "1", "1687785986")


@pytest.mark.parametrize(("pyproject", "expected"), [
    (None, BuildSystem(requires=("setuptools>=40.8.0", "wheel"),
                       backend="setuptools.build_meta:__legacy__")),
    ('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
     BuildSystem(requires=("setuptools",), backend="setuptools.build_meta")),
    ('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["_build"]\n',
     BuildSystem(requires=(), backend="backend", backend_path=("_build",))),
    ('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = "_build"\n',
     "t/pyproject.toml: [build-system] backend-path = '_build': not a list of folders"),
], ids=["no-pyproject (lit 16.0.3)", "lit 16.0.6", "in-tree backend", "bad-backend-path"])
def test_build_system_of_a_tree(tmp_path: Path, pyproject: str | None,
                                expected: BuildSystem | str) -> None:
    """``[build-system]`` with PEP 517's defaults, and an in-tree backend's backend-path."""
    from samebits.errors import InputError

    tree = tmp_path / "t"
    tree.mkdir()
    if pyproject is not None:
        (tree / "pyproject.toml").write_text(pyproject)
    if isinstance(expected, BuildSystem):
        assert build_system(tree) == expected
        return
    with pytest.raises(InputError) as err:
        build_system(tree)
    assert err.value.message == expected

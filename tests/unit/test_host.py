"""samebits.host: the version of an installed distribution, read without importlib.metadata."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from samebits.host import installed_version


@pytest.mark.parametrize(("module", "dist"), [("conda_lock", "conda-lock"),
                                              ("installer", "installer"),
                                              ("packaging", "packaging"),
                                              ("yaml", "PyYAML")])  # no yaml-*.dist-info
def test_installed_version_is_importlib_metadatas(module: str, dist: str) -> None:
    assert installed_version(module, dist) == version(dist)


def test_a_folder_beside_the_package_names_the_version(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fakepkg").mkdir()
    (tmp_path / "fakepkg" / "__init__.py").write_text("")
    (tmp_path / "fakepkg-7.1.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("fakepkg", "fakepkg") == "7.1"
    for v in ("7.1", "7.2"):  # two: whatever importlib.metadata answers
        (tmp_path / f"fakepkg-{v}.dist-info").mkdir(exist_ok=True)
        (tmp_path / f"fakepkg-{v}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fakepkg\nVersion: {v}\n")
    assert installed_version("fakepkg", "fakepkg") == version("fakepkg")


def test_a_module_not_installed_raises_an_import_error() -> None:
    assert "no_such_module_here" not in sys.modules
    with pytest.raises(PackageNotFoundError):
        installed_version("no_such_module_here", "no-such-dist-here")
    assert issubclass(PackageNotFoundError, ImportError)

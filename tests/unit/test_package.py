"""What a built wheel must hold: every module and data file of samebits, verify and
samebits_app, and enough declared dependencies to import each module.

In the checkout (``nox -s tests``) the packages Python imports are the checkout's own folders,
so the first test compares a folder with itself; in ``nox -s wheel`` they are the installed
wheel's (SAMEBITS_TEST_INSTALLED=1 stops the session otherwise), and the tests prove that the
wheel leaves out no module or data file and that its fresh venv, which holds only what the
wheel declares (plus the test extra and torch), imports every module.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("samebits", "verify", "samebits_app")


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` Python or the package reads, by relative path (bytecode
    and the caches it writes left out)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.mark.parametrize("name", PACKAGES)
def test_imported_package_holds_every_file_of_the_checkout(name: str) -> None:
    """The package Python imports has the checkout's files, byte for byte, and no others:
    every module and every package data file (samebits/data/gpus.toml,
    verify/node/canary.toml) made it into the wheel."""
    package = importlib.import_module(name)
    installed = _files(Path(package.__file__ or "").resolve().parent)
    checkout = _files(ROOT / name)
    assert sorted(installed) == sorted(checkout)
    assert [f for f in checkout if installed[f] != checkout[f]] == []


def _modules(name: str) -> list[str]:
    package = importlib.import_module(name)
    found = [m.name for m in pkgutil.walk_packages(package.__path__, prefix=f"{name}.")]
    # a __main__ runs its command when imported; `python -m` starts them in other tests
    return [name, *(m for m in found if m.rsplit(".", 1)[-1] != "__main__")]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_module_imports(name: str) -> None:
    """Each module imports where the package is installed: none needs a dependency the
    package does not declare, none is missing from the wheel."""
    modules = _modules(name)
    assert len(modules) > 10
    where = Path(importlib.import_module(name).__file__ or "").resolve().parent
    for module in modules:
        loaded = importlib.import_module(module)
        assert Path(loaded.__file__ or "").resolve().is_relative_to(where), module


def test_install_names_resolve() -> None:
    """``samebits.install`` imports its names when first asked for (``_FROM``): each of
    ``__all__`` is one it can import, from the module the map names."""
    import samebits.install as install

    assert set(install.__all__) == {*install._FROM, "host_interpreter"}
    for name in install.__all__:
        value = getattr(install, name)
        if name in install._FROM:
            assert value is getattr(importlib.import_module(install._FROM[name]), name), name

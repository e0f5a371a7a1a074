"""``verify env`` in a fresh process (samebits_app/verifyrun.py), as `samebits audit --prefix`
and `attest` run it, from the folder the user is in."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from samebits_app.verifyrun import run_verify_env
from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    Installed,
    elves,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_in_the_current_folder_is_not_imported(
        pristine: Installed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """From a folder holding a checkout of samebits named `samebits` (`~` beside
    `~/samebits`, as the tutorials have it), verify env imports the installed package, not
    that folder: the report, identical. It ended in `ImportError: cannot import name
    '__version__' from 'samebits' (unknown location)`, and the audit said not-reproduced."""
    (tmp_path / "samebits").symlink_to(ROOT)
    lockfile = tmp_path / "conda-lock.yml"
    shutil.copyfile(pristine.lockfile, lockfile)
    monkeypatch.chdir(tmp_path)
    report = run_verify_env(pristine.prefix, Path("conda-lock.yml"), "linux-64")
    assert (report["identical"], report["ok"]) == (True, True)

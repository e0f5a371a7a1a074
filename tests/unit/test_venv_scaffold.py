"""What each virtualenv release writes is its scaffolding, and nothing more is.

The listings are those of real venvs, made on CPython 3.12.1 on 2026-12-04 by ``python -m
virtualenv -q -p python3.12 DEST`` with virtualenv 20.39.1 (the test extra's, pinned below 21
by conda-lock) and 21.15.13 (PyPI's newest then), pip's own files left out. The test extra
cannot install 21.x beside conda-lock, so the integration tests (test_verify_producers) make
only 20.x venvs; this keeps the newer release's files from turning into an ``unowned``
finding, a false DRIFT on a user's fresh venv."""

from __future__ import annotations

import pytest

from verify.env.scaffold import is_scaffold

COMMON = [".gitignore", "CACHEDIR.TAG", "bin/activate", "bin/activate.csh", "bin/activate.fish",
          "bin/activate.nu", "bin/activate.ps1", "bin/activate_this.py", "bin/python",
          "bin/python3", "bin/python3.12", "pyvenv.cfg"]
WRITTEN = {
    "20.39.1": COMMON + ["lib/python3.12/site-packages/_virtualenv.pth",
                         "lib/python3.12/site-packages/_virtualenv.py"],
    "21.15.13": COMMON + ["bin/activate.xsh", "bin/deactivate.csh"],
}


@pytest.mark.parametrize("release", sorted(WRITTEN))
def test_every_file_a_virtualenv_release_writes_is_its_scaffolding(release: str) -> None:
    assert [f for f in WRITTEN[release] if not is_scaffold(f, "virtualenv")] == []


def test_deactivate_csh_is_virtualenvs_only_and_other_names_stay_unowned() -> None:
    assert not is_scaffold("bin/deactivate.csh", "venv")
    assert not is_scaffold("bin/deactivate.csh", "uv")
    for extra in ("bin/deactivate", "bin/deactivate.sh", "bin/deactivate.csh.bak",
                  "lib/python3.12/site-packages/deactivate.csh"):
        assert not is_scaffold(extra, "virtualenv"), extra

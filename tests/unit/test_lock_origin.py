"""A lock's origin (the `# From ...` line of what is rendered from it, and what `bundle` checks
a rendered folder against) is its path under the project root, also where ``lockfiles/`` is
a link to another folder (a shared disk)."""

from __future__ import annotations

import shutil
from pathlib import Path

from samebits.lock.read import load_lock

LOCK = Path(__file__).resolve().parents[2] / "lockfiles" / "cpu.conda-lock.yml"


def test_origin_under_a_linked_lockfiles_folder(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    shutil.copyfile(LOCK, tmp_path / "shared" / LOCK.name)
    root = tmp_path / "project"
    root.mkdir()
    (root / "lockfiles").symlink_to(tmp_path / "shared")
    got = load_lock(root / "lockfiles" / LOCK.name, name="cpu", root=root)
    assert got.origin == f"lockfiles/{LOCK.name}"


def test_origin_outside_the_root_is_the_file_name(tmp_path: Path) -> None:
    shutil.copyfile(LOCK, tmp_path / LOCK.name)
    (tmp_path / "project").mkdir()
    got = load_lock(tmp_path / LOCK.name, name="cpu", root=tmp_path / "project")
    assert got.origin == LOCK.name

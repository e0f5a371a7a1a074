"""``samebits.install.wheels.PlanMemo``: what planning a wheel learnt, kept in the install cache,
gives the very plan planning from the entry's files gives, wherever the prefix is; a memo
that is not as it was written is not used."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from samebits.install import install_prefix, wheels
from samebits.install.cache import read_entry
from samebits.install.wheels import PLANS, PlanMemo, layout_for, plan_wheel
from samebits.lock.read import LockedEnv
from tests.fixtures.install import locked_wheel, write_lock
from tests.integration.test_install_wheels import rich_wheel

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
# a venv's layout, a prefix with its own Python, and an interpreter path the kernel cannot run
# from a shebang (over 127 bytes, with a space): installer writes a /bin/sh trampoline for it
LAYOUTS = [layout_for(LINE, "/envs/a/bin/python", venv=True),
           layout_for(LINE, f"/opt/env/bin/python{LINE}", venv=False),
           layout_for(LINE, "/envs/with space/" + "x" * 130 + "/bin/python", venv=True)]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> tuple[LockedEnv, Path]:
    """A wheel with every scheme, a #!python script, console and GUI scripts, unpacked into
    a cache by an install."""
    tmp = tmp_path_factory.mktemp("memo")
    whl = rich_wheel(tmp / "wheels")
    env = write_lock(tmp / "t.conda-lock.yml", [locked_wheel(whl)], python=LINE)
    install_prefix(env, "linux-64", tmp / "first", final=str(tmp / "first"),
                   cache=tmp / "cache", interpreter=sys.executable)
    return env, tmp / "cache"


def _plans(env: LockedEnv, cache: Path, memo: Path | None) -> list[wheels.WheelPlan]:
    (p,) = env.pip("linux-64")
    entries = [read_entry(cache, key.name, p.filename) for key in (cache / "unpacked").iterdir()]
    (entry,) = [e for e in entries if e is not None]
    return [plan_wheel(entry, p, stage=Path("/stage"), layout=layout, memo=memo)
            for layout in LAYOUTS]


def test_a_plan_from_the_memo_is_the_plan_from_the_files(
        unpacked: tuple[LockedEnv, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Written by the first layout of its folders, read by the others: every copy, every
    generated file's bytes (the scripts' shebangs name each layout's own interpreter, RECORD
    hashes them) and every .py source the same as planned without a memo."""
    env, cache = unpacked
    made = _plans(env, cache, None)
    assert len({w.writes for w in made}) == 3   # the shebangs differ
    assert _plans(env, cache, tmp_path) == made   # written by the first venv layout
    assert len(list(tmp_path.glob("*/*.json"))) == 2   # one per layout's folders
    with monkeypatch.context() as m:  # read: the entry's WHEEL and entry points are not
        m.setattr(wheels, "_wheel_of", lambda *a: pytest.fail("planned from the files"))
        m.setattr(wheels, "_entry_points", lambda *a: pytest.fail("planned from the files"))
        assert _plans(env, cache, tmp_path) == made


def test_the_memo_is_byte_stable(unpacked: tuple[LockedEnv, Path], tmp_path: Path) -> None:
    env, cache = unpacked
    _plans(env, cache, tmp_path / "a")
    _plans(env, cache, tmp_path / "b")
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.json"))
    assert a == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*.json"))
    for rel in a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


@pytest.mark.parametrize("change", [
    "torn", "another key", "a script's number twice", "a script's number missing",
    "a path in info", "an unknown script section", "a number of the wrong type", "not JSON"])
def test_a_memo_not_as_written_is_not_used(unpacked: tuple[LockedEnv, Path], tmp_path: Path,
                                           change: str) -> None:
    env, cache = unpacked
    made = _plans(env, cache, None)
    _plans(env, cache, tmp_path)
    for path in tmp_path.glob("*/*.json"):
        text = path.read_text()
        doc = json.loads(text)
        record = doc["record"]
        assert len(record) == 7 and sorted(record[1::2]) == [0, 1, 2]  # three scripts
        if change == "torn":
            text = text[: len(text) // 2]
        elif change == "not JSON":
            text = "\0" + text
        else:
            if change == "another key":
                doc["key"] = doc["key"].replace("/", "/x", 1)
            elif change == "a script's number twice":
                record[3] = record[1]
            elif change == "a script's number missing":
                del record[-2:]
            elif change == "a path in info":
                doc["info"] = "../" + doc["info"]
            elif change == "an unknown script section":
                doc["points"][0][3] = "daemon"
            elif change == "a number of the wrong type":
                record[1] = False
            text = json.dumps(doc)
        path.write_text(text)
    assert _plans(env, cache, tmp_path) == made


def test_a_cache_the_memo_cannot_be_written_to_still_plans(
        unpacked: tuple[LockedEnv, Path], tmp_path: Path) -> None:
    env, cache = unpacked
    (tmp_path / "memo").write_text("a file where the folder would be")
    assert _plans(env, cache, tmp_path / "memo") == _plans(env, cache, None)


def test_install_keeps_its_plans_in_the_cache(unpacked: tuple[LockedEnv, Path]) -> None:
    """The install that unpacked the wheel kept what it learnt under CACHE/plans/."""
    env, cache = unpacked
    (p,) = env.pip("linux-64")
    found = list((cache / PLANS).glob("*/*.json"))
    assert len(found) == 1
    assert json.loads(found[0].read_text())["info"] == "richpkg-1.0.dist-info"
    entries = [read_entry(cache, key.name, p.filename) for key in (cache / "unpacked").iterdir()]
    (entry,) = [e for e in entries if e is not None]
    assert PlanMemo(cache / PLANS, entry, p, LAYOUTS[0]).path == found[0]


@pytest.mark.parametrize("python", [
    "/envs/a/bin/python", "/" + "p" * 123, "/" + "p" * 124, "/envs/with space/bin/python",
    "/envs/\u00e9t\u00e9/bin/python", "/" + "\u00e9" * 62, "/" + "\u00e9" * 61 + "p"])
@pytest.mark.parametrize("section", ["console", "gui"])
def test_a_launcher_is_installers(python: str, section: str) -> None:
    """The script a memo's body makes is the one installer makes, either side of its limit
    (a shebang line of 127 bytes: 124 of path), with a space, with characters of two bytes."""
    from installer.scripts import Script

    (point,) = [p for p in wheels._entry_points_of(f"[{section}_scripts]\nrun = pkg.cli:main\n")]
    script = Script("run", "pkg.cli", "main", section)  # type: ignore[arg-type]
    want = script.generate(python, "posix")
    assert point[:4] == ("run", "pkg.cli", "main", section) and point[4]
    assert ("run", wheels.launcher(*point, python)) == want


def test_a_plain_interpreter_path_needs_no_installer(
        unpacked: tuple[LockedEnv, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From the memo, the scripts of a prefix whose interpreter path installer writes as it
    is are made without it (its import is 13 ms of a warm install); others are installer's."""
    from installer.scripts import Script

    env, cache = unpacked
    made = _plans(env, cache, None)
    _plans(env, cache, tmp_path)
    calls: list[str] = []
    real = Script.generate
    monkeypatch.setattr(Script, "generate", lambda self, python, kind: (
        calls.append(python), real(self, python, kind))[1])
    assert _plans(env, cache, tmp_path) == made
    assert calls == [LAYOUTS[2].python] * 2   # the console and the GUI script of the third

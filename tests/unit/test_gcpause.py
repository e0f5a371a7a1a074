"""The cycle collector is paused for an install's and a verify's passes, and given back after.

``samebits.gcpause``: the warm install's heaps have no cycles, and the collector walking them
cost 15 to 20 % of it. What must hold: off inside each pass, on again after (also after a
failure), and a caller that turned it off itself keeps it off.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from samebits.gcpause import paused_gc


class Stop(Exception):
    pass


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_off_inside_on_after_also_after_a_failure():
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: the inner one gives back what it found (off)
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(Stop), paused_gc():
        raise Stop
    assert gc.isenabled()


def test_a_caller_that_turned_it_off_keeps_it_off():
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def _seen_inside(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[bool]:
    """Make ``module.name`` (something the pass calls first) record the collector's state and
    stop the pass there."""
    seen: list[bool] = []

    def record(*args: object, **kwargs: object) -> None:
        seen.append(gc.isenabled())
        raise Stop

    monkeypatch.setattr(module, name, record)
    return seen


def test_verify_env_runs_with_the_collector_paused(monkeypatch, tmp_path: Path):
    import verify.env.manifest
    from verify.env.check import check_env

    seen = _seen_inside(monkeypatch, verify.env.manifest, "prefix_kind")
    with pytest.raises(Stop):
        check_env(tmp_path)
    assert seen == [False]
    assert gc.isenabled()


def test_install_runs_with_the_collector_paused(monkeypatch, tmp_path: Path):
    import samebits.install.prefix as prefix_mod

    seen: list[bool] = []

    class Env:
        def check_platform(self, platform: str) -> None:
            seen.append(gc.isenabled())
            raise Stop

    with pytest.raises(Stop):
        prefix_mod.install_prefix(Env(), "linux-64", tmp_path / "p",  # type: ignore[arg-type]
                                  final=str(tmp_path / "p"), cache=tmp_path / "c")
    assert seen == [False]
    assert gc.isenabled()


def test_the_program_ends_with_the_heap_frozen(monkeypatch):
    """``samebits`` (the console script) runs ``main``, freezes the heap, exits with its
    code: Python's finalization then has no collection to walk the objects in."""
    import samebits_app.cli as cli

    monkeypatch.setattr(cli, "main", lambda: 3)
    assert gc.get_freeze_count() == 0
    try:
        with pytest.raises(SystemExit) as ended:
            cli.entry()
        assert ended.value.code == 3
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_console_script_is_the_entry():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert doc["project"]["scripts"]["samebits"] == "samebits_app.cli:entry"

"""Shared fixtures: a local conda channel that mimics the CUDA stack, built once per session;
the ``requires`` marker for tests that run an outside program; GPU tests skipped without one.

A test that runs skopeo, umoci, chromium or Nix says so with ``@pytest.mark.requires("skopeo")``
(several names: all needed); without one of them on PATH it is skipped, the reason naming the
program and the apt package that provides it. A fixture that runs one calls ``require(name)``
(its path, or the same skip). README "Development" has the one apt line that installs them;
.ci/run installs them in CI.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.fakechannel import build_cuda_channel

# Fixture modules shared by several test files.
pytest_plugins = ["tests.fixtures.lock", "tests.fixtures.render", "tests.fixtures.verify"]

# Outside programs tests may run -> the Debian package that provides each.
APT_PACKAGES = {"skopeo": "skopeo", "umoci": "umoci", "chromium": "chromium",
                "nix": "nix-bin", "nix-build": "nix-bin", "nix-store": "nix-bin",
                "nix-instantiate": "nix-bin", "zstd": "zstd", "pigz": "pigz",
                "slurmctld": "slurm-wlm", "munged": "munge", "bwrap": "bubblewrap"}
APT_LINE = ("apt-get install --no-install-recommends "
            + " ".join(dict.fromkeys(APT_PACKAGES.values())))


def missing_reason(program: str) -> str:
    if program not in APT_PACKAGES:  # gcc, openssl: on most machines, not in .ci/run's line
        return f"{program} is not on PATH (apt-get install {program})"
    return (f"{program} is not on PATH (apt-get install {APT_PACKAGES[program]}; .ci/run "
            "installs it)")


def require(program: str) -> str:
    """The path of ``program``, or skip the calling test or fixture saying how to get it."""
    path = shutil.which(program)
    if path is None:
        pytest.skip(missing_reason(program))
    return path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires(*programs): runs these outside programs; skipped, naming each "
        "missing one and its apt package, when one is not on PATH")


@pytest.fixture(autouse=True, scope="session")
def session_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """XDG_CACHE_HOME for session- and module-scoped fixtures (set up before any test's own):
    one folder for the session, never ~/.cache/samebits."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("xdg-cache-session")
        mp.setenv("XDG_CACHE_HOME", str(path))
        yield path


@pytest.fixture(autouse=True)
def cache_home(session_cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's XDG_CACHE_HOME (so samebits' default cache, $XDG_CACHE_HOME/samebits): the
    session's folder, outside ``tmp_path`` (whose listing tests assert), so no test writes
    under ~/.cache/samebits nor reads what an earlier session left there. Within a session the
    tests share it, as users share theirs: a torch venv's bytecode verdicts are computed once
    (a minute cold, seconds warm), not once per test. A test that needs a cold cache says so:
    ``--cache-dir`` or its own XDG_CACHE_HOME (as tests/fixtures/lock.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(session_cache_home))
    return session_cache_home


@pytest.fixture(scope="session")
def cuda_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file:// conda channel (linux-64, linux-aarch64, noarch) indexed with py-rattler."""
    return build_cuda_channel(tmp_path_factory.mktemp("channel"))


HEAVY = ("heavy: installs or bundles a whole committed lock (gigabytes of downloads and disk); "
         "run with -m heavy")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests whose outside programs are missing, `heavy` tests unless ``-m`` names them
    (CI leaves them out to stay within its time), and `gpu` tests when torch sees no CUDA
    device (CI has none)."""
    if "heavy" not in (config.option.markexpr or ""):
        for item in items:
            if "heavy" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=HEAVY))
    for item in items:
        programs = [p for mark in item.iter_markers("requires") for p in mark.args]
        missing = [p for p in dict.fromkeys(programs) if shutil.which(p) is None]
        if missing:
            item.add_marker(pytest.mark.skip(reason="; ".join(map(missing_reason, missing))))
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

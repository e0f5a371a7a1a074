"""Shared fixtures: a local conda channel that mimics the CUDA stack, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakechannel import build_cuda_channel

# Fixture modules shared by several test files.
pytest_plugins = ["tests.lock_fixtures", "tests.render_fixtures", "tests.verify_fixtures"]


@pytest.fixture(scope="session")
def cuda_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file:// conda channel (linux-64, linux-aarch64, noarch) indexed with py-rattler."""
    return build_cuda_channel(tmp_path_factory.mktemp("channel"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests when torch sees no CUDA device: CI has none."""
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

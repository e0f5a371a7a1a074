"""A throwaway samebits project: environments/ with specs pointing at local sources."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakewheels import torch_like, write_wheels


@dataclass
class TmpProject:
    root: Path
    channel: str
    wheels: str

    def spec(self, env_id: str, text: str) -> Path:
        path = self.root / "environments" / f"{env_id}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = textwrap.dedent(text).replace("@CHANNEL@", self.channel)
        path.write_text(text.replace("@WHEELS@", self.wheels))
        return path

    def lockfile(self, env_id: str) -> Path:
        return self.root / "lockfiles" / f"{env_id}.conda-lock.yml"

    def samebits(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run the real CLI in a subprocess, as a user would, with a cache of its own."""
        env = {**os.environ, "XDG_CACHE_HOME": str(self.root / ".cache")}
        return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=self.root,
                              capture_output=True, text=True, check=check, timeout=120, env=env)


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain folder of small wheels mimicking torch + its CUDA runtime wheels."""
    return write_wheels(tmp_path_factory.mktemp("wheels"), torch_like())


@pytest.fixture
def project(tmp_path: Path, cuda_channel: Path, wheel_dir: Path) -> TmpProject:
    (tmp_path / "environments").mkdir()
    return TmpProject(root=tmp_path, channel=cuda_channel.as_uri(), wheels=wheel_dir.as_uri())


CONDA_SPEC = """\
    generation = "{generation}"
    python = "3.12"
    [platforms.{platform}]
    glibc = "2.28"
    {cuda}
    [conda]
    channels = ["@CHANNEL@"]
    dependencies = [{deps}]
"""


def conda_spec(*, generation: str = "hopper", cuda: str | None = "12.4",
               platform: str = "linux-64", deps: str = '"python 3.12.*", "pytorch"') -> str:
    cuda_table = f'[cuda]\nversion = "{cuda}"' if cuda else ""
    return CONDA_SPEC.format(generation=generation, platform=platform, cuda=cuda_table,
                             deps=deps)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback TCP server that accepts connections and never answers: a firewalled host."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    srv.close()

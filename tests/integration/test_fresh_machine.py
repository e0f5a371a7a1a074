"""Tests that run an outside program skip, saying which and how to get it, where it is missing:
the suite passes on a fresh machine without skopeo, umoci, chromium or Nix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.programs import APT_LINE, APT_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
# One test per outside program, each of which calls it.
NEEDS = {
    "skopeo":
        "tests/integration/test_interrupt.py::test_kill_during_render_oci_keeps_previous_layout",
    "umoci": "tests/integration/test_render_oci.py::test_umoci_unpacks_and_verify_env_agrees",
    "chromium": "tests/e2e/test_audit_report.py::test_html_in_a_real_browser",
    "nix-build": "tests/integration/test_render_nix.py::test_nix_build_realises_every_artifact",
}


def hidden_path(folder: Path, hide: set[str]) -> str:
    """A PATH with every program of this one but ``hide`` (links in ``folder``)."""
    folder.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            if name in hide or (folder / name).exists() or not os.access(target, os.X_OK):
                continue
            (folder / name).symlink_to(target)
    return str(folder)


def test_missing_programs_skip_with_their_reason(tmp_path: Path) -> None:
    """With skopeo, umoci, chromium, Nix, zstd and pigz hidden from PATH, each test that runs one is
    skipped before any fixture runs, naming the program and its apt package."""
    path = hidden_path(tmp_path / "bin", set(APT_PACKAGES))
    assert all(shutil.which(p, path=path) is None for p in APT_PACKAGES)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *NEEDS.values()], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PATH": path})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert re.search(rf"\b{len(NEEDS)} skipped\b", proc.stdout), proc.stdout[-3000:]
    for program, test in NEEDS.items():
        file = test.split("::")[0]
        reason = (f"{program} is not on PATH (apt-get install {APT_PACKAGES[program]}; "
                  ".ci/run installs it)")
        assert re.search(rf"SKIPPED \[1\] {re.escape(file)}:\d+: {re.escape(reason)}",
                         proc.stdout), proc.stdout[-3000:]


def test_readme_names_the_apt_line() -> None:
    """README's Development section gives the one apt line that turns those tests on."""
    assert f"sudo {APT_LINE}" in (ROOT / "README.md").read_text()


def test_cpu_index_probe_answers_fast(tmp_path: Path) -> None:
    """noxfile's probe of the CPU torch index: None for a server that answers; a short reason,
    within seconds, for one that does not (the session then falls back to PyPI)."""
    import http.server
    import socket
    import threading
    import time

    import noxfile

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert noxfile._reachable(f"http://127.0.0.1:{server.server_address[1]}/") is None
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    why = noxfile._reachable(f"http://127.0.0.1:{port}/whl/cpu/torch/", timeout=2)
    assert why is not None and "refused" in why.lower()
    assert time.monotonic() - start < 30  # refused at once; a busy machine may be slow
    assert noxfile._reachable("http://127.0.0.1:1/", timeout=0.5) is not None


CACHE_HOMES: list[Path] = []


@pytest.mark.parametrize("run", [1, 2])
def test_tests_never_use_the_users_cache(run: int, cache_home: Path) -> None:
    """samebits' default cache, in this process and in the ones a test starts, is the test
    session's own folder (tests/conftest.py), never under ~/.cache: one per session, shared by
    its tests."""
    from samebits.install import default_cache_dir
    from samebits.solve.indexcache import default_cache_root

    home_cache = Path(os.path.expanduser("~"), ".cache").resolve()
    assert default_cache_dir() == default_cache_root() == cache_home / "samebits"
    assert not cache_home.resolve().is_relative_to(home_cache)
    proc = subprocess.run([sys.executable, "-c", "from samebits.install import "
                           "default_cache_dir; print(default_cache_dir())"],
                          capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout == f"{cache_home / 'samebits'}\n"
    assert all(home == cache_home for home in CACHE_HOMES)
    CACHE_HOMES.append(cache_home)

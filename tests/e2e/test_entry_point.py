"""The installed ``samebits`` console script, built as a wheel and installed the way users
install it, on every Python the project supports (3.10 to 3.13).

The console script is not ``python -m samebits``: its ``__main__`` is ``bin/samebits``, which
the forkserver's workers (the default hashing pool on Python 3.12+) import again as
``__mp_main__`` with the parent's ``sys.path``. When conda-lock's vendored folder led that path,
every worker failed to import ``packaging.tags`` and the pool respawned them forever: a hang on
any command that read a lock. Each command below runs with a hard time limit, so a hang fails.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from samebits.install.interpreter import Places, search
from samebits.solve.pypi import uv_binary

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.10", "3.11", "3.12", "3.13")   # requires-python >= 3.10; every line tested
LIMIT = 240                                 # seconds a command may take at a load of 10

pytestmark = [pytest.mark.network]  # the wheel's dependencies come from PyPI


def _interpreter(line: str) -> str:
    found = search(line, Places.from_environ()).found
    if found is None:
        if os.environ.get("CI"):  # CI's machine has every supported Python (pyenv)
            pytest.fail(f"no Python {line} runs on this machine; CI must test every line")
        pytest.skip(f"no Python {line} runs on this machine")
    return found.executable


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([uv_binary(), "build", "--wheel", "--quiet", "--out-dir", str(out),
                    str(ROOT)], check=True, timeout=LIMIT, capture_output=True)
    (built,) = out.glob("samebits-*.whl")
    return built


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("uv-cache")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "UV_"))}
    return {**env, **extra}


def _run_line(line: str, python: str, wheel: Path, uv_cache: Path, tmp: Path
              ) -> str | None:
    """None when the installed script on ``python`` reads the lock as it should, else why."""
    env = _clean_env(UV_CACHE_DIR=str(uv_cache))
    venv = tmp / "venv"
    subprocess.run([uv_binary(), "venv", "--quiet", "--python", python, str(venv)],
                   check=True, timeout=LIMIT, env=env, capture_output=True)
    subprocess.run([uv_binary(), "pip", "install", "--quiet", "--python",
                    str(venv / "bin" / "python"), str(wheel)],
                   check=True, timeout=LIMIT, env=env, capture_output=True)
    script = venv / "bin" / "samebits"
    # an empty conda prefix: the pool starts whatever the size, and no base interpreter's
    # stdlib is compiled for the bytecode check (12 s a Python, cold)
    subject = tmp / "subject"
    (subject / "conda-meta").mkdir(parents=True)
    (subject / "conda-meta" / "history").write_text("")
    try:
        res = subprocess.run(
            [str(script), "verify", "env", str(ROOT / "lockfiles" / "cpu.conda-lock.yml"),
             "--prefix", str(subject), "--json"],
            capture_output=True, text=True, timeout=LIMIT, env=_clean_env(), cwd=tmp)
    except subprocess.TimeoutExpired as exc:
        return f"did not finish within {LIMIT} s: {(exc.stderr or b'')[-2000:]!r}"
    if "Traceback" in res.stderr or res.returncode != 1:  # 1: drift, nothing locked is there
        return f"exit {res.returncode}: {res.stderr[-3000:]}"
    report = json.loads(res.stdout)
    missing = {f["package"] for f in report["findings"] if f["kind"] == "package-missing"}
    if "torch" not in missing:
        return f"a wrong report: {res.stdout[:2000]}"
    ran = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.version)"],
                         capture_output=True, text=True, timeout=LIMIT).stdout
    return None if ran.startswith(line + ".") else f"the venv runs Python {ran!r}"


def test_console_script_reads_a_lock(wheel: Path, uv_cache: Path, tmp_path: Path) -> None:
    """On each supported Python (side by side: each is mostly downloads and waiting), the
    installed script verifies an environment against a committed lock (the hashing pool
    starts) and exits with its verdict, within the limit, with no traceback."""
    lines = {line: _interpreter(line) for line in PYTHONS}
    with ThreadPoolExecutor(len(lines)) as pool:
        runs = {line: pool.submit(_run_line, line, python, wheel, uv_cache, tmp_path / line)
                for line, python in lines.items()}
        failed = {line: run.result() for line, run in runs.items() if run.result()}
    assert not failed, "\n".join(f"Python {k}: {v}" for k, v in failed.items())

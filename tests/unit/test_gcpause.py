"""The cycle collector is paused for an install's and a verify's passes, and given back after.

``samebits.gcpause``: the warm install's heaps have no cycles, and the collector walking them
cost 15 to 20 % of it. What must hold: off inside each pass, on again after (also after a
failure), and a caller that turned it off itself keeps it off.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from samebits.gcpause import paused_gc

ROOT = Path(__file__).resolve().parents[2]


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


# os._exit, saying that it was called (on stderr, unbuffered) before it ends the process
SPY = """
import os, sys
from samebits.gcpause import exit_now
_exit = os._exit
os._exit = lambda code: (os.write(2, b"os._exit"), _exit(code))
"""


def _ends(script: str, *args: str, **kwargs: object) -> subprocess.CompletedProcess:
    """``script`` (after ``SPY``) run by this Python, which finds samebits as the tests do,
    its output buffered (as Python buffers a pipe unless PYTHONUNBUFFERED says otherwise)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    code = SPY + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code, *args], env=env,
                          timeout=60, **kwargs)  # type: ignore[call-overload]


def test_the_program_ends_with_mains_code() -> None:
    """``samebits`` (the console script) runs ``main`` and exits with its code."""
    done = _ends("""
        import samebits_app.cli as cli
        cli.main = lambda: 3
        cli.entry()
    """)
    assert done.returncode == 3


def test_the_end_runs_atexit_and_flushes_but_frees_nothing(tmp_path: Path) -> None:
    """Buffered output (1 MB to a pipe) arrives whole, atexit callbacks run, and the process
    ends by ``os._exit``: the heap is left to the kernel, not torn down object by object."""
    done = _ends("""
        import atexit
        atexit.register(lambda: open(sys.argv[1], "w").write("ran"))
        sys.stdout.write("x" * 1_000_000)
        sys.stderr.write("said ")
        exit_now(5)
    """, str(tmp_path / "atexit"), capture_output=True, text=True)
    assert done.returncode == 5
    assert done.stdout == "x" * 1_000_000 and done.stderr == "said os._exit"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_a_running_thread_ends_before_the_process(tmp_path: Path) -> None:
    """Another thread still running: Python's own exit, which waits for it."""
    done = _ends("""
        import threading, time

        def late():
            time.sleep(0.3)
            open(sys.argv[1], "w").write("done")

        threading.Thread(target=late).start()
        exit_now(4)
    """, str(tmp_path / "thread"), capture_output=True, text=True)
    assert done.returncode == 4 and "os._exit" not in done.stderr
    assert (tmp_path / "thread").read_text() == "done"


def test_output_to_a_reader_gone_ends_as_python_ends() -> None:
    """stdout a pipe nobody reads any more: flushing fails, and the process ends as a plain
    ``sys.exit`` does there (Python says so on stderr and exits 120)."""
    codes = []
    for end in ("exit_now(0)", "sys.exit(0)"):
        read, write = os.pipe()
        os.close(read)
        try:
            done = _ends(f"sys.stdout.write('lost')\n{end}\n", stdout=write,
                         stderr=subprocess.PIPE, text=True)
        finally:
            os.close(write)
        codes.append((done.returncode, "BrokenPipeError" in done.stderr,
                      "os._exit" in done.stderr))
    assert codes[0] == codes[1] == (120, True, False)


def test_the_console_script_is_the_entry():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert doc["project"]["scripts"]["samebits"] == "samebits_app.cli:entry"

"""Finding the interpreter of a PyPI-only lock's venv: run candidates, list every refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.errors import InputError
from samebits.install.interpreter import Places, find_interpreter, search

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
EXE = os.path.realpath(sys.executable)
SHIM = f"#!/bin/sh\necho 'pyenv: python{LINE}: command not found' >&2\nexit 127\n"


def script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def pyenv_version(root: Path, version: str, target: str) -> Path:
    exe = root / "versions" / version / "bin" / f"python{LINE}"
    exe.parent.mkdir(parents=True)
    exe.symlink_to(target)
    return exe


def test_shim_on_path_is_passed_over_for_pyenv(tmp_path: Path) -> None:
    """A pyenv shim first on PATH runs nothing: it is refused with what it said, and the
    interpreter under ~/.pyenv/versions is found."""
    shim = script(tmp_path / "shims" / f"python{LINE}", SHIM)
    root = tmp_path / "pyenv"
    pyenv_version(root, f"{LINE}.99", EXE)
    found = search(LINE, Places(path=(str(shim.parent),), pyenv_root=str(root), fixed=()))
    assert found.found is not None and os.path.realpath(found.found.executable) == EXE
    assert [(t.path, t.why) for t in found.tried] == [
        (str(shim), f"exit 127: pyenv: python{LINE}: command not found (PATH)")]


def test_nothing_runs_lists_every_path(tmp_path: Path) -> None:
    """No candidate works: the error names each path tried and why it was refused."""
    shim = script(tmp_path / "shims" / f"python{LINE}", SHIM)
    wrong = script(tmp_path / "bin" / f"python{LINE}", f"#!/bin/sh\nexec {EXE} \"$@\"\n")
    root = tmp_path / "pyenv"
    broken = pyenv_version(root, f"{LINE}.1", str(tmp_path / "gone"))
    places = Places(path=(str(shim.parent),), pyenv_root=str(root),
                    fixed=(str(tmp_path / "usr"),))
    with pytest.raises(InputError) as err:
        find_interpreter("3.99", places=places)  # nothing here is 3.99 ...
    assert err.value.message == "no working Python 3.99 interpreter here; tried:\n  " + \
        f"{tmp_path / 'usr' / 'python3.99'}: not there"
    for exe in (shim, wrong):  # ... and for this line: a shim, a broken link, nothing in usr/
        exe.rename(exe.parent / f"python{LINE}")
    wrong.unlink()
    with pytest.raises(InputError) as err:
        find_interpreter(LINE, places=places)
    assert err.value.message.splitlines() == [
        f"no working Python {LINE} interpreter here; tried:",
        f"  {shim}: exit 127: pyenv: python{LINE}: command not found (PATH)",
        f"  {tmp_path / 'usr' / f'python{LINE}'}: not there",
    ]
    assert err.value.hint == (f"pass --python /path/to/python{LINE}, or install one "
                              f"(uv python install {LINE})")
    assert not broken.exists()  # a dangling link is never a candidate that runs


def test_given_python_of_another_line(tmp_path: Path) -> None:
    """--python that is another version is an error, never a fallback to searching."""
    with pytest.raises(InputError) as err:
        find_interpreter("3.99", sys.executable)
    assert err.value.message == (f'--python "{sys.executable}": is Python '
                                 f'{".".join(map(str, sys.version_info[:3]))}, the lock needs '
                                 "Python 3.99")
    with pytest.raises(InputError) as err:
        find_interpreter(LINE, str(tmp_path / "nope"))
    assert err.value.message == f'--python "{tmp_path / "nope"}": not found'


@pytest.mark.slow
def test_install_finds_python_behind_a_shim(tmp_path: Path) -> None:
    """`samebits install` with only a shim on PATH and the interpreter under $PYENV_ROOT:
    the venv runs on the pyenv interpreter and its console script works."""
    from tests.fixtures.install import locked_wheel, wheel, write_lock

    whl = wheel(tmp_path / "wheels", "hello", "1.0", {
        "hello/__init__.py": b"def main():\n    print('hello')\n",
        "hello-1.0.dist-info/entry_points.txt": b"[console_scripts]\nhello = hello:main\n"})
    env = write_lock(tmp_path / "lockfiles" / "h.conda-lock.yml", [locked_wheel(whl)],
                     python=LINE)
    shim = script(tmp_path / "shims" / f"python{LINE}", SHIM)
    pyenv_version(tmp_path / "pyenv", f"{LINE}.99", EXE)
    root = Path(__file__).resolve().parents[2]
    run_env = {"PATH": str(shim.parent), "PYENV_ROOT": str(tmp_path / "pyenv"),
               "HOME": str(tmp_path), "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-m", "samebits", "install", str(env.path),
                           "--target", str(tmp_path / "env"), "--platform", "linux-64",
                           "--cache-dir", str(tmp_path / "cache"),
                           "--find-links", str(tmp_path / "wheels")], env=run_env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert os.path.realpath(tmp_path / "env" / "bin" / "python") == EXE
    hello = subprocess.run([str(tmp_path / "env" / "bin" / "hello")], capture_output=True,
                           text=True)
    assert hello.stdout == "hello\n"

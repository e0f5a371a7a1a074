"""Environments made by the real tools users use, for ``verify env`` to prove or to catch.

- a **base interpreter**: a copy of the interpreter running the tests (its binary and its stdlib,
  without tests, tkinter and site-packages) in a temporary folder, so tests can plant files in
  "the interpreter a venv runs on" without touching the machine's own Python;
- ``python -m venv`` + pip, ``virtualenv`` + pip, ``uv venv`` + ``uv pip install`` on that
  base, each installing a small wheel from a local folder (nothing is downloaded);
- a conda prefix installed by py-rattler from a local channel whose packages the real
  ``rattler-build`` (py-rattler-build) built from recipes: a ``python`` package holding the
  copied interpreter, ``demo`` (an ELF library and its softlink, an executable, a prefix
  placeholder in a text file and in a compiled binary) and ``demopy`` (noarch: python, with an
  entry point).

Every builder returns the prefix; the session fixtures build each once, and ``private_copy``
gives a test its own copy to break.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.fakewheels import Wheel, wheel_bytes_to
from tests.verify_fixtures import _once

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
BASE_BINARY = Path(os.path.realpath(sys._base_executable))
STDLIB = Path(sysconfig.get_paths(vars={"installed_base": sys.base_prefix,
                                        "base": sys.base_prefix})["stdlib"])
SKIP = ("test", "tests", "idlelib", "tkinter", "turtledemo", "lib2to3", "__pycache__",
        "site-packages", "dist-packages", "pydoc_data")
SP = f"lib/python{LINE}/site-packages"
TOOLS = Path(sys.executable).parent  # virtualenv and uv come with the test extra


def copy_interpreter(dest: Path) -> Path:
    """A copy of this Python (binary + stdlib) at ``dest``; returns its binary."""
    (dest / "bin").mkdir(parents=True)
    binary = dest / "bin" / f"python{LINE}"
    shutil.copy2(BASE_BINARY, binary)
    os.symlink(f"python{LINE}", dest / "bin" / "python3")
    shutil.copytree(STDLIB, dest / "lib" / f"python{LINE}", symlinks=True,
                    ignore=shutil.ignore_patterns(*SKIP))
    (dest / SP).mkdir()
    return binary


def sbtest_wheel(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return wheel_bytes_to(folder, Wheel(name="sbtest", version="1.0", files={
        "sbtest/__init__.py": b"from sbtest.mod import answer\n",
        "sbtest/mod.py": b"def answer():\n    return 42\n",
        "sbtest-1.0.data/scripts/sbtool": b"#!python\nimport sbtest\nprint(sbtest.answer())\n",
    }))


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INDEX": "1",
           "UV_NO_CACHE": "1", "UV_OFFLINE": "1", "VIRTUALENV_NO_PERIODIC_UPDATE": "1"}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # Python writes its caches as users see it do
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, env=env,
                          timeout=600, **kw)


def make_venv_pip(base: Path, dest: Path, wheel: Path) -> Path:
    """``python -m venv`` (pip from ensurepip), then ``pip install`` of a wheel file."""
    run(base, "-m", "venv", dest)
    run(dest / "bin/python", "-m", "pip", "install", "-q", "--no-deps", wheel)
    return dest


def make_virtualenv(base: Path, dest: Path, wheel: Path) -> Path:
    """``virtualenv`` (seeds pip and setuptools), then pip from a local --find-links."""
    run(TOOLS / "python", "-m", "virtualenv", "-q", "-p", base, dest)
    run(dest / "bin/python", "-m", "pip", "install", "-q", "--no-deps", "--find-links",
        wheel.parent, "sbtest")
    return dest


def make_uv(base: Path, dest: Path, wheel: Path) -> Path:
    """``uv venv``, then ``uv pip install`` from a local --find-links (no index)."""
    run(TOOLS / "uv", "venv", "-q", "-p", base, dest)
    run(TOOLS / "uv", "pip", "install", "-q", "--python", dest / "bin/python", "--no-index",
        "--find-links", wheel.parent, "sbtest")
    return dest


# ----------------------------------------------------------------------- rattler-build channel

DEMO = """\
package: {{name: demo, version: "1.0"}}
build:
  number: 0
  script:
    - mkdir -p $PREFIX/bin $PREFIX/lib $PREFIX/share/demo
    - printf 'prefix=%s\\n' "$PREFIX" > $PREFIX/share/demo/config.txt
    - printf '#include <stdio.h>\\nstatic const char w[] = "%s/share/demo/config.txt";\\nint main(void) {{ puts(w); return 0; }}\\n' "$PREFIX" > tool.c
    - gcc -O1 -o $PREFIX/bin/demo-tool tool.c
    - printf 'int demo(void) {{ return 1; }}\\n' > lib.c
    - gcc -shared -fPIC -Wl,-soname,libdemo.so.1 -o $PREFIX/lib/libdemo.so.1 lib.c
    - ln -s libdemo.so.1 $PREFIX/lib/libdemo.so
    - printf '#!/bin/sh\\necho demo\\n' > $PREFIX/bin/demo-script
    - chmod 755 $PREFIX/bin/demo-script
"""  # noqa: E501
DEMOPY = """\
package: {{name: demopy, version: "1.0"}}
build:
  number: 0
  noarch: python
  python:
    entry_points: ["demopy = demopy:main"]
  script:
    - mkdir -p $PREFIX/site-packages/demopy
    - printf 'def main():\\n    print("demopy")\\n' > $PREFIX/site-packages/demopy/__init__.py
requirements:
  run: [python]
"""
PYTHON = """\
package: {{name: python, version: "{version}"}}
build:
  number: 0
  string: h0_cpython
  script:
    - cp -a {stage}/. $PREFIX/
"""


STARTUP_MODULES = ("import re, sys, runpy, json, sysconfig, site, marshal; "
                   "print('\\n'.join(sorted(m.__file__ for m in list(sys.modules.values()) "
                   "if getattr(m, '__file__', None))))")


def stage_python(stage: Path) -> None:
    """The copied interpreter's binary and just the stdlib an entry point needs (what a normal
    start plus ``re``, ``runpy`` and ``json`` import), so the package stays small."""
    (stage / "bin").mkdir(parents=True)
    shutil.copy2(BASE_BINARY, stage / "bin" / f"python{LINE}")
    for link in ("python", "python3"):
        os.symlink(f"python{LINE}", stage / "bin" / link)
    lib = stage / "lib" / f"python{LINE}"
    (lib / "site-packages").mkdir(parents=True)
    (lib / "lib-dynload").mkdir()
    out = subprocess.run([BASE_BINARY, "-I", "-c", STARTUP_MODULES], capture_output=True,
                         text=True, check=True).stdout.split()
    for name in out:
        rel = Path(name).relative_to(STDLIB) if name.startswith(str(STDLIB)) else None
        if rel is None or rel.parts[0] in SKIP:
            continue
        top = STDLIB / rel.parts[0]
        if top.is_dir() and rel.parts[0] != "lib-dynload":
            if not (lib / rel.parts[0]).exists():
                shutil.copytree(top, lib / rel.parts[0], ignore=shutil.ignore_patterns(*SKIP))
        else:
            shutil.copy2(STDLIB / rel, lib / rel)


def build_channel(root: Path) -> Path:
    """Build python, demo and demopy with rattler-build into ``root/channel`` (indexed)."""
    from rattler.index import index_fs

    channel = root / "channel"
    for sd in ("noarch", "linux-64"):
        (channel / sd).mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    stage = root / "python-stage"
    stage_python(stage)
    version = ".".join(map(str, sys.version_info[:3]))
    recipes = []
    for name, text in (("python", PYTHON.format(version=version, stage=stage)),
                       ("demo", DEMO.format()), ("demopy", DEMOPY.format())):
        (root / "recipes" / name).mkdir(parents=True)
        (root / "recipes" / name / "recipe.yaml").write_text(text)
        recipes.append(str(root / "recipes" / name / "recipe.yaml"))
    # In a process of its own: rattler-build's threads can abort the interpreter that loaded
    # it at exit ("PyGILState_Release: thread state must be current"), pytest's included.
    code = ("import sys, warnings, rattler_build; warnings.simplefilter('ignore'); "
            "rattler_build.build_recipes(sys.argv[3:], output_dir=sys.argv[1], "
            "channel=[sys.argv[2]], package_format='tar-bz2', no_include_recipe=True, "
            "test='skip')")
    run(sys.executable, "-c", code, root / "out", channel.as_uri(), *recipes)
    for built in (root / "out").glob("*/*.tar.bz2"):
        shutil.copy(built, channel / built.parent.name / built.name)
    asyncio.run(index_fs(channel, write_zst=False, write_shards=False, force=True))
    return channel


def make_conda(channel: Path, dest: Path, cache: Path) -> Path:
    from tests.verify_fixtures import rattler_install

    rattler_install(channel, ["python", "demo", "demopy"], dest, cache)
    return dest


def private_copy(prefix: Path, dest: Path) -> Path:
    """A copy of a prefix with times kept (bytecode headers stay valid)."""
    shutil.copytree(prefix, dest, symlinks=True)
    return dest


# ------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def base_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copied interpreter in tmp: venvs made from it have it as their base."""
    return _once(tmp_path_factory, "base-python",
                 lambda: copy_interpreter(tmp_path_factory.mktemp("base") / "python"))


@pytest.fixture(scope="session")
def producer_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _once(tmp_path_factory, "producer-wheel",
                 lambda: sbtest_wheel(tmp_path_factory.mktemp("producer-wheels")))


@pytest.fixture(scope="session")
def rb_channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local channel of packages built by rattler-build."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to compile the demo package's ELF files")
    return _once(tmp_path_factory, "rb-channel",
                 lambda: build_channel(tmp_path_factory.mktemp("rattler-build")))


PRODUCERS = ("venv", "virtualenv", "uv", "conda")


@pytest.fixture(scope="session")
def produced(tmp_path_factory: pytest.TempPathFactory, base_python: Path,
             producer_wheel: Path, request: pytest.FixtureRequest) -> dict[str, Path]:
    """Every producer's fresh environment, made once per session (conda: on first use)."""
    def make() -> dict[str, Path]:
        root = tmp_path_factory.mktemp("produced")
        return {"venv": make_venv_pip(base_python, root / "venv", producer_wheel),
                "virtualenv": make_virtualenv(base_python, root / "virtualenv", producer_wheel),
                "uv": make_uv(base_python, root / "uv", producer_wheel)}

    return _once(tmp_path_factory, "produced", make)


@pytest.fixture(scope="session")
def conda_produced(tmp_path_factory: pytest.TempPathFactory, rb_channel: Path) -> Path:
    return _once(tmp_path_factory, "conda-produced", lambda: make_conda(
        rb_channel, tmp_path_factory.mktemp("conda-produced") / "env",
        tmp_path_factory.mktemp("rb-cache")))

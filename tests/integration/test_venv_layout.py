"""Where a wheel's ``.data`` schemes land in a venv, against the real pip.

Data files under ``lib64/`` in a venv whose ``lib64`` is a link to ``lib``, as
``python -m venv`` (and uv) make one on 64-bit Linux: pip writes them through the link into
``lib/``, and ``verify env`` of that venv must find them there. The sweep's tsl (torch 2.0's
tables pulls blosc2 2.0.0, whose wheel ships ``blosc2-2.0.0.data/data/lib64/libblosc2.so`` and
its ``pkgconfig/blosc2.pc``) had verify env call five of pip's files missing and five others
unowned. Offline: a wheel shaped like blosc2's, built here (tests/fixtures/fakewheels.py),
served by a loopback index, locked by the real uv, installed by the real pip into a real
``python -m venv``.

Headers (``.data/headers/``) go to ``include/site/pythonX.Y/<name>/`` of a venv, as pip and
uv put them: the sweep's tab-ddpm (greenlet 1.1.3's ``greenlet.h``, SQLAlchemy's dependency)
found samebits writing ``include/pythonX.Y/greenlet.h``, and the RECORD rows saying so.
samebits' own venv has the ``lib64`` link too (it had a real ``lib64/`` folder), so both
trees hold the same paths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.fakewheels import Wheel, write_wheels
from tests.fixtures.lock import TmpProject
from tests.fixtures.pypi_index import LocalIndex, Serving

LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
SPEC = f"""\
generation = "cpu"
python = "{LINE}"
exclude-newer = "2026-03-01T00:00:00Z"
[platforms.linux-64]
glibc = "2.28"
[pypi]
index = "{{url}}"
requirements = ["blosclike"]
"""
DATA = "blosclike-2.0.0.data/data/lib64"
HEADER = ("blosclike-2.0.0.data/headers/blosclike.h", b"#define BLOSCLIKE 2\n")
LIBS = {"libblosclike.so.2.6.1": b"not an ELF: a library's bytes\n",
        "pkgconfig/blosclike.pc": b"prefix=/usr\nlibdir=${prefix}/lib64\n"}


def test_data_and_headers_land_where_pip_puts_them(project: TmpProject, tmp_path: Path) -> None:
    folder = write_wheels(tmp_path / "wheels", [Wheel(
        "blosclike", "2.0.0", files={"blosclike/__init__.py": b"", HEADER[0]: HEADER[1],
                                     **{f"{DATA}/{k}": v for k, v in LIBS.items()}})])
    idx = LocalIndex(folder=folder,
                     upload_times={w.name: "2026-01-01T00:00:00Z" for w in folder.glob("*")})
    with Serving(idx) as url:
        project.spec("env", SPEC.format(url=url))
        res = project.samebits("lock", timeout=600)
        assert res.returncode == 0, res.stderr
        ours = tmp_path / "ours"
        res = project.samebits("install", "env", "--target", str(ours), "--no-bytecode",
                               timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
    header = f"include/site/python{LINE}/blosclike/blosclike.h"
    assert (ours / header).read_bytes() == HEADER[1]
    assert os.readlink(ours / "lib64") == "lib"  # samebits' venv has the link venv and uv make
    for name, data in LIBS.items():
        assert (ours / "lib" / name).read_bytes() == data
    assert f"../../../{header}," in next(ours.glob("lib/python*/site-packages/blosclike-2.0.0"
                                                    ".dist-info/RECORD")).read_text()
    venv = tmp_path / "pipvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"),
                    "install", "--no-index", "--find-links", str(folder), "--no-compile",
                    "--disable-pip-version-check", "blosclike==2.0.0"],
                   check=True, capture_output=True, timeout=300)
    assert os.readlink(venv / "lib64") == "lib"  # the venv module's link, pip wrote through it
    for name, data in LIBS.items():
        assert (venv / "lib" / name).read_bytes() == data
    assert (venv / header).read_bytes() == HEADER[1]  # where pip puts it, as samebits does
    res = project.samebits("verify", "env", "env", "--prefix", str(venv), "--json",
                           "--no-linkage", timeout=600)
    doc = json.loads(res.stdout)
    assert (res.returncode, doc["identical"], doc["findings"]) == (0, True, []), res.stderr
    # a file pip wrote is still its: changed, it is named by its real path
    lib = venv / "lib" / "libblosclike.so.2.6.1"
    lib.chmod(0o644)
    lib.write_bytes(b"other bytes\n")
    res = project.samebits("verify", "env", "env", "--prefix", str(venv), "--json",
                           "--no-linkage", timeout=600)
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and not doc["identical"]
    assert [f["path"] for f in doc["findings"]] == ["lib/libblosclike.so.2.6.1"], doc["findings"]

"""pip's installation order computed from wheels' metadata (samebits.lock.pipordering) against
the order the real pip installs them in: ``pip install`` of small wheels built here, offline
(--no-index --find-links), read from its own log line "Installing collected packages: ...",
which lists ``get_installation_order``'s result. Each case is a graph shape whose order the
lock's own dependency edges (uv's ``# via``: no extras, no Requires-Python) would get wrong."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from samebits.foreign.target import Target
from samebits.lock.pipordering import Dist, pip_order
from tests.fixtures.fakewheels import Wheel, write_wheels

RP = ("Requires-Python: >=3.8",)
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"

CASES = {
    # a dependency-free wheel without Requires-Python installs before one with it
    "requires-python": ([Wheel("b-first", "1.0"), Wheel("a-last", "1.0", metadata=RP)],
                        ["a-last", "b-first"]),
    # lib[x] is its own node: xdep hangs below it, not below lib, so lib installs first
    "extras": ([Wheel("top", "1.0", requires=("lib[x]",), metadata=RP),
                Wheel("lib", "1.0", requires=("base", "xdep; extra == 'x'"),
                      metadata=("Provides-Extra: x",)),
                Wheel("xdep", "1.0", requires=("deep1",)),
                Wheel("deep1", "1.0", requires=("deep2",)), Wheel("deep2", "1.0"),
                Wheel("base", "1.0")], ["top"]),
    "extras with a specifier": ([Wheel("t2", "1.0", requires=("l2[y]>=1",)),
                                 Wheel("l2", "1.0", requires=("y2; extra=='y'",),
                                       metadata=("Provides-Extra: y",)),
                                 Wheel("y2", "1.0", metadata=RP)], ["t2"]),
    "cycle": ([Wheel("ca", "1.0", requires=("cb",)), Wheel("cb", "1.0", requires=("ca", "cc")),
               Wheel("cc", "1.0", requires=("ca",)), Wheel("cd", "1.0", requires=("cc",))],
              ["cd", "cb"]),
    "opencv-like": ([Wheel("opencv-python", "4.8.0.76", requires=("numpy>=1.21",),
                           metadata=RP),
                     Wheel("opencv-python-headless", "4.8.0.76", requires=("numpy>=1.21",),
                           metadata=RP),
                     Wheel("albumentations", "1.3.1",
                           requires=("numpy", "opencv-python-headless>=4.1.1"), metadata=RP),
                     Wheel("numpy", "1.26.0", metadata=RP)],
                    ["opencv-python", "albumentations==1.3.1"]),
}


def real_pip_order(folder: Path, roots: list[str], target: Path) -> list[str]:
    """What pip prints as it starts installing: its installation order."""
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index",
                           "--find-links", str(folder), "--prefix", str(target),
                           "--ignore-installed",  # numpy is in this venv: install it too
                           "--no-compile", "--disable-pip-version-check", *roots],
                          capture_output=True, text=True, timeout=300)
    m = re.search(r"^Installing collected packages: (.*)$", proc.stdout, re.M)
    assert m, proc.stdout + proc.stderr
    return [canonicalize_name(n.strip()) for n in m[1].split(",")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_order_is_the_real_pips(tmp_path: Path, case: str) -> None:
    """The order computed from the wheels' METADATA is the one the real pip installs in."""
    wheels, roots = CASES[case]
    folder = write_wheels(tmp_path / "wheels", wheels)
    dists = []
    for w in wheels:
        with zipfile.ZipFile(folder / w.filename) as zf:
            dists.append(Dist.from_metadata(
                w.name, zf.read(f"{w.dist}-{w.version}.dist-info/METADATA")))
    environment = Target(platform="linux-64", python=LINE, glibc="2.28").environment()
    assert pip_order(dists, roots, environment) == \
        real_pip_order(folder, roots, tmp_path / "prefix")

"""The machine a universal Python lock is resolved for: platform, Python and glibc floor.

A ``Target`` gives the two things an installer needs to pick from a universal lock: the PEP 508
marker environment (``environment()``) and the wheel tags it accepts, best first (``tags()``),
built with ``packaging.tags`` exactly as pip orders them for a CPython of that version on a
manylinux glibc of that floor. ``best_wheel`` ranks wheel file names with packaging's own
selector (``create_compatible_tags_selector``), the rule pip and PEP 751 installers follow.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from packaging.tags import Tag, compatible_tags, cpython_tags, create_compatible_tags_selector
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from samebits.errors import UsageError
from samebits.foreign.model import DEFAULT_GLIBC, ReadOptions

ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# manylinux's legacy aliases, by the glibc they stand for (PEP 600)
LEGACY = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
PYTHON_RE = re.compile(r"^3\.\d{1,2}(\.\d{1,3})?$")
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Target:
    platform: str  # linux-64 | linux-aarch64
    python: str  # "3.12" or "3.12.4"
    glibc: str  # "2.28"

    @property
    def line(self) -> str:
        """``X.Y``."""
        return ".".join(self.python.split(".")[:2])

    @property
    def full_version(self) -> str:
        """``X.Y.Z`` for markers; ``X.Y.0`` when only the line was given."""
        parts = self.python.split(".")
        return ".".join(parts + ["0"] * (3 - len(parts)))

    @property
    def arch(self) -> str:
        return ARCH[self.platform]

    def describe(self) -> str:
        return f"{self.platform}, Python {self.python}, glibc {self.glibc}"

    def environment(self) -> dict[str, str]:
        """The PEP 508 marker environment of a CPython on this Linux platform."""
        return {
            "implementation_name": "cpython",
            "implementation_version": self.full_version,
            "os_name": "posix",
            "platform_machine": self.arch,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": self.full_version,
            "python_version": self.line,
            "sys_platform": "linux",
        }

    def platform_tags(self) -> list[str]:
        """manylinux_2_N for N from the floor down to the architecture's oldest (with the
        legacy aliases), then ``linux_<arch>``: packaging's order for a glibc of this floor."""
        major, minor = (int(x) for x in self.glibc.split("."))
        oldest = 5 if self.arch == "x86_64" else 17
        out = []
        for m in range(minor, oldest - 1, -1):
            out.append(f"manylinux_{major}_{m}_{self.arch}")
            legacy = LEGACY.get((major, m))
            if legacy == "manylinux2014" or (legacy and self.arch == "x86_64"):
                out.append(f"{legacy}_{self.arch}")
        out.append(f"linux_{self.arch}")
        return out

    @cached_property
    def _tags(self) -> tuple[Tag, ...]:
        version = tuple(int(x) for x in self.line.split("."))
        plats = self.platform_tags()
        return (*cpython_tags(version, platforms=plats),
                *compatible_tags(version, f"cp{version[0]}{version[1]}", plats))

    def tags(self) -> tuple[Tag, ...]:
        return self._tags

    def best(self, items: Iterable[tuple[T, str]]) -> T | None:
        """The item whose wheel file name fits best (pip's choice); None if none fits."""
        tagged = []
        for item, filename in items:
            tags = wheel_tags(filename)
            if tags:
                tagged.append((item, tags))
        return next(create_compatible_tags_selector(self.tags())(tagged), None)


def wheel_tags(filename: str) -> frozenset[Tag]:
    if not filename.endswith(".whl"):
        return frozenset()
    try:
        return frozenset(parse_wheel_filename(filename)[3])
    except InvalidWheelFilename:
        return frozenset()


def min_glibc(tags: Iterable[Tag]) -> tuple[int, int] | None:
    """The oldest glibc a wheel with these tags runs on (None: no manylinux tag)."""
    found = []
    for t in tags:
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", t.platform)
        if m:
            found.append((int(m.group(1)), int(m.group(2))))
        for (major, minor), legacy in LEGACY.items():
            if t.platform.startswith(legacy + "_"):
                found.append((major, minor))
    return min(found) if found else None


def host_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def targets(options: ReadOptions, *, default_platforms: Sequence[str]) -> list[Target]:
    """One ``Target`` per platform to convert for; bad option values are usage errors."""
    python = options.python or host_python()
    if not PYTHON_RE.match(python):
        raise UsageError(f'--lock-python "{python}": expected X.Y or X.Y.Z, e.g. 3.12')
    glibc = options.glibc or DEFAULT_GLIBC
    if not re.fullmatch(r"2\.\d{1,2}", glibc):
        raise UsageError(f'glibc "{glibc}": expected 2.N, e.g. 2.28')
    platforms = options.platforms or tuple(default_platforms)
    bad = [p for p in platforms if p not in ARCH]
    if bad:
        raise UsageError(f"platform {bad[0]}: samebits chooses wheels for "
                         f"{' and '.join(ARCH)} only")
    return [Target(platform=p, python=python, glibc=glibc) for p in platforms]

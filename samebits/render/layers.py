"""Which files of a prefix go into which image layer.

Every file belongs to the package that installed it: conda-meta/<pkg>.json lists a conda
package's files (and the record itself is the package's), a wheel's ``*.dist-info/RECORD`` lists
its files. The large GPU libraries get layers of their own, so that a lock update that leaves
them alone leaves those layers (and their digests) alone, and registries and caches reuse them:

    cuda     the CUDA runtime and math libraries (cuda-*, libcu*, libnv*, nvidia-* wheels)
    cublas   cuBLAS (the largest CUDA library)
    cudnn    cuDNN
    nccl     NCCL
    torch    torch / pytorch / libtorch and triton
    env      everything else: Python, numpy, the rest, conda-meta/history, venv files

Layers come in that order (the ones that change least at the bottom); a group with no files has
no layer. Folders go into every layer that has something under them, identical each time. A
prefix holding the NVIDIA driver's own libraries (libcuda.so, libnvidia-ml.so) is refused: the
container runtime mounts the host's, and a copy in the image would shadow them.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from samebits.errors import InputError
from samebits.render.tarball import Entry

REST = "env"
# (layer, package-name patterns), most specific first: the first match wins.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cublas", ("libcublas*", "nvidia-cublas*")),
    ("cudnn", ("cudnn", "libcudnn*", "nvidia-cudnn*")),
    ("nccl", ("nccl", "libnccl*", "nvidia-nccl*")),
    ("torch", ("torch", "pytorch", "pytorch-gpu", "libtorch", "triton", "pytorch-triton*")),
    ("cuda", ("cuda", "cuda-*", "cudatoolkit", "libcu*", "libnv*", "nvidia-*")),
)
LAYER_ORDER = ("cuda", "cublas", "cudnn", "nccl", "torch", REST)
DRIVER_LIBS = re.compile(r"(^|/)lib(cuda|nvidia-ml)\.so(\.[0-9.]+)?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    name: str
    entries: tuple[Entry, ...]
    packages: tuple[str, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)


def group_of(package: str) -> str:
    """The layer a package's files go in (package names as conda / PyPI spell them)."""
    name = canonicalize_name(package)
    for group, patterns in GROUPS:
        if any(fnmatch.fnmatchcase(name, pat) for pat in patterns):
            return group
    return REST


def read_owners(prefix: Path) -> dict[str, str]:
    """path (relative to ``prefix``) -> the package that installed it."""
    prefix = Path(prefix)
    owners: dict[str, str] = {}
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        doc = json.loads(record.read_text())
        name = doc.get("name", "")
        owners[f"conda-meta/{record.name}"] = name
        for path in doc.get("files", []):
            owners[path] = name
    for record in sorted(prefix.glob("lib/python*/site-packages/*.dist-info/RECORD")):
        site = record.parent.parent.relative_to(prefix).as_posix()
        name = canonicalize_name(record.parent.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        for row in csv.reader(record.read_text().splitlines()):
            if row and row[0]:
                owners[posixpath.normpath(posixpath.join(site, row[0]))] = name
    return owners


def driver_libraries(entries: Sequence[Entry]) -> list[str]:
    return [e.path for e in entries
            if e.kind != "dir" and "/stubs/" not in e.path and DRIVER_LIBS.search(e.path)]


def assign_layers(entries: Sequence[Entry], owners: Mapping[str, str]) -> list[Layer]:
    """Split sorted prefix ``entries`` into layers by their owners' groups (pure)."""
    bad = driver_libraries(entries)
    if bad:
        raise InputError(f"the prefix ships the NVIDIA driver's libraries: {', '.join(bad)}",
                         hint="GPU images must not ship libcuda: the container runtime mounts "
                         "the host driver's; drop the package that brings it from the spec")
    dirs = [e for e in entries if e.kind == "dir"]
    members: dict[str, list[Entry]] = {g: [] for g in LAYER_ORDER}
    packages: dict[str, set[str]] = {g: set() for g in LAYER_ORDER}
    for e in entries:
        if e.kind == "dir":
            continue
        owner = owners.get(e.path)
        group = group_of(owner) if owner else REST
        members[group].append(e)
        if owner:
            packages[group].add(owner)
    layers = []
    for group in LAYER_ORDER:
        files = members[group]
        if group == REST:
            chosen = dirs  # every folder, the empty ones too
        else:
            needed = {posixpath.dirname(e.path) for e in files}
            for path in list(needed):
                while path:
                    needed.add(path)
                    path = posixpath.dirname(path)
            chosen = [d for d in dirs if d.path in needed]
        if not files and group != REST:
            continue
        all_entries = sorted([*chosen, *files], key=lambda e: e.sort_key)
        layers.append(Layer(name=group, entries=tuple(all_entries),
                            packages=tuple(sorted(packages[group]))))
    return layers

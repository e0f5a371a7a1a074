"""Which CUDA stack an environment carries, read from its files: the CUDA runtime, the CUDA
torch was built for, cuDNN, NCCL, and the ptxas a runtime compiler (triton) brings.

Sources, first found wins (paths are matched by their ends, so a prefix, a wheel member or a
conda package all work):

    cuda_runtime  DIR/include/cuda_runtime_api.h ``#define CUDART_VERSION 13000`` where
                  DIR/lib holds a libcudart (triton's own copy of the header does not count);
                  else the version in a ``libcudart.so.X.Y.Z`` name; else ``libcudart.so.X``
    torch_cuda    torch/version.py ``cuda = '13.0'``; torch's version from ``__version__``
    cudnn         include/cudnn_version.h ``CUDNN_MAJOR/MINOR/PATCHLEVEL``; else libcudnn.so.X.Y.Z
    nccl          include/nccl.h ``NCCL_MAJOR/MINOR/PATCH``; else libnccl.so.X.Y.Z
    ptxas         any ``.../bin/ptxas*``: "Cuda compilation tools, release 12.8" inside it

``stack_from(files)`` is pure: ``files`` maps each candidate path to a function returning its
bytes (``candidates`` says which paths are worth reading, ``essence`` which part of them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

HEADER_ENDS = ("include/cuda_runtime_api.h", "include/cudnn_version.h", "include/nccl.h",
               "torch/version.py")
_LIB = re.compile(r"(?:^|/)lib(cudart|cudnn|nccl)\.so\.(\d+(?:\.\d+)*)$")
_PTXAS = re.compile(r"(?:^|/)bin/ptxas[\w.-]*$")
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+\.\d+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaStack:
    cuda_runtime: str | None = None
    torch: str | None = None
    torch_cuda: str | None = None
    cudnn: str | None = None
    nccl: str | None = None
    ptxas: tuple[tuple[str, str], ...] = ()  # (path, CUDA release of that ptxas)
    sources: tuple[tuple[str, str], ...] = ()  # (fact, path it was read from)

    def to_dict(self) -> dict[str, Any]:
        return {"cuda_runtime": self.cuda_runtime, "torch": self.torch,
                "torch_cuda": self.torch_cuda, "cudnn": self.cudnn, "nccl": self.nccl,
                "ptxas": [{"path": p, "cuda": v} for p, v in self.ptxas],
                "sources": dict(self.sources)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CudaStack:
        return cls(cuda_runtime=d.get("cuda_runtime"), torch=d.get("torch"),
                   torch_cuda=d.get("torch_cuda"), cudnn=d.get("cudnn"), nccl=d.get("nccl"),
                   ptxas=tuple((p["path"], p["cuda"]) for p in d.get("ptxas", ())),
                   sources=tuple(sorted(dict(d.get("sources", {})).items())))


def stack_member(path: str) -> bool:
    """Whether ``stack_from`` looks at this path at all (a candidate, or a library name)."""
    return path.endswith(HEADER_ENDS) or bool(_PTXAS.search(path) or _LIB.search(path))


def candidates(paths: Iterable[str]) -> list[str]:
    """The paths ``stack_from`` reads: version headers, torch/version.py, ptxas binaries."""
    return sorted(p for p in paths if p.endswith(HEADER_ENDS) or _PTXAS.search(p))


_ESSENTIAL = re.compile(
    rb"^(#define\s+(CUDART_VERSION|CUDNN_MAJOR|CUDNN_MINOR|CUDNN_PATCHLEVEL|NCCL_MAJOR"
    rb"|NCCL_MINOR|NCCL_PATCH)\b.*|__version__\s*=.*|cuda(\s*:[^=]*)?\s*=.*)$", re.M)


def essence(path: str, data: bytes) -> bytes:
    """The part of a candidate file ``stack_from`` reads (what a cache keeps): the version
    lines of a header or version.py, the release line of a ptxas."""
    if _PTXAS.search(path):
        m = _RELEASE.search(data)
        return m.group(0) if m else b""
    return b"\n".join(m.group(0) for m in _ESSENTIAL.finditer(data))


def _defines(text: str, *names: str) -> str | None:
    values = []
    for name in names:
        m = re.search(rf"#define\s+{name}\s+(\d+)\b", text)
        if m is None:
            return None
        values.append(str(int(m.group(1))))
    return ".".join(values)


def _cudart(text: str) -> str | None:
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
    if m is None:
        return None
    v = int(m.group(1))
    return f"{v // 1000}.{v % 1000 // 10}"


def _torch_version(text: str) -> tuple[str | None, str | None]:
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    cuda = re.search(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return (version.group(1) if version else None), (cuda.group(1) if cuda else None)


def _beside_cudart(header: str, paths: list[str]) -> bool:
    root = header[:-len("include/cuda_runtime_api.h")]
    return any(p.startswith((f"{root}lib/libcudart.so", f"{root}lib64/libcudart.so"))
               for p in paths)


def stack_from(paths: Iterable[str], read: Callable[[str], bytes]) -> CudaStack:
    """The stack of an environment whose files are ``paths``; ``read(path)`` gives bytes."""
    paths = sorted(paths)
    found: dict[str, str] = {}
    source: dict[str, str] = {}

    def put(key: str, value: str | None, path: str) -> None:
        if value and key not in found:
            found[key], source[key] = value, path

    ptxas = []
    for path in candidates(paths):
        if _PTXAS.search(path):
            m = _RELEASE.search(read(path))
            if m:
                ptxas.append((path, m.group(1).decode()))
            continue
        text = read(path).decode("utf-8", "replace")
        if path.endswith("cuda_runtime_api.h"):
            if _beside_cudart(path, paths):
                put("cuda_runtime", _cudart(text), path)
        elif path.endswith("cudnn_version.h"):
            put("cudnn", _defines(text, "CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"), path)
        elif path.endswith("nccl.h"):
            put("nccl", _defines(text, "NCCL_MAJOR", "NCCL_MINOR", "NCCL_PATCH"), path)
        elif path.endswith("torch/version.py"):
            version, cuda = _torch_version(text)
            put("torch", version, path)
            put("torch_cuda", cuda, path)
    for path in paths:  # library file names, when no header said it
        lib = _LIB.search(path)
        if lib:
            key = {"cudart": "cuda_runtime"}.get(lib.group(1), lib.group(1))
            put(key, lib.group(2), path)
    return CudaStack(cuda_runtime=found.get("cuda_runtime"), torch=found.get("torch"),
                     torch_cuda=found.get("torch_cuda"), cudnn=found.get("cudnn"),
                     nccl=found.get("nccl"), ptxas=tuple(ptxas),
                     sources=tuple(sorted(source.items())))

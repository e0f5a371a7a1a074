"""How a process really loads what ``verify.env.linkage`` could not find on the search path.

Three cases where ld.so's search alone would call a library missing, but the process that
uses the environment does not:

- ``torch_preloads``: ``import torch`` loads the CUDA libraries of ``TORCH_PRELOADS`` from
  ``site-packages/nvidia/<folder>/lib`` (or ``nvidia/cuXX/lib``, ``<folder>/lib``) before
  libtorch (``torch/__init__.py`` ``_preload_cuda_deps``, torch 2.13); once one is loaded, ld.so
  satisfies every later DT_NEEDED of that name: ``preloaded``.
  The libraries of ``torch/lib`` that ``import torch`` loads (the DT_NEEDED closure of
  ``torch/_C*.so``) satisfy, the same way, an extension module of another package beside it
  (torchvision's ``_C.so`` needs ``libtorch.so`` and has no RUNPATH to it: it runs because
  ``import torchvision`` imports torch first): ``preloaded``.
- ``plugins``: a shared library nothing in the environment needs and that is no Python
  extension module is only ever dlopen'ed (nvshmem's MPI/UCX bootstraps, cufile's RDMA
  plugin); when every library it lacks is an optional transport (``TRANSPORTS``), it loads on
  machines that have one: ``optional``, a note.
- ``package_tools``: an executable, or a ``lib*.so`` plugin missing only libraries of its own
  package's folder, inside site-packages, that nothing loads, whose missing libraries are all
  elsewhere in the environment (torch's
  ``torch/bin/test_shim``, RUNPATH ``$ORIGIN``; triton's ``triton/plugins/lib*.so``, which
  need ``libtriton.so`` and are dlopen'ed only by a process that has loaded it, with a RUNPATH
  of triton's build folder): it runs only when its caller sets LD_LIBRARY_PATH or has loaded
  the library; the environment lacks nothing: ``off_path``, a note.

Anything else stays ``unresolved``: a finding, unless what really loads says otherwise
(``verify.env.importverdict``: the owning packages imported in the environment's interpreter).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping

from verify.env.linkage import Link
from verify.env.manifest import Entry, Manifest

# torch/__init__.py _preload_cuda_deps (torch 2.13): (folder, library name stem) it loads.
TORCH_PRELOADS = (
    ("cublas", "libcublasLt.so."), ("cublas", "libcublas.so."), ("cudnn", "libcudnn.so."),
    ("cuda_nvrtc", "libnvrtc.so."), ("cuda_nvrtc", "libnvrtc-builtins.so."),
    ("cuda_runtime", "libcudart.so."), ("cuda_cupti", "libcupti.so."),
    ("cufft", "libcufft.so."), ("curand", "libcurand.so."), ("nvjitlink", "libnvJitLink.so."),
    ("cusparse", "libcusparse.so."), ("cusparselt", "libcusparseLt.so."),
    ("cusolver", "libcusolver.so."), ("nccl", "libnccl.so."), ("nvshmem", "libnvshmem_host.so."),
    ("cufile", "libcufile.so."), ("nvtx", "libnvToolsExt.so."),
)
# Libraries of interconnects a plugin may use when the machine has them (name prefixes).
TRANSPORTS = ("libmpi", "liboshmem", "libucp", "libucs", "libuct", "libucm", "libfabric",
              "libibverbs", "libmlx5", "librdmacm", "libpmix", "libpmi", "libefa", "libgdrapi",
              "libnl-3", "libnl-route-3", "libhcoll", "libsharp", "libmlx4")
EXTENSION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[^./]+)?\.so$")


def torch_preloads(links: list[Link], entries: Mapping[str, Entry], manifest: Manifest
                    ) -> tuple[list[Link], list[Link]]:
    """(preloaded, still unresolved): names torch loads itself from site-packages first."""
    from verify.env.records import site_packages

    sps = [sp for sp in site_packages(manifest.prefix) if f"{sp}/torch/__init__.py" in entries]
    if not sps or not links:
        return [], links
    loaded = {name: path for sp in sps for name, path in _torch_closure(sp, entries).items()}
    found: list[Link] = []
    rest: list[Link] = []
    for link in links:
        where = loaded.get(link.needed) if _extension_beside_torch(link.file, sps) else None
        folders = [f for f, stem in TORCH_PRELOADS if link.needed.startswith(stem)]
        for sp in sps if folders and where is None else ():
            pattern = re.compile(rf"^{re.escape(sp)}/(nvidia/([^/]+)|([^/]+))/lib/"
                                 rf"{re.escape(link.needed)}$")
            for path in entries:
                m = pattern.match(path)
                if m and ((m[2] in folders or (m[2] or "").startswith("cu"))
                          or m[3] in folders):
                    where = path
                    break
            if where:
                break
        if where:
            found.append(Link(file=link.file, needed=link.needed, package=link.package,
                              status="preloaded", found=where))
        else:
            rest.append(link)
    return found, rest


def _torch_closure(sp: str, entries: Mapping[str, Entry]) -> dict[str, str]:
    """soname -> path of every library of ``torch/lib`` that ``import torch`` loads: the
    DT_NEEDED closure of torch's own extension modules (``torch/_C*.so``) within torch/lib."""
    lib = f"{sp}/torch/lib/"
    todo = [p for p in entries
            if p.startswith(f"{sp}/torch/_C") and p.endswith(".so") and "/" not in p[len(sp) + 7:]]
    out: dict[str, str] = {}
    while todo:
        e = entries.get(todo.pop())
        for name in (e.elf.needed if e is not None and e.elf is not None else ()):
            if name not in out and lib + name in entries:
                out[name] = lib + name
                todo.append(lib + name)
    return out


def _extension_beside_torch(file: str, sps: list[str]) -> bool:
    """A Python extension module of another package in torch's site-packages (torchvision's
    ``_C.so``, ``image.so``): such packages import torch before they load their extensions, so
    libtorch's libraries are already in the process and ld.so satisfies their DT_NEEDED."""
    name = posixpath.basename(file)
    return EXTENSION.match(name) is not None and any(
        file.startswith(f"{sp}/") and not file.startswith(f"{sp}/torch/") for sp in sps)


def plugins(links: list[Link], loaders: dict[str, set[str]]
             ) -> tuple[list[Link], list[Link]]:
    """(optional, still unresolved): a plugin nothing needs, missing only transports."""
    by_file: dict[str, list[Link]] = {}
    for link in links:
        by_file.setdefault(link.file, []).append(link)
    optional: list[Link] = []
    rest: list[Link] = []
    for file, group in by_file.items():
        name = posixpath.basename(file)
        plugin = ".so" in name and not EXTENSION.match(name) and file not in loaders
        if plugin and all(lk.needed.startswith(TRANSPORTS) for lk in group):
            optional.extend(Link(file=lk.file, needed=lk.needed, package=lk.package,
                                 status="optional", searched=lk.searched) for lk in group)
        else:
            rest.extend(group)
    return optional, rest


def package_tools(links: list[Link], entries: Mapping[str, Entry],
                   loaders: dict[str, set[str]]) -> tuple[list[Link], list[Link]]:
    """(off_path, still unresolved): an executable or a ``lib*.so`` plugin inside
    site-packages that nothing loads (torch's torch/bin/test_shim, triton's plugins), whose
    every missing library is in the environment, just not on its search path: it runs only
    when its caller sets LD_LIBRARY_PATH or has loaded that library. The environment lacks
    nothing, so it is a note; a library found nowhere stays a finding, and so does a Python
    extension module (``name.cpython-*.so``: ``import`` loads it with its own search path)."""
    names: dict[str, str] = {}
    for path, e in entries.items():
        if e.type == "file" and e.elf is not None:
            names.setdefault(posixpath.basename(path), path)

    def own(file: str, lib: str) -> bool:
        """``lib`` is in the same top folder of site-packages as ``file`` (triton/...)."""
        return _top(file) is not None and _top(file) == _top(lib)

    by_file: dict[str, list[Link]] = {}
    for link in links:
        by_file.setdefault(link.file, []).append(link)
    off: list[Link] = []
    rest: list[Link] = []
    for file, group in by_file.items():
        base = posixpath.basename(file)
        tool = "/site-packages/" in f"/{file}" and file not in loaders
        executable = ".so" not in base
        plugin = base.startswith("lib") and ".so" in base  # the package's own libraries only
        if tool and (executable or plugin) and all(
                lk.needed in names and (executable or own(file, names[lk.needed]))
                for lk in group):
            off.extend(Link(file=lk.file, needed=lk.needed, package=lk.package,
                            status="optional", found=names[lk.needed]) for lk in group)
        else:
            rest.extend(group)
    return off, rest


def _top(path: str) -> str | None:
    """The first folder below site-packages in ``path`` (``triton`` of
    ``lib/python3.12/site-packages/triton/_C/libtriton.so``), or None."""
    _, sep, rest = path.partition("/site-packages/")
    return rest.split("/", 1)[0] if sep and "/" in rest else None

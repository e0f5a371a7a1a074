"""Linkage: does every ELF file in the prefix find the libraries it needs, before anything runs?

For each ELF file (its dynamic section read by pyelftools while it was hashed, see
``verify.env.elfinfo``), each DT_NEEDED name is looked up the way ld.so does, in this order:

1. DT_RPATH (only when there is no DT_RUNPATH), then DT_RUNPATH, with ``$ORIGIN`` (the file's
   own folder) and ``$LIB`` expanded; folders inside the prefix are looked up in the manifest,
   symlinks followed, and a candidate of another ELF class or machine is skipped as ld.so does.
   A file without DT_RUNPATH also gets the DT_RPATH of the files in the prefix that load it,
   and of theirs (ld.so searches the loading chain's RPATHs: auditwheel's grafted libraries in
   ``<pkg>.libs/`` find each other that way);
2. the prefix's library folders (``lib``, ``lib64``), in a conda prefix only: there the
   interpreter is the prefix's own, and its RPATH brings them to every extension module it
   loads. A venv (``pyvenv.cfg``) runs an interpreter from outside the prefix, so ld.so never
   searches the venv's ``lib/``: a library a wheel's data scheme put there (PyPI's ``tbb``
   writes ``lib/libtbb.so.12``) is found only through an RPATH that names it;
3. the host allow-list ``HOST_LIBRARIES``: the glibc family, the compiler runtime the manylinux
   policy lets wheels take from the host, and the NVIDIA driver's user-space libraries, which
   the driver install (or the container toolkit) provides;
4. the host's default library folders (``host_library_dirs()``, from /etc/ld.so.conf): found
   there means "works on this machine only" — reported as ``host``, not as a failure.

5. torch's preloads: ``import torch`` loads the CUDA libraries of its ``TORCH_PRELOADS`` list
   from ``site-packages/nvidia/<folder>/lib``, ``nvidia/cuXX/lib`` or ``<folder>/lib`` before
   libtorch (``torch/__init__.py``, ``_preload_cuda_deps``); once loaded, ld.so satisfies any
   later DT_NEEDED of that name. In an environment with torch, such a name found there is
   ``preloaded``, not missing.

What is found nowhere is ``unresolved``: ``libcudart.so.11.0: cannot open shared object file``
as a finding, with the file that needs it and its package. Except for a **plugin**: a shared
library that nothing in the environment needs (so only a dlopen loads it: nvshmem's MPI/UCX
bootstraps, cufile's RDMA plugin) and that is not a Python extension module, whose missing
libraries are all optional transports (``TRANSPORTS``: MPI, UCX, libfabric, verbs, PMIx...).
It loads only on machines that have that transport, so it is listed as ``optional`` (a note),
exactly as ``samebits install`` judges it. Likewise an executable inside site-packages that
nothing loads (torch ships ``torch/bin/test_shim`` with RUNPATH ``$ORIGIN``) whose missing
libraries are all elsewhere in the environment is ``off_path`` (a note: it runs only with
LD_LIBRARY_PATH). LD_LIBRARY_PATH is not consulted.

What is still ``unresolved`` after all that is judged by what really loads
(``verify.env.importverdict``, run by ``verify.env.check`` only when there is any): the
top-level modules of the packages owning such a file are imported in the environment's own
interpreter (``verify.env.importprobe``); a file that was mapped is ``loaded`` (ld.so found its
libraries at run time: a package that loads its own library by path first, as torchaudio
does), one no import loads is ``lazy`` (a note saying when it would load), and a failing or
unfinished import leaves it ``unresolved``, with the import's error in ``detail``.
"""

from __future__ import annotations

import glob
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from verify.env.elfinfo import ElfInfo
from verify.env.manifest import Entry, Manifest

GLIBC = (
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld-linux.so.2", "libc.so.6",
    "libm.so.6", "libmvec.so.1", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libutil.so.1", "libresolv.so.2", "libnsl.so.1", "libanl.so.1", "libcrypt.so.1",
    "libBrokenLocale.so.1", "libthread_db.so.1", "libc_malloc_debug.so.0",
    "libnss_files.so.2", "libnss_dns.so.2", "libnss_compat.so.2",
)
COMPILER_RUNTIME = ("libgcc_s.so.1", "libstdc++.so.6")
NVIDIA_DRIVER = (
    "libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so.4", "libcudadebugger.so.1", "libnvidia-opencl.so.1",
    "libnvcuvid.so.1", "libnvidia-encode.so.1", "libnvidia-fbc.so.1",
)
HOST_LIBRARIES: dict[str, str] = {
    **{n: "glibc" for n in GLIBC},
    **{n: "compiler-runtime" for n in COMPILER_RUNTIME},
    **{n: "nvidia-driver" for n in NVIDIA_DRIVER},
}
PREFIX_LIB_DIRS = ("lib", "lib64")
MAX_LINKS = 40
MAX_LOADERS = 256  # loaders looked at per unresolved library

Status = Literal["prefix", "allowed", "host", "preloaded", "unresolved", "optional", "loaded",
                 "lazy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    file: str                       # prefix-relative ELF file that needs the library
    needed: str                     # the DT_NEEDED name
    package: str | None
    status: Status
    found: str | None = None        # where it resolved (prefix-relative, or a host path)
    searched: tuple[str, ...] = ()  # folders looked in, in order (for unresolved)
    detail: str | None = None       # what the import probe saw (verify.env.importverdict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "needed": self.needed,
                               "package": self.package, "status": self.status}
        if self.found:
            out["found"] = self.found
        if self.searched:
            out["searched"] = list(self.searched)
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkageReport:
    elf_files: int
    links: int
    unresolved: tuple[Link, ...] = ()
    host: tuple[Link, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()   # (file, why)
    preloaded: tuple[Link, ...] = ()               # found where torch preloads it from
    optional: tuple[Link, ...] = ()                # a plugin's absent transport: a note
    off_path: tuple[Link, ...] = ()                # a package's own tool: a note
    loaded: tuple[Link, ...] = ()                  # mapped by an import: resolved at run time
    lazy: tuple[Link, ...] = ()                    # no import loads the file: a note
    imports: Mapping[str, Any] | None = None       # the import probe's record, when it ran
    # file -> the files in the prefix that load it (DT_NEEDED found there): the import probe's
    # input, not part of the report
    loaders: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False,
                                                  repr=False)

    @property
    def ok(self) -> bool:
        return not self.unresolved

    def to_json(self) -> dict[str, Any]:
        return {"checked": True, "ok": self.ok, "elf_files": self.elf_files,
                "links": self.links,
                "unresolved": [lk.to_json() for lk in self.unresolved],
                "host": [lk.to_json() for lk in self.host],
                "preloaded": [lk.to_json() for lk in self.preloaded],
                "optional": [lk.to_json() for lk in self.optional],
                "off_path": [lk.to_json() for lk in self.off_path],
                "loaded": [lk.to_json() for lk in self.loaded],
                "lazy": [lk.to_json() for lk in self.lazy],
                "imports": dict(self.imports) if self.imports is not None
                else {"ran": False, "why": "not asked" if self.unresolved
                      else "no unresolved library"},
                "unreadable": [{"file": f, "error": e} for f, e in self.unreadable],
                "allow_list": dict(sorted(HOST_LIBRARIES.items()))}


def host_library_dirs(root: str = "/") -> tuple[str, ...]:
    """The host's default library folders: ld.so.conf (with includes) and the built-in ones."""
    dirs: list[str] = []

    def read(conf: str, depth: int = 0) -> None:
        try:
            with open(conf) as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            line = line.split("#", 1)[0].strip()
            if line.startswith("include ") and depth < 8:
                pattern = line.split(None, 1)[1]
                if not pattern.startswith("/"):
                    pattern = os.path.join(os.path.dirname(conf), pattern)
                for inc in sorted(glob.glob(os.path.join(root, pattern.lstrip("/")))):
                    read(inc, depth + 1)
            elif line.startswith("/"):
                dirs.append(line)

    read(os.path.join(root, "etc/ld.so.conf"))
    dirs += ["/lib", "/usr/lib", "/lib64", "/usr/lib64"]
    return tuple(dict.fromkeys(os.path.join(root, d.lstrip("/")) for d in dirs))


def check_linkage(manifest: Manifest, *, host_dirs: Sequence[str]) -> LinkageReport:
    entries = manifest.by_path()
    prefix = str(manifest.prefix)
    lib_dirs = [] if os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) else [
        d for d in PREFIX_LIB_DIRS if os.path.isdir(os.path.join(prefix, d))]
    elfs = [e for e in manifest.entries if e.type == "file" and e.elf is not None]
    loaders: dict[str, set[str]] = {}   # file -> files that load it (found in the prefix)
    pending: list[Link] = []
    host: list[Link] = []
    unreadable: list[tuple[str, str]] = []
    links = 0
    for e in elfs:
        info = e.elf
        assert info is not None
        if info.error:
            unreadable.append((e.path, info.error))
            continue
        for needed in info.needed:
            links += 1
            link = _resolve(e, info, needed, entries, prefix, lib_dirs, host_dirs)
            if link.status == "prefix" and link.found:
                loaders.setdefault(link.found, set()).add(e.path)
            elif link.status == "unresolved":
                pending.append(link)
            elif link.status == "host":
                host.append(link)
    unresolved = _through_loaders(pending, entries, prefix, loaders)
    from verify.env.loadmodel import package_tools, plugins, torch_preloads

    preloaded, unresolved = torch_preloads(unresolved, entries, manifest)
    optional, unresolved = plugins(unresolved, loaders)
    off_path, unresolved = package_tools(unresolved, entries, loaders)
    return LinkageReport(elf_files=len(elfs), links=links, unresolved=tuple(unresolved),
                         host=tuple(host), unreadable=tuple(unreadable),
                         preloaded=tuple(preloaded), optional=tuple(optional),
                         off_path=tuple(off_path),
                         loaders={k: frozenset(v) for k, v in loaders.items()})


def _through_loaders(pending: list[Link], entries: Mapping[str, Entry], prefix: str,
                     loaders: dict[str, set[str]]) -> list[Link]:
    """ld.so's other path: an object without DT_RUNPATH also searches the DT_RPATH of the
    objects that loaded it, up to the executable (auditwheel's grafted libraries rely on it).
    A library found that way through some loader in the prefix counts as found."""
    still: list[Link] = []
    changed = True
    while pending and changed:
        changed = False
        still = []
        for link in pending:
            e = entries[link.file]
            assert e.elf is not None
            found = None if e.elf.has_runpath else _via_loaders(link, e.elf, entries, prefix,
                                                                loaders)
            if found:
                loaders.setdefault(found, set()).add(link.file)
                changed = True
            else:
                still.append(link)
        pending = still
    return pending


def _via_loaders(link: Link, want: ElfInfo, entries: Mapping[str, Entry], prefix: str,
                 loaders: dict[str, set[str]]) -> str | None:
    seen: set[str] = set()
    todo = sorted(loaders.get(link.file, ()))
    while todo and len(seen) < MAX_LOADERS:
        path = todo.pop(0)
        if path in seen:
            continue
        seen.add(path)
        info = entries[path].elf
        if info is None:
            continue
        for d in info.rpath:
            folder = _expand(d, path, info)
            found = folder and _lookup(_place(folder, link.needed, prefix), entries, prefix, want)
            if found and not found.startswith("/"):
                return found
        todo.extend(sorted(loaders.get(path, ())))
    return None


def _resolve(e: Entry, info: ElfInfo, needed: str, entries: Mapping[str, Entry], prefix: str,
             lib_dirs: Sequence[str], host_dirs: Sequence[str]) -> Link:
    base: dict[str, Any] = {"file": e.path, "needed": needed, "package": e.owner}
    if "/" in needed:  # a path, not a name: ld.so opens it as it is
        found = _lookup(_place(posixpath.dirname(e.path), needed, prefix), entries, prefix, info)
        if found:
            return Link(**base, status="host" if found.startswith("/") else "prefix",
                        found=found)
        return Link(**base, status="unresolved", searched=(needed,))
    dirs = [] if info.has_runpath else list(info.rpath)
    dirs += info.runpath
    searched: list[str] = []
    for d in [*(_expand(d, e.path, info) for d in dirs), *lib_dirs]:
        if d is None:
            continue
        searched.append(d)
        found = _lookup(_place(d, needed, prefix), entries, prefix, info)
        if found:  # an absolute RPATH outside the prefix works on this machine only
            return Link(**base, status="host" if found.startswith("/") else "prefix",
                        found=found)
    if needed in HOST_LIBRARIES:
        return Link(**base, status="allowed", found=HOST_LIBRARIES[needed])
    for d in host_dirs:
        candidate = os.path.join(d, needed)
        if os.path.exists(candidate):
            return Link(**base, status="host", found=candidate)
    return Link(**base, status="unresolved", searched=(*searched, "allow-list", *host_dirs))


def _expand(d: str, path: str, info: ElfInfo) -> str | None:
    if not d.startswith(("/", "$ORIGIN", "${ORIGIN}")):
        return None  # relative to whatever the working directory is: never reliable
    origin = posixpath.dirname(path) or "."
    lib = "lib64" if info.elfclass == 64 else "lib"
    for token, value in (("${ORIGIN}", origin), ("$ORIGIN", origin), ("${LIB}", lib),
                         ("$LIB", lib)):
        d = d.replace(token, value)
    return None if "$" in d else d  # $PLATFORM: not resolved


def _place(d: str, name: str, prefix: str) -> str:
    """A prefix-relative path for ``d/name`` when it lies in the prefix, else absolute."""
    full = posixpath.normpath(posixpath.join(d, name))
    if full.startswith("/"):
        root = prefix.rstrip("/") + "/"
        return full[len(root):] if full.startswith(root) else full
    if full == ".." or full.startswith("../"):
        return posixpath.normpath(posixpath.join(prefix, full))
    return full


def _lookup(path: str, entries: Mapping[str, Entry], prefix: str, want: ElfInfo) -> str | None:
    """Where ``path`` ends up (following symlinks), if a compatible ELF file is there."""
    for _ in range(MAX_LINKS):
        if path.startswith("/"):
            return path if os.path.isfile(path) else None
        e = entries.get(path)
        if e is None:
            moved = _through_linked_folder(path, entries, prefix)
            if moved is None:
                return None
            path = moved
            continue
        if e.type == "symlink" and e.target is not None:
            path = _place(posixpath.dirname(path), e.target, prefix)
            continue
        if e.type == "file" and e.elf is not None and not e.elf.error \
                and e.elf.elfclass == want.elfclass and e.elf.machine == want.machine:
            return path
        return None
    return None


def _through_linked_folder(path: str, entries: Mapping[str, Entry], prefix: str) -> str | None:
    """``lib64/x`` -> ``lib/x`` when ``lib64`` is a symlink to ``lib``."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        head = "/".join(parts[:i])
        e = entries.get(head)
        if e is not None and e.type == "symlink" and e.target is not None:
            return _place(posixpath.dirname(head), posixpath.join(e.target, *parts[i:]), prefix)
    return None

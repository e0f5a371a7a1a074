"""verify env linkage: DT_NEEDED resolved like ld.so, on ELF files compiled here with gcc."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.verify import (  # noqa: F401  (fixtures)
    C_LIB,
    C_TOOL,
    Installed,
    elves,
    gcc,
    pristine,
    rattler_cache,
    rattler_install,
    vchannel,
    wheel,
)
from verify.env.linkage import check_linkage
from verify.env.manifest import build_manifest


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libvfa.so.1 and the C source of a tool that needs it."""
    work = tmp_path_factory.mktemp("objects")
    (work / "vfa.c").write_text(C_LIB)
    (work / "tool.c").write_text(C_TOOL)
    gcc("-shared", "-fPIC", "-Wl,-soname,libvfa.so.1", "-o", "libvfa.so.1", "vfa.c", cwd=work)
    return work


def tool(objects: Path, out: Path, *rpath: str, new_dtags: bool = True) -> None:
    flags = [f"-Wl,-rpath,{r}" for r in rpath]
    tags = "-Wl,--enable-new-dtags" if new_dtags else "-Wl,--disable-new-dtags"
    gcc("-o", str(out), "tool.c", "-L.", "-l:libvfa.so.1", tags, *flags, cwd=objects)


def venv(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


LIB = "lib/libvfa.so.1"
# name, tool's rpath entries (HOST = the host folder), DT_RPATH instead of DT_RUNPATH,
# how the prefix holds the library, expected (status, found)
CASES = [
    ("runpath $ORIGIN/../lib", ["$ORIGIN/../lib"], False, "file", ("prefix", LIB)),
    ("old-style DT_RPATH", ["$ORIGIN/../lib"], True, "file", ("prefix", LIB)),
    ("through a symlinked folder", ["$ORIGIN/../lib64"], False, "lib64", ("prefix", LIB)),
    ("through a symlink chain", ["$ORIGIN/../lib"], False, "chain",
     ("prefix", "lib/libvfa.so.1.0.0")),
    # a venv's interpreter lives outside it: ld.so never searches the venv's lib/ (a false
    # "resolved" before); a conda prefix's interpreter brings its lib/ to what it loads
    ("a venv's lib folder without any rpath", [], False, "file", ("unresolved", None)),
    ("a conda prefix's lib folder without any rpath", [], False, "conda", ("prefix", LIB)),
    ("not in the prefix at all", ["$ORIGIN/../lib"], False, "none", ("unresolved", None)),
    ("a file of that name that is not ELF", ["$ORIGIN/../lib"], False, "text",
     ("unresolved", None)),
    ("a dangling symlink", ["$ORIGIN/../lib"], False, "dangling", ("unresolved", None)),
    ("an absolute rpath out of the prefix", ["HOST"], False, "none", ("host", "HOST/libvfa.so.1")),
    ("only in the host's default folders", [], False, "none-hostdirs",
     ("host", "HOST/libvfa.so.1")),
]


@pytest.mark.parametrize(("name", "rpath", "old", "layout", "expected"), CASES,
                         ids=[c[0] for c in CASES])
def test_needed_library_resolution(objects: Path, tmp_path: Path, name: str, rpath: list[str],
                                   old: bool, layout: str, expected: tuple) -> None:
    """bin/tool needs libvfa.so.1; where the prefix (or host) has it decides the status."""
    host = tmp_path / "host"
    host.mkdir()
    shutil.copy(objects / "libvfa.so.1", host / "libvfa.so.1")
    prefix = venv(tmp_path / "env")
    tool(objects, prefix / "bin/tool", *[str(host) if r == "HOST" else r for r in rpath],
         new_dtags=not old)
    lib = prefix / LIB
    if layout == "conda":
        (prefix / "pyvenv.cfg").unlink()
        (prefix / "conda-meta").mkdir()
        layout = "file"
    if layout in ("file", "lib64"):
        shutil.copy(objects / "libvfa.so.1", lib)
    if layout == "lib64":
        os.symlink("lib", prefix / "lib64")
    if layout == "chain":
        shutil.copy(objects / "libvfa.so.1", prefix / "lib/libvfa.so.1.0.0")
        os.symlink("libvfa.so.1.0", lib)
        os.symlink("libvfa.so.1.0.0", prefix / "lib/libvfa.so.1.0")
    if layout == "text":
        lib.write_text("not a library\n")
    if layout == "dangling":
        os.symlink("libvfa.so.1.9", lib)
    host_dirs = (str(host),) if layout == "none-hostdirs" else ()
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=host_dirs)
    links = [*report.unresolved, *report.host]
    status, found = expected
    if status == "prefix":
        assert links == []
    else:
        (link,) = links
        assert (link.file, link.needed, link.status, link.found) == (
            "bin/tool", "libvfa.so.1", status, found and found.replace("HOST", str(host)))


def test_glibc_is_allowed_from_the_host(objects: Path, tmp_path: Path) -> None:
    """libc.so.6 is on the allow-list: resolved without looking at the host."""
    prefix = venv(tmp_path / "env")
    tool(objects, prefix / "bin/tool", "$ORIGIN/../lib")
    shutil.copy(objects / "libvfa.so.1", prefix / LIB)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert report.ok and report.elf_files == 2 and report.unresolved == ()


def test_unreadable_elf_is_reported_not_fatal(tmp_path: Path) -> None:
    """A file that starts like ELF but is not one is listed as unreadable."""
    prefix = venv(tmp_path / "env")
    (prefix / "lib/libbroken.so").write_bytes(b"\x7fELF" + b"\0" * 10)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert [f for f, _ in report.unreadable] == ["lib/libbroken.so"]


def test_pristine_prefix_links(pristine: Installed) -> None:
    """vfa-tool finds libvfa.so.1 through its RUNPATH $ORIGIN/../lib in the installed prefix."""
    report = check_linkage(build_manifest(pristine.prefix, jobs=1), host_dirs=())
    assert report.ok and report.elf_files == 2 and report.host == ()


def test_missing_cuda_runtime_is_a_named_finding(vchannel: Path, rattler_cache: Path,
                                                 tmp_path: Path) -> None:
    """libneedy.so needs libcudart.so.11.0, which no package ships: named with file and package."""
    prefix = tmp_path / "env"
    rattler_install(vchannel, ["python 3.11.*", "needy"], prefix, rattler_cache)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert [(lk.file, lk.needed, lk.package) for lk in report.unresolved] == [
        ("lib/libneedy.so", "libcudart.so.11.0", "conda:needy-1.0-h0_0")]
    assert not report.ok


@pytest.mark.parametrize(("old_dtags", "resolves"), [(True, True), (False, False)],
                         ids=["loader has DT_RPATH", "loader has DT_RUNPATH"])
def test_rpath_of_the_loading_chain(tmp_path: Path, old_dtags: bool, resolves: bool) -> None:
    """libx.so (no rpath) needs liby.so beside it; bin/z loads libx.so through its rpath.
    ld.so lends z's DT_RPATH (not its DT_RUNPATH) to libx.so; the check agrees with ldd."""
    prefix = venv(tmp_path / "env")
    libs = prefix / "libs"
    libs.mkdir()
    (tmp_path / "y.c").write_text("int y(void) { return 1; }\n")
    (tmp_path / "x.c").write_text("int y(void);\nint x(void) { return y(); }\n")
    (tmp_path / "z.c").write_text("int x(void);\nint main(void) { return x() - 1; }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,liby.so", "-o", str(libs / "liby.so"), "y.c",
        cwd=tmp_path)
    gcc("-shared", "-fPIC", "-Wl,-soname,libx.so", "-o", str(libs / "libx.so"), "x.c",
        f"-L{libs}", "-l:liby.so", cwd=tmp_path)
    tags = "--disable-new-dtags" if old_dtags else "--enable-new-dtags"
    gcc("-o", str(prefix / "bin/z"), "z.c", f"-L{libs}", "-l:libx.so",
        f"-Wl,{tags},-rpath,$ORIGIN/../libs", f"-Wl,-rpath-link,{libs}", cwd=tmp_path)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    ldd = subprocess.run(["ldd", str(prefix / "bin/z")], capture_output=True, text=True)
    assert ("not found" not in ldd.stdout) is resolves
    assert [(lk.file, lk.needed) for lk in report.unresolved] == (
        [] if resolves else [("libs/libx.so", "liby.so")])


def shared(tmp_path: Path, out: Path, soname: str, *needs: str, runpath: str | None = None
           ) -> None:
    """A shared library ``out`` with DT_NEEDED ``needs`` (stubs made for linking only)."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    (tmp_path / "s.c").write_text("int s(void) { return 0; }\n")
    for name in needs:
        gcc("-shared", "-fPIC", f"-Wl,-soname,{name}", "-o", str(stubs / name), "s.c",
            cwd=tmp_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    gcc("-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), "s.c", f"-L{stubs}",
        "-Wl,--no-as-needed", *(f"-l:{n}" for n in needs),
        *([f"-Wl,--enable-new-dtags,-rpath,{runpath}"] if runpath else []), cwd=tmp_path)


SP = "lib/python3.11/site-packages"
# (name, library path, what it needs, who needs it, expected unresolved, expected optional)
PLUGINS = [
    ("nvshmem's MPI bootstrap: a plugin missing a transport is a note",
     f"{SP}/nvidia/nvshmem/lib/nvshmem_bootstrap_mpi.so.3", ("libmpi.so.40",), False,
     [], ["libmpi.so.40"]),
    ("nvshmem's OpenSHMEM bootstrap: Open MPI's liboshmem absent",
     f"{SP}/nvidia/nvshmem/lib/nvshmem_bootstrap_shmem.so.3", ("liboshmem.so.40",), False,
     [], ["liboshmem.so.40"]),
    ("cufile's RDMA plugin: verbs and mlx5 absent",
     f"{SP}/nvidia/cufile/lib/libcufile_rdma.so.1", ("libibverbs.so.1", "libmlx5.so.1"),
     False, [], ["libibverbs.so.1", "libmlx5.so.1"]),
    ("a plugin missing the CUDA runtime is a finding",
     "lib/libplugin.so.1", ("libcudart.so.11.0",), False, ["libcudart.so.11.0"], []),
    ("a Python extension module missing a transport is a finding",
     f"{SP}/mpiext.cpython-311-x86_64-linux-gnu.so", ("libmpi.so.40",), False,
     ["libmpi.so.40"], []),
    ("a library something needs is no plugin",
     "lib/libtransport.so.1", ("libucp.so.0",), True, ["libucp.so.0"], []),
]


@pytest.mark.parametrize(("path", "needs", "needed", "unresolved", "optional"),
                         [p[1:] for p in PLUGINS], ids=[p[0] for p in PLUGINS])
def test_dlopened_plugins(tmp_path: Path, path: str, needs: tuple[str, ...], needed: bool,
                          unresolved: list[str], optional: list[str]) -> None:
    """A library nothing needs, missing only optional transports, loads only where they are:
    a note; anything else that cannot load is a finding."""
    prefix = venv(tmp_path / "env")
    soname = path.rsplit("/", 1)[-1]
    shared(tmp_path, prefix / path, soname, *needs)
    if needed:
        (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
        gcc("-o", str(prefix / "bin/user"), "m.c", "-Wl,--no-as-needed", f"-L{prefix / 'lib'}",
            f"-l:{soname}", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib",
            f"-Wl,-rpath-link,{tmp_path / 'stubs'}", cwd=tmp_path)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert sorted(lk.needed for lk in report.unresolved) == unresolved
    assert sorted(lk.needed for lk in report.optional) == sorted(optional)
    assert report.ok is (not unresolved)


@pytest.mark.parametrize(("folder", "with_torch", "resolves"), [
    ("nvidia/cu13/lib", True, True), ("nvidia/cuda_runtime/lib", True, True),
    ("nvidia/cu13/lib", False, False), ("elsewhere/lib", True, False)],
    ids=["nvidia/cu13 (CUDA 13 wheels)", "nvidia/cuda_runtime", "no torch to preload it",
         "a folder torch does not search"])
def test_libraries_torch_preloads_resolve(tmp_path: Path, folder: str, with_torch: bool,
                                          resolves: bool) -> None:
    """libtorch_cuda.so needs libcudart.so.13 with no RUNPATH to it: torch/__init__.py loads
    it from site-packages/nvidia/*/lib first, so it resolves there (and only there)."""
    prefix = venv(tmp_path / "env")
    shared(tmp_path, prefix / SP / folder / "libcudart.so.13", "libcudart.so.13")
    shared(tmp_path, prefix / SP / "torch/lib/libtorch_cuda.so", "libtorch_cuda.so",
           "libcudart.so.13")
    if with_torch:
        (prefix / SP / "torch/__init__.py").write_text("# torch\n")
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert report.ok is resolves
    if resolves:
        (link,) = report.preloaded
        assert (link.file, link.found) == (f"{SP}/torch/lib/libtorch_cuda.so",
                                           f"{SP}/{folder}/libcudart.so.13")


@pytest.mark.parametrize(("needs", "with_torch", "unresolved"), [
    (("libtorch.so", "libc10.so"), True, []),
    (("libtorch.so", "libtorch_cuda_linalg.so"), True, ["libtorch_cuda_linalg.so"]),
    (("libtorch.so",), False, ["libtorch.so"])],
    ids=["what import torch loaded", "a torch/lib library torch loads lazily", "no torch"])
def test_extension_beside_torch_uses_the_libraries_import_torch_loaded(
        tmp_path: Path, needs: tuple[str, ...], with_torch: bool, unresolved: list[str]) -> None:
    """torchvision/_C.so needs libtorch.so and libc10.so with no RUNPATH to torch/lib: import
    torchvision imports torch first, whose _C loaded them (its DT_NEEDED closure), so they
    resolve; a torch/lib library outside that closure does not."""
    prefix = venv(tmp_path / "env")
    lib = prefix / SP / "torch" / "lib"
    shared(tmp_path, lib / "libc10.so", "libc10.so")
    shared(tmp_path, lib / "libtorch_cuda_linalg.so", "libtorch_cuda_linalg.so")
    shared(tmp_path, lib / "libtorch.so", "libtorch.so", "libc10.so", runpath="$ORIGIN")
    shared(tmp_path, prefix / SP / "torch/_C.cpython-311-x86_64-linux-gnu.so", "_C.so",
           "libtorch.so", runpath="$ORIGIN/lib")
    if with_torch:
        (prefix / SP / "torch/__init__.py").write_text("# torch\n")
    shared(tmp_path, prefix / SP / "torchvision/_C.so", "_C.so", *needs)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    assert sorted(lk.needed for lk in report.unresolved) == unresolved
    assert report.ok is (not unresolved)
    if not unresolved:
        assert {(lk.file, lk.found) for lk in report.preloaded} == {
            (f"{SP}/torchvision/_C.so", f"{SP}/torch/lib/{n}") for n in needs}


@pytest.mark.parametrize(("ships_lib", "status"), [(True, "off_path"), (False, "unresolved")],
                         ids=["library elsewhere in the environment", "library nowhere"])
def test_a_packages_own_tool_off_the_search_path(tmp_path: Path, ships_lib: bool,
                                                 status: str) -> None:
    """torch/bin/test_shim needs libtorch.so (in torch/lib) with RUNPATH $ORIGIN: it runs only
    with LD_LIBRARY_PATH; a note while the library is in the environment, else a finding."""
    prefix = venv(tmp_path / "env")
    stubs = tmp_path / "stubs"
    shared(tmp_path, stubs / "libtorch.so", "libtorch.so")
    if ships_lib:
        shared(tmp_path, prefix / SP / "torch/lib/libtorch.so", "libtorch.so")
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    (prefix / SP / "torch/bin").mkdir(parents=True)
    gcc("-o", str(prefix / SP / "torch/bin/test_shim"), "m.c", "-Wl,--no-as-needed",
        f"-L{stubs}", "-l:libtorch.so", "-Wl,--enable-new-dtags,-rpath,$ORIGIN", cwd=tmp_path)
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    got = {"off_path": report.off_path, "unresolved": report.unresolved}[status]
    assert [(lk.file, lk.needed) for lk in got] == [(f"{SP}/torch/bin/test_shim",
                                                     "libtorch.so")]
    assert report.ok is (status == "off_path")


@pytest.mark.parametrize(("plugin", "status"), [
    ("triton/plugins/libTritonPluginsTestLib.so", "off_path"),
    ("triton/plugins/libMLIRDialectPlugin.so.23.0git", "off_path"),
    ("triton/plugins/dialect.cpython-311-x86_64-linux-gnu.so", "unresolved"),
], ids=["a lib*.so plugin", "a versioned lib*.so plugin", "a Python extension module"])
def test_a_packages_plugin_needing_its_own_library(tmp_path: Path, plugin: str,
                                                   status: str) -> None:
    """triton's plugins need libtriton.so (triton/_C) with a RUNPATH of triton's build folder:
    dlopen'ed only by a process that loaded libtriton, so a note; an extension module that
    cannot find it fails its import, so a finding."""
    prefix = venv(tmp_path / "env")
    shared(tmp_path, prefix / SP / "triton/_C/libtriton.so", "libtriton.so")
    shared(tmp_path, prefix / SP / plugin, plugin.rsplit("/", 1)[-1], "libtriton.so")
    report = check_linkage(build_manifest(prefix, jobs=1), host_dirs=())
    got = {"off_path": report.off_path, "unresolved": report.unresolved}[status]
    assert [(lk.file, lk.needed) for lk in got] == [(f"{SP}/{plugin}", "libtriton.so")]
    assert report.ok is (status == "off_path")

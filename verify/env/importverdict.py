"""Judge an ``unresolved`` library by what really loads: the import probe's verdict.

The static check (``verify.env.linkage``) calls a library missing when ld.so's search would not
find it. Whether that matters depends on whether anything loads the file that needs it, and
how: numba's ``numba/np/ufunc/tbbpool*.so`` needs ``libtbb.so.12``, which pip does not install,
but ``import numba`` does not load that module (only choosing numba's TBB threading layer
does); torchaudio's ``_torchaudio.so`` needs ``libtorchaudio.so``, which torchaudio loads by
path first; PyPI's ``tbb`` ships ``libtbbbind*.so`` (needs hwloc), which libtbb dlopens only
where hwloc exists. So, when there are ``unresolved`` links (and only then):

1. Plan (pure, ``plan``): for each file with unresolved links, the packages to import are its
   owner and the owners of every file in the prefix that loads it (DT_NEEDED, transitively:
   a library that an imported extension links to fails that import). Their top-level modules
   (``package_modules``) are the ``modules``; none at all means "start-up alone". A file the
   probe cannot judge keeps the static verdict: a program (no ``.so`` in its name), a
   library a program in the prefix needs (programs are run, not imported), a file no
   package owns.
2. Probe (``verify.env.importprobe``): each module imported in a process of its own in the
   environment's own interpreter, sandboxed, bounded, in a clean environment; the files mapped
   after the import are read from ``/proc/self/maps``.
3. Decide, per file (``decide``):

       loaded      the file was mapped by some import: ld.so found every library it needs at
                   run time (status ``loaded``; ``found``: the mapped file of that name)
       lazy        every import finished and none mapped it: a note saying when it would load
                   (status ``lazy``)
       unresolved  an import failed (a missing library: the report quotes the import error;
                   another error: the static verdict stands, and the report says so), or a
                   probe did not finish (timeout, crash): the static verdict stands

What this proves and what it does not: ``loaded`` proves the file loads in this environment
on this machine, once its package is imported. ``lazy`` proves only that importing those
top-level modules (each alone, at start-up, without calling anything) does not load it; "not
loaded on import" is not "never loaded": a submodule imported later, a threading layer chosen
at run time or a dlopen may still load it, and then it fails as the static check says. A
package that only dlopens another package's library without linking to it (torch loading
cuDNN's sub-libraries) is not among the packages imported for that library.

Every input of the verdict is in the report's ``linkage.imports``: the interpreter, the
sandbox, the probe's environment, the timeout, each module's outcome and error, and each
file's packages, modules, verdict and why.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from verify.env.importprobe import (
    IMPORT_TIMEOUT,
    PRIVATE,
    Probe,
    Sandbox,
    detect_sandbox,
    probe_environ,
    run_probes,
)
from verify.env.linkage import Link, LinkageReport
from verify.env.loadmodel import EXTENSION
from verify.env.manifest import Entry, Manifest
from verify.env.records import site_packages

MAX_MODULES = 32    # modules imported per verify at most; the rest keep the static verdict
STATIC = "the static verdict stands"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    file: str
    packages: tuple[str, ...] = ()    # the file's owner, then its loaders' owners (sorted)
    modules: tuple[str, ...] = ()     # their top-level modules; () = the start-up alone
    unjudged: str | None = None       # why the import probe cannot judge this file

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "packages": list(self.packages),
                "modules": list(self.modules)}


def judge_by_imports(report: LinkageReport, manifest: Manifest, *, executable: str | None,
                     runs: bool, readable: Sequence[str], environ: Mapping[str, str],
                     sandbox: Sandbox | None = None, timeout: float = IMPORT_TIMEOUT,
                     ) -> LinkageReport:
    """``report`` with its unresolved links judged by the import probe (unchanged, but for
    the record, when nothing is unresolved or the environment's Python does not run)."""
    if not report.unresolved:
        return report
    plans = plan(report, manifest)
    if not runs or executable is None:
        return replace(report, imports={
            "ran": False, "why": f"the environment's Python does not run here: {STATIC}",
            "files": [{**p.to_json(), "verdict": "unresolved", "why": p.unjudged or STATIC}
                      for p in plans.values()]})
    sandbox = sandbox or detect_sandbox(environ)
    wanted = sorted({m for p in plans.values() if not p.unjudged for m in p.modules or ("",)})
    probes = run_probes(executable, wanted[:MAX_MODULES], sandbox=sandbox, readable=readable,
                        environ=environ, timeout=timeout)
    for module in wanted[MAX_MODULES:]:
        probes[module] = Probe(module=module, outcome="not-run",
                               error=f"more than {MAX_MODULES} modules to import")
    home = PRIVATE if sandbox.kind == "bubblewrap" else "(a fresh empty folder)"
    record: dict[str, Any] = {
        "ran": True, "interpreter": executable, "sandbox": sandbox.to_json(),
        "environment": probe_environ(environ, bin_dir=os.path.dirname(executable), home=home),
        "timeout_s": timeout, "isolation": "one process per module",
        "probes": [{**probes[m].to_json(), "packages": _importers(m, plans)} for m in wanted]}
    return decide(report, manifest, plans, probes, record)


def plan(report: LinkageReport, manifest: Manifest) -> dict[str, Plan]:
    """file -> what to import to judge it (pure)."""
    entries = manifest.by_path()
    packages = {p.id for p in manifest.records.packages}
    files = sorted({lk.file for lk in report.unresolved})
    loaders = {f: _loaders(f, report.loaders) for f in files}
    owners = {e.owner for f in files for x in (f, *loaders[f])
              if (e := entries.get(x)) is not None and e.owner in packages}
    modules = package_modules(manifest, owners)
    out: dict[str, Plan] = {}
    for f in files:
        owner = entries[f].owner if f in entries else None
        programs = sorted(x for x in loaders[f] if ".so" not in posixpath.basename(x))
        why = None
        if owner not in packages:
            why = f"no package owns it: {STATIC}"
        elif ".so" not in posixpath.basename(f):
            why = f"a program, not imported: {STATIC}"
        elif programs:
            why = f"the program {programs[0]} needs it (programs run, not imported): {STATIC}"
        pkgs = sorted({o for x in (f, *loaders[f])
                       if (o := entries[x].owner if x in entries else None) in packages},
                      key=lambda p: (p != owner, p))
        mods = sorted({m for p in pkgs for m in modules.get(p, ())})
        out[f] = Plan(file=f, packages=tuple(pkgs), modules=tuple(mods), unjudged=why)
    return out


def package_modules(manifest: Manifest, ids: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Package id -> its top-level modules: the names its files give below site-packages (a
    package folder, ``name.py``, an extension ``name.<tag>.so``), kept to those its
    dist-info's ``top_level.txt`` lists when that lists any of them."""
    want = set(ids)
    sps = [f"{sp}/" for sp in site_packages(manifest.prefix)]
    found: dict[str, set[str]] = {i: set() for i in want}
    listed: dict[str, set[str]] = {i: set() for i in want}
    for e in manifest.entries:
        if e.owner not in want or e.owner is None:
            continue
        sp = next((s for s in sps if e.path.startswith(s)), None)
        if sp is None:
            continue
        rest = e.path[len(sp):]
        head, sep, tail = rest.partition("/")
        if sep and head.endswith(".dist-info") and tail == "top_level.txt":
            listed[e.owner] |= _top_level(manifest, e)
        name = _module_name(head, folder=bool(sep))
        if name:
            found[e.owner].add(name)
    out = {}
    for i in want:
        kept = found[i] & listed[i]
        out[i] = tuple(sorted(kept or found[i]))
    return out


def decide(report: LinkageReport, manifest: Manifest, plans: Mapping[str, Plan],
           probes: Mapping[str, Probe], record: Mapping[str, Any]) -> LinkageReport:
    """The new report: each file's links loaded, lazy or still unresolved (pure, given the
    probes)."""
    prefix = str(manifest.prefix)
    real_prefix = os.path.realpath(prefix)
    entries = manifest.by_path()
    loaded: list[Link] = []
    lazy: list[Link] = []
    still: list[Link] = []
    files: list[dict[str, Any]] = []
    groups: dict[str, list[Link]] = {}
    for link in report.unresolved:
        groups.setdefault(link.file, []).append(link)
    for f, links in groups.items():
        p = plans[f]
        if p.unjudged:
            still.extend(links)
            files.append({**p.to_json(), "verdict": "unresolved", "why": p.unjudged})
            continue
        results = [probes[m] for m in p.modules or ("",)]
        real = os.path.realpath(os.path.join(prefix, f))
        mapped = [r for r in results if real in r.maps]
        if mapped:
            why = f"loaded by {_imports(mapped)}: ld.so found its libraries at run time"
            loaded.extend(replace(lk, status="loaded", detail=why,
                                  found=_provider(lk.needed, mapped, real_prefix, entries))
                          for lk in links)
            verdict = "loaded"
        elif all(r.outcome == "imported" for r in results):
            why = _lazy_why(f, p, manifest)
            lazy.extend(replace(lk, status="lazy", detail=why) for lk in links)
            verdict = "lazy"
        else:
            bad = [r for r in results if r.outcome != "imported"]
            why = "; ".join(r.says() for r in bad)
            if any(r.missing for r in bad):
                pass  # the import error itself says what is missing
            elif any(r.outcome == "failed" for r in bad):
                why += f" (not a missing library: {STATIC})"
            else:
                why += f": {STATIC}"
            still.extend(replace(lk, detail=why) for lk in links)
            verdict = "unresolved"
        files.append({**p.to_json(), "verdict": verdict, "why": why})
    return replace(report, unresolved=tuple(still), loaded=tuple(loaded), lazy=tuple(lazy),
                   imports={**record, "files": files})


def _lazy_why(f: str, p: Plan, manifest: Manifest) -> str:
    when = "something dlopens it"
    module = _dotted(f, site_packages(manifest.prefix))
    if module:
        when = f"`{module}` is imported (or something dlopens it)"
    if not p.modules:
        names = ", ".join(p.packages)
        return (f"{names} has no Python module to import and the interpreter's start-up does "
                f"not load it; it loads only when {when}")
    return f"not loaded by {_imports_of(p.modules)}; it loads only when {when}"


def _imports(probes: Sequence[Probe]) -> str:
    return _imports_of([r.module for r in probes])


def _imports_of(modules: Sequence[str]) -> str:
    named = [m for m in modules if m]
    return f"`import {', '.join(named)}`" if named else "the interpreter's start-up"


def _importers(module: str, plans: Mapping[str, Plan]) -> list[str]:
    """The packages whose files asked for ``module`` (for the record)."""
    return sorted({pk for p in plans.values() if not p.unjudged
                   and (module in p.modules or (not module and not p.modules))
                   for pk in p.packages})


def _provider(needed: str, probes: Sequence[Probe], real_prefix: str,
              entries: Mapping[str, Entry]) -> str | None:
    """The mapped file that satisfied ``needed``: same name, or an ELF file of the prefix
    whose SONAME it is (prefix-relative when it is in the prefix)."""
    head = real_prefix.rstrip("/") + "/"
    for path in sorted({m for r in probes for m in r.maps}):
        rel = path[len(head):] if path.startswith(head) else None
        e = entries.get(rel) if rel else None
        soname = e.elf.soname if e is not None and e.elf is not None else None
        if posixpath.basename(path) == needed or soname == needed:
            return rel or path
    return None


def _loaders(file: str, loaders: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    """Every file in the prefix that loads ``file``, directly or through others."""
    seen: set[str] = set()
    todo = sorted(loaders.get(file, ()))
    while todo:
        x = todo.pop()
        if x not in seen and x != file:
            seen.add(x)
            todo.extend(sorted(loaders.get(x, ())))
    return tuple(sorted(seen))


def _module_name(head: str, *, folder: bool) -> str | None:
    if folder:
        name = head
    elif head.endswith(".py"):
        name = head[:-3]
    elif EXTENSION.match(head):
        name = head.split(".", 1)[0]
    else:
        return None
    return name if name.isidentifier() and not name.startswith("__") else None


def _top_level(manifest: Manifest, e: Entry) -> set[str]:
    try:
        text = (manifest.prefix / e.path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    return {n for line in text.splitlines() if (n := line.strip()).isidentifier()}


def _dotted(f: str, sps: Sequence[str]) -> str | None:
    """``numba.np.ufunc.tbbpool`` for an extension module file below site-packages."""
    name = posixpath.basename(f)
    if name.startswith("lib"):
        return None  # a library (torchaudio/lib/libtorchaudio.so), not a module
    for sp in sps:
        if f.startswith(f"{sp}/") and EXTENSION.match(name):
            parts = [*f[len(sp) + 1:].split("/")[:-1], name.split(".", 1)[0]]
            if all(p.isidentifier() for p in parts):
                return ".".join(parts)
    return None

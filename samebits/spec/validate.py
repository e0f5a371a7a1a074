"""Reading a merged spec mapping, key by key, collecting every problem (``SpecError``).

``Validator`` is what ``EnvironmentSpec.from_mapping`` drives: each reader returns the value or
None, and records a ``Problem`` naming the file (the spec in the ``extends`` chain that set the
key), the key and the value. The torch/CUDA/generation cross-checks read the GPU registry
(``samebits.spec.gpus``). Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Mapping
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from samebits.errors import Problem, SpecError, clip, quote
from samebits.spec.gpus import Generation, registry, sm_names
from samebits.spec.model import (
    GLIBC_FLOORS,
    PLATFORM_KEYS,
    PLATFORMS,
    PYPI_DEFAULT_INDEX,
    TABLE_KEYS,
    TOP_KEYS,
    PlatformTarget,
    get_dotted,
    parse_instant,
    req_name,
)


class Validator:
    """Collects problems while reading a mapping; every reader returns None on a bad value."""

    def __init__(self, file: str, origins: Mapping[str, str]) -> None:
        self.file = file
        self.origins = origins
        self.problems: list[Problem] = []

    def add(self, key: str, value: object, message: str) -> None:
        file = self.origins.get(key) or self.origins.get(key.split(".")[0]) or self.file
        self.problems.append(Problem(file=file, key=key, value=value, message=message))

    def raise_if_any(self) -> None:
        if self.problems:
            raise SpecError(
                self.problems, hint="fix the spec, then run `samebits lock` again"
            )

    def unknown(self, key: str, allowed: tuple[str, ...], value: object) -> None:
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(allowed)}"
        self.add(key, value, "unknown key" + hint)

    def check_keys(self, data: Mapping[str, Any]) -> None:
        for k, val in data.items():
            if k not in TOP_KEYS:
                self.unknown(k, TOP_KEYS, val)
            elif k in TABLE_KEYS:
                if not isinstance(val, Mapping):
                    self.add(k, val, f"must be a table ([{k}])")
                    continue
                for sub, subval in val.items():
                    if sub not in TABLE_KEYS[k]:
                        self.unknown(f"{k}.{sub}", TABLE_KEYS[k], subval)

    def string(self, data: Mapping[str, Any], key: str, *, default: str | None = None,
               required: bool = False) -> str | None:
        val = get_dotted(data, key)
        if val is None:
            if required:
                self.add(key, None, "missing")
            return default
        if not isinstance(val, str) or not val.strip():
            self.add(key, val, "must be a non-empty string")
            return None
        return val

    def strings(self, data: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
        val = get_dotted(data, key)
        if val is None:
            return ()
        if not isinstance(val, list) or not all(isinstance(x, str) and x.strip() for x in val):
            self.add(key, val, "must be a list of non-empty strings")
            return None
        return tuple(val)

    def exclude_newer(self, data: Mapping[str, Any]) -> str | None:
        val = data.get("exclude-newer")
        if val is None:
            return None
        if isinstance(val, dt.datetime):
            val = val.isoformat().replace("+00:00", "Z")
        elif isinstance(val, dt.date):
            val = val.isoformat()
        if not isinstance(val, str) or parse_instant(val) is None:
            self.add("exclude-newer", val,
                     'must be a date or UTC time like 2026-11-29 or "2026-11-29T00:00:00Z"')
            return None
        return val

    def generation(self, data: Mapping[str, Any]) -> Generation | None:
        name = self.string(data, "generation", required=True)
        if name is None:
            return None
        gens = registry().generations
        if name not in gens:
            close = difflib.get_close_matches(name, list(gens), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            self.add("generation", name, f"unknown generation (known: {', '.join(gens)}){hint}")
            return None
        return gens[name]

    def python(self, data: Mapping[str, Any]) -> str | None:
        val = self.string(data, "python", required=True)
        if val is None:
            return None
        if not re.fullmatch(r"3\.\d+(\.\d+)?", val) or Version(val) < Version("3.9"):
            self.add("python", val, 'must be a CPython version >= 3.9 like "3.12" or "3.12.7"')
            return None
        return val

    def platforms(self, data: Mapping[str, Any]) -> tuple[PlatformTarget, ...]:
        val = data.get("platforms")
        if val is None:
            self.add("platforms", None, "missing: add [platforms.linux-64] glibc = \"2.28\"")
            return ()
        if not isinstance(val, Mapping) or not val:
            self.add("platforms", val, "must be a table of platforms, e.g. [platforms.linux-64]")
            return ()
        out = []
        for plat, table in val.items():
            key = f"platforms.{plat}"
            if plat not in PLATFORMS:
                close = difflib.get_close_matches(plat, PLATFORMS, n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                self.add(key, table, f"unknown platform (known: {', '.join(PLATFORMS)}){hint}")
                continue
            if not isinstance(table, Mapping):
                self.add(key, table, 'must be a table like { glibc = "2.28" }')
                continue
            for sub, subval in table.items():
                if sub not in PLATFORM_KEYS:
                    self.unknown(f"{key}.{sub}", PLATFORM_KEYS, subval)
            glibc = table.get("glibc")
            if glibc is None:
                self.add(f"{key}.glibc", None, 'missing: the glibc floor, e.g. "2.28"')
            elif glibc not in GLIBC_FLOORS:
                self.add(f"{key}.glibc", glibc,
                         f"not a manylinux floor uv can target ({', '.join(GLIBC_FLOORS)})")
            else:
                out.append(PlatformTarget(platform=plat, glibc=glibc))
        return tuple(sorted(out, key=lambda t: PLATFORMS.index(t.platform)))

    def cuda(self, data: Mapping[str, Any], generation: Generation | None) -> str | None:
        table = data.get("cuda")
        if table is None:
            if generation is not None and generation.needs_cuda:
                self.add("cuda.version", None,
                         f"missing: the {generation.name} generation needs a CUDA line "
                         f"({generation.cuda_text})")
            return None
        if not isinstance(table, Mapping):
            return None  # reported by check_keys
        val = table.get("version")
        if val is None:
            self.add("cuda.version", None, 'missing: the CUDA line, e.g. "12.8"')
            return None
        if not isinstance(val, str) or not re.fullmatch(r"\d+\.\d+", val):
            self.add("cuda.version", val, 'must be a CUDA line "MAJOR.MINOR", e.g. "12.8"')
            return None
        if generation is not None:
            problem = generation.cuda_problem(val)
            if problem:
                self.add("cuda.version", val, problem)
                return None
        return val

    def conda(self, data: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
        channels = self.strings(data, "conda.channels") or ()
        deps = self.strings(data, "conda.dependencies")
        if not deps:  # none, or an empty list (a spec extending base.toml has one)
            return channels, deps
        # imported only for a spec with conda dependencies (20 to 37 ms of every install that
        # reads a PyPI-only spec for its [install] sources)
        from rattler import MatchSpec

        names: dict[str, str] = {}
        for dep in deps:
            try:
                # strict: the parse the solver applies ("pytorch 2.4.0 cuda*" is ambiguous)
                name = MatchSpec(dep, strict=True).name.normalized
            except Exception as exc:  # rattler raises its own InvalidMatchSpecError
                self.add("conda.dependencies", dep,
                         f"not a conda match spec: {clip(str(exc), 200)}")
                continue
            if name in names:
                self.add("conda.dependencies", dep,
                         f"{quote(name)} is already given as {quote(names[name])}")
            names[name] = dep
        if deps and not channels:
            self.add("conda.channels", None,
                     "missing: conda dependencies need at least one channel")
        return channels, deps

    def pypi(self, data: Mapping[str, Any]) -> tuple[str, tuple[str, ...] | None]:
        index = self.string(data, "pypi.index", default=PYPI_DEFAULT_INDEX) or PYPI_DEFAULT_INDEX
        if not re.match(r"^(https?|file)://", index):
            self.add("pypi.index", index, "must be an http(s):// or file:// URL")
        reqs = self.strings(data, "pypi.requirements")
        seen: dict[str, str] = {}
        for r in reqs or ():
            try:
                req = Requirement(r)
            except InvalidRequirement as exc:
                first = clip(str(exc).splitlines()[0], 200)
                self.add("pypi.requirements", r, f"not a PEP 508 requirement: {first}")
                continue
            name = canonicalize_name(req.name)
            if name in seen:
                self.add("pypi.requirements", r,
                         f"{quote(name)} is already given as {quote(seen[name])}")
            seen[name] = r
        return index, reqs

    def install(self, data: Mapping[str, Any]
                ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """``[install] find-links`` (folders) and ``mirrors`` (URL prefix -> URL prefix)."""
        folders = self.strings(data, "install.find-links") or ()
        raw = get_dotted(data, "install.mirrors")
        if raw is None:
            return folders, ()
        if not isinstance(raw, Mapping):
            self.add("install.mirrors", raw, 'must be a table of URL prefixes, e.g. '
                     '{ "https://download.pytorch.org/whl/" = "https://mirror.example/whl/" }')
            return folders, ()
        mirrors = []
        for source, target in raw.items():
            if not isinstance(target, str) or not all(
                    re.match(r"^(https?|file)://", u) for u in (source, target)):
                self.add(f"install.mirrors.{source}", target,
                         "both sides must be http(s):// or file:// URLs")
                continue
            mirrors.append((source, target))
        return folders, tuple(mirrors)

    def extra_indexes(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        """``[pypi] extra-indexes``: http(s):// simple indexes or file:// URLs, each once."""
        urls = self.strings(data, "pypi.extra-indexes") or ()
        seen: set[str] = set()
        for url in urls:
            if not re.match(r"^(https?|file)://", url):
                self.add("pypi.extra-indexes", url, "must be an http(s):// or file:// URL")
            elif url.rstrip("/") in seen:
                self.add("pypi.extra-indexes", url, "is given twice")
            seen.add(url.rstrip("/"))
        return urls

    def no_binary(self, data: Mapping[str, Any]) -> tuple[str, ...]:
        """``[pypi] no-binary``: packages whose sdist is locked and built, never a wheel (what
        pip's ``--no-binary NAME`` asks): package names, each once, canonical."""
        out: list[str] = []
        for name in self.strings(data, "pypi.no-binary") or ():
            if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
                self.add("pypi.no-binary", name, "must be a package name (pip's :all: is not "
                         "taken: name each package)")
            elif canonicalize_name(name) in out:
                self.add("pypi.no-binary", name, "is given twice")
            else:
                out.append(canonicalize_name(name))
        return tuple(out)

    def torch_facts(self, gen: Generation, cuda: str | None, platforms: tuple[PlatformTarget, ...],
                    index: str, reqs: tuple[str, ...]) -> None:
        """Fail before solving when torch from PyPI cannot serve this generation."""
        if index.rstrip("/") != PYPI_DEFAULT_INDEX or not gen.needs_cuda:
            return
        torch = next((r for r in reqs if req_name(r) == "torch"), None)
        if torch is None or Requirement(torch).url:  # an artifact by URL: not PyPI's lines
            return
        lines = registry().pypi_torch_lines(Requirement(torch).specifier)
        if not lines:
            return  # a release samebits has no facts for: the post-solve check decides
        sms = sm_names(gen.compute_capabilities)
        fitting = [ln for ln in lines if ln.covers(gen)]
        if not fitting:
            shipped = "; ".join(f"CUDA {ln.cuda}: {sm_names(ln.sm)}" for ln in lines)
            self.add("pypi.requirements", torch,
                     f"torch from PyPI for this range ships {shipped}; {gen.name} needs {sms}"
                     + (f" ({gen.note})" if gen.note else ""))
            return
        if cuda is not None and not any(ln.cuda == cuda for ln in fitting):
            have = ", ".join(sorted({ln.cuda for ln in fitting}))
            self.add("cuda.version", cuda,
                     f"{torch} from PyPI ships CUDA {have} builds, not CUDA {cuda}")
        for t in platforms:
            if t.platform == "linux-aarch64" and not any(ln.aarch64_cuda for ln in fitting):
                self.add("platforms.linux-aarch64", {"glibc": t.glibc},
                         f"{torch} from PyPI is CPU-only on linux-aarch64; "
                         f"{gen.name} on aarch64 needs torch >= 2.11")



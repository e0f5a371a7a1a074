"""Environment specs: ``environments/<name>.toml`` read, merged along ``extends``, validated.

``read_spec(path)`` does the I/O (and follows ``extends``); ``EnvironmentSpec.from_mapping``
validates a merged mapping, purely, and raises one ``SpecError`` listing every problem, each
naming the file, the key and the value. The format, in full (README "Spec format"):

    format = 1                       # spec format version
    name = "hopper"                  # defaults to the file's stem
    description = "..."
    extends = "base.toml"            # a spec, relative to this one; its keys are the defaults
    abstract = true                  # a base: never locked on its own
    generation = "hopper"            # volta | ampere | ada | hopper | blackwell | cpu
    python = "3.12"                  # the interpreter the environment runs on
    exclude-newer = 2026-11-29       # ignore releases after this instant: re-locks reproduce
    [platforms.linux-64]             # and/or [platforms.linux-aarch64]
    glibc = "2.28"                   # the oldest glibc the environment must run on
    [cuda]
    version = "13.0"                 # the CUDA line; becomes the lock's __cuda floor
    [conda]
    channels = ["conda-forge"]
    dependencies = ["pytorch 2.7.* cuda*"]
    [pypi]
    index = "https://pypi.org/simple"
    requirements = ["torch==2.13.0"] # PEP 508

Merging: tables merge key by key, the extending spec winning; ``conda.dependencies`` and
``pypi.requirements`` merge by package name (the extending spec's entry replaces the base's);
``platforms`` is replaced whole when the extending spec names it.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from samebits._io import compact_json, sha256_hex
from samebits.errors import Problem, SpecError
from samebits.gpus import Generation, registry, sm_names

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover
    pass

SPEC_FORMAT = 1
Platform = Literal["linux-64", "linux-aarch64"]
PLATFORMS: tuple[Platform, ...] = ("linux-64", "linux-aarch64")
ARCH = {"linux-64": "x86_64", "linux-aarch64": "aarch64"}
# The manylinux floors uv can target (`uv pip compile --python-platform`).
GLIBC_FLOORS = ("2.17", "2.28", *(f"2.{n}" for n in range(31, 41)))
PYPI_DEFAULT_INDEX = "https://pypi.org/simple"

TOP_KEYS = (
    "format", "name", "description", "extends", "abstract", "generation", "python",
    "platforms", "cuda", "conda", "pypi", "exclude-newer",
)
TABLE_KEYS = {
    "cuda": ("version",),
    "conda": ("channels", "dependencies"),
    "pypi": ("index", "requirements"),
}
PLATFORM_KEYS = ("glibc",)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformTarget:
    platform: Platform
    glibc: str

    @property
    def arch(self) -> str:
        return ARCH[self.platform]

    @property
    def uv_platform(self) -> str:
        return f"{self.arch}-manylinux_{self.glibc.replace('.', '_')}"


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentSpec:
    """A validated, merged environment spec."""

    name: str
    file: str
    sources: tuple[str, ...]
    description: str
    generation: Generation
    python: str
    platforms: tuple[PlatformTarget, ...]
    cuda: str | None
    conda_channels: tuple[str, ...]
    conda_dependencies: tuple[str, ...]
    pypi_index: str
    pypi_requirements: tuple[str, ...]
    exclude_newer: str | None
    digest: str

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        *,
        file: str,
        sources: tuple[str, ...] = (),
        origins: Mapping[str, str] | None = None,
    ) -> EnvironmentSpec:
        """Validate a merged spec mapping; raise SpecError listing every problem."""
        v = _Validator(file, origins or {})
        v.check_keys(data)
        fmt = data.get("format", SPEC_FORMAT)
        if fmt != SPEC_FORMAT:
            v.add("format", fmt, f"unknown spec format; this samebits reads format {SPEC_FORMAT}")
        name = v.string(data, "name", default=Path(file).stem)
        if name is not None and not NAME_RE.match(name):
            v.add("name", name, "use lower-case letters, digits, '.', '_' and '-'")
        if data.get("abstract", False) is True:
            v.add("abstract", True, "this spec is a base for others to extend; lock those")
        description = v.string(data, "description", default="") or ""
        generation = v.generation(data)
        python = v.python(data)
        platforms = v.platforms(data)
        cuda = v.cuda(data, generation)
        channels, conda_deps = v.conda(data)
        index, reqs = v.pypi(data)
        exclude_newer = v.exclude_newer(data)
        if conda_deps == () and reqs == ():
            v.add("", None, "nothing to lock: add [conda] dependencies or [pypi] requirements")
        if generation is not None and platforms and reqs is not None:
            v.torch_facts(generation, cuda, platforms, index, reqs)
        v.raise_if_any()
        assert generation is not None and python is not None and name is not None
        return cls(
            name=name,
            file=file,
            sources=sources or (file,),
            description=description,
            generation=generation,
            python=python,
            platforms=platforms,
            cuda=cuda,
            conda_channels=channels,
            conda_dependencies=conda_deps or (),
            pypi_index=index,
            pypi_requirements=reqs or (),
            exclude_newer=exclude_newer,
            digest=spec_digest(data),
        )

    def target(self, platform: str) -> PlatformTarget:
        for t in self.platforms:
            if t.platform == platform:
                return t
        raise KeyError(platform)

    @property
    def compute_capabilities(self) -> tuple[str, ...]:
        return self.generation.compute_capabilities


def spec_digest(data: Mapping[str, Any]) -> str:
    """sha256 of the merged spec's canonical JSON: comments and key order do not count."""
    body = {k: v for k, v in data.items() if k not in ("extends", "description")}
    return sha256_hex(compact_json({"spec-format": SPEC_FORMAT, "spec": body}))


class _Validator:
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
        val = _get(data, key)
        if val is None:
            if required:
                self.add(key, None, "missing")
            return default
        if not isinstance(val, str) or not val.strip():
            self.add(key, val, "must be a non-empty string")
            return None
        return val

    def strings(self, data: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
        val = _get(data, key)
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
        if not isinstance(val, str) or _parse_instant(val) is None:
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
        from rattler import MatchSpec

        channels = self.strings(data, "conda.channels") or ()
        deps = self.strings(data, "conda.dependencies")
        if deps is None:
            return channels, None
        names: dict[str, str] = {}
        for dep in deps:
            try:
                # strict: the parse the solver applies ("pytorch 2.4.0 cuda*" is ambiguous)
                name = MatchSpec(dep, strict=True).name.normalized
            except Exception as exc:  # rattler raises its own InvalidMatchSpecError
                self.add("conda.dependencies", dep, f"not a conda match spec: {exc}")
                continue
            if name in names:
                self.add("conda.dependencies", dep, f"'{name}' is already given as '{names[name]}'")
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
                first = str(exc).splitlines()[0]
                self.add("pypi.requirements", r, f"not a PEP 508 requirement: {first}")
                continue
            name = canonicalize_name(req.name)
            if name in seen:
                self.add("pypi.requirements", r, f"'{name}' is already given as '{seen[name]}'")
            seen[name] = r
        return index, reqs

    def torch_facts(self, gen: Generation, cuda: str | None, platforms: tuple[PlatformTarget, ...],
                    index: str, reqs: tuple[str, ...]) -> None:
        """Fail before solving when torch from PyPI cannot serve this generation."""
        if index.rstrip("/") != PYPI_DEFAULT_INDEX or not gen.needs_cuda:
            return
        torch = next((r for r in reqs if req_name(r) == "torch"), None)
        if torch is None:
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


def _parse_instant(text: str) -> dt.datetime | None:
    """``exclude-newer`` as an aware UTC datetime (a bare date means its midnight, UTC)."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(dt.timezone.utc)


def exclude_newer_datetime(spec: EnvironmentSpec) -> dt.datetime | None:
    return _parse_instant(spec.exclude_newer) if spec.exclude_newer else None


def req_name(r: str) -> str | None:
    try:
        return canonicalize_name(Requirement(r).name)
    except InvalidRequirement:
        return None


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = data
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur

"""Lockfiles: ``lockfiles/<env>.conda-lock.yml`` in conda-lock's v1 format.

``Lock`` is samebits' own frozen view. ``render_lock`` turns it into YAML text, validated by
conda-lock's own v1 model on the way out; ``parse_lock`` checks every required field and hash
(``samebits.lock.validate``), then reads the document with conda-lock's own models, the steps of
``conda_lock.lockfile.parse_conda_lock_file``, the judge of the format. The bytes are a
function of the Lock alone: packages sorted by (platform, manager, name), dependency maps
sorted, no timestamps.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from samebits._io import atomic_write, read_regular, sha256_hex, sys_path_kept
from samebits.errors import LockfileError, Problem, clip
from samebits.lock.validate import (
    is_structural,
    is_vcs_url,
    lock_problems,
    package_label,
    pydantic_problems,
)

Manager = Literal["conda", "pip"]
# What `conda-lock render` and `conda-lock install` take by default: main and dev; a package only
# in an optional extra category (``conda-lock install -e NAME``) is left out, as they leave it.
DEFAULT_CATEGORIES = frozenset({"main", "dev"})
LOCK_SUFFIX = ".conda-lock.yml"
META = "samebits."  # prefix of our keys in metadata.custom_metadata
LOCK_FORMAT = "1"  # bump when samebits writes different bytes for the same solve
RESTORE = "restore it (git checkout) or re-create it with `samebits lock`"


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedPackage:
    name: str
    version: str
    manager: Manager
    platform: str
    url: str
    md5: str | None = None
    sha256: str | None = None
    build: str | None = None
    dependencies: tuple[tuple[str, str], ...] = ()
    commit: str | None = None   # a pip VCS package (``git+https://...@<commit>``): no archive
    categories: tuple[str, ...] = ("main",)  # conda-lock's; see DEFAULT_CATEGORIES
    # the archive's size in bytes, where the lock states one (pixi.lock, pylock, uv.lock; a
    # conda-lock v1 file has no such field): a fetch never writes more (install.fetch)
    size: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # A digest is a value, not its spelling: conda-lock, pylock and uv.lock files may
        # write hex in capitals, and every comparison (the cache's folder names, a bundle's
        # check, direct_url.json) is of the lower-case form, taken here once for every reader.
        for name in ("md5", "sha256"):
            value = getattr(self, name)
            if isinstance(value, str) and value != value.lower():
                object.__setattr__(self, name, value.lower())

    @property
    def vcs(self) -> bool:
        """A checkout of a repository at a commit, not an archive (nothing to hash-check)."""
        return self.commit is not None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.platform, self.manager, self.name)

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].split("#", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "manager": self.manager,
            "platform": self.platform,
            "dependencies": dict(self.dependencies),
            "url": self.url,
            # conda-lock writes a VCS package's commit as its hash.sha256
            "hash": {"sha256": self.commit} if self.commit else
                    {k: v for k, v in (("md5", self.md5), ("sha256", self.sha256)) if v},
        }
        if self.build is not None:
            out["build"] = self.build
        out["category"] = "main"
        out["optional"] = False
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Lock:
    platforms: tuple[str, ...]
    channels: tuple[str, ...]
    sources: tuple[str, ...]
    content_hash: Mapping[str, str]
    custom: Mapping[str, str]
    packages: tuple[LockedPackage, ...]
    header: str = field(default="", compare=False)

    def packages_for(self, platform: str, manager: Manager | None = None) -> list[LockedPackage]:
        return [p for p in self.packages
                if p.platform == platform and (manager is None or p.manager == manager)
                and not DEFAULT_CATEGORIES.isdisjoint(p.categories)]

    def meta(self, key: str, default: str | None = None) -> str | None:
        return self.custom.get(META + key, default)

    @property
    def spec_digest(self) -> str | None:
        return self.meta("spec-digest")


def conda_dependencies(depends: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """conda ``depends`` strings ("python >=3.12,<3.13") as conda-lock's name -> spec map."""
    out: dict[str, str] = {}
    for dep in depends:
        name, _, rest = dep.strip().partition(" ")
        out[name] = rest.strip() or "*"
    return tuple(sorted(out.items()))


def sort_packages(packages: Iterable[LockedPackage]) -> tuple[LockedPackage, ...]:
    return tuple(sorted(packages, key=lambda p: p.key))


def lock_to_dict(lock: Lock) -> dict[str, Any]:
    """The v1 document, in conda-lock's key order."""
    meta: dict[str, Any] = {
        "content_hash": dict(sorted(lock.content_hash.items())),
        "channels": [{"url": c, "used_env_vars": []} for c in lock.channels],
        "platforms": list(lock.platforms),
        "sources": list(lock.sources),
        "custom_metadata": dict(sorted(lock.custom.items())),
    }
    return {
        "version": 1,
        "metadata": meta,
        "package": [p.to_dict() for p in sort_packages(lock.packages)],
    }


def render_lock(lock: Lock) -> str:
    """The lockfile's text; conda-lock's v1 model validates it first."""
    validate_lock(lock)
    return lock_text(lock)


def lock_text(lock: Lock) -> str:
    """The lockfile's text, not validated (``render_lock`` validates)."""
    return lock.header + dump_yaml(lock_to_dict(lock))


def validate_lock(lock: Lock) -> None:
    """conda-lock's v1 model accepts the document or this raises (a samebits bug)."""
    with sys_path_kept():
        from conda_lock.lockfile.v1.models import Lockfile as LockfileV1

    try:
        LockfileV1.model_validate(lock_to_dict(lock))
    except Exception as exc:  # pydantic.ValidationError; a bug in samebits if it happens
        raise LockfileError(f"samebits built a lock conda-lock rejects: {exc}") from exc


def dump_yaml(doc: Any, *, dumper: Any = None) -> str:
    """PyYAML's safe dump with libyaml's emitter when PyYAML has it (several times faster on
    a large lock). Both emit the same bytes for what a lock holds; a test keeps it so, because
    the bytes must not depend on which one a machine has."""
    import yaml  # here: a lock read from its parse memo needs no YAML (10 ms of imports)

    dumper = dumper or getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=4096,
                     allow_unicode=True)


def _header_lines(text: str) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        if not line.startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def read_lock_text(path: Path) -> str:
    """A lockfile's text (UTF-8), or a LockfileError naming why it cannot be read."""
    try:  # a FIFO or a device is refused unread: it could block or never end
        return read_regular(Path(path)).decode("utf-8")
    except FileNotFoundError:
        raise LockfileError(f"{path}: no such lockfile",
                            hint="run `samebits lock` to create it") from None
    except IsADirectoryError:
        raise LockfileError(f"{path}: is a folder, not a lockfile") from None
    except OSError as exc:
        raise LockfileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise LockfileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def parse_lock(path: Path) -> Lock:
    """Read a conda-lock v1 (or v2) file: every required field and every hash checked first
    (``samebits.lock.validate``: each problem named by file, package and field), then
    conda-lock's own model, the judge of the format."""
    path = Path(path)
    text = read_lock_text(path)
    remembered = _parsed_before(text)
    if remembered is not None:
        return remembered
    doc = _load_yaml(text, path)
    problems = lock_problems(doc, str(path))
    if problems:
        raise LockfileError(problems, hint=_hint(problems, doc), head=_head(problems))
    parsed = _conda_lock_model(doc, path)
    packages = []
    for p in parsed.package:
        vcs = p.manager == "pip" and is_vcs_url(p.url)
        packages.append(LockedPackage(
            name=p.name,
            version=p.version,
            manager=p.manager,
            platform=p.platform,
            url=p.url,
            md5=p.hash.md5,
            sha256=None if vcs else p.hash.sha256,
            commit=p.hash.sha256 if vcs else None,
            categories=tuple(sorted(p.categories)) or ("main",),
            build=p.build,
            dependencies=tuple(sorted(p.dependencies.items())),
        ))
    m = parsed.metadata
    lock = Lock(
        platforms=tuple(m.platforms),
        channels=tuple(c.url for c in m.channels),
        sources=tuple(m.sources),
        content_hash=dict(m.content_hash),
        custom=dict(m.custom_metadata or {}),
        packages=sort_packages(packages),
        header=_header_lines(text),
    )
    _remember(text, lock)
    return lock


# A lock's reading is a function of its bytes and of the reading code: the Lock read from some
# bytes is kept under CACHE/lockparse/<parser>/<sha256 of the text>.json, so a command that
# reads a lock it has read before (install, verify env, verify node: each second counts in a
# prolog) does not import conda-lock (about 0.6 s) to judge the same bytes again. <parser> is
# the sha256 of samebits' version, conda-lock's and this module's and the validator's sources:
# another parser never reads an older answer. Only locks that were read without a problem are
# kept; a torn or unreadable entry is read again from the lock.
PARSE_CACHE = "lockparse"
_PARSER: list[str] = []


def _parse_file(text: str) -> Path | None:
    try:
        from samebits import __version__
        from samebits.host import cache_dir, installed_version
        from samebits.lock import validate

        if not _PARSER:
            conda_lock = installed_version("conda_lock", "conda-lock")
            h = hashlib.sha256(f"{__version__}\0{conda_lock}\0".encode())
            for module in (__file__, validate.__file__):
                h.update(Path(str(module)).read_bytes())
            _PARSER.append(h.hexdigest()[:16])
        digest = hashlib.sha256(text.encode()).hexdigest()
        return cache_dir() / PARSE_CACHE / _PARSER[0] / f"{digest}.json"
    except (OSError, ValueError, ImportError):
        return None


def _parsed_before(text: str) -> Lock | None:
    where = _parse_file(text)
    if where is None:
        return None
    try:
        doc = json.loads(where.read_bytes())
        packages = tuple(LockedPackage(
            **{**p, "dependencies": tuple((str(a), str(b)) for a, b in p["dependencies"]),
               "categories": tuple(p["categories"])}) for p in doc["packages"])
        return Lock(platforms=tuple(doc["platforms"]), channels=tuple(doc["channels"]),
                    sources=tuple(doc["sources"]), content_hash=dict(doc["content_hash"]),
                    custom=dict(doc["custom"]), packages=packages,
                    header=_header_lines(text))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember(text: str, lock: Lock) -> None:
    where = _parse_file(text)
    if where is None:
        return
    doc = {"platforms": list(lock.platforms), "channels": list(lock.channels),
           "sources": list(lock.sources), "content_hash": dict(lock.content_hash),
           "custom": dict(lock.custom),
           "packages": [{f.name: getattr(p, f.name) for f in fields(LockedPackage)}
                        for p in lock.packages]}
    with contextlib.suppress(OSError):  # a read-only cache: read from the lock next time
        atomic_write(where, json.dumps(doc, sort_keys=True))


def _load_yaml(text: str, path: Path) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        what = " ".join(str(x) for x in (exc.problem, exc.context) if x)
        cut = " (the file may be cut short)" if "end of stream" in what else ""
        raise LockfileError(f"{path}: not YAML{where}: {clip(what, 200)}{cut}",
                            hint=RESTORE) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # e.g. a bad character
        raise LockfileError(f"{path}: not YAML: {clip(str(exc), 200)}") from None


def _hint(problems: list[Problem], doc: Any) -> str:
    """A truncated file (its last entry incomplete) says so; anything else: how to fix."""
    packages = doc.get("package") if isinstance(doc, dict) else None
    if isinstance(packages, list) and packages:
        last = package_label(len(packages) - 1, packages[-1])
        if any(p.key.startswith(last + ":") and p.message == "missing"
               for p in problems):
            return f"its last entry is incomplete: the file looks cut short; {RESTORE}"
    return RESTORE


def _head(problems: list[Problem]) -> str:
    return "not a conda-lock file" if any(is_structural(p) for p in problems) else ""


def _conda_lock_model(doc: Any, path: Path) -> Any:
    """conda-lock's ``parse_conda_lock_file`` on a document already read (same steps)."""
    with sys_path_kept():
        from conda_lock.lockfile import lockfile_v1_to_v2
        from conda_lock.lockfile.v1.models import Lockfile as LockfileV1
        from conda_lock.lockfile.v2prelim.models import Lockfile as LockfileV2
    from pydantic import ValidationError

    content = {k: v for k, v in doc.items() if k != "version"}
    try:
        if doc["version"] == 1:
            parsed = lockfile_v1_to_v2(LockfileV1.model_validate(content))
        else:
            parsed = LockfileV2.model_validate(content)
    except ValidationError as exc:
        problems = pydantic_problems(exc.errors(), doc, str(path))
        raise LockfileError(problems, hint=RESTORE, head=_head(problems)) from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LockfileError(f"{path}: not a conda-lock file: {clip(str(exc), 200)}",
                            hint=RESTORE) from None
    parsed.toposort_inplace()
    return parsed


def lock_digest(path: Path) -> str:
    """sha256 of the lockfile's bytes: what attestations and images name."""
    return sha256_hex(Path(path).read_bytes())


def lockfile_path(lockfiles: Path, name: str) -> Path:
    return Path(lockfiles) / f"{name}{LOCK_SUFFIX}"

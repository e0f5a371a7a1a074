"""A lock as the renderers see it: parsed, named, with where it came from and its digest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from samebits.errors import UsageError
from samebits.foreign.model import Conversion
from samebits.lock.model import Lock, LockedPackage, lock_digest
from samebits.lock.read import ReadOptions, load_lock

DEFAULT_PREFIX = "/opt/env"


@dataclass(frozen=True, slots=True, kw_only=True)
class LockedEnv:
    """One lockfile: ``name`` (environment id), ``origin`` (its path as rendered files name it,
    relative to the project root when it is inside it) and ``digest`` (sha256 of its bytes).
    ``conversion`` says how a lock of another format (pixi.lock, uv.lock, ...) was read."""

    name: str
    path: Path
    origin: str
    digest: str
    lock: Lock
    conversion: Conversion | None = None

    @property
    def platforms(self) -> tuple[str, ...]:
        return self.lock.platforms

    @property
    def python(self) -> str | None:
        """The Python line the lock was solved for ("3.12"), from ``samebits.python``."""
        value = self.lock.meta("python")
        return ".".join(value.split(".")[:2]) if value else None

    @property
    def cuda(self) -> str | None:
        return self.lock.meta("__cuda") or None

    @property
    def slug(self) -> str:
        """The name as a file name / image tag: ``conda-forge/hopper`` -> ``conda-forge-hopper``."""
        return self.name.replace("/", "-")

    def check_platform(self, platform: str) -> str:
        if platform not in self.platforms:
            raise UsageError(f"{self.origin}: no platform '{platform}' in this lock "
                             f"(it has {', '.join(self.platforms)})")
        return platform

    def conda(self, platform: str) -> list[LockedPackage]:
        return [p for p in self.lock.packages_for(platform, "conda")
                if not p.name.startswith("__")]

    def pip(self, platform: str) -> list[LockedPackage]:
        return self.lock.packages_for(platform, "pip")


def load_locked_env(path: Path, *, name: str, root: Path,
                    options: ReadOptions | None = None) -> LockedEnv:
    """Read ``path`` (any format ``load_lock`` reads); ``origin`` is relative to ``root``
    when the file lies under it."""
    path = Path(path)
    loaded = load_lock(path, options)
    try:
        origin = path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        origin = path.name
    return LockedEnv(name=name, path=path, origin=origin, digest=lock_digest(path),
                     lock=loaded.lock, conversion=loaded.conversion)

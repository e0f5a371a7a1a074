"""The Nix store, as samebits reads it: where a locked artifact lives, and Nix's own verdict.

Every artifact ``samebits render nix`` writes is a flat fixed-output derivation named
``samebits.render.nix.store_name(filename)`` with the lock's sha256, so its store path is a
function of the lock alone; ``nix-store --print-fixed-path`` computes it (Nix is the judge of
its own path scheme, so samebits does not reimplement it). ``nix-store --verify-path`` is Nix's
judge of whether a path is valid and unmodified.

    NixStore(store=None)            the default store (``/nix/store``), or ``--store URI``:
                                    a local chroot store (``/path`` or ``local?root=/path``)
                                    is the only kind whose files samebits can read
    .fixed_path(sha256, name)       the artifact's store path
    .file(store_path)               where that path's bytes are on this machine
    .verify(store_path)             ("valid" | "missing" | "modified", Nix's message)
    fill_cache(packages, cache, store)
                                    copy every locked archive out of the store into the install
                                    cache (``CACHE/archives/<sha256>/<filename>``), each one
                                    hash-checked, so ``samebits install`` runs offline

Errors: ``ToolError`` (exit 5) when ``nix-store`` is absent or fails unexpectedly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from samebits._io import sha256_file
from samebits.childenv import child_environ
from samebits.errors import InputError, ToolError, UsageError
from samebits.lock.model import LockedPackage

State = Literal["valid", "missing", "modified"]
TIMEOUT = 120.0


def _root_of(store: str | None) -> Path | None:
    """The folder a chroot store keeps ``/nix/store`` under; None for the default store."""
    if store is None or store in ("auto", "local"):
        return None
    if store.startswith("/"):
        return Path(store)
    if store.startswith("local?"):
        for part in store.split("?", 1)[1].split("&"):
            key, _, value = part.partition("=")
            if key == "root" and value.startswith("/"):
                return Path(value)
    raise UsageError(f'--store "{store[:80]}": samebits reads local stores only '
                     "(/path or local?root=/path)")


@dataclass(frozen=True, slots=True)
class NixStore:
    store: str | None = None

    def __post_init__(self) -> None:
        _root_of(self.store)  # a store samebits cannot read fails before any work

    def _cmd(self, *args: str) -> subprocess.CompletedProcess[str]:
        exe = shutil.which("nix-store")
        if exe is None:
            raise ToolError("nix-store is not installed",
                            hint="install Nix (Debian: apt-get install nix-bin)")
        store = ["--store", self.store] if self.store else []
        try:
            return subprocess.run([exe, *store, *args], capture_output=True, text=True,
                                  timeout=TIMEOUT, env=child_environ(os.environ))
        except subprocess.TimeoutExpired:
            raise ToolError(f"nix-store {args[0]} ran past {TIMEOUT:g} s") from None

    def fixed_path(self, sha256: str, name: str) -> str:
        proc = self._cmd("--print-fixed-path", "sha256", sha256, name)
        path = proc.stdout.strip()
        if proc.returncode != 0 or not path.startswith("/"):
            raise ToolError(f"nix-store --print-fixed-path sha256 {sha256} {name}: "
                            f"{_last_line(proc)}")
        return path

    def file(self, store_path: str) -> Path:
        root = _root_of(self.store)
        return Path(store_path) if root is None else root / store_path.lstrip("/")

    def verify(self, store_path: str) -> tuple[State, str]:
        proc = self._cmd("--verify-path", store_path)
        if proc.returncode == 0:
            return "valid", ""
        message = _last_line(proc)
        if "is not valid" in message:
            return "missing", message
        if "was modified" in message:
            return "modified", message
        raise ToolError(f"nix-store --verify-path {store_path}: {message}")


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines()
             if not ln.startswith("warning:")]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"



@dataclass(frozen=True, slots=True, kw_only=True)
class StoreArtifact:
    """One locked artifact as the store holds it."""

    package: LockedPackage
    store_path: str
    state: State
    sha256: str | None       # of the bytes found, when the path exists
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "valid" and self.sha256 == self.package.sha256


def look_up(packages: Sequence[LockedPackage], store: NixStore) -> list[StoreArtifact]:
    """Every locked artifact: its store path, Nix's verdict and the sha256 of its bytes."""
    from samebits.render.nix import store_name

    out = []
    for p in packages:
        if not p.sha256:
            raise InputError(f"{p.platform}: {p.filename}: the lock has no sha256, so Nix "
                             "cannot have fetched it by hash")
        path = store.fixed_path(p.sha256, store_name(p.filename))
        state, detail = store.verify(path)
        sha = None
        if state != "missing":
            f = store.file(path)
            sha = sha256_file(f) if f.is_file() else None
        out.append(StoreArtifact(package=p, store_path=path, state=state, sha256=sha,
                                 detail=detail))
    return out


def fill_cache(packages: Sequence[LockedPackage], cache: Path, store: NixStore) -> list[str]:
    """Copy each locked archive from the store into ``cache/archives/<sha256>/<filename>``.

    Only bytes whose sha256 is the lock's are copied (written to a temporary name and
    renamed, so a reader never sees half a file); every artifact that is missing, modified or
    of another hash is listed in the returned problems and none of those is copied."""
    problems = []
    for a in look_up(packages, store):
        p = a.package
        if not a.ok:
            why = {"missing": "not in the Nix store (run nix-build ... -A all first)",
                   "modified": f"modified in the store: {a.detail}"}.get(
                       a.state, f"sha256 {a.sha256} in the store, the lock says {p.sha256}")
            problems.append(f"{p.platform}: {p.filename}: {a.store_path}: {why}")
            continue
        dest = cache / "archives" / str(p.sha256) / p.filename
        if dest.is_file() and sha256_file(dest) == p.sha256:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.filename}.", dir=dest.parent)
        os.close(fd)
        try:
            shutil.copyfile(store.file(a.store_path), tmp)
            if sha256_file(Path(tmp)) != p.sha256:  # the store changed under us
                problems.append(f"{p.platform}: {p.filename}: changed while being copied")
                continue
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return problems

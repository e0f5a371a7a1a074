"""A paper's environment in one reproducible tar that outlives the URLs in its lock.

    <env>.bundle/
      bundle.json                    format 1: environment, platforms, lockfile, every archive
      README.txt                     how to check and install it without network
      SHA256SUMS                     ``sha256sum -c`` format: every file here but itself
      <name>.conda-lock.yml          the lockfile, byte for byte
      containers/<env>/...           the project's rendered files (Containerfile, requirements,
                                     Nix files) and the conda files rendered from the lock
      offline/<P>.requirements.txt   the PyPI part as local paths with hashes, for pip
      archives/<key>/<filename>      every locked archive (conda and PyPI): the layout of the
                                     install cache (``CACHE/archives/<key>/<filename>``, key =
                                     the sha256, else the md5), so an extracted bundle is a cache

The metadata comes first and the archives last, so a reader that streams the tar knows every
expected hash before the first archive arrives (``samebits.bundle.read``). The tar is
``samebits.render.tarball``'s stream (``tar_pieces``): entries in this fixed order, mtime 0,
uid/gid 0 with no names, modes 0755/0644, PAX headers only where a path needs one;
uncompressed (the archives are compressed already). Its bytes depend on the lock, the bundled
platforms, the project's containers/<env>/ files and the samebits version (recorded in
bundle.json): not on the folder, umask, time zone, clock or cache of the machine that writes it.

Archives are read once: each is hashed as it streams into the tar and checked against the lock
(sha256, and md5 where the lock has one); a mismatch stops the write and nothing is left.
``samebits.bundle.prep`` gathers the inputs (cache, containers/<env>/); this module is the
layout, the small files and the writer.
"""

from __future__ import annotations

import hashlib
import io
import queue
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from samebits import __version__
from samebits._io import atomic_writer, canonical_json
from samebits.errors import InputError, LockfileError
from samebits.lock.model import LockedPackage
from samebits.lock.read import LockedEnv
from samebits.lock.shared import stage_name
from samebits.render.tarball import Entry, tar_pieces

BUNDLE_FORMAT = 1
BUNDLE_KIND = "samebits.bundle"
MANIFEST = "bundle.json"
README = "README.txt"
SUMS = "SHA256SUMS"
ARCHIVES = "archives"
OFFLINE = "offline"
MTIME = 0
LOCK_DIGEST_NOTE = re.compile(r"\(sha256 ([0-9a-f]{64})\)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Archive:
    """One locked archive as it goes into the bundle (shared by the platforms that lock it)."""

    path: str  # archives/<key>/<filename>
    source: Path  # the cached file it is read from
    size: int
    sha256: str  # the lock's; for an archive locked by md5 alone, hashed from the cache
    md5: str | None
    packages: tuple[LockedPackage, ...]

    @property
    def label(self) -> str:
        p = self.packages[0]
        return f"{p.manager}:{p.name} {p.version}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BundlePlan:
    root: str  # the one folder everything is under: <env>.bundle
    files: Mapping[str, bytes]  # every small file, by path under root (metadata first)
    archives: tuple[Archive, ...]  # sorted by path

    @property
    def archive_bytes(self) -> int:
        return sum(a.size for a in self.archives)

    def entries(self) -> list[Entry]:
        """The tar's entries in order: metadata, then each folder before what is in it."""
        out: list[Entry] = []
        made: set[str] = set()
        for path, size in [*((p, len(d)) for p, d in self.files.items()),
                           *((a.path, a.size) for a in self.archives)]:
            parts = path.split("/")
            for i in range(1, len(parts)):
                folder = "/".join(parts[:i])
                if folder not in made:
                    made.add(folder)
                    out.append(Entry(path=folder, kind="dir", mode=0o755))
            out.append(Entry(path=path, kind="file", mode=0o644, size=size))
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleResult:
    sha256: str
    size: int
    archives: int
    archive_bytes: int


def archive_path(p: LockedPackage) -> str:
    """Where the install cache keeps ``p`` (``samebits.install``), under the bundle root."""
    return f"{ARCHIVES}/{p.sha256 or p.md5}/{p.filename}"


def locked_packages(env: LockedEnv, platforms: Sequence[str]) -> list[LockedPackage]:
    """Every archive ``platforms`` of the lock install; LockfileError for any without a hash."""
    packages = [p for plat in platforms for p in (*env.conda(plat), *env.pip(plat))]
    unhashed = sorted(f"{p.platform}: {p.manager}:{p.name} {p.version}"
                      for p in packages if not p.sha256 and not p.md5)
    if unhashed:
        raise LockfileError(f"{env.origin}: {len(unhashed)} package(s) without a hash cannot "
                            "be bundled: " + ", ".join(unhashed)[:400],
                            hint=f"re-lock it: samebits lock {env.name}")
    return packages


def by_archive(packages: Sequence[LockedPackage]) -> dict[str, list[LockedPackage]]:
    """Bundle path -> the packages (one per platform that locks it), sorted by path."""
    out: dict[str, list[LockedPackage]] = {}
    for p in packages:
        out.setdefault(archive_path(p), []).append(p)
    return dict(sorted(out.items()))


def stale_containers(env: LockedEnv, platforms: Sequence[str], found: Mapping[str, bytes],
                     fresh: Mapping[str, str]) -> list[str]:
    """Files of containers/<env>/ that were not rendered from this lock: a conda file that
    differs from a fresh render, or any file that names the lock with another sha256."""
    stale = [f"{name}: differs from a fresh render of {env.origin}"
             for name, text in sorted(fresh.items())
             if name in found and found[name] != text.encode()]
    for name, data in sorted(found.items()):
        text = data.decode("utf-8", "replace")
        other = {d for d in LOCK_DIGEST_NOTE.findall(text) if d != env.digest}
        if other and env.origin.rsplit("/", 1)[-1] in text:
            stale.append(f"{name}: names the lock with sha256 {sorted(other)[0][:12]}…, "
                         f"{env.origin} is {env.digest[:12]}…")
    return stale


def offline_files(env: LockedEnv, platform: str) -> list[str]:
    """``offline/<platform>.requirements.txt``, and one more per later stage of the lock's
    shared paths (``samebits.lock.shared.install_stages``), to install in that order."""
    from samebits.render.containerfile import pip_stages

    first = f"{OFFLINE}/{platform}.requirements.txt"
    return [stage_name(first, k) for k in range(len(pip_stages(env, platform)))]


def offline_requirements(env: LockedEnv, platform: str, stage: int = 0) -> str:
    """The PyPI part of ``platform`` (its ``stage``) as local archive paths with hashes (pip
    reads them relative to the current folder: run pip in the bundle's root)."""
    from samebits.render.containerfile import pip_stages

    stages = pip_stages(env, platform)
    files = offline_files(env, platform)
    lines = [f"# samebits bundle: the PyPI part of {env.name} on {platform}, from {env.origin}",
             f"# (sha256 {env.digest}). From the bundle's root folder, with no network:",
             *(f"#   pip install --no-index --no-deps --require-hashes -r {f}" for f in files),
             *(["# in this order: a later file's wheels write paths an earlier one's write "
                "too, and the lock", "# records the later one's bytes there (pip's order)."]
               if len(files) > 1 else []),
             *(f"{archive_path(p)} --hash=sha256:{p.sha256}"
               for p in (stages[stage] if stages else []))]
    return "\n".join(lines) + "\n"


def readme(env: LockedEnv, platforms: Sequence[str], lock_name: str, root: str,
           archives: Sequence[Archive]) -> str:
    size = sum(a.size for a in archives)
    pip_platforms = [p for p in platforms if env.pip(p)]
    plats = ", ".join(platforms)
    lines = [
        f"{env.name}: a samebits environment bundle (format {BUNDLE_FORMAT}, samebits "
        f"{__version__})",
        "",
        f"The lock {lock_name} for {plats}, sha256",
        f"    {env.digest},",
        f"and every archive it installs: {len(archives)} files, {size:,} bytes, each named by its",
        "hash and checked against the lock. Nothing here needs a network or the lock's URLs.",
        "",
        "Check it (needs only coreutils):",
        f"    tar -xf BUNDLE.tar && cd {root} && sha256sum -c --quiet SHA256SUMS",
        "",
        f"Install it with samebits ({__version__}, named in bundle.json, or later), offline:",
        "    samebits bundle check BUNDLE.tar",
        f"    samebits install --from-bundle BUNDLE.tar --target /path/to/env --platform "
        f"{platforms[0]}",
        "It unpacks the archives into samebits' cache, checks every hash, installs exactly the",
        "lock (conda part with py-rattler, PyPI part by hash, nothing resolved) and ends with",
        "`samebits verify env`: the same environment digest as an install from the network.",
        f"The extracted folder is such a cache too: samebits install {root}/{lock_name} "
        f"--cache-dir {root} --target DIR",
    ]
    if pip_platforms:
        plat = pip_platforms[0]
        lines += [
            "",
            "Without samebits, the PyPI part installs with pip from the extracted folder:",
            f"    python{env.python or '3'} -m venv /path/to/env && cd {root} &&",
        ]
        files = offline_files(env, plat)
        for n, f in enumerate(files):
            lines += ["    /path/to/env/bin/pip install --no-index --no-deps --require-hashes "
                      "\\", f"        -r {f}" + (" &&" if n < len(files) - 1 else "")]
    lines += [
        "",
        f"containers/{env.name}/ holds the conda files (explicit list with md5s,",
        "environment.yml) rendered from the lock and, where the project had them, its",
        "Containerfile and Nix files. bundle.json lists every archive with its package and hashes.",
    ]
    return "\n".join(lines) + "\n"


def manifest(env: LockedEnv, platforms: Sequence[str], lock_name: str,
             archives: Sequence[Archive], files: Sequence[str]) -> bytes:
    return canonical_json({
        "format": BUNDLE_FORMAT, "kind": BUNDLE_KIND, "samebits": __version__,
        "environment": env.name, "platforms": list(platforms),
        "lockfile": {"path": lock_name, "sha256": env.digest},
        "files": sorted(files),
        "archives": [{"path": a.path, "size": a.size, "sha256": a.sha256, "md5": a.md5,
                      "packages": sorted({f"{p.platform} {p.manager}:{p.name} {p.version}"
                                          for p in a.packages})} for a in archives],
    })


def sha256sums(files: Mapping[str, bytes], archives: Sequence[Archive]) -> bytes:
    rows = [(hashlib.sha256(d).hexdigest(), p) for p, d in files.items()]
    rows += [(a.sha256, a.path) for a in archives]
    return "".join(f"{h}  {p}\n" for h, p in sorted(rows, key=lambda r: r[1])).encode()


def plan(env: LockedEnv, platforms: Sequence[str], *, lock_bytes: bytes,
         containers: Mapping[str, bytes], archives: Sequence[Archive]) -> BundlePlan:
    """Every small file of the bundle, and the archives, in the order they are written.
    ``containers``: containers/<env>/'s files (name -> bytes) with the conda files fresh from
    the lock; ``archives`` from ``locate``."""
    lock_name = env.path.name
    extra: dict[str, bytes] = {lock_name: lock_bytes}
    extra.update({f"containers/{env.name}/{n}": d for n, d in sorted(containers.items())})
    for plat in platforms:
        for stage, name in enumerate(offline_files(env, plat) if env.pip(plat) else []):
            extra[name] = offline_requirements(env, plat, stage).encode()
    root = f"{env.slug}.bundle"
    text = readme(env, platforms, lock_name, root, archives).encode()
    listed = {README: text, **extra}
    head = manifest(env, platforms, lock_name, archives, [*listed, *(a.path for a in archives)])
    sums = sha256sums({MANIFEST: head, **listed}, archives)
    return BundlePlan(root=root, files={MANIFEST: head, README: text, SUMS: sums, **extra},
                      archives=tuple(archives))


class _Checked(io.RawIOBase):
    """An archive read from the cache, hashed as it is read; at its last byte the hashes must
    be the lock's, else InputError names it (and the tar being written is discarded)."""

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self.f = open(archive.source, "rb")  # noqa: SIM115 (closed by close())
        self.sha = hashlib.sha256()
        self.md5 = hashlib.md5() if archive.md5 else None
        self.seen = 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.sha.update(data)
        if self.md5 is not None:
            self.md5.update(data)
        self.seen += len(data)
        if self.seen == self.archive.size:
            self._check()
        return data

    def _check(self) -> None:
        a = self.archive
        got = self.sha.hexdigest()
        if got != a.sha256:
            raise InputError(f"{a.source}: sha256 is {got}, the lock says {a.sha256} "
                             f"({a.label})", hint=f"delete {a.source.parent} from the cache "
                             "and bundle again: it is fetched anew")
        if self.md5 is not None and self.md5.hexdigest() != a.md5:
            raise InputError(f"{a.source}: md5 is {self.md5.hexdigest()}, the lock says "
                             f"{a.md5} ({a.label})")

    def close(self) -> None:
        self.f.close()
        super().close()


def tar_stream(bundle: BundlePlan) -> Iterator[bytes]:
    archives = {a.path: a for a in bundle.archives}

    def open_file(entry: Entry) -> BinaryIO:
        if entry.path in archives:
            return _Checked(archives[entry.path])  # type: ignore[return-value]
        return io.BytesIO(bundle.files[entry.path])

    return tar_pieces(Path("."), bundle.entries(), root=bundle.root, mtime=MTIME,
                      open_file=open_file)


def write_bundle(bundle: BundlePlan, dest: Path, *,
                 advance: Callable[[int], None] = lambda n: None) -> BundleResult:
    """Stream the tar into ``dest`` atomically (nothing is left if any archive fails its
    hash); ``advance(n)`` after each block of n bytes.

    Two threads, so that two cores work and neither waits on the disk alone: this one reads
    and hashes the archives into tar blocks, a writer writes the blocks and hashes the tar
    (hashlib and file writes release the GIL). The queue between them is bounded (32 MiB)."""
    sha = hashlib.sha256()
    size = 0
    blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=32)
    failed: list[BaseException] = []

    def writer(f: BinaryIO) -> None:
        try:
            while (block := blocks.get()) is not None:
                f.write(block)
                sha.update(block)
        except BaseException as exc:  # reported by the reading side, which stops
            failed.append(exc)
            while blocks.get() is not None:  # drain so the reader never blocks
                pass

    with atomic_writer(dest) as f:
        thread = threading.Thread(target=writer, args=(f,), name="bundle-writer", daemon=True)
        thread.start()
        try:
            for chunk in tar_stream(bundle):
                if failed:
                    break
                blocks.put(chunk)
                size += len(chunk)
                advance(len(chunk))
        finally:
            blocks.put(None)
            thread.join()
        if failed:
            raise failed[0]
    return BundleResult(sha256=sha.hexdigest(), size=size, archives=len(bundle.archives),
                        archive_bytes=bundle.archive_bytes)

"""Archive safety: every member of every archive checked before anything is installed.

A conda package (``.tar.bz2``, ``.conda``) or a wheel may name a member ``/etc/passwd`` or
``../../x``, or carry a link that points out of the prefix; installing it would write outside
the prefix or leave a link into the host. ``scan_archive`` lists every such member (all of them,
not the first); the installer refuses the whole lock when any archive has one.

The path rules (``path_problem``, ``link_problem``) are pure and shared with the tar writer,
which applies them again to the installed prefix before a layer is written.
"""

from __future__ import annotations

import binascii
import posixpath
import re
import tarfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
# No single file in a CUDA/torch stack comes near this (libtorch_cuda.so is ~1.5 GiB); a member
# that claims more is a corrupt or hostile archive, refused before anything is written.
MAX_MEMBER_BYTES = 64 << 30
# A wheel member inflating more than this many times over its compressed size is a zip bomb.
MAX_RATIO = 1000


_BASE64 = re.compile(r"[A-Za-z0-9_+/-]+={0,2}")
# the form PEP 376 asks for, which nearly every row has: sha256, its 32 bytes in 43 characters
# of urlsafe base64, unpadded (or padded: the one "=")
_PLAIN_SHA256 = re.compile(r"sha256=([A-Za-z0-9_-]{43})=?")


def record_hash(value: str) -> tuple[str, bytes] | None:
    """A RECORD row's hash column, ``<algorithm>=<base64 digest>``, as (algorithm, digest
    bytes); None for an empty column (the RECORD's own row, a pyc).

    PEP 376 and the wheel spec ask for urlsafe base64 without its ``=`` padding; real wheels
    also pad it (catboost 1.0.3 writes ``sha256=_8KhHaY45G73W68dS5SDqrkl2x4w72YtCOVosustXZc=``),
    and pip installs them without a word. So a digest is compared as the bytes it encodes,
    never as text: padded or not, either base64 alphabet, the same bytes are the same hash.
    Anything that is not base64 at all is a ValueError naming the value.
    """
    if not value:
        return None
    plain = _PLAIN_SHA256.fullmatch(value)
    if plain is not None:  # decoded as below, in one match and one call
        return "sha256", binascii.a2b_base64(plain[1].replace("-", "+").replace("_", "/") + "=")
    algo, sep, text = value.partition("=")
    if not sep or not algo or not _BASE64.fullmatch(text):
        raise ValueError(f"not <algorithm>=<base64 digest>: {value[:80]!r}")
    body = text.rstrip("=")
    try:  # the alphabet was checked above: binascii alone (base64 checks it again)
        digest = binascii.a2b_base64(body.replace("-", "+").replace("_", "/")
                                     + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"not <algorithm>=<base64 digest>: {value[:80]!r}") from None
    return algo, digest


@dataclass(frozen=True, slots=True, kw_only=True)
class BadMember:
    """One member of one archive (or one entry of a prefix) that must not be installed."""

    archive: str
    member: str
    reason: str

    def __str__(self) -> str:
        return f"{self.archive}: {self.member}: {self.reason}"

    def to_json(self) -> dict[str, str]:
        return {"archive": self.archive, "member": self.member, "reason": self.reason}


def path_problem(name: str) -> str | None:
    """Why ``name`` (a member path, '/'-separated) may not be written under a prefix, or None."""
    if not name or name in (".", "./"):
        return None if name else "empty path"
    if name.startswith("/") or _DRIVE.match(name):
        return "absolute path"
    if "\x00" in name:
        return "NUL in path"
    if ".." in name.split("/"):
        return "'..' in path"
    return None


def link_problem(name: str, target: str, *, hard: bool = False) -> str | None:
    """Why a link at ``name`` pointing to ``target`` escapes its root, or None.

    Symlink targets are relative to the link's folder; hardlink targets (in tar) to the root.
    """
    if not target:
        return "link with an empty target"
    if target.startswith("/"):
        return f"link to an absolute path ({target})"
    base = "" if hard else posixpath.dirname(name)
    resolved = posixpath.normpath(posixpath.join(base, target))
    if resolved == ".." or resolved.startswith("../"):
        return f"link escaping the prefix ({target})"
    return None


def absurd_size(size: int) -> str:
    return f"declared size {size} bytes is absurd (limit {MAX_MEMBER_BYTES})"


def tar_member_problem(m: tarfile.TarInfo) -> str | None:
    """Why one tar member may not be unpacked under a root, or None: an absolute or '..'
    path, a symlink out of the root, a hardlink to such a path, a device or fifo, an absurd
    declared size. Shared by packages (``scan_conda``) and a paper's deposit archive
    (``samebits_app.audit.deposit``)."""
    reason = path_problem(m.name)
    if reason is None and m.issym():
        reason = link_problem(m.name, m.linkname)
    elif reason is None and m.islnk():
        bad = path_problem(m.linkname)
        reason = f"hardlink to {m.linkname!r}: {bad}" if bad else None
    elif reason is None and not (m.isfile() or m.isdir()):
        reason = "device, fifo or other special file"
    elif reason is None and m.size > MAX_MEMBER_BYTES:
        reason = absurd_size(m.size)
    return reason


def _tar_member_problems(members: Iterable[tarfile.TarInfo], archive: str) -> Iterator[BadMember]:
    for m in members:
        reason = tar_member_problem(m)
        if reason:
            yield BadMember(archive=archive, member=m.name, reason=reason)
        if m.size > MAX_MEMBER_BYTES and reason == absurd_size(m.size):
            # Stop here: reading on would make tarfile skip the declared bytes, a read per
            # 10 kB block of a stream that has none (minutes for a 64 GiB claim).
            return


def scan_conda(path: Path) -> list[BadMember]:
    """Every unsafe member of a ``.tar.bz2`` or ``.conda`` package (both of a .conda's parts)."""
    from conda_package_streaming.package_streaming import stream_conda_component

    path = Path(path)
    components = ("pkg", "info") if path.name.endswith(".conda") else ("pkg",)
    out: list[BadMember] = []
    for component in components:
        members = _members_until_broken(
            (m for _, m in stream_conda_component(str(path), component=component)), path.name, out)
        out += _tar_member_problems(members, path.name)
    return out


def _members_until_broken(members: Iterator[tarfile.TarInfo], archive: str,
                          problems: list[BadMember]) -> Iterator[tarfile.TarInfo]:
    """Yield members until the stream breaks; the break becomes one more problem, so what was
    found before it (an absurd declared size, say) is still reported."""
    last = ""
    while True:
        try:
            m = next(members)
        except StopIteration:
            return
        except (OSError, EOFError, tarfile.TarError, ValueError) as exc:
            where = f"after {last}" if last else "at the start"
            problems.append(BadMember(archive=archive, member="",
                                      reason=f"unreadable archive ({where}): {exc}"))
            return
        last = m.name
        yield m


def scan_wheel(path: Path) -> list[BadMember]:
    """Every unsafe member of a wheel (a zip): absolute or '..' names, symlink entries."""
    path = Path(path)
    out = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            reason = path_problem(info.filename.rstrip("/") or info.filename)
            if reason is None and zip_is_link(info):
                reason = "symlink entry (wheels hold regular files only)"
            reason = reason or zip_member_problem(info)
            if reason:
                out.append(BadMember(archive=path.name, member=info.filename, reason=reason))
    return out


def zip_is_link(info: zipfile.ZipInfo) -> bool:
    """Whether a zip entry is a symlink (its Unix mode, where the zip records one)."""
    return (info.external_attr >> 16) & 0o170000 == 0o120000


def zip_member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why one zip entry may not be unpacked under a root, or None: an absolute or '..'
    name, an absurd declared size, a zip bomb. (A symlink entry is the caller's to judge:
    a wheel holds none; a deposit's link must stay inside its folder.) Shared by wheels
    (``scan_wheel``) and a paper's deposit archive (``samebits_app.audit.deposit``)."""
    reason = path_problem(info.filename.rstrip("/") or info.filename)
    if reason is None and info.file_size > MAX_MEMBER_BYTES:
        reason = absurd_size(info.file_size)
    elif reason is None and info.file_size > MAX_RATIO * max(info.compress_size, 1 << 20):
        reason = (f"inflates {info.compress_size} bytes to {info.file_size} "
                  f"(over {MAX_RATIO}x): a zip bomb")
    return reason


def scan_archive(path: Path) -> list[BadMember]:
    """Unsafe members of a conda package or wheel; an unreadable archive is one problem too."""
    path = Path(path)
    try:
        if path.name.endswith(".whl"):
            return scan_wheel(path)
        if path.name.endswith((".tar.bz2", ".conda")):
            return scan_conda(path)
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile, LookupError,
            ValueError, RuntimeError) as exc:
        return [BadMember(archive=path.name, member="", reason=f"unreadable archive: {exc}")]
    return [BadMember(archive=path.name, member="",
                      reason="not a conda package (.tar.bz2, .conda) or a wheel (.whl)")]

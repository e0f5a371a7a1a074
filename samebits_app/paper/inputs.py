"""``[[inputs]]``: the data a paper's commands read, pinned by sha256, checked before any runs.

    [[inputs]]
    path = "data/stripes.json"      # where the commands read it, relative to the paper folder
    sha256 = "..."                  # sha256sum data/stripes.json
    url = "https://..."             # optional: fetched into the cache, then put at path in
                                    # the scratch copy (the paper folder is never written)

``check_inputs`` reads (or fetches: ``samebits.install.fetch.fetch_url``; the cache is
``CACHE/inputs/<sha256>/<name>``, a file proved by its hash before it is kept) every input and
says, per input, what it found. ``attest`` refuses any input that is missing or not its sha256
(``PaperInputError``, exit 1, every input named) before anything runs; the attestation records
each (``record``) and names it as an in-toto subject (``input/<path>``). ``audit`` compares
the reviewer's files with the attested sha256 (``against_attested``): "input differs:
data/stripes.json (...)" is a reason that explains the commands' divergences.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from samebits._io import sha256_file
from samebits.errors import EXIT_DIFFERENT, SamebitsError
from samebits_app.paper.manifest import InputSpec, PaperManifest

Fetch = Callable[[str, Path], None]


class PaperInputError(SamebitsError):
    """``attest`` refuses: an ``[[inputs]]`` file is missing, unfetchable or not its sha256."""

    exit_code = EXIT_DIFFERENT
    kind = "paper-input"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputState:
    spec: InputSpec
    sha256: str | None = None     # what was found; None: nothing was
    source: Path | None = None    # the file the run is given (the folder's, or the cache's)
    problem: str | None = None

    def record(self) -> dict[str, Any]:
        """The attestation's record of this input: its path and URL, and the sha256 of what
        was found (the pinned one, for ``attest``; None when nothing was)."""
        return {**self.spec.to_json(), "sha256": self.sha256}


def cache_folder(cache: Path | None) -> Path:
    from samebits.install.fetch import default_cache_dir

    return Path(cache or default_cache_dir()) / "inputs"


def _name(spec: InputSpec) -> str:
    tail = PurePosixPath(unquote(urlsplit(spec.url or "").path)).name
    return tail or PurePosixPath(spec.path).name or "input"


def _fetch(spec: InputSpec, cache: Path, fetch: Fetch) -> InputState:
    assert spec.url is not None
    kept = cache / spec.sha256 / _name(spec)
    if kept.is_file() and sha256_file(kept) == spec.sha256:
        return InputState(spec=spec, sha256=spec.sha256, source=kept)
    kept.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".fetch.", dir=kept.parent)
    os.close(fd)
    try:
        try:
            fetch(spec.url, Path(tmp))
        except SamebitsError as exc:
            return InputState(spec=spec, problem=f"input not fetched: {spec.path} from "
                              f"{spec.url}: {exc.message}")
        except OSError as exc:
            return InputState(spec=spec, problem=f"input not fetched: {spec.path} from "
                              f"{spec.url}: {exc}")
        got = sha256_file(tmp)
        if got != spec.sha256:
            return InputState(spec=spec, sha256=got, problem=(
                f"input differs: {spec.path} from {spec.url} (sha256 {got[:12]}, the manifest "
                f"pins {spec.sha256[:12]})"))
        os.replace(tmp, kept)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return InputState(spec=spec, sha256=spec.sha256, source=kept)


def default_fetch(manifest: PaperManifest, roots: Sequence[Path] = ()) -> Fetch:
    """fetch_url under the fetch cap, reading a file:// URL only from below the paper's
    folder or ``roots`` (the folders the user named: --find-links), never from a device,
    as for a lock's files (``samebits.install.fetch``)."""
    from samebits.install.fetch import MAX_FETCH_ENV, Limits, fetch_url, max_fetch_bytes

    limits = Limits(max_bytes=max_fetch_bytes(), why=f"the fetch cap ({MAX_FETCH_ENV})",
                    roots=tuple(dict.fromkeys(Path(os.path.realpath(r))
                                              for r in (manifest.folder, *roots))))
    return lambda url, dest: fetch_url(url, dest, limits)


def check_inputs(manifest: PaperManifest, *, cache: Path | None = None,
                 fetch: Fetch | None = None,
                 roots: Sequence[Path] = ()) -> tuple[InputState, ...]:
    """Every input of ``manifest``, read or fetched, against the sha256 it pins."""
    out = []
    for spec in manifest.inputs:
        if spec.url is not None:
            out.append(_fetch(spec, cache_folder(cache), fetch or default_fetch(manifest, roots)))
            continue
        p = manifest.folder / spec.path
        if p.is_symlink() or not p.is_file():
            out.append(InputState(spec=spec, problem=f"input missing: {spec.path} (no such "
                                  f"file in {manifest.folder})"))
            continue
        got = sha256_file(p)
        problem = None if got == spec.sha256 else (
            f"input differs: {spec.path} (sha256 {got[:12]}, the manifest pins "
            f"{spec.sha256[:12]})")
        out.append(InputState(spec=spec, sha256=got, source=p, problem=problem))
    return tuple(out)


def raise_problems(manifest: PaperManifest, states: Sequence[InputState]) -> None:
    problems = [s.problem for s in states if s.problem]
    if problems:
        raise PaperInputError(f"{manifest.file}: {len(problems)} problem(s) with the paper's "
                              "inputs:\n  " + "\n  ".join(problems),
                              hint="fix the file or its sha256 in [[inputs]] (sha256sum FILE); "
                              "no attestation was written")


def place(states: Sequence[InputState], work: Path) -> None:
    """Put every fetched input at its path in the scratch copy ``work``."""
    for s in states:
        if s.spec.url is not None and s.source is not None:
            target = work / s.spec.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()
            shutil.copyfile(s.source, target)


def subjects(records: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {f"input/{r['path']}": str(r["sha256"]) for r in records if r.get("sha256")}


def against_attested(states: Sequence[InputState], attested: Any) -> list[str]:
    """Reasons: the reviewer's inputs against the attestation's ``paper.inputs``."""
    theirs = {str(r.get("path")): r for r in attested if isinstance(r, Mapping)} \
        if isinstance(attested, list) else {}
    reasons: list[str] = []
    mine = {s.spec.path: s for s in states}
    for path, rec in theirs.items():
        s = mine.get(path)
        want = str(rec.get("sha256"))
        if s is None:
            reasons.append(f"input differs: {path} is an input the authors attested (sha256 "
                           f"{want[:12]}); the manifest here does not declare it")
        elif s.sha256 is None:
            reasons.append(s.problem or f"input missing: {path}")
        elif s.sha256 != want:
            pin = ("" if s.spec.sha256 == want else
                   f"; the manifest here pins {s.spec.sha256[:12]}")
            reasons.append(f"input differs: {path} (sha256 {s.sha256[:12]}, the authors' "
                           f"{want[:12]}{pin})")
        elif s.problem:
            reasons.append(f"input differs: {path}: the manifest here pins sha256 "
                           f"{s.spec.sha256[:12]}, the file is the authors' {want[:12]}")
    for path in mine:
        if path not in theirs:
            reasons.append(f"input differs: {path} is declared here, not in the authors' "
                           "attestation")
    return reasons


"""From a command's three runs (``trials``) to what its manifest declares: ``samebits paper
init``'s measurements.

    outputs   the files runs 1 and 2 both wrote (``draft.written``); a file only one of them
              wrote is named and left out (its name changes run to run: a time or an id in
              it); stdout and stderr when they read as a curve (a stream is declared only as
              one)
    kinds     ``kinds.kind_of`` on run 1's bytes (a file over ``KIND_MAX`` bytes is a
              ``file``, unless the tensor reader reads it); the tensor files are read by the
              worker in the environment, ``python -m verify.gpu.errorstats``: one request for
              the three runs' records and run 1's element-by-element comparison with runs 2
              and 3
    measures  ``runner.output_records`` of each run (what attest records), then
              ``noise.decide`` per output
    inputs    ``draft.reads`` of runs 1 and 2 (run 2's read as if in run 1's copy), pinned by
              the sha256 of the paper folder's file; the inputs the manifest already pins
              and those given with ``--input`` are not repeated
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from samebits._io import sha256_file
from samebits_app.paper import draft, kinds, noise
from samebits_app.paper.manifest import OutputSpec, PaperManifest
from samebits_app.paper.runner import output_records
from samebits_app.paper.sandbox import readable_for
from samebits_app.paper.trials import Run

KIND_MAX = 64 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Survey:
    decisions: tuple[noise.Decision, ...]
    left_out: tuple[tuple[str, str], ...]     # (path or <stream>, why): not declared outputs
    inputs: tuple[tuple[str, str], ...]       # (path, sha256): to pin
    reads: draft.Reads
    notes: tuple[str, ...] = ()


def _rel(manifest: PaperManifest, path: Path) -> str | None:
    try:
        return path.resolve().relative_to(manifest.folder.resolve()).as_posix()
    except ValueError:
        return None


def _kinds(runs: Sequence[Run], files: Sequence[str], errorstats: Callable[[dict], dict] | None
           ) -> tuple[dict[str, kinds.Kinded], dict[str, Any]]:
    """Each file's kind from run 1, and the worker's answer for the tensor files."""
    tensorish = [f for f in files if PurePosixPath(f).suffix.lower() in kinds.TENSOR_SUFFIXES]
    answer: dict[str, Any] = {"records": {}, "compare": []}
    if tensorish and errorstats is not None:
        a, b, c = (r.root for r in runs)
        answer = errorstats({
            "records": [str(r / f) for r in (a, b, c) for f in tensorish],
            "compare": [{"a": str(a / f), "b": str(other / f), "rtol": 0.0, "atol": 0.0}
                        for f in tensorish for other in (b, c)]})
    out: dict[str, kinds.Kinded] = {}
    for f in files:
        path = runs[0].root / f
        size = path.stat().st_size
        told = answer["records"].get(str(path)) if f in tensorish else None
        if size > KIND_MAX and (told is None or "tensors" not in told):
            out[f] = kinds.Kinded(spec=OutputSpec(kind="file", path=f),
                                  what=f"{size:,} bytes: compared by bytes")
        else:
            out[f] = kinds.kind_of(f, path.read_bytes(), told)
    return out, answer


def _given(records: Mapping[str, Any]) -> Callable[[Sequence[Path]], Mapping[str, Any]]:
    """A tensor reader that answers with ``records`` (read by the worker already)."""
    def read(paths: Sequence[Path]) -> Mapping[str, Any]:
        return records

    return read


def survey(runs: Sequence[Run], *, manifest: PaperManifest, errorstats: Callable[[dict], dict],
           margin: float, accept: bool, perturbation: str, environment: Path,
           pinned: Sequence[str] = ()) -> Survey:
    """What runs 1, 2 and 3 of ``manifest``'s new command (``runs[0].spec``) say it should
    declare (module doc); ``environment``: the folder of the interpreter the runs used (its
    environment's reads are not inputs); ``pinned``: input paths already declared."""
    first, second, _ = runs
    spec = first.spec
    a, b = set(first.written.files), set(second.written.files)
    left = [*first.written.left_out,
            *((f, "written by one of the two alike runs only: its name changes run to run (a "
               "time or a random id in it?)") for f in sorted(a ^ b))]
    files = sorted(a & b)
    found, answer = _kinds(runs, files, errorstats)
    outputs = [found[f].spec for f in files]
    kinded = dict(found)
    for stream in ("stdout", "stderr"):
        k = kinds.stream_kind(stream, first.streams[stream])
        if k is not None:
            kinded[f"<{stream}>"] = k
            outputs.append(k.spec)
        elif first.streams[stream].strip():
            left.append((f"<{stream}>", "no line reads as a curve (a stream is declared only "
                         "as a curve: a step word, its number, then name number pairs)"))
    declared = replace(spec, outputs=tuple(outputs))
    records = []
    for run in runs:
        theirs = {str(run.root / f): answer["records"].get(str(run.root / f), {"error": "not read"})
                  for f in files}
        records.append({r["output"]: r for r in output_records(
            declared, root=run.root, streams=run.streams,
            tensor_records=_given(theirs))})
    compared: dict[str, list[Any]] = {}
    jobs = [f for f in files if PurePosixPath(f).suffix.lower() in kinds.TENSOR_SUFFIXES]
    for i, f in enumerate(jobs):
        compared[f] = answer["compare"][2 * i:2 * i + 2] if answer["compare"] else [None, None]
    decisions = []
    for o in outputs:
        label = o.label
        sides = [noise.Side(record=recs[label], file=run.root / o.path if o.path else None)
                 for run, recs in zip(runs, records, strict=True)]
        decisions.append(noise.decide(kinded[label], sides,
                                      compared=compared.get(label, [None, None]),
                                      margin=margin, accept=accept, perturbation=perturbation))
    reads = _reads(runs, manifest=manifest, outputs=a | b, env=readable_for(environment))
    inputs = tuple((p, sha256_file(manifest.folder / p)) for p in reads.inputs
                   if p not in pinned)
    notes = tuple(f"the command deletes {p}" for p in first.written.deleted
                  if draft.left_out(p) is None)
    return Survey(decisions=tuple(decisions), left_out=tuple(left), inputs=inputs, reads=reads,
                  notes=notes)


def _reads(runs: Sequence[Run], *, manifest: PaperManifest, outputs: set[str],
           env: Sequence[Path]) -> draft.Reads:
    first, second = runs[0], runs[1]
    declared = {str(PurePosixPath(c.cwd) / o.path) for c in manifest.commands
                for o in c.outputs if o.path}
    special = {p for p in (_rel(manifest, manifest.file), _rel(manifest, manifest.lockfile),
                           _rel(manifest, manifest.attestation)) if p}
    return draft.reads([first.opens, draft.relative(second.opens, root=second.root,
                                                    to=first.root)],
                       root=first.root, paper=manifest.folder, before=first.before,
                       outputs=outputs | declared, special=special,
                       ignore=[*env, Path(tempfile.gettempdir()), first.root.parent.parent])


def stats(decisions: Sequence[noise.Decision]) -> Mapping[str, int]:
    """How many outputs are declared, left out, and noisy-but-accepted."""
    return {"declared": sum(d.spec is not None for d in decisions),
            "left_out": sum(d.spec is None for d in decisions),
            "accepted": sum(any(n.accepted for n in d.noisy) for d in decisions)}

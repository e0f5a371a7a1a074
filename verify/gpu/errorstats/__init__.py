"""Error statistics of outputs that differ: what ``compare`` and the paper audit add to bits.

    python -m verify.gpu.errorstats DIR_A DIR_B      # {workload: [{output, max_abs, ...}]} as JSON
    python -m verify.gpu.errorstats --request FILE   # tensor records, comparisons, fingerprints

``output_errors`` reads two ``--save-outputs`` indexes (``outputs.json``, format 1) and, for
every output whose bytes differ, the max absolute and relative error, where it is, and the
largest distance in units in the last place. The paper audit's requests (``__main__``) read
the tensors of checkpoint files (``tensorfiles``: safetensors, .npy, .npz, torch.save) and
compare them tensor by tensor (``tensors``). It all needs torch, so audits run it as a worker
in the audited environment's own interpreter (``samebits_app.audit.runtime``); like
``verify.gpu.workloads`` it imports only the standard library, torch and samebits' stdlib-only
``_io``/``errors``/``_compat``, and runs on Python 3.8 or later (``verify.gpu.launch.IN_ENV``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from samebits._compat import dataclass
from samebits._io import read_json
from samebits.errors import InputError, quote


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputError:
    """How far apart two saved outputs are. ``max_ulp`` is the largest distance in units in
    the last place among elements whose two values have the same sign (zero counts as
    either); ``opposite_signs`` counts the elements whose values have opposite signs, for
    which a ULP count is no measure of closeness (+1e-6 and -1e-6 are ~1.7e9 floats apart)."""

    output: str
    max_abs: float
    max_ulp: int
    differing: int
    total: int
    max_rel: float = 0.0  # |a-b| / |a| at its worst (inf where a is 0 and b is not)
    index: tuple[int, ...] = ()  # where |a-b| is largest
    opposite_signs: int = 0

    def ulp_text(self) -> str:
        return ulp_text(self.max_ulp, self.differing, self.opposite_signs)


def ulp_text(max_ulp: int, differing: int, opposite_signs: int = 0) -> str:
    """``3 ULP``; ``3 ULP (2 elements of opposite sign)``; ``opposite signs`` when every
    differing element changed sign."""
    if opposite_signs and opposite_signs == differing:
        return "opposite signs"
    text = f"{max_ulp:,} ULP"
    if opposite_signs:
        many = "element" if opposite_signs == 1 else "elements"
        text += f" ({opposite_signs:,} {many} of opposite sign)"
    return text


def _read_index(root: Path) -> dict[str, Any]:
    path = Path(root) / "outputs.json"
    doc = read_json(path, what="saved-outputs index",
                    hint="run `samebits verify gpu --save-outputs DIR`")
    fmt = doc.get("format") if isinstance(doc, dict) else None
    if fmt != 1:
        raise InputError(f"{path}: format = {quote(fmt)}: this samebits reads format 1")
    return doc["workloads"]


def output_errors(dir_a: Path, dir_b: Path) -> dict[str, tuple[OutputError, ...]]:
    """Max absolute error and ULP distance of every saved output whose bytes differ."""
    import torch

    idx_a, idx_b = _read_index(dir_a), _read_index(dir_b)
    out: dict[str, tuple[OutputError, ...]] = {}
    for name in sorted(set(idx_a) & set(idx_b)):
        errs = []
        for output, ea in idx_a[name].items():
            eb = idx_b[name].get(output)
            if eb is None or ea["sha256"] == eb["sha256"] or ea["dtype"] != eb["dtype"] or (
                    ea["shape"] != eb["shape"]):
                continue
            dtype = getattr(torch, ea["dtype"])
            ta = _load(Path(dir_a) / ea["file"], dtype)
            tb = _load(Path(dir_b) / eb["file"], dtype)
            errs.append(error_stats(output, ta, tb))
        if errs:
            out[name] = tuple(errs)
    return out


def _load(path: Path, dtype: Any) -> Any:
    import torch

    try:
        data = bytearray(path.read_bytes())
    except OSError as exc:
        raise InputError(f"{path}: cannot read saved output: {exc.strerror}") from None
    return torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)


def error_stats(output: str, a: Any, b: Any) -> OutputError:
    """Max |a-b|, where it is, the max relative error and the largest distance in units in
    the last place, element by element (``tensors.diff``)."""
    from verify.gpu.errorstats.tensors import diff

    d = diff(a, b)
    return OutputError(output=output, max_abs=_float(d.get("max_abs", 0.0)),
                       max_ulp=int(d.get("max_ulp") or 0), differing=int(d["differing"]),
                       total=int(d["total"]), max_rel=_float(d.get("max_rel", 0.0)),
                       index=tuple(d.get("index") or ()),
                       opposite_signs=int(d.get("opposite_signs") or 0))


def _float(x: Any) -> float:
    return float(x) if not isinstance(x, str) else float(x.replace("nan", "inf"))

"""Max errors between two ``--save-outputs`` folders: what ``compare`` adds when bits differ.

    python -m verify.errorstats DIR_A DIR_B      # {workload: [{output, max_abs, ...}]} as JSON

``output_errors`` reads both indexes (``outputs.json``, format 1) and, for every output whose
bytes differ, the max absolute error and the largest distance in units in the last place.
It needs torch, so audits run it as a worker in the audited environment's own interpreter
(``samebits.app.audit.runtime``); like ``verify.workloads`` it imports only the standard
library, torch and samebits' stdlib-only ``_io``/``errors``.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from samebits._io import canonical_json, read_json
from samebits.errors import InputError, SamebitsError, quote


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


_INT_VIEW = {"float16": "int16", "bfloat16": "int16", "float32": "int32", "float64": "int64"}


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
    """Max |a-b| and the largest distance in units in the last place, element by element."""
    import torch

    name = str(a.dtype).removeprefix("torch.")
    if name in _INT_VIEW:
        ia, ib = (_ordered(t, getattr(torch, _INT_VIEW[name])) for t in (a, b))
        diff = torch.nan_to_num((a.double() - b.double()).abs(), nan=float("inf"))
        opposite = (ia > 0) & (ib < 0) | (ia < 0) & (ib > 0)
    else:  # integers and bools: the distance is the difference
        ia, ib = a.long(), b.long()
        diff = (ia - ib).abs().double()
        opposite = torch.zeros_like(ia, dtype=torch.bool)
    # same sign: |ia - ib| < 2**63 even for float64, so the subtraction cannot overflow
    ulp = torch.where(opposite, torch.zeros_like(ia), ia - ib).abs()
    return OutputError(output=output, max_abs=float(diff.max()) if diff.numel() else 0.0,
                       max_ulp=int(ulp.max()) if ulp.numel() else 0,
                       differing=int((ia != ib).sum()), total=int(a.numel()),
                       opposite_signs=int(opposite.sum()))


def _ordered(t: Any, int_dtype: Any) -> Any:
    """Float bits as integers that count ULPs: sign-magnitude mapped onto a number line."""
    import torch

    i = t.contiguous().view(int_dtype).long()
    bits = torch.iinfo(int_dtype).bits
    mag = i & ((1 << (bits - 1)) - 1)
    return torch.where(i < 0, -mag, mag)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m verify.errorstats DIR_A DIR_B\n")
        return 2
    try:
        errors = output_errors(Path(args[0]), Path(args[1]))
    except SamebitsError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    doc = {name: [asdict(e) for e in errs] for name, errs in errors.items()}
    sys.stdout.buffer.write(canonical_json(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

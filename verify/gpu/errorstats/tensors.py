"""Per-tensor records and comparisons: what a paper audit says about two checkpoints.

    record(t)          dtype, shape, sha256 of the raw bytes, and a fingerprint
    fingerprint(t)     element count, float64 sum, max |x| and 16 evenly spaced elements: a
                       few hundred bytes that let two runs bound their difference without
                       either file (the bound is a lower one: the samples may miss the worst)
    diff(a, b, ...)    element by element: how many differ, max |a-b| and where (the index),
                       max relative error |a-b|/|a|, the largest distance in units in the last
                       place, and whether every element is within ``atol + rtol * |a|``
                       (numpy's ``isclose`` with ``a`` the authors' value; NaN matches NaN)

``a`` is always the authors' side, ``b`` the reviewer's. Values go into JSON, so non-finite
numbers are written as the strings "nan", "inf" and "-inf" (``number``).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from samebits._compat import removeprefix

SAMPLES = 16
_INT_VIEW = {"float16": "int16", "bfloat16": "int16", "float32": "int32", "float64": "int64"}


def number(x: float | int | bool) -> float | int | bool | str:
    """A JSON-safe number: non-finite floats as "nan", "inf", "-inf"."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _name(t: Any) -> str:
    return removeprefix(str(t.dtype), "torch.")


def _comparable(t: Any) -> Any:
    """A real-valued view of ``t`` for arithmetic: complex as (re, im) pairs."""
    return __import__("torch").view_as_real(t) if t.is_complex() else t


def raw_bytes(t: Any) -> bytes:
    from verify.gpu.workloads import tensor_bytes

    return tensor_bytes(t)


def fingerprint(t: Any) -> dict[str, Any]:
    import torch

    flat = _comparable(t.detach().cpu()).reshape(-1)
    n = flat.numel()
    if n == 0:
        return {"n": 0, "sum": 0.0, "abs_max": 0.0, "samples": []}
    x = flat.double() if flat.dtype != torch.bool else flat.long().double()
    idx = sorted({(i * (n - 1)) // (SAMPLES - 1) for i in range(SAMPLES)}) if n > 1 else [0]
    return {"n": n, "sum": number(float(x.sum())),
            "abs_max": number(float(torch.nan_to_num(x.abs(), nan=math.inf,
                                                     posinf=math.inf).max())),
            "samples": [[i, number(float(x[i]))] for i in idx]}


def record(t: Any) -> dict[str, Any]:
    t = t.detach().cpu().contiguous()
    return {"dtype": _name(t), "shape": list(t.shape),
            "sha256": hashlib.sha256(raw_bytes(t)).hexdigest(), "fingerprint": fingerprint(t)}


def _ordered(t: Any, int_dtype: Any) -> Any:
    """Float bits as integers that count ULPs: sign-magnitude mapped onto a number line."""
    import torch

    i = t.contiguous().view(int_dtype).long()
    bits = torch.iinfo(int_dtype).bits
    mag = i & ((1 << (bits - 1)) - 1)
    return torch.where(i < 0, -mag, mag)


def _unravel(flat: int, shape: list[int]) -> list[int]:
    out = []
    for n in reversed(shape):
        flat, r = divmod(flat, n) if n else (flat, 0)
        out.append(r)
    return out[::-1]


def diff(a: Any, b: Any, *, rtol: float = 0.0, atol: float = 0.0) -> dict[str, Any]:
    """Element-wise comparison of two tensors of one dtype and shape (see the module doc)."""
    import torch

    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    out: dict[str, Any] = {"dtype": _name(a), "shape": list(a.shape), "total": a.numel()}
    if a.dtype != b.dtype or a.shape != b.shape:
        out.update(mismatch=f"{_name(a)} {list(a.shape)} vs {_name(b)} {list(b.shape)}",
                   same=False, within=False)
        return out
    same = raw_bytes(a) == raw_bytes(b)
    ca, cb = _comparable(a), _comparable(b)
    shape = list(ca.shape)
    name = _name(ca)
    if ca.is_floating_point():
        a64, b64 = ca.double(), cb.double()
        equal = (a64 == b64) | (torch.isnan(a64) & torch.isnan(b64))
        d = torch.where(equal, torch.zeros_like(a64), (a64 - b64).abs())
        # NaN against a number: infinitely far (and an infinity stays one)
        d = torch.nan_to_num(d, nan=math.inf, posinf=math.inf)
        view = _INT_VIEW.get(name)
        if view is not None:
            ia, ib = (_ordered(t, getattr(torch, view)) for t in (ca, cb))
            opposite = (ia > 0) & (ib < 0) | (ia < 0) & (ib > 0)
            # a ULP count across zero measures nothing (and overflows int64 for float64):
            # such elements are counted apart; the same sign cannot overflow the subtraction
            ulp = torch.where(equal | opposite, torch.zeros_like(ia), ia - ib).abs()
            differing = int((ia != ib).sum())
            out["opposite_signs"] = int(opposite.sum())
        else:  # float8: no ULP count here
            ulp, differing = None, int((~equal).sum())
    else:
        a64 = ca.long().double()
        d = (ca.long() - cb.long()).abs().double()
        ulp, differing = (ca.long() - cb.long()).abs(), int((ca != cb).sum())
    mag = a64.abs()
    rel = torch.where(d == 0, torch.zeros_like(d),
                      torch.where(mag == 0, torch.full_like(d, math.inf), d / mag))
    rel = torch.nan_to_num(rel, nan=math.inf, posinf=math.inf)
    beyond = d > atol + rtol * torch.nan_to_num(mag, nan=0.0)
    out.update(same=same, differing=differing, beyond=int(beyond.sum()),
               within=not bool(beyond.any()))
    if ca.numel() == 0 or float(d.max()) == 0.0:
        out.update(max_abs=0.0, max_rel=0.0, max_ulp=0, index=None)
        return out
    at = int(torch.argmax(d.reshape(-1)))
    index = _unravel(at, shape)
    out.update(max_abs=number(float(d.reshape(-1)[at])), max_rel=number(float(rel.max())),
               max_ulp=int(ulp.max()) if ulp is not None else None, index=index,
               authors=number(_item(ca.reshape(-1)[at])),
               reviewer=number(_item(cb.reshape(-1)[at])))
    return out


def _item(x: Any) -> float | int | bool:
    v = x.item()
    return float(v) if isinstance(v, float) else v


def compare_files(a: dict[str, Any], b: dict[str, Any], *, rtol: float,
                  atol: float) -> dict[str, Any]:
    """Two files' tensors by name: a row per tensor both hold, and the names one lacks."""
    rows = [{"name": name, **diff(a[name], b[name], rtol=rtol, atol=atol)}
            for name in a if name in b]
    return {"tensors": rows, "only_authors": [n for n in a if n not in b],
            "only_reviewer": [n for n in b if n not in a]}

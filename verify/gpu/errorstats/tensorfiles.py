"""Tensors out of the files papers write, with the standard library and torch alone.

    read_tensors(path) -> {name: tensor}     by the file's suffix:

    .safetensors   the format's own layout: an 8-byte little-endian header length, a JSON
                   header (dtype, shape, data_offsets per tensor), the raw bytes
    .npy           NumPy's format 1.0-3.0: magic, a Python-literal header (descr,
                   fortran_order, shape), the raw bytes (C or Fortran order, either byte order)
    .npz           a zip of ``.npy`` members (stored or deflated), named without ``.npy``
    .pt .pth .ckpt torch.load(weights_only=True) (before torch 1.13, which lacks it, the same
                   rule by ``weights_only_pickle``): nested dicts, lists and tuples of tensors
                   flattened into dotted names ("model.layer1.weight", "optim.state.0.exp_avg");
                   numbers become 0-d tensors (int64, float64, bool); other leaves (strings,
                   None) are skipped

Nothing here needs numpy or the safetensors package: this runs inside the audited environment
(``python -m verify.gpu.errorstats``), which is only promised torch. Every failure is an
``InputError`` naming the file and what is wrong with it.
"""

from __future__ import annotations

import ast
import json
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samebits._compat import removeprefix, removesuffix
from samebits.errors import InputError

SUFFIXES = (".safetensors", ".npy", ".npz", ".pt", ".pth", ".ckpt")

# safetensors dtype names -> torch dtype names (those this torch has are used)
_SAFETENSORS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
                "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "C64": "complex64"}
# numpy descr (without the byte-order character) -> torch dtype name
_NUMPY = {"f8": "float64", "f4": "float32", "f2": "float16", "i8": "int64", "i4": "int32",
          "i2": "int16", "i1": "int8", "u1": "uint8", "u2": "uint16", "u4": "uint32",
          "u8": "uint64", "b1": "bool", "c8": "complex64", "c16": "complex128"}
_NPY_MAGIC = b"\x93NUMPY"


def read_tensors(path: Path) -> dict[str, Any]:
    """Every tensor in ``path``, by name, in the file's order."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"{path}: cannot read tensors from a '{suffix or path.name}' file "
                         f"(known: {', '.join(SUFFIXES)})",
                         hint='compare it by bytes instead: kind = "file"')
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    if suffix == ".safetensors":
        return read_safetensors(data, where=str(path))
    if suffix == ".npy":
        return {"": read_npy(data, where=str(path))}
    if suffix == ".npz":
        return read_npz(path)
    return read_torch(path)


def _dtype(name: str, where: str) -> Any:
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise InputError(f"{where}: dtype {name} is not one this torch ({torch.__version__}) "
                         "has")
    return dtype


def _frombuffer(raw: bytes | bytearray, dtype: Any, shape: list[int], where: str) -> Any:
    import torch

    count = 1
    for n in shape:
        count *= n
    size = torch.empty((), dtype=dtype).element_size()
    if len(raw) != count * size:
        raise InputError(f"{where}: {len(raw)} bytes of data for shape {list(shape)} of "
                         f"{removeprefix(str(dtype), 'torch.')} ({count * size} expected)")
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def read_safetensors(data: bytes, *, where: str) -> dict[str, Any]:
    if len(data) < 8:
        raise InputError(f"{where}: not a safetensors file (shorter than its 8-byte header "
                         "length)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise InputError(f"{where}: not a safetensors file (header length {n} is past the "
                         f"end of the file's {len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{where}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise InputError(f"{where}: not a safetensors file (its header is not an object)")
    body = data[8 + n:]
    out: dict[str, Any] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            kind, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: tensor {name!r}: expected dtype, shape and "
                             "data_offsets") from None
        if kind not in _SAFETENSORS:
            raise InputError(f"{where}: tensor {name!r}: unknown dtype {kind!r}")
        if not 0 <= start <= end <= len(body):
            raise InputError(f"{where}: tensor {name!r}: data_offsets [{start}, {end}] outside "
                             f"the {len(body)} data bytes")
        out[name] = _frombuffer(body[start:end], _dtype(_SAFETENSORS[kind], where), shape,
                                f"{where}: tensor {name!r}")
    return dict(sorted(out.items(), key=lambda kv: header[kv[0]]["data_offsets"][0]))


def read_npy(data: bytes, *, where: str) -> Any:
    if not data.startswith(_NPY_MAGIC) or len(data) < 10:
        raise InputError(f"{where}: not a .npy file (no \\x93NUMPY magic)")
    major = data[6]
    if major == 1:
        (n,), start = struct.unpack("<H", data[8:10]), 10
    elif major in (2, 3):
        (n,), start = struct.unpack("<I", data[8:12]), 12
    else:
        raise InputError(f"{where}: .npy format version {major}.{data[7]}: this reads 1.0-3.0")
    try:
        header = ast.literal_eval(data[start:start + n].decode("latin1" if major < 3 else "utf8"))
        descr, fortran, shape = header["descr"], header["fortran_order"], list(header["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise InputError(f"{where}: .npy header is not a dict with descr, fortran_order and "
                         "shape") from None
    if not isinstance(descr, str) or descr[1:] not in _NUMPY or descr[0] not in "<>|=":
        raise InputError(f"{where}: .npy dtype {descr!r}: only plain numbers and booleans "
                         "are compared (no objects, strings or records)")
    dtype = _dtype(_NUMPY[descr[1:]], where)
    raw = data[start + n:]
    if descr[0] == ">" and int(descr[2:]) > 1:  # big-endian: swap each element's bytes
        size = int(descr[2:])
        raw = b"".join(raw[i:i + size][::-1] for i in range(0, len(raw), size))
    if fortran and len(shape) > 1:
        t = _frombuffer(raw, dtype, shape[::-1], where)
        return t.permute(*reversed(range(len(shape)))).contiguous()
    return _frombuffer(raw, dtype, shape, where)


def read_npz(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                name = removesuffix(info.filename, ".npy")
                out[name] = read_npy(zf.read(info), where=f"{path}: {info.filename}")
    except zipfile.BadZipFile:
        raise InputError(f"{path}: not a .npz file (not a zip archive)") from None
    return out


def read_torch(path: Path) -> dict[str, Any]:
    import inspect
    import pickle

    import torch

    # torch 1.13 brought weights_only; before it, the same rule by a pickle module of ours
    # (a paper of torch 1.12, Tune-A-Video's, writes .pt files too)
    own = "weights_only" in inspect.signature(torch.load).parameters
    how = "torch.load(weights_only=True)" if own else "torch.load(tensors and containers only)"
    try:
        obj = (torch.load(path, map_location="cpu", weights_only=True) if own else
               torch.load(path, map_location="cpu", pickle_module=weights_only_pickle()))
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: {how} failed: {first[:200]}") from None
    out: dict[str, Any] = {}
    _flatten(obj, "", out)
    return out


# What a checkpoint of tensors may name (the globals torch 1.13's weights_only unpickler
# allows for the same files): containers, tensors and parameters as torch rebuilds them, and
# torch's dtypes, devices and sizes. Storage classes torch resolves itself before asking.
_SAFE_GLOBALS = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
                 ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
                 ("torch._utils", "_rebuild_parameter_with_state"), ("torch", "Size"),
                 ("torch", "device")}


def weights_only_pickle() -> Any:
    """A pickle module for ``torch.load(pickle_module=...)`` that unpickles what
    ``_SAFE_GLOBALS`` names and torch's dtypes, and refuses any other global by name: a
    paper's ``.pt`` file is untrusted and must not run code when it is read."""
    import pickle
    import types

    import torch

    class Unpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            if (module, name) in _SAFE_GLOBALS or (
                    module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"refused to load the global {module}.{name} (only "
                                         "tensors and containers are read)")

    def load(file: Any, **kwargs: Any) -> Any:
        return Unpickler(file, **kwargs).load()

    mod = types.ModuleType("samebits_weights_only")
    mod.Unpickler = Unpickler  # type: ignore[attr-defined]
    mod.load = load  # type: ignore[attr-defined]
    mod.UnpicklingError = pickle.UnpicklingError  # type: ignore[attr-defined]
    mod.__version__ = pickle.format_version  # type: ignore[attr-defined]
    return mod


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out[prefix] = obj.detach().cpu()
    elif isinstance(obj, bool):
        out[prefix] = torch.tensor(obj, dtype=torch.bool)
    elif isinstance(obj, int):
        out[prefix] = torch.tensor(obj, dtype=torch.int64)
    elif isinstance(obj, float):  # a Python float is a double: keep every bit
        out[prefix] = torch.tensor(obj, dtype=torch.float64)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}.{i}" if prefix else str(i), out)

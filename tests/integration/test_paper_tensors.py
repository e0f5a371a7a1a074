"""verify.gpu.errorstats: the tensors of files real tools write (torch.save, numpy, safetensors),
read without numpy or safetensors, and compared tensor by tensor through the worker's CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from samebits.errors import InputError
from samebits_app.paper.judge import judge_output
from verify.gpu.errorstats.tensorfiles import read_tensors
from verify.gpu.errorstats.tensors import diff, fingerprint, record

ROOT = Path(__file__).resolve().parents[2]


def state_dict() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"conv.weight": torch.randn(4, 1, 3, 3, generator=g),
            "conv.bias": torch.randn(4, generator=g),
            "head.weight": torch.randn(3, 16, generator=g, dtype=torch.float64),
            "head.bias": torch.randn(3, generator=g).to(torch.bfloat16),
            "steps": torch.arange(5, dtype=torch.int64)}


def test_torch_save_nested(tmp_path: Path) -> None:
    """torch.save of a nested checkpoint: dotted names, numbers as 0-d tensors, text skipped."""
    sd = state_dict()
    path = tmp_path / "ckpt.pt"
    torch.save({"model": sd, "optim": {"state": {0: {"step": 3.5}}, "groups": [{"lr": 0.1}]},
                "note": "text"}, path)
    got = read_tensors(path)
    assert list(got) == [*(f"model.{k}" for k in sd), "optim.state.0.step", "optim.groups.0.lr"]
    assert all(torch.equal(got[f"model.{k}"], v) for k, v in sd.items())
    assert got["optim.groups.0.lr"].dtype == torch.float64


def test_safetensors(tmp_path: Path) -> None:
    """A file safetensors itself wrote: every tensor, dtype and bit."""
    sd = state_dict()
    save_file(sd, str(tmp_path / "m.safetensors"), metadata={"format": "pt"})
    got = read_tensors(tmp_path / "m.safetensors")
    assert sorted(got) == sorted(sd)
    assert all(got[k].dtype == v.dtype and torch.equal(got[k], v) for k, v in sd.items())


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.asfortranarray(np.arange(24, dtype=np.float64).reshape(2, 3, 4)),
    np.arange(6, dtype=">i4").reshape(2, 3),
    np.array([True, False, True]),
    np.float16(1.5) * np.ones((2, 2), dtype=np.float16),
    np.zeros((0, 3), dtype=np.float32),
])
def test_npy(tmp_path: Path, array: np.ndarray) -> None:
    """numpy's .npy, C or Fortran order, either byte order, as numpy reads it back."""
    np.save(tmp_path / "a.npy", array)
    (name, t), = read_tensors(tmp_path / "a.npy").items()
    assert name == ""
    assert t.tolist() == np.load(tmp_path / "a.npy").tolist()
    assert list(t.shape) == list(array.shape)


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz(tmp_path: Path, save) -> None:
    """.npz, stored or deflated: one tensor per member, named without .npy."""
    save(tmp_path / "a.npz", logits=np.ones((2, 3), dtype=np.float32), labels=np.arange(2))
    got = read_tensors(tmp_path / "a.npz")
    assert sorted(got) == ["labels", "logits"]
    assert got["labels"].tolist() == [0, 1]


@pytest.mark.parametrize(("name", "data", "message"), [
    ("x.json", b"{}", "cannot read tensors from a '.json' file (known: .safetensors, .npy, .npz, "
     ".pt, .pth, .ckpt)"),
    ("x.npy", b"NUMPY", "not a .npy file (no \\x93NUMPY magic)"),
    ("x.safetensors", b"\xff" * 16, "not a safetensors file (header length 18446744073709551615 "
     "is past the end of the file's 16 bytes)"),
    ("x.npz", b"PK no zip", "not a .npz file (not a zip archive)"),
    ("x.pt", b"not a pickle", "torch.load(weights_only=True) failed: "),
])
def test_unreadable_tensor_files(tmp_path: Path, name: str, data: bytes, message: str) -> None:
    """A file that is not what its suffix says: an InputError naming the file and why."""
    (tmp_path / name).write_bytes(data)
    with pytest.raises(InputError) as info:
        read_tensors(tmp_path / name)
    assert info.value.message.startswith(f"{tmp_path / name}: {message}")


def test_object_npy_is_refused(tmp_path: Path) -> None:
    """A .npy of Python objects (a pickle inside) is not read: only numbers are compared."""
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"\.npy dtype '\|O': only plain numbers"):
        read_tensors(tmp_path / "o.npy")


def test_diff_names_the_index() -> None:
    """One changed element: counted, its index, both values, max rel error and ULPs."""
    a = torch.zeros(3, 4, 5)
    b = a.clone()
    b[1, 2, 3] = 1e-3
    d = diff(a, b, atol=1e-4)
    assert {k: d[k] for k in ("same", "differing", "beyond", "within", "index", "authors",
                              "reviewer", "max_rel")} == {
        "same": False, "differing": 1, "beyond": 1, "within": False, "index": [1, 2, 3],
        "authors": 0.0, "reviewer": pytest.approx(1e-3), "max_rel": "inf"}
    assert diff(a, b, atol=1e-2)["within"] is True
    assert diff(a, a.double())["mismatch"] == "float32 [3, 4, 5] vs float64 [3, 4, 5]"


def test_record_is_byte_stable() -> None:
    """A tensor's record: its dtype, shape, sha256 and fingerprint, equal for equal bits."""
    t = torch.linspace(-1, 1, 100)
    assert record(t) == record(t.clone())
    assert record(t)["fingerprint"] == fingerprint(t)
    assert len(record(t)["fingerprint"]["samples"]) == 16


def test_state_dict_with_one_changed_element(tmp_path: Path) -> None:
    """The worker, as audits run it (python -m verify.gpu.errorstats --request), compares two
    state dicts and names the one tensor that changed and the index of the changed element;
    the judge's summary says both."""
    sd = state_dict()
    torch.save(sd, tmp_path / "authors.pt")
    sd["head.weight"][2, 7] += 0.25
    torch.save(sd, tmp_path / "reviewer.pt")
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"compare": [{"a": str(tmp_path / "authors.pt"),
                                                "b": str(tmp_path / "reviewer.pt"),
                                                "rtol": 0.0, "atol": 1e-6}],
                                   "records": [str(tmp_path / "authors.pt")]}))
    proc = subprocess.run([sys.executable, "-m", "verify.gpu.errorstats", "--request",
                           str(request)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    rows = {r["name"]: r for r in answer["compare"][0]["tensors"]}
    assert [n for n, r in rows.items() if not r["same"]] == ["head.weight"]
    assert (rows["head.weight"]["index"], rows["head.weight"]["differing"]) == ([2, 7], 1)
    assert set(answer["records"][str(tmp_path / "authors.pt")]["tensors"]) == set(sd)
    out = {"output": "model.pt", "kind": "tensors", "rtol": 0.0, "atol": 1e-6}
    v = judge_output({**out, "sha256": "a"}, {**out, "sha256": "b"}, answer["compare"][0])
    assert v.level == "beyond-tolerance"
    assert "largest |Δ| in head.weight at index [2, 7]" in v.summary
    assert v.summary.endswith("beyond rtol 0, atol 1e-06: head.weight (1 of 48 beyond)")


class _Evil:
    """Unpickles as a call of os.system: what a hostile .pt file does to torch.load."""

    def __reduce__(self):  # type: ignore[no-untyped-def]
        import os

        return (os.system, ("echo pwned",))


@pytest.mark.parametrize("zipped", [True, False], ids=["zip format", "legacy format"])
def test_the_weights_only_rule_without_weights_only(tmp_path: Path, zipped: bool) -> None:
    """torch before 1.13 has no weights_only (Tune-A-Video's torch 1.12.1: attest stopped with
    a TypeError); the same rule by a pickle module of ours: a state dict, its OrderedDict,
    parameters and dtypes load, in either of torch.save's formats; any other global is
    refused by name and nothing runs."""
    import collections
    import pickle

    from verify.gpu.errorstats.tensorfiles import weights_only_pickle

    state = collections.OrderedDict(w=torch.nn.Parameter(torch.arange(6.0).reshape(2, 3)),
                                    b=torch.ones(2, dtype=torch.float16), n=3, d=torch.float64)
    good = tmp_path / "good.pt"
    torch.save(state, good, _use_new_zipfile_serialization=zipped)
    got = torch.load(good, map_location="cpu", weights_only=False,
                     pickle_module=weights_only_pickle())
    assert torch.equal(got["w"], state["w"]) and got["b"].dtype == torch.float16
    assert (got["n"], got["d"]) == (3, torch.float64)
    evil = tmp_path / "evil.pt"
    torch.save({"x": torch.ones(1), "boom": _Evil()}, evil,
               _use_new_zipfile_serialization=zipped)
    with pytest.raises(pickle.UnpicklingError, match="refused to load the global "
                       r"(posix|os)\.system"):
        torch.load(evil, map_location="cpu", weights_only=False,
                   pickle_module=weights_only_pickle())

"""Facts and workloads on torch 1.13 to 2.13: an API the torch at hand lacks is a recorded
"unavailable (torch X has no Y)", never a failed probe; comparisons treat unavailable on both
sides as neither a difference nor bits compared.

The fast tests stand in for older torch with objects shaped as PyPI's 1.13.1 and 2.0.1 wheels
behave (read off them: ``torch.backends`` without ``cpu``, ``torch.backends.cuda.matmul``
raising AssertionError for an attribute it lacks, ``sdp_kernel`` that binds no CPU kernel);
the ``network`` test installs torch 2.0.1 from PyPI and attests and audits it for real.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from tests.fixtures.samples import BASE, att, ok
from verify.gpu.compare import compare
from verify.gpu.facts.torchapi import find, is_unavailable, unavailable
from verify.gpu.facts.torchinfo import cpu_capability
from verify.gpu.workloads import _run_one
from verify.gpu.workloads._common import Context, Unavailable, seed_for


class _Matmul:
    """torch 1.13's torch.backends.cuda.matmul: an unknown attribute is an AssertionError."""

    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True

    def __getattr__(self, name: str):
        raise AssertionError("Unknown attribute " + name)


def old_torch(version: str = "1.13.1+cu117", *, config: str = "  - CPU capability usage: AVX2",
              sdp_flags: tuple[str, ...] | None = None) -> types.SimpleNamespace:
    """A module-like object with what the probe asks of an older torch, and nothing newer."""
    cuda = types.SimpleNamespace(matmul=_Matmul())
    if sdp_flags is not None:
        def sdp_kernel(**flags: bool) -> contextlib.AbstractContextManager[None]:
            cuda.switched.append(flags)
            return contextlib.nullcontext()
        sdp_kernel.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(f, inspect.Parameter.KEYWORD_ONLY) for f in sdp_flags])
        cuda.sdp_kernel, cuda.switched = sdp_kernel, []
    return types.SimpleNamespace(
        __version__=version, __config__=types.SimpleNamespace(show=lambda: config),
        version=types.SimpleNamespace(cuda=None),
        backends=types.SimpleNamespace(
            cuda=cuda, cudnn=types.SimpleNamespace(deterministic=True, benchmark=False,
                                                   allow_tf32=False),
            mkldnn=types.SimpleNamespace(enabled=True)),
        are_deterministic_algorithms_enabled=lambda: True,
        is_deterministic_algorithms_warn_only_enabled=lambda: False,
        get_float32_matmul_precision=lambda: "highest")


@pytest.mark.parametrize(("config", "expected"), [
    ("  - CPU capability usage: AVX2\n  - CUDA Runtime 11.7", "AVX2"),
    ("  - CPU capability usage: NO AVX", "DEFAULT"),  # torch 2.0's words for DEFAULT
    ("  - CPU capability usage: AVX512", "AVX512"),
    ("PyTorch built with:\n  - GCC 9.3", "unavailable (torch 1.13.1+cu117 has no "
                                          "torch.backends.cpu.get_cpu_capability)"),
])
def test_cpu_capability_before_torch_2_1(config: str, expected: str) -> None:
    """Without get_cpu_capability (2.1) the ISA comes from the line ATen writes into
    torch.__config__.show(), in get_cpu_capability's words."""
    assert cpu_capability(old_torch(config=config)) == expected


def test_cpu_capability_of_this_torch() -> None:
    """On a torch that has get_cpu_capability, its answer, the same as the config's line."""
    assert cpu_capability(torch) == torch.backends.cpu.get_cpu_capability()


@pytest.mark.parametrize(("name", "found"), [
    ("torch.backends.cuda.matmul.allow_tf32", False),
    ("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", None),  # 2.0
    ("torch.backends.cuda.preferred_blas_library", None),  # 2.3
    ("torch.backends.cpu.get_cpu_capability", None),  # 2.1
    ("torch.nn.attention.sdpa_kernel", None),  # 2.3
])
def test_find_on_an_older_torch(name: str, found: object) -> None:
    """find answers None for what an older torch lacks, AssertionError-raising modules too."""
    assert find(old_torch(), name) is found


def test_readback_on_torch_1_13() -> None:
    """The attested settings of a torch without preferred_blas_library (2.3) and the bf16
    reduction flag (2.0): those two recorded as unavailable, the rest read back."""
    from verify.gpu.workloads.settings import readback

    got = readback(old_torch())
    assert got["blas_library"] == ("unavailable (torch 1.13.1+cu117 has no "
                                   "torch.backends.cuda.preferred_blas_library)")
    assert is_unavailable(got["cuda_matmul_allow_bf16_reduced_precision_reduction"])
    assert (got["deterministic_algorithms"], got["float32_matmul_precision"],
            got["cuda_matmul_allow_fp16_reduced_precision_reduction"]) == (True, "highest", True)
    assert got["cublas_workspace_source"] == "no CUDA in use"


def torch_1_11() -> types.SimpleNamespace:
    """torch 1.11 as the settings see it: no float32 matmul precision (1.12), TF32 matmul on
    by default, deterministic algorithms (1.8) off."""
    state = {"det": False}
    got = old_torch("1.11.0+cu113")
    del got.get_float32_matmul_precision
    got.backends.cuda.matmul = types.SimpleNamespace(allow_tf32=True)
    got.use_deterministic_algorithms = lambda on: state.update(det=on)
    got.are_deterministic_algorithms_enabled = lambda: state["det"]
    return got


@pytest.mark.parametrize(("precision", "tf32"), [("highest", False), ("high", True)])
def test_settings_on_torch_before_1_12(precision: str, tf32: bool) -> None:
    """Without set_float32_matmul_precision the workloads set its one switch as it would
    (TF32 matmul off for "highest") and record the precision as unavailable, not crash."""
    from dataclasses import replace

    from verify.gpu.workloads.settings import DETERMINISTIC, apply, readback

    old = torch_1_11()
    apply(replace(DETERMINISTIC, float32_matmul_precision=precision), environ={}, torch=old)
    got = readback(old)
    assert (got["deterministic_algorithms"], got["cuda_matmul_allow_tf32"]) == (True, tf32)
    assert got["float32_matmul_precision"] == ("unavailable (torch 1.11.0+cu113 has no "
                                               "torch.get_float32_matmul_precision)")


OLD_TORCH_PACKAGE = {
    "__init__.py": "__version__ = '1.11.0+cu113'\n_det = [False]\n"
                   "def use_deterministic_algorithms(on):\n    _det[0] = on\n"
                   "def are_deterministic_algorithms_enabled():\n    return _det[0]\n"
                   "import torch.backends\n",
    "backends/__init__.py": "",
    "backends/cudnn.py": "deterministic = False\nbenchmark = True\nallow_tf32 = True\n",
    "backends/cuda.py": "class _Matmul:\n    allow_tf32 = True\n"
                        "    def __getattr__(self, name):\n"
                        "        raise AssertionError('Unknown attribute ' + name)\n"
                        "matmul = _Matmul()\n",
}


def test_paper_hook_on_torch_before_1_12(tmp_path: Path) -> None:
    """A paper command importing a torch 1.11 (shaped as its wheel: no matmul precision, a
    matmul object raising AssertionError for what it lacks) runs: the hook turns TF32 matmul
    off as "highest" would and records the precision as unavailable."""
    from samebits_app.paper import hook
    from verify.gpu.workloads.settings import DETERMINISTIC

    for rel, text in OLD_TORCH_PACKAGE.items():
        (tmp_path / "site" / "torch" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "site" / "torch" / rel).write_text(text)
    (tmp_path / "hook").mkdir()
    readback = tmp_path / hook.READBACK
    (tmp_path / "hook" / "sitecustomize.py").write_text(
        hook.source(DETERMINISTIC.to_dict(), str(readback)))
    env = {"PATH": os.environ.get("PATH", ""),
           "PYTHONPATH": f"{tmp_path / 'hook'}:{tmp_path / 'site'}"}
    proc = subprocess.run([sys.executable, "-c", "import torch; "
                           "print(torch.backends.cuda.matmul.allow_tf32)"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", "False\n")
    assert json.loads(readback.read_text()) == {
        "cublas_workspace_config": None, "cuda_matmul_allow_tf32": False,
        "cudnn_allow_tf32": False, "cudnn_benchmark": False, "cudnn_deterministic": True,
        "deterministic_algorithms": True,
        "float32_matmul_precision": "unavailable (torch 1.11.0+cu113 has no "
                                    "torch.get_float32_matmul_precision)"}


FLAGS_2_0 = ("enable_flash", "enable_math", "enable_mem_efficient")


@pytest.mark.parametrize(("flags", "backend", "on", "detail"), [
    (FLAGS_2_0, "FLASH_ATTENTION", "enable_flash", None),
    (FLAGS_2_0, "EFFICIENT_ATTENTION", "enable_mem_efficient", None),
    (FLAGS_2_0, "CUDNN_ATTENTION", None,
     "CUDNN_ATTENTION: torch 2.0.1+cu117 has no torch.nn.attention and its "
     "torch.backends.cuda.sdp_kernel has no enable_cudnn"),
    ((*FLAGS_2_0, "enable_cudnn"), "CUDNN_ATTENTION", "enable_cudnn", None),
    (None, "MATH", None, "MATH: torch 2.0.1+cu117 has no torch.nn.attention"),
])
def test_backend_switch_before_torch_2_3(flags: tuple[str, ...] | None, backend: str,
                                         on: str | None, detail: str | None) -> None:
    """Without torch.nn.attention (2.3) the backend is chosen with sdp_kernel's flags, only
    the named one on; a backend it has no flag for is unavailable, saying so."""
    from verify.gpu.workloads.attention import only_backend

    fake = old_torch("2.0.1+cu117", sdp_flags=flags)
    if detail is not None:
        with pytest.raises(Unavailable) as err:
            only_backend(fake, backend)
        assert str(err.value) == detail
        return
    _, legacy = only_backend(fake, backend)
    assert legacy is True
    assert fake.backends.cuda.switched == [{f: f == on for f in flags or ()}]


def test_this_torch_uses_torch_nn_attention() -> None:
    """torch 2.3 and later: sdpa_kernel, and no second opinion asked."""
    from verify.gpu.workloads.attention import only_backend

    context, legacy = only_backend(torch, "MATH")
    assert legacy is False
    with context:
        pass


def test_older_switch_naming_another_kernel_is_unavailable() -> None:
    """torch 2.0's sdp_kernel does not bind the CPU: when torch would run another kernel than
    the one named, the workload is unavailable (what torch 2.0.1 records), not math's bits
    under flash's name. Real torch, told to run math, asked about flash."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from verify.gpu.workloads.attention import _check_choice

    q = k = v = torch.randn(1, 1, 8, 8)
    with sdpa_kernel(SDPBackend.MATH), pytest.raises(Unavailable) as err:
        _check_choice("FLASH_ATTENTION", q, k, v, device="cpu")
    assert str(err.value) == (f"FLASH_ATTENTION: torch {torch.__version__} runs its MATH kernel "
                              "on cpu when torch.backends.cuda.sdp_kernel asks for "
                              "FLASH_ATTENTION alone")
    with sdpa_kernel(SDPBackend.MATH):
        _check_choice("MATH", q, k, v, device="cpu")  # the one named: no objection


def _ctx(name: str) -> Context:
    return Context(device=torch.device("cpu"), seed=seed_for(name))


def test_sdpa_on_torch_1_13(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 1.13 has no scaled_dot_product_attention: every backend records why."""
    from verify.gpu.workloads import attention

    monkeypatch.setattr(attention, "F", types.SimpleNamespace())  # 1.13's functional: no SDPA
    result, _ = _run_one("sdpa_math", attention.sdpa_math, _ctx("sdpa_math"))
    assert (result.status, result.detail) == (
        "unavailable", f"MATH: torch {torch.__version__} has no "
        "torch.nn.functional.scaled_dot_product_attention")


def _raises(message: str, kind: type[Exception] = RuntimeError):
    def fn(ctx: Context) -> dict:
        raise kind(message)
    return fn


@pytest.mark.parametrize(("exc", "status"), [
    (_raises("\"addmm_impl_cpu_\" not implemented for 'Half'"), "unavailable"),  # torch 2.0
    (_raises("\"slow_conv2d_cpu\" not implemented for 'Half'"), "unavailable"),
    (_raises("Could not run 'aten::_foo' with arguments from the 'CPU' backend. This could be "
             "because the operator doesn't exist for this backend", NotImplementedError),
     "unavailable"),
    (_raises("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"), "error"),
    (_raises("not implemented for 'Half'", ValueError), "error"),
])
def test_no_kernel_for_a_dtype_is_unavailable(exc, status: str) -> None:
    """ATen's "no kernel for this dtype here" is unavailable (torch 2.0 has no fp16 GEMM on a
    CPU); any other failure stays an error."""
    result, _ = _run_one("gemm_fp16", exc, _ctx("gemm_fp16"))
    assert result.status == status


NOT_ON_CPU = {"status": "unavailable", "detail": "CUDNN_ATTENTION has no CPU kernel"}


@pytest.mark.parametrize(("a", "b", "identical", "not_run", "different"), [
    pytest.param({"sdpa_cudnn": NOT_ON_CPU}, {"sdpa_cudnn": NOT_ON_CPU}, 4, ("sdpa_cudnn",), (),
                 id="unavailable-on-both"),
    pytest.param({"sdpa_cudnn": NOT_ON_CPU},
                 {"sdpa_cudnn": {**NOT_ON_CPU, "detail": "torch 1.13.1 has no SDPA"}},
                 4, ("sdpa_cudnn",), (), id="unavailable-for-other-reasons"),
    pytest.param({"sdpa_cudnn": ok("9")}, {"sdpa_cudnn": NOT_ON_CPU}, 4, (), ("sdpa_cudnn",),
                 id="ok-against-unavailable"),
    pytest.param({n: NOT_ON_CPU for n in BASE}, {n: NOT_ON_CPU for n in BASE}, 0,
                 tuple(BASE), (), id="nothing-with-bits"),
])
def test_unavailable_on_both_sides(a: dict, b: dict, identical: int, not_run: tuple,
                                   different: tuple) -> None:
    """Unavailable on both sides is not a difference, and not counted as identical."""
    report = compare(att(changed=a), att(changed=b, source="b.json"))
    assert len(report.identical) == identical
    assert set(report.not_run) == set(not_run)
    assert tuple(d.name for d in report.different) == different
    assert report.compared == identical + len(different)


def test_unavailable_facts_agree() -> None:
    """Two torches that both lack an API agree on it: no class difference from the versions
    quoted in "unavailable (torch X has no Y)"; against a value, it is a difference."""
    from tests.fixtures.samples import DET

    def blas(value: str):  # a CUDA setting: a class fact of runs that used CUDA
        return att(gpu=True, settings={**DET, "blas_library": value})

    old, older = (blas(unavailable(types.SimpleNamespace(__version__=v),
                                   "torch.backends.cuda.preferred_blas_library"))
                  for v in ("2.2.2", "2.0.1"))
    assert compare(old, older).class_differences == ()
    (diff,) = compare(old, blas("Cublas")).class_differences
    assert diff.key == "settings.blas_library" and is_unavailable(diff.a)


@pytest.mark.parametrize(("a", "b", "level", "note"), [
    pytest.param({"sdpa_cudnn": NOT_ON_CPU}, {"sdpa_cudnn": NOT_ON_CPU}, "bit-identical",
                 "1 workload gave no bits on either side", id="some-not-run"),
    pytest.param({n: NOT_ON_CPU for n in BASE}, {n: NOT_ON_CPU for n in BASE},
                 "environment-identical", "no workload gave bits on both sides",
                 id="none-with-bits"),
])
def test_audit_level_counts_only_bits_compared(a: dict, b: dict, level: str, note: str) -> None:
    """The audit's runtime level: bit-identical needs bits compared; unavailable on both
    sides is named in a note, and alone it is no evidence (environment-identical)."""
    from samebits_app.audit.verdict import judge_runtime

    got, reasons, notes = judge_runtime(compare(att(changed=a), att(changed=b, source="b")))
    assert (got, reasons) == (level, ())
    assert any(note in n for n in notes)


def test_compare_says_when_nothing_was_compared() -> None:
    """verify compare: no bits on either side is no verdict of sameness."""
    from verify.gpu.cmd_compare import NOTHING_COMPARED, format_report

    report = compare(att(changed={n: NOT_ON_CPU for n in BASE}),
                     att(changed={n: NOT_ON_CPU for n in BASE}, source="b.json"))
    text = format_report(report)
    assert "0 workloads compared: 0 identical, 0 different" in text
    assert text.splitlines()[-1] == NOTHING_COMPARED


@pytest.mark.parametrize("line", ["2.7", "3.6", "3.7"])
def test_an_older_python_is_refused_in_one_line(line: str) -> None:
    """The worker on a Python older than 3.8: one line saying it needs 3.8, not a TypeError
    from a dataclass or a SyntaxError from an f-string."""
    from tests.fixtures.pythons import pyenv_python, skip_reason
    from verify.gpu.launch import run_module

    python = pyenv_python(line)
    if python is None:
        pytest.skip(skip_reason(line))
    proc = run_module(str(python), ["-m", "verify.gpu.workloads", "--only", ""], timeout=60)
    version = subprocess.run([str(python), "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == (f"error: Python {version} ({python}): samebits' workers (python -m "
                           "verify.gpu.workloads, verify.gpu.errorstats, verify.node.canaryrun) "
                           "need Python 3.8 or later in the environment they run in\n")


@pytest.mark.parametrize("line", ["3.8", "3.9"])
def test_python_3_8_and_3_9_pass_the_guard(line: str) -> None:
    """The worker on Python 3.8 and 3.9 (a torch 1.13 environment may have either) runs: in
    an interpreter without torch it gets as far as importing torch, and says that."""
    from tests.fixtures.pythons import pyenv_python, skip_reason
    from verify.gpu.launch import run_module
    from verify.gpu.workloads.settings import DETERMINISTIC

    python = pyenv_python(line)
    if python is None:
        pytest.skip(skip_reason(line))
    proc = run_module(str(python), ["-m", "verify.gpu.workloads", "--facts", "--only", "",
                                    "--settings", json.dumps(DETERMINISTIC.to_dict())],
                      timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("ModuleNotFoundError: No module named "
                                                    "'torch'")
    assert "need Python" not in proc.stderr


# ------------------------------------------------------------- real torch 2.0.1 from PyPI

OLD = "2.0.1"  # a CUDA build (torch + nvidia-*-cu11, ~2.5 GB); it runs on a CPU


@pytest.fixture(scope="module")
def old_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv on Python 3.11 with torch 2.0.1 from PyPI (pip caches the download)."""
    from samebits.install.interpreter import Places, search

    found = search("3.11", Places.from_environ()).found
    if found is None:
        pytest.skip("no Python 3.11 on this machine")
    venv = tmp_path_factory.mktemp("torch201") / "venv"
    subprocess.run([found.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"torch=={OLD}"],
                   check=True, timeout=3600, capture_output=True)
    return venv


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "samebits", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.network
@pytest.mark.slow
def test_facts_and_suite_on_torch_2_0(old_venv: Path) -> None:
    """The facts probe and the whole suite in torch 2.0.1's own interpreter: every fact
    recorded, what 2.0 lacks unavailable with the reason, nothing an error."""
    from samebits_app.audit.runtime import Interpreter
    from verify.gpu.workloads import NAMES
    from verify.gpu.workloads.settings import DETERMINISTIC

    runtime = Interpreter(str(old_venv / "bin" / "python"))
    measured = runtime.run(device="cpu", settings=DETERMINISTIC, names=NAMES)
    facts, settings, workloads = measured.facts, measured.settings, measured.workloads
    assert facts.torch.version.startswith(f"{OLD}+")
    assert facts.torch.cpu_capability in ("DEFAULT", "AVX2", "AVX512")  # from the config line
    assert settings["blas_library"] == (f"unavailable (torch {facts.torch.version} has no "
                                        "torch.backends.cuda.preferred_blas_library)")
    statuses = {n: r["status"] for n, r in workloads.items()}
    assert "error" not in statuses.values(), workloads
    assert statuses["sdpa_math"] == "ok" and statuses["sdpa_flash"] == "unavailable"
    assert "runs its MATH kernel on cpu" in workloads["sdpa_flash"]["detail"]
    assert statuses["gemm_fp16"] == "unavailable"  # no fp16 GEMM on a CPU before 2.1


@pytest.mark.network
@pytest.mark.slow
def test_attest_and_audit_on_torch_2_0(old_venv: Path, tmp_path: Path) -> None:
    """samebits attest and audit of a torch 2.0.1 venv against its hashed requirements (uv):
    bit-identical, the workloads unavailable on both sides named and not counted."""
    from samebits.solve.pypi import uv_binary

    freeze = subprocess.run([str(old_venv / "bin" / "pip"), "freeze", "--all"],
                            capture_output=True, text=True, check=True).stdout
    (tmp_path / "pins.txt").write_text(
        "\n".join(ln for ln in freeze.splitlines() if not ln.startswith("wheel==")) + "\n")
    lock = tmp_path / "requirements.txt"
    subprocess.run([uv_binary(), "pip", "compile", "pins.txt", "--generate-hashes",
                    "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
                    "-q", "-o", str(lock)], cwd=tmp_path, check=True, timeout=300)
    attest = _cli("attest", str(lock), "--prefix", str(old_venv), "--device",
                  "cpu", "--out", "a.json", "--save-outputs", "outputs", "--json", cwd=tmp_path)
    assert attest.returncode == 0, attest.stderr
    audit = _cli("audit", str(lock), "--attestation", "a.json", "--outputs",
                 "outputs", "--prefix", str(old_venv), "--out", "audit", "--json", cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr
    doc = json.loads((tmp_path / "audit" / "audit.json").read_text())
    assert doc["verdict"]["level"] == "bit-identical"
    assert any("gave no bits on either side" in n for n in doc["verdict"]["notes"])
    cells = {row["name"]: row["cell"] for row in doc["workloads"]}
    assert cells["sdpa_flash"] == "not-run" and cells["sdpa_math"] == "same"

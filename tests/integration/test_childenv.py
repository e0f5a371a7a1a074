"""samebits.childenv and every launcher that uses it: a process samebits starts gets the caller's
environment without the start-up variables that load other code (PYTHONPATH, the user site,
LD_PRELOAD, ...), unless a paper manifest keeps them; real processes, no torch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from samebits.childenv import child_environ, is_dropped, keepable
from verify.gpu.launch import run_module, worker_environ

CALLER = {"HOME": "/home/me", "PATH": "/usr/bin", "OMP_NUM_THREADS": "2",
          "PYTHONPATH": "/elsewhere", "PYTHONHOME": "/opt/py", "PYTHONSTARTUP": "/s.py",
          "PYTHONUSERBASE": "/u", "PYTHONSAFEPATH": "1", "PYTHONINSPECT": "1",
          "PYTHONWARNINGS": "error", "PYTHONHASHSEED": "5", "PYTHONDONTWRITEBYTECODE": "1",
          "LD_PRELOAD": "/x.so", "LD_LIBRARY_PATH": "/opt/lib", "LD_AUDIT": "/a.so",
          "CUBLAS_WORKSPACE_CONFIG": ":16:8"}


@pytest.mark.parametrize(("keep", "expected"), [
    pytest.param((), {"HOME": "/home/me", "PATH": "/usr/bin", "OMP_NUM_THREADS": "2",
                      "PYTHONHASHSEED": "5", "PYTHONDONTWRITEBYTECODE": "1",
                      "CUBLAS_WORKSPACE_CONFIG": ":16:8", "PYTHONNOUSERSITE": "1"},
                 id="dropped"),
    pytest.param(("PYTHONPATH", "LD_LIBRARY_PATH"), {
        **{k: v for k, v in CALLER.items() if not k.startswith(("PYTHON", "LD_"))},
        "PYTHONHASHSEED": "5", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "/elsewhere",
        "LD_LIBRARY_PATH": "/opt/lib", "PYTHONNOUSERSITE": "1"}, id="kept"),
    pytest.param(("PYTHONNOUSERSITE",), {
        **{k: v for k, v in CALLER.items() if not k.startswith(("PYTHON", "LD_"))},
        "PYTHONHASHSEED": "5", "PYTHONDONTWRITEBYTECODE": "1"}, id="user-site-kept"),
])
def test_child_environ(keep: tuple, expected: dict) -> None:
    """Every PYTHON* start-up variable (but the passed ones) and every LD_* is dropped, the
    user site is off; keep names what passes as the caller has it."""
    assert child_environ(CALLER, keep=keep) == expected


@pytest.mark.parametrize(("value", "kept"), [
    ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib64"),
    ("/opt/cuda/lib64:/usr/local/nvidia/lib/:/usr/local/nvidia/lib64", "/usr/local/nvidia/lib/:"
                                                                       "/usr/local/nvidia/lib64"),
    ("/opt/cuda/lib64", None),
])
def test_driver_folders_of_ld_library_path_stay(value: str, kept: str | None) -> None:
    """The NVIDIA container runtime's driver folders stay on LD_LIBRARY_PATH (libcuda, no CUDA
    runtime there); every other folder goes."""
    assert child_environ({"LD_LIBRARY_PATH": value}).get("LD_LIBRARY_PATH") == kept


@pytest.mark.parametrize(("name", "dropped", "may_keep"), [
    ("PYTHONPATH", True, True), ("PYTHON_CPU_COUNT", True, True), ("LD_BIND_NOW", True, True),
    ("PYTHONNOUSERSITE", True, True), ("PYTHONHASHSEED", False, False),
    ("OMP_NUM_THREADS", False, False), ("HOME", False, False),
])
def test_what_is_dropped_and_may_be_kept(name: str, dropped: bool, may_keep: bool) -> None:
    """keep-env may name what samebits drops or sets, nothing it passes anyway."""
    assert (is_dropped(name), keepable(name)) == (dropped, may_keep)


def test_worker_environ_drops_the_workspace_config() -> None:
    """Each settings profile sets CUBLAS_WORKSPACE_CONFIG itself in the worker."""
    assert "CUBLAS_WORKSPACE_CONFIG" not in worker_environ(CALLER)


# What a child sees: whether the caller's sitecustomize ran, its PYTHONPATH, its user site.
SEEN = ("import json, os, site, sys; print(json.dumps({'ran': 'SAMEBITS_SITE_RAN' in os.environ,"
        " 'pythonpath': os.environ.get('PYTHONPATH'), 'user_site': site.ENABLE_USER_SITE,"
        " 'preload': os.environ.get('LD_PRELOAD'), 'samebits': __import__('samebits').__file__}))")


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    """A caller whose PYTHONPATH holds a sitecustomize.py that marks the process it runs in."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['SAMEBITS_SITE_RAN'] = '1'\n")
    return {**os.environ, "PYTHONPATH": str(site), "LD_PRELOAD": ""}


def _interpreter(environ: dict[str, str], keep: tuple[str, ...] = ()) -> dict:
    """What a worker of attest/audit sees: ``Interpreter._worker``, as the facts probe runs."""
    from samebits_app.audit.runtime import Interpreter

    return Interpreter(sys.executable, environ=environ, keep=keep)._worker(["-c", SEEN],
                                                                          what="seeing")


def _launch(environ: dict[str, str], keep: tuple[str, ...] = ()) -> dict:
    """What a worker of verify gpu --probe sees: ``verify.gpu.launch.run_module``."""
    return json.loads(run_module(sys.executable, ["-c", SEEN], environ=environ, keep=keep,
                                 timeout=60).stdout)


def test_the_shim_holds_both_packages_whole() -> None:
    """The worker runs ``python -m verify.gpu.workloads`` from the shim, so its ``verify`` must
    be the package itself, not one of its areas (a link to verify/gpu/ broke every attest and
    audit: "No module named 'verify.gpu'")."""
    from verify.gpu.launch import shim

    with shim() as folder:
        assert (folder / "verify" / "gpu" / "workloads" / "__main__.py").is_file()
        assert (folder / "samebits" / "childenv.py").is_file()


@pytest.mark.parametrize("see", [_interpreter, _launch])
def test_a_callers_sitecustomize_does_not_reach_the_worker(hostile: dict[str, str],
                                                            see) -> None:
    """The facts probe's and the workload worker's launchers: the caller's sitecustomize does
    not run, no PYTHONPATH, no user site, no LD_PRELOAD; samebits comes from the shim."""
    seen = see(hostile)
    assert seen["ran"] is False and seen["pythonpath"] is None
    assert seen["user_site"] is False and seen["preload"] is None
    assert "samebits-path." in seen["samebits"]  # this samebits, through the shim


@pytest.mark.parametrize("see", [_interpreter, _launch])
def test_a_kept_pythonpath_reaches_the_worker(hostile: dict[str, str], see) -> None:
    """A manifest that keeps PYTHONPATH gets the caller's, sitecustomize and all."""
    seen = see(hostile, ("PYTHONPATH",))
    assert seen["ran"] is True and seen["pythonpath"] == hostile["PYTHONPATH"]


def test_verify_gpu_digest_child_is_clean(hostile: dict[str, str], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """verify gpu's environment-digest process imports from this process's sys.path and runs
    none of the caller's start-up code (here it finds no environment, and says so)."""
    from samebits.errors import InputError
    from verify.gpu.cmd_gpu import environment_digests, start_environment_digests

    marker = tmp_path / "ran"
    site = Path(hostile["PYTHONPATH"])
    (site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    for k, v in hostile.items():
        monkeypatch.setenv(k, v)
    proc = start_environment_digests(str(tmp_path))
    with pytest.raises(InputError, match="not an environment"):
        environment_digests(proc, str(tmp_path))
    assert not marker.exists()


@pytest.mark.slow
def test_a_callers_sitecustomize_does_not_change_the_recorded_facts(tmp_path: Path) -> None:
    """The regression: a sitecustomize.py on the caller's PYTHONPATH that sets a numerics
    variable (a recorded fact) reached the facts process of attest and audit; no longer."""
    from samebits_app.audit.runtime import Interpreter

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\nos.environ['TORCH_SAMEBITS_PROBE'] = 'from the caller'\n")
    caller = {**os.environ, "PYTHONPATH": str(site)}
    facts = Interpreter(sys.executable, environ=caller).facts()
    assert "TORCH_SAMEBITS_PROBE" not in dict(facts.env)
    kept = Interpreter(sys.executable, environ=caller, keep=("PYTHONPATH",)).facts()
    assert dict(kept.env)["TORCH_SAMEBITS_PROBE"] == "from the caller"  # kept: it runs
    assert dict(kept.env)["PYTHONPATH"] == str(site)  # and the facts say why


@pytest.mark.parametrize(("mine", "attested", "reason"), [
    ((), None, None),
    (("LD_LIBRARY_PATH",), ["LD_LIBRARY_PATH"], None),
    (("LD_LIBRARY_PATH",), None, "M: keep-env = ['LD_LIBRARY_PATH'], the attestation records "
     "keep-env = []: the paper's processes would not start as the authors' did"),
    ((), ["PYTHONPATH"], "M: keep-env = [], the attestation records keep-env = ['PYTHONPATH']: "
     "the paper's processes would not start as the authors' did"),
])
def test_keep_env_is_attested_and_compared(tmp_path: Path, mine: tuple, attested: list | None,
                                           reason: str | None) -> None:
    """The attestation's paper section records keep-env; an audit whose manifest keeps other
    start-up variables than the authors' is a reason, naming both."""
    from samebits_app.paper.manifest import read_manifest
    from samebits_app.paper.session import keep_env_reason, section

    path = tmp_path / "samebits-paper.toml"
    path.write_text(f"format = 1\nkeep-env = {list(mine)!r}\n"
                    "[[commands]]\nname = 'a'\nrun = 'x'\n")
    manifest = read_manifest(path)
    assert section(manifest, {}).get("keep_env") == (list(mine) or None)
    paper = {"keep_env": attested} if attested is not None else {}
    got = keep_env_reason(manifest, paper)
    assert (got.replace(str(path), "M") if got else None) == reason


def test_a_kept_start_up_variable_is_a_fact_that_explains() -> None:
    """Kept and recorded, a start-up variable that differs between the two runs is a class
    fact every workload is sensitive to (it loads other code): the difference is explained."""
    from tests.fixtures.samples import att, ok
    from verify.gpu.compare import compare

    report = compare(att(env=(("PYTHONPATH", "/opt/a"),)),
                     att(env=(("PYTHONPATH", "/opt/b"),), changed={"randn": ok("f")}))
    (diff,) = report.different
    assert (report.verdict, diff.attributed_to, diff.expected) == (
        "explained", ("env.PYTHONPATH",), True)

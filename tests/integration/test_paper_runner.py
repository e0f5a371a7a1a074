"""samebits_app.paper.runner: a command's environment, the settings hook, timeouts, failures
and the record of what it wrote; real processes of this interpreter (torch, numpy)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from samebits_app.paper.manifest import CommandSpec, OutputSpec, read_manifest
from samebits_app.paper.runner import Host, command_env, prepare_workdir, run_command
from verify.gpu.workloads.settings import DETERMINISTIC

BIN = Path(sys.executable).parent
SETTINGS = DETERMINISTIC.to_dict()
CALLER = {"HOME": "/home/me", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "3", "SECRET_TOKEN": "x",
          "PYTHONHASHSEED": "99", "PATH": "/opt/evil/bin", "PYTHONPATH": "/elsewhere",
          "CUDA_VISIBLE_DEVICES": "1", "LD_PRELOAD": "/x.so"}


def spec(*argv: str, **kw) -> CommandSpec:
    return CommandSpec(name="c", argv=argv, **kw)


def no_tensors(files):  # the tests that declare no tensors outputs
    raise AssertionError(f"no tensor files expected: {files}")


@pytest.mark.parametrize(("kw", "hook", "expected", "inherited"), [
    ({}, False,
     {"HOME": "$HOME", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "3", "CUDA_VISIBLE_DEVICES": "1",
      "PATH": "$BIN:/usr/local/bin:/usr/bin:/bin", "PYTHONHASHSEED": "0",
      "PYTHONUNBUFFERED": "1", "PYTHONNOUSERSITE": "1"},
     ["CUDA_VISIBLE_DEVICES", "HOME", "LANG", "OMP_NUM_THREADS"]),
    ({"threads": 2, "hash_seed": 7, "env": (("PYTHONPATH", "src"), ("SEED", "1"))}, True,
     {"HOME": "$HOME", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2",
      "CUDA_VISIBLE_DEVICES": "1", "PATH": "$BIN:/usr/local/bin:/usr/bin:/bin",
      "PYTHONHASHSEED": "7", "PYTHONUNBUFFERED": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
      "PYTHONPATH": "$HOOK:src", "SEED": "1", "PYTHONNOUSERSITE": "1"},
     ["CUDA_VISIBLE_DEVICES", "HOME", "LANG"]),
])
def test_command_env(tmp_path: Path, kw: dict, hook: bool, expected: dict,
                     inherited: list) -> None:
    """Built from nothing: the environment's bin first on PATH, the caller's locale, HOME and
    numerics variables (recorded as inherited), never its PATH, PYTHONPATH, PYTHONHASHSEED,
    LD_PRELOAD, user site or other variables; threads, seed, settings and the manifest's env
    on top."""
    env, recorded, inh = command_env(spec("python", **kw), host=Host(bin=BIN, environ=CALLER),
                                     hook_dir=tmp_path if hook else None,
                                     settings=SETTINGS if hook else None)
    assert recorded == expected
    assert inh == inherited
    assert env["PATH"] == f"{BIN}:/usr/local/bin:/usr/bin:/bin"
    assert "SECRET_TOKEN" not in env and "LD_PRELOAD" not in env


@pytest.mark.parametrize(("keep", "caller", "hook", "expected", "inherited"), [
    pytest.param(("PYTHONPATH", "LD_PRELOAD"), {}, False,
                 {"PYTHONPATH": "/elsewhere", "LD_PRELOAD": "/x.so", "PYTHONNOUSERSITE": "1"},
                 ["LD_PRELOAD", "PYTHONPATH"], id="kept-as-the-caller-has-them"),
    pytest.param(("PYTHONPATH",), {}, True,
                 {"PYTHONPATH": "$HOOK:/elsewhere", "PYTHONNOUSERSITE": "1"}, ["PYTHONPATH"],
                 id="the-hook-before-a-kept-pythonpath"),
    pytest.param(("PYTHONNOUSERSITE",), {}, False, {"PYTHONNOUSERSITE": None}, [],
                 id="user-site-kept-when-the-caller-allows-it"),
    pytest.param(("PYTHONNOUSERSITE",), {"PYTHONNOUSERSITE": "1"}, False,
                 {"PYTHONNOUSERSITE": "1"}, ["PYTHONNOUSERSITE"], id="user-site-kept-off"),
    pytest.param((), {"LD_LIBRARY_PATH": "/opt/cuda/lib64:/usr/local/nvidia/lib64"}, False,
                 {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64", "PYTHONPATH": None},
                 ["LD_LIBRARY_PATH"], id="only-the-driver-folders-of-ld-library-path"),
    pytest.param(("LD_LIBRARY_PATH",), {"LD_LIBRARY_PATH": "/opt/cuda/lib64"}, False,
                 {"LD_LIBRARY_PATH": "/opt/cuda/lib64"}, ["LD_LIBRARY_PATH"],
                 id="ld-library-path-kept"),
])
def test_command_env_keeps_what_the_manifest_names(
        tmp_path: Path, keep: tuple, caller: dict, hook: bool, expected: dict,
        inherited: list) -> None:
    """keep-env: the start-up variables it names pass as the caller has them (recorded, and as
    inherited: facts the audit compares), the others stay dropped."""
    host = Host(bin=BIN, environ={**CALLER, **caller}, keep=keep)
    _, recorded, inh = command_env(spec("python"), host=host,
                                   hook_dir=tmp_path if hook else None,
                                   settings=SETTINGS if hook else None)
    assert {k: recorded.get(k) for k in expected} == expected
    assert [k for k in inh if k in keep or k.startswith("LD_")] == inherited


PROBE = ("import json, os, sys, torch; print(json.dumps({'det': "
         "torch.are_deterministic_algorithms_enabled(), 'exe': sys.executable, "
         "'seed': os.environ['PYTHONHASHSEED'], 'hash': hash('paper')}))")


@pytest.mark.parametrize("deterministic", [True, False])
def test_settings_hook(tmp_path: Path, deterministic: bool) -> None:
    """With deterministic = true the command's own torch runs with the attested settings,
    applied at its import, and torch's readback is recorded; false leaves torch alone."""
    code = PROBE.replace("print(", "open('o.json', 'w').write(")
    rec = run_command(spec("python", "-c", code, deterministic=deterministic,
                           outputs=(OutputSpec(kind="metrics", path="o.json", fmt="json"),)),
                      workdir=tmp_path, host=Host(bin=BIN, environ={}), settings=SETTINGS,
                      tensor_records=no_tensors)
    assert rec["status"] == "ok", rec
    assert json.loads((tmp_path / "o.json").read_text())["det"] is deterministic
    assert rec["settings"] == (SETTINGS if deterministic else None)
    if deterministic:
        assert rec["torch_settings"] == {
            "cublas_workspace_config": ":4096:8", "cuda_matmul_allow_tf32": False,
            "cudnn_allow_tf32": False,
            "cudnn_benchmark": False, "cudnn_deterministic": True,
            "deterministic_algorithms": True, "float32_matmul_precision": "highest"}
    else:
        assert rec["torch_settings"] is None


def test_interpreter_seed_and_hash(tmp_path: Path) -> None:
    """`python` is the environment's interpreter and str hashes are the same run to run."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE.replace("print(", "open('o.json', 'w').write(") + "\n")
    out = OutputSpec(kind="file", path="o.json")
    recs = []
    for _ in range(2):
        recs.append(run_command(spec("python", "probe.py", deterministic=False, outputs=(out,)),
                                workdir=tmp_path, host=Host(bin=BIN, environ={}),
                                settings=None, tensor_records=no_tensors))
        doc = json.loads((tmp_path / "o.json").read_text())
        # `python` is found in the host bin folder (BIN), whatever name started pytest
        assert doc["exe"] == str(BIN / "python") and doc["seed"] == "0"
    assert recs[0] == recs[1], "equal runs give equal records"


DEEP = "".join(f"def f{i}(): f{i + 1}()\n" for i in range(24)) + \
    "def f24(): open(__import__('os').getcwd() + '/none')\nf0()\n"


@pytest.mark.parametrize(("argv", "timeout", "status", "tail"), [
    (("python", "-c", "import sys; print('half way'); sys.exit(3)"), 60.0, "failed",
     ["half way"]),
    (("python", "-c", "import sys; sys.stderr.write('Traceback\\nValueError: boom\\n'); "
      "sys.exit(1)"), 60.0, "failed", ["Traceback", "ValueError: boom"]),
    (("python", "-c", "import time; print('started', flush=True); time.sleep(120)"), 3.0,
     "timed-out", ["started"]),
    (("no-such-program-xyz",), 60.0, "not-started",
     ["no-such-program-xyz: No such file or directory (cwd .)"]),
    # a traceback deeper than the tail is kept whole, each line as printed; the scratch
    # copy's path is $PAPER, so the record does not depend on where the copy was made
    (("python", "-c", DEEP), 60.0, "failed",
     ["Traceback (most recent call last):", '  File "<string>", line 26, in <module>',
      *[f'  File "<string>", line {i + 1}, in f{i}' for i in range(24)],
      '  File "<string>", line 25, in f24',
      "FileNotFoundError: [Errno 2] No such file or directory: '$PAPER/none'"]),
])
def test_failures_keep_their_last_lines(tmp_path: Path, argv: tuple, timeout: float,
                                        status: str, tail: list) -> None:
    """A command that fails, runs past its timeout (its process group killed) or does not
    start is recorded with its last lines of output."""
    rec = run_command(spec(*argv, timeout=timeout, deterministic=False,
                           outputs=(OutputSpec(kind="file", path="x"),)),
                      workdir=tmp_path, host=Host(bin=BIN, environ={}), settings=None,
                      tensor_records=no_tensors)
    assert (rec["status"], rec["tail"]) == (status, tail)
    assert rec["outputs"] == [{"output": "x", "kind": "file", "path": "x", "stream": None,
                               "rtol": 0.0, "atol": 0.0, "save": True}]


def test_outputs_recorded_and_saved(tmp_path: Path) -> None:
    """Each output: its sha256 and values; a missing one and an unreadable one are said so;
    saved outputs go to commands/<name>/files/<cwd>/<path> and streams to <stream>.txt."""
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    code = ("import json; json.dump({'acc': 0.5}, open('m.json', 'w')); "
            "open('bad.json', 'w').write('{'); print('step 1 loss 2.5'); print('step 2 loss 2')")
    outputs = (OutputSpec(kind="metrics", path="m.json", fmt="json"),
               OutputSpec(kind="metrics", path="bad.json", fmt="json"),
               OutputSpec(kind="file", path="never.bin"),
               OutputSpec(kind="curve", stream="stdout", fmt="regex", series=("loss",),
                          regex=r"step (\d+) loss (\S+)"))
    rec = run_command(spec("python", "-c", code, cwd="sub", deterministic=False,
                           outputs=outputs),
                      workdir=work, host=Host(bin=BIN, environ={}), settings=None,
                      tensor_records=no_tensors, save=tmp_path / "saved")
    m, bad, never, stdout = rec["outputs"]
    assert m["values"] == {"acc": 0.5} and len(m["sha256"]) == 64
    assert bad["error"].startswith("not JSON: ")
    assert never["missing"] is True
    assert stdout["curve"] == {"steps": [1, 2], "series": {"loss": [2.5, 2]}}
    assert (tmp_path / "saved/c/files/sub/m.json").read_text() == '{"acc": 0.5}'
    assert (tmp_path / "saved/c/stdout.txt").read_text() == "step 1 loss 2.5\nstep 2 loss 2\n"


def test_workdir_leaves_out_stale_outputs(tmp_path: Path) -> None:
    """The scratch copy holds the paper's inputs, never its declared outputs, saved outputs or
    attestation: a stale file cannot pass for a fresh one."""
    paper = tmp_path / "paper"
    (paper / "out").mkdir(parents=True)
    (paper / "outputs" / "commands").mkdir(parents=True)
    (paper / "samebits-paper.toml").write_text(
        "format = 1\n[[commands]]\nname = 't'\nrun = 'python t.py'\n"
        "[[commands.outputs]]\npath = 'out/m.json'\nkind = 'metrics'\n")
    for name in ("t.py", "data.csv", "out/m.json", "out/keep.txt", "reference.attestation.json",
                 "outputs/commands/x"):
        (paper / name).write_text("x")
    prepare_workdir(read_manifest(paper), tmp_path / "work")
    got = sorted(str(p.relative_to(tmp_path / "work")) for p in (tmp_path / "work").rglob("*"))
    assert got == ["data.csv", "out", "out/keep.txt", "samebits-paper.toml", "t.py"]

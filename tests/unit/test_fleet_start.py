"""Starting a fleet's ranks in the environment under test (verify.fleet.start, rankopts, tree,
run.Outcome): the launcher's command line per launcher, the ranks' environment, the one-file
rank program, the options both parsers share, the `tree` digest pinned. The real fleets:
tests/integration/test_fleet_inenv.py."""

from __future__ import annotations

import argparse
import io
import os
import zipfile
from pathlib import Path

import pytest

import verify.cli
from samebits.errors import InputError, UsageError
from verify.fleet.__main__ import parser as rank_parser
from verify.fleet.rankopts import no_torch_line, rank_argv
from verify.fleet.run import Outcome
from verify.fleet.start import launch_environ, launcher_word, rank_command, rank_program
from verify.fleet.tree import tree_digest
from verify.gpu.launch import IN_ENV, module_file

PY, PROG, OPTS = "/opt/env/bin/python", "/shared/.samebits-fleet-x/rank.pyz", ["--handoff", "D"]


@pytest.mark.parametrize(("words", "expected"), [
    (["torchrun", "--nnodes", "4", "--nproc-per-node", "8"],
     [PY, "-m", "torch.distributed.run", "--nnodes", "4", "--nproc-per-node", "8", PROG, *OPTS]),
    (["/usr/bin/python3", "-m", "torch.distributed.run", "--standalone"],
     [PY, "-m", "torch.distributed.run", "--standalone", PROG, *OPTS]),
    (["srun", "-N", "4", "--ntasks-per-node", "8"],
     ["srun", "-N", "4", "--ntasks-per-node", "8", PY, PROG, *OPTS]),
    (["mpiexec", "-n", "2", "-genv", "MASTER_ADDR", "h0"],
     ["mpiexec", "-n", "2", "-genv", "MASTER_ADDR", "h0", PY, PROG, *OPTS]),
])
def test_the_rank_program_is_appended_to_the_launcher(words: list[str],
                                                      expected: list[str]) -> None:
    """torchrun runs as the environment's `python -m torch.distributed.run` (its ranks are its
    own sys.executable); every other launcher gets the environment's python and the program."""
    assert rank_command(words, PY, PROG, OPTS) == expected


@pytest.mark.parametrize(("words", "message"), [
    ([], "verify fleet: nothing after --: the launcher and its options go there"),
    (["torchrun", "--nproc-per-node", "2", "-m", "verify", "fleet"], "runs a fleet itself"),
    (["srun", "-n", "2", "python", "-m", "verify.fleet"], "runs a fleet itself"),
])
def test_a_launcher_line_that_is_not_one_is_refused(words: list[str], message: str) -> None:
    """Nothing after --, or a line that already runs a fleet: a usage error saying what goes
    after --."""
    with pytest.raises(UsageError, match=message) as got:
        rank_command(words, PY, PROG, OPTS)
    assert "samebits verify fleet --prefix ENV -- torchrun" in str(got.value.hint)


@pytest.mark.parametrize(("words", "word"), [
    (["torchrun", "--standalone"], "torchrun"), (["/usr/bin/srun", "-n", "2"], "srun"),
    (["python3", "-m", "torch.distributed.run"], "torchrun"), (["mpiexec"], "mpiexec")])
def test_the_launcher_is_named_as_a_user_writes_it(words: list[str], word: str) -> None:
    assert launcher_word(words) == word


def test_the_launcher_environment_drops_python_startup_and_keeps_the_loader() -> None:
    """The caller's PYTHONPATH and user site never reach a rank; LD_LIBRARY_PATH (which the
    launcher may need, and each rank's facts record and preflight judges) does; bytecode is
    never written."""
    env = launch_environ({"PATH": "/usr/bin", "PYTHONPATH": "/home/me/samebits",
                          "PYTHONSTARTUP": "/home/me/s.py", "LD_LIBRARY_PATH": "/opt/mpi/lib",
                          "SLURM_CONF": "/etc/slurm.conf", "PYTHONHASHSEED": "0"})
    assert env == {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/opt/mpi/lib",
                   "SLURM_CONF": "/etc/slurm.conf", "PYTHONHASHSEED": "0",
                   "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def test_the_rank_program_is_the_in_environment_list_and_byte_stable() -> None:
    """rank.pyz holds exactly the IN_ENV files (the rank program among them) and a
    __main__.py; two builds are the same bytes."""
    data = rank_program()
    assert data == rank_program()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = z.namelist()
        assert names == sorted(names)
        assert set(names) == {"__main__.py", *(module_file(n).as_posix() for n in IN_ENV)}
        assert "verify/fleet/__main__.py" in names and "verify/fleet/run.py" in names
        assert {i.date_time for i in z.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert b"from verify.fleet.__main__ import main" in z.read("__main__.py")


def _verify_fleet(argv: list[str]) -> argparse.Namespace:
    return verify.cli.build_parser(["fleet"]).parse_args(["fleet", *argv])


@pytest.mark.parametrize("argv", [
    [], ["--only", "gemm_fp32,randn", "--only", "sum_fp32", "--device", "cpu"],
    ["--no-env-digest", "--rank-timeout", "12.5", "--device", "cuda"],
])
def test_the_rank_options_reach_the_rank_as_given(argv: list[str]) -> None:
    """What `verify fleet` parsed, written back by rank_argv, parses to the same values in
    the rank program's own parser: the two parsers share one table."""
    launcher = _verify_fleet([*argv, "--", "srun"])
    rank = rank_parser().parse_args([*rank_argv(launcher), "--handoff", "D"])
    for dest in ("only", "device", "no_env_digest", "rank_timeout"):
        assert getattr(rank, dest) == getattr(launcher, dest), dest


@pytest.mark.parametrize(("argv", "lock", "only", "launch"), [
    (["--prefix", "/e", "--", "srun", "-n", "2"], None, None, ["srun", "-n", "2"]),
    (["hopper", "--", "torchrun", "--only", "x", "--", "y"], "hopper", None,
     ["torchrun", "--only", "x", "--", "y"]),
    (["hopper", "--only", "randn"], "hopper", ["randn"], None),
])
def test_after_the_first_dashes_is_the_launcher(argv: list[str], lock: str | None,
                                              only: list[str] | None,
                                              launch: list[str] | None) -> None:
    """`verify fleet [LOCK] [options] -- LAUNCHER ARGS`: the launcher's words are never read as
    the LOCK or as this command's options; without -- there is no launcher."""
    args = _verify_fleet(argv)
    assert (args.lock, args.only, args.launch) == (lock, only, launch)


def test_the_no_torch_line_names_the_python_and_the_command() -> None:
    assert no_torch_line("/venv/bin/python, Python 3.11", "srun") == (
        "this Python (/venv/bin/python, Python 3.11) has no torch: run the ranks with the "
        "environment's Python (samebits verify fleet --prefix ENV -- srun ...)")


def _tree(root: Path) -> Path:
    (root / "lib" / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "lib" / "pkg" / "__init__.py").write_bytes(b"A = 1\n")
    (root / "lib" / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0")
    (root / "bin").mkdir()
    (root / "bin" / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "bin" / "tool", 0o755)
    os.symlink("tool", root / "bin" / "alias")
    os.symlink("lib", root / "libdir")
    (root / "conda-meta").mkdir()
    (root / "conda-meta" / "history").write_bytes(b"# a time\n")
    return root


# sha256 over b"samebits-fleet-tree 1\n" and the records b"bin/alias\0l\0-\0tool\0",
# b"bin/tool\0f\0x\0<sha256 of the script>\0", b"lib/pkg/__init__.py\0f\0-\0<sha256>\0" and
# b"libdir\0l\0-\0lib\0", in that order (tree.py's docstring), computed by hand from them
TREE = "7a582f00b2f7489e439a48d06d0f16b860f2492e42c336bec398343d3e5e4ff9"


def test_the_tree_digest_is_pinned_and_skips_caches_and_conda_meta(tmp_path: Path) -> None:
    """The `tree` digest of a small prefix is the pinned value; bytecode caches and
    conda-meta do not enter it, a byte of a file and a link's target do."""
    root = _tree(tmp_path / "env")
    first = tree_digest(str(root))
    assert first == TREE
    (root / "lib" / "pkg" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\1")
    (root / "conda-meta" / "history").write_bytes(b"# another time\n")
    assert tree_digest(str(root)) == first
    (root / "lib" / "pkg" / "__init__.py").write_bytes(b"A = 2\n")
    assert tree_digest(str(root)) != first


def test_an_outcome_round_trips_and_another_format_is_named() -> None:
    """The outcome rank 0 hands the launcher reads back as it was; a document of another
    format is refused, naming the file and the format."""
    outcome = Outcome(records=({"rank": 0},), missing=({"rank": 1, "reason": "r"},),
                      backend="gloo", world_size=2)
    assert Outcome.from_dict(outcome.to_dict(), where="o.json") == outcome
    with pytest.raises(InputError, match="o.json: format = 9: not a fleet outcome"):
        Outcome.from_dict({**outcome.to_dict(), "format": 9}, where="o.json")

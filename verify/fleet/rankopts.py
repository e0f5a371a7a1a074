"""The options a fleet's rank takes, defined once for both parsers that read them.

``samebits verify fleet`` (samebits' own process: the launcher, or a rank of the old kind,
``torchrun -m verify fleet``) and ``python -m verify.fleet`` (the rank program the launcher
starts in the environment under test, ``verify.fleet.__main__``) add these with
``add_rank_options``; the launcher hands the values it parsed to the ranks with ``rank_argv``,
which writes each option of ``RANK_OPTIONS`` back as a command line. One table, so the two
parsers cannot come to disagree (``tests/unit/test_fleet_rankopts.py`` parses the one's output
with the other).

Also the one line a rank says when its Python has no torch (``no_torch``): which Python it is,
and the command that runs the ranks with the environment's own.

In the environment under test's interpreter (``verify.gpu.launch.IN_ENV``): the standard
library only, Python 3.8 or later.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

from samebits._compat import dataclass

DEVICES = ("auto", "cpu", "cuda")
DEFAULT_RANK_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RankOption:
    flag: str
    dest: str
    kind: str  # "append" (repeatable, a list), "flag" (store_true), "value" (one value)
    options: Mapping[str, Any]


RANK_OPTIONS = (
    RankOption(flag="--only", dest="only", kind="append", options={
        "metavar": "NAMES",
        "help": "comma-separated workloads (default: the whole suite)"}),
    RankOption(flag="--device", dest="device", kind="value", options={
        "default": "auto", "choices": DEVICES,
        "help": "auto: cuda:LOCAL_RANK when torch sees GPUs, else the CPU"}),
    RankOption(flag="--no-env-digest", dest="no_env_digest", kind="flag", options={
        "help": "skip hashing the environment (the host name stands in)"}),
    RankOption(flag="--rank-timeout", dest="rank_timeout", kind="value", options={
        "type": float, "default": DEFAULT_RANK_TIMEOUT, "metavar": "S",
        "help": "how long rank 0 waits for a rank's check-in, record or collectives before "
                "naming it missing in a partial report (default 600)"}),
)

_ACTIONS = {"append": "append", "flag": "store_true", "value": "store"}


def add_rank_options(p: argparse.ArgumentParser | Any) -> None:
    """The rank's options on ``p`` (a parser or an argument group)."""
    for opt in RANK_OPTIONS:
        p.add_argument(opt.flag, dest=opt.dest, action=_ACTIONS[opt.kind], **opt.options)


def rank_argv(args: argparse.Namespace) -> list[str]:
    """The rank's options as parsed into ``args``, as the command line that gives them."""
    out: list[str] = []
    for opt in RANK_OPTIONS:
        value = getattr(args, opt.dest)
        if opt.kind == "append":
            for item in value or ():
                out += [opt.flag, str(item)]
        elif opt.kind == "flag":
            out += [opt.flag] if value else []
        else:
            out += [opt.flag, repr(value) if isinstance(value, float) else str(value)]
    return out


# what a user writes for each launcher rendezvous() names, in the no-torch line
LAUNCHER_WORDS = {"torchrun": "torchrun", "slurm": "srun", "openmpi": "mpirun",
                  "pmi": "mpiexec"}


def no_torch(launcher: str | None) -> str | None:
    """None when this Python can import torch; else the one line that says which Python this
    is and how to run the ranks with the environment's (``launcher``: which launcher started
    this rank, ``verify.fleet.launcher.launcher_name``)."""
    if importlib.util.find_spec("torch") is not None:
        return None
    python = f"{sys.executable}, Python {sys.version_info[0]}.{sys.version_info[1]}"
    return no_torch_line(python, LAUNCHER_WORDS.get(launcher or "", "srun"))


def no_torch_line(python: str, launcher_word: str) -> str:
    """``python``: the interpreter, as the line names it."""
    return (f"this Python ({python}) has no torch: run the ranks with the environment's "
            f"Python (samebits verify fleet --prefix ENV -- {launcher_word} ...)")

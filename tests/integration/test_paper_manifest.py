"""samebits-paper.toml: read, validated key by key, every problem named with file, key, value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from samebits_app.paper.manifest import (
    ManifestError,
    PaperManifest,
    Tolerance,
    read_manifest,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "paper"

GOOD = """\
format = 1
title = "t"

[run]
threads = 2
env = { SEED = "0" }

[[commands]]
name = "train"
run = "python train.py --steps 3"

[[commands.outputs]]
path = "out/m.json"
kind = "metrics"
rtol = 0.1
metrics = { acc = { atol = 0.01 } }

[[commands.outputs]]
stream = "stdout"
kind = "curve"
regex = 'step (\\d+) loss (\\S+)'
series = ["loss"]

[[commands]]
name = "eval"
run = ["python", "eval.py"]
cwd = "sub"
threads = 1
deterministic = false
env = { SEED = "1", EXTRA = "x" }

[[commands.outputs]]
path = "w.safetensors"
kind = "tensors"
atol = 0.001
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "samebits-paper.toml"
    path.write_text(text)
    return path


def test_good_manifest(tmp_path: Path) -> None:
    """Defaults, [run] inherited and overridden per command, outputs with their tolerances."""
    m = read_manifest(write(tmp_path, GOOD).parent)
    assert (m.title, m.lockfile, m.attestation, m.outputs) == (
        "t", tmp_path / "conda-lock.yml", tmp_path / "reference.attestation.json",
        tmp_path / "outputs")
    train, ev = m.commands
    assert (train.argv, train.cwd, train.threads, train.deterministic, train.hash_seed,
            train.timeout, train.env) == (("python", "train.py", "--steps", "3"), ".", 2, True, 0,
                                          600.0, (("SEED", "0"),))
    assert (ev.argv, ev.cwd, ev.threads, ev.deterministic, ev.env) == (
        ("python", "eval.py"), "sub", 1, False, (("EXTRA", "x"), ("SEED", "1")))
    metrics, stdout = train.outputs
    assert (metrics.fmt, metrics.tolerance, metrics.metrics) == (
        "json", Tolerance(rtol=0.1), (("acc", Tolerance(rtol=0.1, atol=0.01)),))
    assert (stdout.label, stdout.fmt, stdout.series) == ("<stdout>", "regex", ("loss",))
    assert ev.outputs[0].tolerance == Tolerance(atol=0.001)


@pytest.mark.parametrize(("line", "keep"), [
    ("", ()),
    ("keep-env = ['PYTHONPATH', 'LD_LIBRARY_PATH']\n", ("LD_LIBRARY_PATH", "PYTHONPATH")),
    ("keep-env = ['PYTHONNOUSERSITE']\n", ("PYTHONNOUSERSITE",)),
])
def test_keep_env(tmp_path: Path, line: str, keep: tuple[str, ...]) -> None:
    """keep-env names the start-up variables the paper's processes keep (default: none)."""
    assert read_manifest(write(tmp_path, line + GOOD)).keep_env == keep


def test_the_example_manifest_reads() -> None:
    """examples/paper/samebits-paper.toml is valid and declares every kind it demonstrates."""
    m = read_manifest(EXAMPLE)
    assert [c.name for c in m.commands] == ["train"]
    assert {o.kind for o in m.commands[0].outputs} == {"curve", "metrics", "tensors"}


@pytest.mark.parametrize(("text", "problems"), [
    ("title = 1\n[[commands]]\nname = 'a'\nrun = 'x'\n", [
        'M: format: missing: write format = 1',
        "M: title = 1: expected a string"]),
    ("format = 2\ncomand = []\n", [
        "M: format = 2: this samebits reads format 1",
        "M: comand = []: unknown key; did you mean 'commands'?",
        "M: commands: expected at least one [[commands]] table"]),
    ("format = 1\nlockfile = '../x.yml'\n[[commands]]\nname = 'a b'\nrun = ''\n", [
        'M: lockfile = "../x.yml": expected a relative path inside the paper folder (no '
        "'..', not absolute)",
        'M: commands[0].name = "a b": expected a name of letters, digits, \'.\', \'_\' or \'-\'',
        'M: commands[0].run = "": empty command']),
    ("format = 1\n[run]\nthreads = 0\ntimeout = -1\npython-hash-seed = 'random'\n"
     "env = { PATH = '/x', 1X = 'a', N = 3 }\n[[commands]]\nname = 'a'\nrun = 'x'\n", [
         "M: run.python-hash-seed = \"random\": expected an integer 0..4294967295 (a fixed "
         "seed: 'random' would make str hashes differ run to run)",
         "M: run.threads = 0: expected an integer >= 1",
         "M: run.timeout = -1: expected a finite number >= 0",
         'M: run.env.PATH = "/x": samebits sets this one (docs/reference/paper-manifest.md); '
         "remove it",
         'M: run.env.1X = "a": not an environment variable name',
         "M: run.env.N = 3: expected a string (environment values are text)"]),
    ("format = 1\n[[commands]]\nname = 'a'\nrun = 'x'\n"
     "[[commands.outputs]]\npath = 'a'\nkind = 'image'\n"
     "[[commands.outputs]]\nkind = 'file'\npath = 'b'\nrtol = 0.1\n"
     "[[commands.outputs]]\nkind = 'metrics'\npath = 'c.txt'\n"
     "[[commands.outputs]]\nkind = 'curve'\nstream = 'stdout'\n"
     "[[commands.outputs]]\nkind = 'curve'\npath = 'd'\nstream = 'stdout'\nregex = '(\\d+)'\n", [
         'M: commands[0].outputs[0].kind = "image": expected one of file, tensors, metrics, '
         "curve",
         "M: commands[0].outputs[1].rtol = 0.1: a file compares by bytes: no tolerance",
         'M: commands[0].outputs[2].format = "c.txt": expected json, csv or yaml (or a '
         ".json/.csv/.yaml path)",
         "M: commands[0].outputs[3].regex: missing: a stream (or format = \"regex\") needs a "
         "regex whose first group is the step",
         "M: commands[0].outputs[4]: give exactly one of path and stream",
         'M: commands[0].outputs[4].regex = "(\\\\d+)": needs two groups or more: the step, '
         "then values"]),
    ("format = 1\n[[commands]]\nname = 'a'\nrun = 'x'\n[[commands]]\nname = 'a'\nrun = 'y'\n"
     "[[commands.outputs]]\nkind = 'curve'\nstream = 'stdout'\nregex = '(\\d+) (\\S+) (\\S+)'\n"
     "series = ['loss']\n", [
         "M: commands[1].outputs[0].series = ['loss']: name the regex's 2 value group(s), in "
         "order (or use named groups)",
         'M: commands[1].name = "a": another command has this name']),
    ("format = 1\nkeep-env = ['PYTHONPATH', 'OMP_NUM_THREADS', 'PYTHONPATH', '1X']\n"
     "[[commands]]\nname = 'a'\nrun = 'x'\n", [
         'M: keep-env[1] = "OMP_NUM_THREADS": samebits passes this variable already: keep-env '
         "names start-up variables it drops (PYTHONPATH, PYTHONHOME, PYTHONSTARTUP, "
         "PYTHONUSERBASE, PYTHONNOUSERSITE, LD_PRELOAD, LD_LIBRARY_PATH, any other PYTHON* or "
         "LD_*)",
         'M: keep-env[2] = "PYTHONPATH": named twice',
         'M: keep-env[3] = "1X": not an environment variable name']),
    ("format = 1\nkeep-env = 'LD_LIBRARY_PATH'\n[[commands]]\nname = 'a'\nrun = 'x'\n", [
        'M: keep-env = "LD_LIBRARY_PATH": expected a list of environment variable names']),
])
def test_every_problem_is_listed(tmp_path: Path, text: str, problems: list[str]) -> None:
    """A bad manifest lists every problem (file, key, value, why), not the first."""
    path = write(tmp_path, text)
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    assert [str(p).replace(str(path), "M") for p in info.value.problems] == problems


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    (b"format = \n", "not valid TOML: "),
    (b"\xff\xfe", "not UTF-8 text (byte 0)"),
])
def test_unreadable_manifest(tmp_path: Path, content: bytes | None, message: str) -> None:
    """A missing, malformed or binary manifest is one problem naming the file."""
    path = tmp_path / "samebits-paper.toml"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ManifestError, match=f"^{path}: " + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        read_manifest(tmp_path)


def test_named_groups(tmp_path: Path) -> None:
    """Named regex groups name the series themselves; ``step`` names the step's group."""
    data = {"format": 1, "commands": [{"name": "a", "run": "x", "outputs": [
        {"kind": "curve", "stream": "stderr", "regex": r"it=(?P<it>\d+) l=(?P<l>\S+)",
         "step": "it"}]}]}
    m = PaperManifest.from_mapping(data, file=tmp_path / "m.toml")
    (o,) = m.commands[0].outputs
    assert (o.step, o.series, o.stream) == ("it", ("l",), "stderr")


def test_cli_bad_manifest_exits_2(tmp_path: Path) -> None:
    """`samebits audit PAPER` with a bad manifest: exit 2, the problems, no traceback."""
    write(tmp_path, "format = 1\n[[commands]]\nname = 'a'\n")
    proc = subprocess.run([sys.executable, "-m", "samebits", "audit", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {tmp_path}/samebits-paper.toml: commands[0].run: "
                                  "missing: the command line to run\n")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("table", "key", "value"), [
    ("atol = inf", "commands[0].outputs[0].atol", "inf"),
    ("rtol = inf", "commands[0].outputs[0].rtol", "inf"),
    ("rtol = nan", "commands[0].outputs[0].rtol", "nan"),
    ("metrics = { acc = { atol = inf } }", "commands[0].outputs[0].metrics.acc.atol", "inf"),
])
def test_non_finite_tolerance_is_a_manifest_error(tmp_path: Path, table: str, key: str,
                                                  value: str) -> None:
    """atol = inf (or a NaN rtol) would let any value through: a problem naming the key."""
    path = write(tmp_path, "format = 1\n[[commands]]\nname = 'a'\nrun = 'x'\n"
                 f"[[commands.outputs]]\npath = 'm.json'\nkind = 'metrics'\n{table}\n")
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    assert [str(p).replace(str(path), "M") for p in info.value.problems] == [
        f"M: {key} = {value}: expected a finite number >= 0 (inf and nan are not tolerances: "
        "nothing would be beyond them)"]

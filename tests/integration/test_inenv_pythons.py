"""The code samebits runs in the audited environment runs on Python 3.8 and 3.9.

A torch 1.13 paper's environment is often Python 3.8 or 3.9 (transformers 4.2.1 needs
tokenizers 0.9.4, whose newest wheels are cp39), while samebits itself needs 3.10. What runs
in that environment's interpreter is one list, ``verify.gpu.launch.IN_ENV``, the modules the
worker shim hands a child. Here:

    closed     every module of ours an in-environment module imports (at any depth, the
               workload families ``run_suite`` imports by name too) is on the list; anything
               else it imports is the standard library, torch or nvidia-ml-py
    compiles   ``py_compile`` of each file with pyenv's real 3.8 and 3.9 interpreters (an
               ``ast.parse(feature_version=...)`` would miss what fails only at run time)
    imports    each module imported there, through the real launcher (``run_module``: the
               shim, a clean environment) with no torch installed: those that need torch fail
               with exactly "No module named 'torch'", every other one imports, and every
               standard-library module the list imports exists on that Python
    the hook   the paper commands' generated ``sitecustomize.py`` compiles and installs itself
               at start-up there

Real torch 1.13.1 on those Pythons: tests/e2e/test_old_python_env.py. Skipped, saying so,
where pyenv has no such Python (CI's machine image has them).
"""

from __future__ import annotations

import ast
import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.pythons import pyenv_python, skip_reason
from verify.gpu.launch import IN_ENV, module_file, package_dirs, run_module, shim, worker_environ
from verify.gpu.workloads.catalog import FAMILIES

LINES = ("3.8", "3.9")
# The modules that import torch when imported: with no torch, their import fails, and only so.
NEEDS_TORCH = frozenset({"verify.gpu.workloads._common",
                         *(f"verify.gpu.workloads.{f}" for f in FAMILIES)})
THIRD_PARTY = ("torch", "pynvml")  # torch, and nvidia-ml-py where the environment has it
NO_TORCH = "ModuleNotFoundError: No module named 'torch'"


def path_of(name: str) -> Path:
    rel = module_file(name)
    return package_dirs()[rel.parts[0]].joinpath(*rel.parts[1:])


def ours(name: str) -> bool:
    return name.split(".")[0] in ("samebits", "verify", "samebits_app")


def is_our_module(name: str) -> bool:
    """Whether ``name`` is a module or package of this checkout (a file or a folder)."""
    top, *rest = name.split(".")
    if top not in package_dirs():
        return top == "samebits_app"
    where = package_dirs()[top].joinpath(*rest)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports_of(name: str, text: str | None = None) -> set[str]:
    """The modules module ``name`` (its file, or ``text``) imports, at any depth (``from X
    import Y``: X, and X.Y where that is a module of ours)."""
    found: set[str] = set()
    tree = ast.parse(path_of(name).read_text() if text is None else text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if ours(node.module) and is_our_module(f"{node.module}.{a.name}"))
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{name}: a relative import: the shim's tests read absolute ones")
    return found


def stdlib_tops() -> list[str]:
    """The top-level standard-library modules the in-environment modules import."""
    return sorted({m.split(".")[0] for n in IN_ENV for m in imports_of(n)
                   if not ours(m) and m.split(".")[0] not in THIRD_PARTY
                   and m != "__future__"})


def outside_the_list(name: str, text: str | None = None) -> list[str]:
    """What module ``name`` imports that the worker does not have: a module of ours not in
    IN_ENV, or a module that is not the standard library, torch or nvidia-ml-py."""
    bad = []
    for m in sorted(imports_of(name, text)):
        top = m.split(".")[0]
        if (m not in IN_ENV) if ours(m) else (
                top not in (*THIRD_PARTY, "__future__") and top not in sys.stdlib_module_names):
            bad.append(f"{name} imports {m}")
    return bad


def test_the_list_is_closed() -> None:
    """What an in-environment module imports of ours is in IN_ENV (so the shim hands it to
    the worker); the rest is the standard library, torch or nvidia-ml-py."""
    assert [b for n in IN_ENV for b in outside_the_list(n)] == []
    families = [f"verify.gpu.workloads.{f}" for f in FAMILIES]  # run_suite's import_module
    assert [f for f in families if f not in IN_ENV] == []


@pytest.mark.parametrize(("name", "statement", "imported"), [
    ("verify.gpu.facts.cpu", "from samebits.ui import Output", "samebits.ui"),
    ("verify.gpu.workloads.settings", "from verify.gpu import compare", "verify.gpu.compare"),
    ("verify.gpu.errorstats.tensorfiles", "import numpy", "numpy"),
    ("samebits.errors", "import yaml", "yaml"),
])
def test_an_import_outside_the_list_is_found(name: str, statement: str, imported: str) -> None:
    """The check is real: one import the worker would not have, added to a module (lazily,
    in a function), is named."""
    text = path_of(name).read_text() + f"\n\ndef _added():\n    {statement}\n"
    assert outside_the_list(name, text) == [f"{name} imports {imported}"]


def test_the_shim_holds_the_list_and_nothing_else() -> None:
    """The worker's folder holds links to exactly the IN_ENV files."""
    with shim() as folder:
        held = {str(p.relative_to(folder)): p.resolve() for p in folder.rglob("*.py")}
    assert held == {str(module_file(n)): path_of(n) for n in IN_ENV}


# What Python 3.8 lacks that samebits' own (3.10+) code uses, and that only a run reaches: in
# a function body (the import test runs module bodies only) or in a module that imports torch
# first (it stops there without torch). (what, the Python that has it)
NEWER = {"str.removeprefix": "3.9", "str.removesuffix": "3.9", "functools.cache": "3.9",
         "dict[...] at run time": "3.9", "zip(strict=)": "3.10",
         "isinstance(x, A | B)": "3.10", "dataclass(slots=, kw_only=)": "3.10"}
GENERICS = ("dict", "list", "tuple", "set", "frozenset", "type")


class _Newer(ast.NodeVisitor):
    """Finds the uses of ``NEWER`` outside annotations (strings under ``from __future__
    import annotations``, never evaluated)."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []

    def visit_arg(self, node: ast.arg) -> None:
        pass  # an annotation only

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for child in [*node.decorator_list, node.args, *node.body]:
            self.visit(child)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("removeprefix", "removesuffix"):
            self.found.append((node.lineno, f"str.{node.attr}"))
        if node.attr == "cache" and isinstance(node.value, ast.Name) \
                and node.value.id == "functools":
            self.found.append((node.lineno, "functools.cache"))
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = {a.name for a in node.names}
        if node.module == "functools" and "cache" in names:
            self.found.append((node.lineno, "functools.cache"))
        if node.module == "dataclasses" and "dataclass" in names:
            self.found.append((node.lineno, "dataclass(slots=, kw_only=)"))

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in GENERICS:
            self.found.append((node.lineno, "dict[...] at run time"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = getattr(node.func, "id", "")
        if name == "zip" and any(k.arg == "strict" for k in node.keywords):
            self.found.append((node.lineno, "zip(strict=)"))
        if name in ("isinstance", "issubclass") and len(node.args) == 2 \
                and isinstance(node.args[1], ast.BinOp):
            self.found.append((node.lineno, "isinstance(x, A | B)"))
        self.generic_visit(node)


def newer_uses(text: str) -> list[tuple[int, str]]:
    finder = _Newer()
    finder.visit(ast.parse(text))
    return sorted(finder.found)


@pytest.mark.parametrize(("line", "what"), [
    ('n = s.removeprefix("torch.")\n', "str.removeprefix"),
    ("x = dict(zip(a, b, strict=True))\n", "zip(strict=)"),
    ("ok = isinstance(x, list | tuple)\n", "isinstance(x, A | B)"),
    ("Outputs = dict[str, int]\n", "dict[...] at run time"),
    ("from dataclasses import dataclass\n", "dataclass(slots=, kw_only=)"),
    ("from functools import cache\n", "functools.cache"),
])
def test_a_newer_feature_is_found(line: str, what: str) -> None:
    """The check is real: each feature it looks for, added to a module, is named."""
    assert newer_uses(line) == [(1, what)]
    annotated = "def f(x: dict[str, int] | None) -> list[int]:\n    y: tuple[int, ...] = ()\n"
    assert newer_uses(annotated) == []  # annotations are strings, never evaluated


def test_no_newer_python_at_run_time() -> None:
    """No in-environment module uses, at run time, what Python 3.8 lacks (``NEWER``): samebits'
    ``_compat`` stands in for dataclass, the rest is written the 3.8 way."""
    found = {n: [f"line {ln}: {what} (Python {NEWER[what]})" for ln, what in
                 newer_uses(path_of(n).read_text())] for n in IN_ENV if n != "samebits._compat"}
    assert {n: f for n, f in found.items() if f} == {}


def _python(line: str) -> Path:
    python = pyenv_python(line)
    if python is None:
        pytest.skip(skip_reason(line))
    return python


@pytest.mark.parametrize("line", LINES)
def test_in_env_modules_compile(line: str, tmp_path: Path) -> None:
    """py_compile of every in-environment file by the real interpreter: no syntax it lacks."""
    python = _python(line)
    files = {n: str(path_of(n)) for n in IN_ENV}
    script = ("import json, py_compile, sys\n"
              "bad = {}\n"
              "for i, (name, path) in enumerate(sorted(json.loads(sys.argv[1]).items())):\n"
              "    try:\n"
              "        py_compile.compile(path, cfile=sys.argv[2] + '/%d.pyc' % i, doraise=True)\n"
              "    except py_compile.PyCompileError as exc:\n"
              "        bad[name] = exc.msg.strip().splitlines()[-1]\n"
              "print(json.dumps(bad))\n")
    proc = subprocess.run([str(python), "-I", "-c", script, json.dumps(files), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}


_IMPORT_EACH = """\
import importlib, importlib.util, json, sys
names, tops = json.loads(sys.argv[1]), json.loads(sys.argv[2])
got = {}
for name in names:
    try:
        importlib.import_module(name)
        got[name] = "ok"
    except BaseException as exc:  # the guard's SystemExit too
        got[name] = "%s: %s" % (type(exc).__name__, exc)
missing = [t for t in tops if importlib.util.find_spec(t) is None]
print(json.dumps({"python": sys.version_info[:2], "imports": got, "missing": missing}))
"""


@pytest.mark.parametrize("line", LINES)
def test_in_env_modules_import(line: str) -> None:
    """Every in-environment module imports on the real interpreter, from the worker's shim in
    its clean environment; with no torch there, those that need torch fail with exactly that
    and nothing else; every standard-library module the list uses exists there."""
    python = _python(line)
    probe = subprocess.run([str(python), "-I", "-c", "import torch"], capture_output=True,
                           timeout=60)
    assert probe.returncode != 0, f"{python} has torch: this test wants it without"
    proc = run_module(str(python), ["-c", _IMPORT_EACH, json.dumps(list(IN_ENV)),
                                    json.dumps(stdlib_tops())], timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["python"] == [int(p) for p in line.split(".")]
    expected = {n: NO_TORCH if n in NEEDS_TORCH else "ok" for n in IN_ENV}
    assert doc["imports"] == expected
    assert doc["missing"] == []


@pytest.mark.parametrize("line", LINES)
def test_settings_hook_starts(line: str, tmp_path: Path) -> None:
    """The paper commands' generated sitecustomize.py compiles on the real interpreter and
    installs its torch hook at start-up; a process that never imports torch runs as usual."""
    from samebits_app.paper import hook
    from verify.gpu.workloads.settings import DETERMINISTIC

    python = _python(line)
    folder = tmp_path / "hook"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(hook.source(DETERMINISTIC.to_dict(),
                                                         str(tmp_path / hook.READBACK)))
    py_compile.compile(str(folder / "sitecustomize.py"), cfile=str(tmp_path / "hook.pyc"),
                       doraise=True)  # this Python's verdict; the real one's next
    env = {**worker_environ(), "PYTHONPATH": str(folder)}
    proc = subprocess.run([str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2], "
                           "type(sys.meta_path[0]).__name__)"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", f"{line} _AfterTorch\n")
    assert not (tmp_path / hook.READBACK).exists()  # no torch imported: nothing applied


_ENDING = """
import atexit, sys
from samebits.gcpause import exit_now
class Kept:
    def __del__(self):
        sys.stderr.write("torn down\\n")
kept = Kept()  # freed by the interpreter's teardown, which a normal exit runs
atexit.register(lambda: sys.stderr.write("atexit\\n"))  # where coverage saves its data
sys.stdout.write("x" * 200000 + "\\n")   # more than a pipe holds: flushed before the exit
sys.stderr.write("said\\n")
exit_now(3) if sys.argv[1] == "now" else sys.exit(3)
"""


@pytest.mark.parametrize("line", (*LINES, "this"))
def test_a_worker_ends_without_teardown(line: str) -> None:
    """``samebits.gcpause.exit_now``, the end of the canary and the workers, on the
    environment's Python, through the real launcher: everything written is read whole, the
    exit code is the given one, the ``atexit`` callbacks run (a subprocess's coverage is saved
    there), and the interpreter's teardown does not (torch's took 0.4-0.6 s of each canary).
    Ended by ``sys.exit``, the same script's teardown is seen: the check can fail."""
    python = sys.executable if line == "this" else str(_python(line))
    out = "x" * 200000 + "\n"
    now = run_module(python, ["-c", _ENDING, "now"], timeout=60)
    assert (now.returncode, now.stdout, now.stderr) == (3, out, "said\natexit\n")
    slow = run_module(python, ["-c", _ENDING, "exit"], timeout=60)
    assert (slow.returncode, slow.stdout, slow.stderr) == (3, out, "said\natexit\ntorn down\n")

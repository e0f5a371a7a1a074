"""Layers import one way: core -> verify -> composition (docs/explanation/architecture.md).

    core         samebits.*: imports nothing of verify or samebits_app
    verify       verify.*: imports the core only, never samebits_app
    composition  samebits_app.* (and the ``python -m samebits`` shim): imports both
    worker       verify.gpu.workloads.*, verify.gpu.facts.*, verify.gpu.errorstats: what runs
                 inside other people's environments, so only the standard library, torch,
                 nvidia-ml-py, itself and samebits' stdlib-only errors/_io/childenv/_compat and
                 gcpause (how a worker ends)

Imports are read with ``ast`` from every module, including imports inside functions: a lazy
back-edge is still a back-edge. So are the modules a module reaches without an import
statement: ``importlib.import_module("m")`` (an f-string counts by its constant head), a
``"-m", "m"`` pair in a command line, and any string that is exactly one of our modules' names
(``set_forkserver_preload(["verify.env.hashing"])``).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from verify.gpu.workloads.settings import DETERMINISTIC

ROOT = Path(__file__).resolve().parents[2]
WORKER = ("verify.gpu.workloads", "verify.gpu.facts", "verify.gpu.errorstats")
WORKER_MAY_IMPORT = ("torch", "pynvml", "samebits.errors", "samebits._io", "samebits.childenv",
                     "samebits._compat", "samebits.gcpause", *WORKER)


def layer(module: str) -> str | None:
    if module == "samebits.__main__" or module.startswith("samebits_app"):
        return "composition"
    if module == "samebits" or module.startswith("samebits."):
        return "core"
    if module == "verify" or module.startswith("verify."):
        return "verify"
    return None


def is_worker(module: str) -> bool:
    return any(module == w or module.startswith(w + ".") for w in WORKER)


ALLOWED = {"core": {"core"}, "verify": {"core", "verify"},
           "composition": {"core", "verify", "composition"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import statement of ``text`` (the module at
    ``path``), at any depth."""
    tree = ast.parse(text, filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            # `from samebits import app` imports samebits_app
            out.extend((node.lineno, f"{mod}.{a.name}") for a in node.names
                       if layer(f"{mod}.{a.name}") and (ROOT / Path(*f"{mod}.{a.name}"
                                                                   .split("."))).is_dir())
        elif isinstance(node, ast.Call) and _name(node.func) in ("import_module", "__import__") \
                and node.args and (head := _head(node.args[0])):
            out.append((node.lineno, head))
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = node.elts
            out.extend((b.lineno, head) for a, b in zip(items, items[1:], strict=False)
                       if isinstance(a, ast.Constant) and a.value == "-m" and (head := _head(b)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "." in node.value and is_module(node.value):
            out.append((node.lineno, node.value))
    return list(dict.fromkeys(out))  # a "-m" pair's module is also a module-name string


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _head(node: ast.expr) -> str:
    """The module a string names: a constant, or an f-string's constant head up to its first
    placeholder ("verify.gpu.workloads.{family}" -> verify.gpu.workloads)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values \
            and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).rstrip(".")
    return ""


def is_module(name: str) -> bool:
    """Whether ``name`` is one of our modules or packages (a file or folder of the tree)."""
    parts = name.split(".")
    if layer(name) is None or not all(p.isidentifier() for p in parts):
        return False
    path = ROOT / Path(*parts)
    return path.is_dir() or path.with_suffix(".py").is_file()


def modules() -> list[Path]:
    return sorted(p for pkg in ("samebits", "samebits_app", "verify")
                  for p in (ROOT / pkg).rglob("*.py"))


def back_edges(sources: dict[Path, str]) -> list[str]:
    """Every import of ``sources`` (path -> module text) that breaks a layer rule."""
    bad = []
    for path, text in sources.items():
        mod = module_name(path)
        here = layer(mod)
        assert here is not None, mod
        for line, imported in imports_of(path, text):
            there = layer(imported)
            if there is not None and there not in ALLOWED[here]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {here} module {mod} imports "
                           f"{there} module {imported}")
            if is_worker(mod):
                top = imported.split(".")[0]
                if top in sys.stdlib_module_names or top == "__future__":
                    continue
                if not any(imported == w or imported.startswith(w + ".")
                           for w in WORKER_MAY_IMPORT) and imported not in ("samebits",
                                                                             "verify"):
                    bad.append(f"{path.relative_to(ROOT)}:{line}: worker module {mod} imports "
                               f"{imported} (only the standard library, torch, nvidia-ml-py "
                               "and samebits.errors/_io/childenv/_compat/gcpause)")
    return bad


def test_no_back_edges() -> None:
    """No core module imports verify or the composition; verify never imports the
    composition; the worker imports only what a torch-only environment has."""
    assert back_edges({p: p.read_text() for p in modules()}) == []


@pytest.mark.parametrize(("where", "line"), [
    ("samebits/lock/model.py", "from verify.env.records import Package\n"),
    ("samebits/install/prefix.py", "    import samebits_app.cli\n"),
    ("verify/env/drift.py", "from samebits_app.audit import verdict\n"),
    ("verify/gpu/workloads/gemm.py", "import yaml\n"),
    ("verify/gpu/facts/cpu.py", "from samebits.lock.model import Lock\n"),
    ("verify/env/records.py", "from ...samebits_app import cli\n"),
    ("samebits/install/prefix.py", "subprocess.run([sys.executable, '-m', 'verify', 'env'])\n"),
    ("samebits/render/image.py", "subprocess.run([python, \"-m\", \"samebits_app.cli\"])\n"),
    ("verify/env/hashing.py", "importlib.import_module(f\"samebits_app.{name}\")\n"),
    ("verify/gpu/probe.py", "WORKER = \"samebits_app.audit.runtime\"\n"),
    ("verify/gpu/workloads/gemm.py", "importlib.import_module(\"verify.env.drift\")\n"),
])
def test_one_back_edge_fails(where: str, line: str) -> None:
    """The check is real: one back-edge import added to a module's text is named."""
    path = ROOT / where
    assert back_edges({path: path.read_text()}) == []
    found = back_edges({path: path.read_text() + line})
    assert len(found) == 1, found
    assert found[0].startswith(f"{where}:")


def _torch_closure() -> list[Path]:
    """The installed files of torch and everything it requires (its own requirements,
    recursively, without extras): what `pip install torch` puts in a fresh venv."""
    from packaging.requirements import Requirement

    seen: dict[str, metadata.Distribution] = {}
    todo = ["torch"]
    while todo:
        name = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform
        key = dist.metadata["Name"].lower()
        if key in seen:
            continue
        seen[key] = dist
        for req in dist.requires or ():
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    tops: set[Path] = set()
    for dist in seen.values():
        for f in dist.files or ():
            top = f.parts[0]
            if top.endswith((".pth", ".py")) or top in ("..", "__pycache__"):
                if top.endswith(".py"):
                    tops.add(Path(dist.locate_file(top)))
                continue
            tops.add(Path(dist.locate_file(top)))
    return sorted(tops)


@pytest.mark.slow
def test_worker_runs_in_a_torch_only_venv(tmp_path: Path) -> None:
    """`python -m verify.gpu.workloads` and `python -m verify.gpu.errorstats` run in a venv that
    holds torch and its own requirements alone, with samebits' two packages on PYTHONPATH (as
    `samebits attest` runs them): no yaml, rattler, packaging or rich needed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    line = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = venv / "lib" / line / "site-packages"
    for top in _torch_closure():
        os.symlink(top, site / top.name)
    shim = tmp_path / "path"
    shim.mkdir()
    for pkg in ("samebits", "verify"):
        os.symlink(ROOT / pkg, shim / pkg)
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(shim), "OMP_NUM_THREADS": "1"}
    python = str(venv / "bin" / "python")
    probe = subprocess.run([python, "-c", "import yaml"], capture_output=True, env=env,
                           cwd=tmp_path)
    assert probe.returncode != 0, "the venv must not see this interpreter's packages"
    settings = json.dumps(DETERMINISTIC.to_dict())
    out = tmp_path / "outputs"
    proc = subprocess.run([python, "-m", "verify.gpu.workloads", "--facts", "--only", "sum_fp32",
                           "--settings", settings, "--save-outputs", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["workloads"]["sum_fp32"]["status"] == "ok"
    assert doc["facts"]["torch"]["version"]
    proc = subprocess.run([python, "-m", "verify.gpu.errorstats", str(out), str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}

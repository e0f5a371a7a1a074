"""The package layers import one way: core -> verify -> composition (README "Layout").

    core         samebits.* except samebits.app: imports nothing of verify or samebits.app
    verify       verify.*: imports the core only, never samebits.app
    composition  samebits.app.* (and the ``python -m samebits`` shim): imports both
    worker       verify.workloads.*, verify.facts.*, verify.errorstats: what runs inside other
                 people's environments, so only the standard library, torch, nvidia-ml-py,
                 itself and samebits' stdlib-only errors/_io/childenv

Imports are read with ``ast`` from every module, including imports inside functions: a lazy
back-edge is still a back-edge.
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

from verify.workloads.settings import DETERMINISTIC

ROOT = Path(__file__).resolve().parent.parent
WORKER = ("verify.workloads", "verify.facts", "verify.errorstats")
WORKER_MAY_IMPORT = ("torch", "pynvml", "samebits.errors", "samebits._io", "samebits.childenv",
                     *WORKER)


def layer(module: str) -> str | None:
    if module == "samebits.__main__" or module.startswith("samebits.app"):
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
            # `from samebits import app` imports samebits.app
            out.extend((node.lineno, f"{mod}.{a.name}") for a in node.names
                       if layer(f"{mod}.{a.name}") and (ROOT / Path(*f"{mod}.{a.name}"
                                                                   .split("."))).is_dir())
    return out


def modules() -> list[Path]:
    return sorted(p for pkg in ("samebits", "verify") for p in (ROOT / pkg).rglob("*.py"))


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
                               "and samebits.errors/_io/childenv)")
    return bad


def test_no_back_edges() -> None:
    """No core module imports verify or the composition; verify never imports the
    composition; the worker imports only what a torch-only environment has."""
    assert back_edges({p: p.read_text() for p in modules()}) == []


@pytest.mark.parametrize(("where", "line"), [
    ("samebits/lockfile.py", "from verify.records import Package\n"),
    ("samebits/install/prefix.py", "    import samebits.app.cli\n"),
    ("verify/drift.py", "from samebits.app.audit import verdict\n"),
    ("verify/workloads/gemm.py", "import yaml\n"),
    ("verify/facts/cpu.py", "from samebits.lockfile import Lock\n"),
    ("verify/records.py", "from ..samebits.app import cli\n"),
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
    """`python -m verify.workloads` and `python -m verify.errorstats` run in a venv that holds
    torch and its own requirements alone, with samebits' two packages on PYTHONPATH (as
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
    proc = subprocess.run([python, "-m", "verify.workloads", "--facts", "--only", "sum_fp32",
                           "--settings", settings, "--save-outputs", str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["workloads"]["sum_fp32"]["status"] == "ok"
    assert doc["facts"]["torch"]["version"]
    proc = subprocess.run([python, "-m", "verify.errorstats", str(out), str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}

"""Our fatbin reader beside NVIDIA's ``cuobjdump`` on the same files, entry for entry.

    python -m tests.gpu.cuobjdump_compare [--prefix P] [--cuobjdump TOOL] [--json]

Every file under ``P`` (default: the site-packages folder torch is installed in) that the
coverage scan finds device code in is listed by ``cuobjdump --list-elf`` and ``--list-ptx``;
the SASS and PTX entries of its ``.nv_fatbin`` section, named cuobjdump's way, must be the same
list in the same order. Prints one line per file; exit 0 when every file agrees, 1 when one
does not (the first entries that differ are printed), 2 when cuobjdump is missing.
``tests/integration/test_coverage_network.py`` uses ``ours`` and ``theirs`` on the locked wheels;
``tests/gpu/run.sh`` runs this on the GPU machine's own torch.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from verify.kernels.fatbin import STRICT_SECTION, read_file


def theirs(tool: Path, path: Path, kind: str) -> list[str]:
    """cuobjdump --list-elf / --list-ptx: "ELF file 1: libx.1.sm_90a.cubin" -> "sm_90a"."""
    out = subprocess.run([str(tool), f"--list-{kind}", str(path)], capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0 and "does not contain" not in out.stderr:
        raise RuntimeError(f"{tool} --list-{kind} {path}: exit {out.returncode}: "
                           f"{out.stderr.strip()[-300:]}")
    return re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)$", out.stdout, re.M)


def ours(path: Path, kind: str) -> list[str]:
    """Our entries of .nv_fatbin (what cuobjdump lists), named its way: PTX as sm_XY, and a
    family-specific sm_103f as sm_103 (cuobjdump drops the "f", keeps the "a")."""
    names = []
    for fat in read_file(path).fatbins:
        if fat.section != STRICT_SECTION:
            continue
        for e in fat.entries:
            if (kind == "elf" and e.is_sass) or (kind == "ptx" and e.is_ptx):
                names.append(f"sm_{e.arch}{'a' if e.variant == 'a' else ''}")
    return names


def torch_site() -> Path:
    """The folder torch is installed in (its site-packages): torch's CUDA libraries, the
    nvidia-* wheels and triton are there; a system prefix's other files are not read."""
    import torch

    return Path(torch.__file__).resolve().parents[1]


def _first_difference(a: list[str], b: list[str]) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
              min(len(a), len(b)))
    return f"entry {at}: ours {a[at:at + 3]} vs cuobjdump {b[at:at + 3]}"


def compare(prefix: Path, tool: Path) -> list[dict]:
    from verify.kernels.codescan import scan_prefix

    rows = []
    for lib in scan_prefix(prefix).libraries:
        path = prefix / lib.path
        row: dict = {"path": lib.path, "agree": True}
        for kind in ("elf", "ptx"):
            a, b = ours(path, kind), theirs(tool, path, kind)
            row[kind] = len(b)
            if a != b:
                row["agree"] = False
                row[f"{kind}_difference"] = _first_difference(a, b)
        rows.append(row)
    return rows


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.gpu.cuobjdump_compare")
    p.add_argument("--prefix", type=Path,
                   help="default: the site-packages folder torch is installed in")
    p.add_argument("--cuobjdump", type=Path, help="default: cuobjdump on PATH")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    found = shutil.which("cuobjdump")
    tool = args.cuobjdump or (Path(found) if found else None)
    if tool is None or not tool.exists():
        print("cuobjdump: not found (give --cuobjdump TOOL)", file=sys.stderr)
        return 2
    prefix = (args.prefix or torch_site()).absolute()
    rows = compare(prefix, tool)
    if args.json:
        print(json.dumps({"prefix": str(prefix), "files": rows}, indent=1))
    for r in rows:
        mark = "agree" if r["agree"] else "DIFFER"
        why = "; ".join(r[k] for k in ("elf_difference", "ptx_difference") if k in r)
        print(f"{mark:6} {r['elf']:5} SASS {r['ptx']:4} PTX  {r['path']}"
              + (f"  ({why})" if why else ""), file=sys.stderr if args.json else sys.stdout)
    bad = sum(not r["agree"] for r in rows)
    print(f"{len(rows)} files with device code under {prefix}: "
          f"{len(rows) - bad} agree with {tool}, {bad} differ", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

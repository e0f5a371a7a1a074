"""Lock environments/examples/paper-cpu.toml where download.pytorch.org is not reachable.

    python examples/paper/make_lock.py --wheel /opt/wheels/torch-2.13.0+cpu-...whl

The spec asks for one file by its official URL (``torch @ https://download.pytorch.org/...``)
and its dependencies from PyPI. ``samebits lock examples/paper-cpu`` does exactly that where the
URL answers: uv reads the wheel's metadata, resolves the dependencies on PyPI and records the
URL with the sha256 of the bytes it downloaded. Where the URL does not answer, this script
runs the same solve (``samebits.lock.make.solve_spec``, uv, the spec's ``exclude-newer``) on a
local copy of that file, then writes the official URL back in its place; the sha256 is the
local file's, so an install fails unless the bytes it fetches are those bytes. Everything
else (the dependencies, the metadata, ``spec-digest``) is what ``samebits lock`` writes, and
``samebits lock --check examples/paper-cpu`` says so.

Writes lockfiles/examples/paper-cpu.conda-lock.yml and the paper's copy,
examples/paper/conda-lock.yml (the same bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from samebits._io import atomic_write  # noqa: E402
from samebits.lock.make import content_hashes, custom_metadata, header, solve_spec  # noqa: E402
from samebits.lock.model import render_lock  # noqa: E402
from samebits.project import Project  # noqa: E402
from samebits.spec.read import read_spec  # noqa: E402

ENV_ID = "examples/paper-cpu"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheel", type=Path, required=True,
                   help="a local copy of the file the spec names by URL")
    args = p.parse_args()
    project = Project.at(ROOT)
    spec = read_spec(project.spec_path(ENV_ID), root=ROOT)
    (url_req,) = [r for r in spec.pypi_requirements if " @ " in r]
    name, url = (s.strip() for s in url_req.split(" @ ", 1))
    filename = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    if args.wheel.name != filename:
        sys.exit(f"{args.wheel}: not {filename}, the file {url} names")
    local = f"{name} @ {args.wheel.resolve().as_uri()}"
    solvable = replace(spec, pypi_requirements=tuple(
        local if r == url_req else r for r in spec.pypi_requirements))
    path = project.lock_path(ENV_ID)
    sources = [os.path.relpath(ROOT / s, path.parent) for s in spec.sources]
    lock = asyncio.run(solve_spec(solvable, sources=sources))
    packages = tuple(replace(q, url=url) if q.name == name and q.manager == "pip" else q
                     for q in lock.packages)
    lock = replace(lock, packages=packages, content_hash=content_hashes(spec),
                   custom=custom_metadata(spec), header=header(spec))
    text = render_lock(lock)
    atomic_write(path, text)
    shutil.copyfile(path, Path(__file__).parent / "conda-lock.yml")
    print(f"{path.relative_to(ROOT)} and examples/paper/conda-lock.yml: "
          f"{len(packages)} packages; {name} from {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

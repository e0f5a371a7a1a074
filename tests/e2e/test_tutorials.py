"""The tutorials walked as written (issue 45): the marked code blocks of docs/tutorials/, in
page order, in a scratch folder; every command gives the exit code and the lines its page shows
(tests/fixtures/walk.py: how a block is marked and read, how shown lines are matched).

Each walk runs in a reader's shell: HOME is a scratch folder holding ``samebits``, a link to
this checkout (the pages' ``~/samebits``), the cache is empty, ``samebits`` runs this checkout.
What a walk changes is listed in its ``StandIn`` rows, each with why; nothing else is.

    author (CI)                   the steps that need no lock: the folder, requirements.txt,
                                  init (exit 2, then --generation cpu), keygen
    reviewer (CI)                 the five commands and the audit without a manifest, on the
                                  lock-only paper of tests/fixtures/audit.py, signed and bundled
    cluster-admin (CI)            section 1: check, from the committed coverage table
    author + reviewer (slow)      every step of both pages, the reviewer working from what the
                                  author's walk published, on torch 2.13.0's CPU build
    reviewer-example (slow)       the quickstart's audit of examples/paper, then OMP_NUM_THREADS=1
    cluster-admin-install (heavy) section 2: install and bundle the hopper lock (GBs of CUDA)
    cluster-admin-fleet (slow)    section 3's small run: two ranks under torchrun in a venv
                                  holding torch alone, and its report read again
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tests.fixtures.audit import (  # noqa: F401  (fixtures)
    Paper,
    _archives_folder,
    elves,
    paper,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from tests.fixtures.pypi_index import LocalIndex, Serving
from tests.fixtures.tutorial_index import local_torch, mirror, static_index, upload_times
from tests.fixtures.walk import Step, environ, page_steps, run_step, shim, unmatched

ROOT = Path(__file__).resolve().parents[2]
AUTHOR = "docs/tutorials/author.md"
REVIEWER = "docs/tutorials/reviewer.md"
ADMIN = "docs/tutorials/cluster-admin.md"
# the pages show what Python 3.11 prints (the example's Python; the mirror's torch is cp311)
ON_311 = pytest.mark.skipif(sys.version_info[:2] != (3, 11),
                            reason="the tutorials show what samebits prints on Python 3.11")
PYPI_COUNTS = "PyPI's torch brings 19 CUDA packages, the mirror's CPU build none"


@dataclass(frozen=True, slots=True, kw_only=True)
class StandIn:
    """What a walk changes in the commands starting with ``prefix``, and why."""

    prefix: str
    why: str
    append: tuple[str, ...] = ()  # arguments added to the command
    replace: tuple[tuple[str, str], ...] = ()  # (as written, as run) in the command
    shown: tuple[tuple[str, str], ...] = ()  # (as the page shows, as the stand-in prints)
    before: Callable[[Path], None] | None = None  # run in the walk's folder first


@dataclass(kw_only=True)
class Reader:
    """One reader's shell: home, folder, environment; ``walk`` runs steps in it."""

    home: Path
    cwd: Path
    env: dict[str, str]
    timeout: float = 900

    def walk(self, steps: Sequence[Step], stand_ins: Sequence[StandIn] = ()) -> None:
        assert steps, "no step to walk: is the page's walk mark gone?"
        for step in steps:
            applied = [s for s in stand_ins if step.command.startswith(s.prefix)]
            command = re.sub(r"\s+#.*$", "", step.command) if applied else step.command
            shown = list(step.shown)
            for s in applied:
                for old, new in s.replace:
                    command = command.replace(old, new)
                command = " ".join([command, *s.append])
                shown = [_rewrite(line, s.shown) for line in shown]
                if s.before is not None:
                    s.before(self.cwd)
            result = run_step(replace(step, command=command), cwd=self.cwd, env=self.env,
                              timeout=self.timeout)
            missing = unmatched(shown, result, str(self.home))
            if result.rc != step.exit or missing:
                pytest.fail(f"{step.where()}: `{step.command}`"
                            + (f" (run as `{command}`)" if command != step.command else "")
                            + f"\n  exit {result.rc}, the page says {step.exit}"
                            + "".join(f"\n  not in the output: {line}" for line in missing)
                            + f"\n{result.output()[-6000:]}", pytrace=False)
            self.cwd = result.cwd

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        """`samebits ARGS` in the reader's shell, outside the walk (what the test sets up)."""
        proc = subprocess.run(["samebits", *map(str, args)], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=self.timeout)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc


def _rewrite(line: str, pairs: Sequence[tuple[str, str]]) -> str:
    for old, new in pairs:
        line = line.replace(old, new)
    return line


def make_reader(base: Path, name: str, **env: str) -> Reader:
    """A reader whose home and folder are under ``base``; ``~/samebits`` is this checkout;
    ``env``: variables their shell sets."""
    home = base / name
    home.mkdir(parents=True)
    (home / "samebits").symlink_to(ROOT)
    shell = environ(home, shim(base / f"{name}-bin", sys.executable), base / f"{name}-cache",
                    **env)
    return Reader(home=home, cwd=home, env=shell)


@pytest.fixture(scope="session")
def index_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The recorded PyPI pages of torch 2.13.0 and numpy 2.4.6, as a file:// index."""
    return static_index(tmp_path_factory.mktemp("tutorial-index"))


def init_stand_in(index: str) -> StandIn:
    return StandIn(prefix="samebits init ", append=("--index", index),
                   why="init reads the recorded PyPI pages instead of PyPI")


def author_cheap(steps: Sequence[Step]) -> list[Step]:
    """The author's steps that need no lock: those before `samebits lock`, and keygen."""
    first_lock = next(i for i, s in enumerate(steps) if s.command.startswith("samebits lock"))
    return [s for i, s in enumerate(steps)
            if i < first_lock or s.command.startswith("samebits keygen")]


@ON_311
def test_author_walk_without_a_lock(tmp_path: Path, index_url: str) -> None:
    """The author's page up to its lock, and keygen: init exits 2 asking for --generation,
    says the choices, then writes the spec with --generation cpu; the key is made."""
    reader = make_reader(tmp_path, "author")
    steps = author_cheap(page_steps(ROOT, AUTHOR, "author"))
    assert [s.exit for s in steps if s.command.startswith("samebits init")] == [2, 0]
    reader.walk(steps, [init_stand_in(index_url)])
    spec = (reader.cwd / "environments" / "mypaper.toml").read_text()
    assert 'generation = "cpu"' in spec and 'python = "3.11"' in spec
    assert (reader.home / "keys" / "mypaper").stat().st_mode & 0o777 == 0o600


def published_stand_in(paper: Paper, reader: Reader, authors: Path) -> None:
    """What the authors publish, made from tests/fixtures/audit.py's paper (a lock, its
    attestation and saved outputs): ``paper/`` with the attestation signed by a key of
    `samebits keygen`, ``mypaper.pub`` beside it, ``mypaper.bundle.tar`` of its lock."""
    from samebits.dsse import load_signing_key, signed_bytes

    folder = reader.cwd
    shutil.copytree(paper.folder, folder / "paper")
    reader.run("keygen", "--out", authors / "mypaper")
    shutil.copyfile(authors / "mypaper.pub", folder / "mypaper.pub")
    att = folder / "paper" / "reference.attestation.json"
    att.write_bytes(signed_bytes(att.read_bytes(), load_signing_key(authors / "mypaper")))
    # the bundle's archives come from the authors' cache, as after their install (bundle
    # reads no file:// folder it is not told of, and the small paper's lock names some)
    cache = authors / "cache"
    reader.run("install", "paper/conda-lock.yml", "--target", authors / "env", "--cache-dir",
               cache, "--find-links", _archives_folder(paper.lockfile))
    reader.run("bundle", "paper/conda-lock.yml", "--out", "mypaper.bundle.tar", "--cache-dir",
               cache)


def test_reviewer_walk_on_a_small_paper(tmp_path: Path, paper: Paper) -> None:
    """The reviewer's five commands and the audit without a manifest, on a small published
    paper: the signature is good, the bundle checks, installs offline and verifies, the audit
    is bit-identical and the compare identical."""
    # the small paper was attested with OMP_NUM_THREADS=2 (tests/fixtures/audit.py): the
    # reviewer's shell sets it too, or a machine of more cores is another equivalence class
    reader = make_reader(tmp_path, "reviewer", OMP_NUM_THREADS="2")
    published_stand_in(paper, reader, tmp_path / "authors")
    torchless = StandIn(prefix="samebits audit ", append=("--workload-python", sys.executable),
                        why="the small paper's environment has no torch: the workloads run "
                            "on this interpreter, as they did when it was attested")
    reader.walk(page_steps(ROOT, REVIEWER, "reviewer"), [torchless])
    assert (reader.cwd / "build" / "audit-env" / "audit.json").is_file()


def test_cluster_admin_walk_checks_the_committed_lock(tmp_path: Path) -> None:
    """Section 1: the hopper lock runs on an H100 with driver 580.65.06 (exit 0) and not with
    535.104 (exit 1), read from the committed coverage table, nothing downloaded."""
    reader = make_reader(tmp_path, "admin")
    reader.walk(page_steps(ROOT, ADMIN, "cluster-admin"))
    assert not (tmp_path / "admin-cache" / "samebits" / "archives").exists()


def venv_with_torch_alone(folder: Path) -> None:
    """``folder/venv``: a venv holding torch 2.13.0 and what it requires, nothing else, installed
    by pip from its find-links (the CPU build on this project's machines)."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
                    "--quiet", "--only-binary", ":all:", "torch==2.13.0"], check=True,
                   timeout=900)


@ON_311
@pytest.mark.network
@pytest.mark.slow
def test_cluster_admin_fleet_walk(tmp_path: Path) -> None:
    """Section 3's small run: `samebits verify fleet --prefix ./venv ... -- torchrun
    --nproc-per-node 2` in a venv holding torch alone, consistent, and its report read again."""
    reader = make_reader(tmp_path, "admin")
    reader.walk(page_steps(ROOT, ADMIN, "cluster-admin-fleet"), [StandIn(
        prefix="samebits verify fleet --prefix ./venv", before=venv_with_torch_alone,
        why="the page's venv holding torch alone is made first (pip, torch 2.13.0)")])
    assert json.loads((reader.cwd / "fleet.json").read_text())["verdict"] == "consistent"
    assert not list(reader.cwd.glob(".samebits-fleet-*"))  # the rank program's folder is gone


# ---- the whole pages, slow: every step, a real torch environment ---------------------------


@pytest.fixture(scope="module")
def mirror_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The mirror of tests/fixtures/tutorial_index.py on a loopback port."""
    if local_torch() is None:
        pytest.skip("torch 2.13.0's CPU wheel is not in pip's find-links folder "
                    "(PIP_FIND_LINKS); this walk does not download 192 MB")
    folder = mirror(tmp_path_factory.mktemp("tutorial-mirror"))
    with Serving(LocalIndex(folder=folder, upload_times=upload_times())) as url:
        yield url


def to_mirror(index: str, mirror_url: str) -> Callable[[Path], None]:
    def edit(cwd: Path) -> None:
        spec = cwd / "environments" / "mypaper.toml"
        text = spec.read_text()
        assert f'index = "{index}"' in text
        spec.write_text(text.replace(f'index = "{index}"', f'index = "{mirror_url}"'))
    return edit


@ON_311
@pytest.mark.slow
@pytest.mark.network
def test_author_then_reviewer_walk(tmp_path: Path, index_url: str, mirror_url: str) -> None:
    """Every step of the author's page, then the reviewer's five commands on what it
    published: a lock, an environment, a signed attestation, a bundle; bit-identical."""
    author = make_reader(tmp_path, "author")
    stand_ins = [
        init_stand_in(index_url),
        StandIn(prefix="samebits lock ", before=to_mirror(index_url, mirror_url),
                shown=(("(linux-64: 30 packages)", "(linux-64: 11 packages)"),),
                why="the spec's index is the mirror from here on: " + PYPI_COUNTS),
        StandIn(prefix="samebits bundle mypaper ",
                shown=(("linux-64: 30 archives", "linux-64: 11 archives"),), why=PYPI_COUNTS),
    ]
    author.walk(page_steps(ROOT, AUTHOR, "author"), stand_ins)
    reviewer = make_reader(tmp_path, "reviewer")
    shutil.copytree(author.cwd / "paper", reviewer.cwd / "paper")
    shutil.copyfile(author.cwd / "mypaper.bundle.tar", reviewer.cwd / "mypaper.bundle.tar")
    shutil.copyfile(author.home / "keys" / "mypaper.pub", reviewer.cwd / "mypaper.pub")
    reviewer.walk(page_steps(ROOT, REVIEWER, "reviewer"))
    doc = json.loads((reviewer.cwd / "build" / "audit" / "audit.json").read_text())
    assert doc["verdict"]["level"] == "bit-identical"
    assert [s["status"] for s in doc["steps"]].count("ok") == len(doc["steps"])


@pytest.mark.slow
@pytest.mark.network
def test_reviewer_quickstart_walk(tmp_path: Path) -> None:
    """The quickstart's audit of examples/paper (torch from /opt/wheels as the page says, the
    small wheels from PyPI), then the same environment with OMP_NUM_THREADS=1: exit 0."""
    if not Path("/opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").is_file():
        pytest.skip("the page's /opt/wheels holds no torch 2.13.0 CPU wheel here")
    reader = make_reader(tmp_path, "reviewer")
    checkout = reader.home / "checkout"  # the page's checkout, without writing into ours
    shutil.copytree(ROOT / "examples", checkout / "examples")
    reader.cwd = checkout
    reader.walk(page_steps(ROOT, REVIEWER, "reviewer-example"))
    assert (checkout / "build" / "audit-omp1" / "audit.json").is_file()


@pytest.mark.heavy
@pytest.mark.network
def test_cluster_admin_install_walk(tmp_path: Path) -> None:
    """Section 2: the hopper lock installed, bundled, and installed again from the bundle
    (2.7 GB of CUDA wheels from PyPI), each install identical to the lock."""
    reader = make_reader(tmp_path, "admin")
    project = reader.home / "project"  # the checkout's locks, without writing into it
    for name in ("environments", "lockfiles", "containers"):  # copies (2 MB): a lock read
        shutil.copytree(ROOT / name, project / name)  # through a link renders another origin
    reader.cwd = project
    nodes = [StandIn(prefix=f"samebits install {how}",
                     replace=(("/opt/env", str(reader.home / node / "opt" / "env")),),
                     why="each node's /opt/env is a folder of the walk's")
             for how, node in (("hopper ", "node1"), ("--from-bundle ", "node2"))]
    reader.walk(page_steps(ROOT, ADMIN, "cluster-admin-install"), nodes)

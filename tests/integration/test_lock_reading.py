"""Reading a lockfile: every required field and every hash checked, each problem named by
file, package and field, before any command downloads, installs or renders anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conda_lock.lockfile import parse_conda_lock_file

from samebits.errors import LockfileError
from samebits.lock.model import parse_lock

MD5 = "0123456789abcdef0123456789abcdef"
SHA = "a46a8cc84112d769d0f57bf3ae3fedc115cf09348f14da85a1a8200968b6f262"
GOOD = f"""\
version: 1
metadata:
  content_hash:
    linux-64: 006321794619e88b299093315d0cd03907368872ca446e1e1fb59de2daee6cf7
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - ../environments/env.toml
package:
- name: python
  version: 3.12.7
  manager: conda
  platform: linux-64
  dependencies: {{}}
  url: https://conda.anaconda.org/conda-forge/linux-64/python-3.12.7-h0_0.conda
  hash:
    md5: {MD5}
    sha256: {SHA}
  build: h0_0
  category: main
  optional: false
- name: cuda-pathfinder
  version: 1.9.1
  manager: pip
  platform: linux-64
  dependencies: {{}}
  url: https://files.pythonhosted.org/packages/cuda_pathfinder-1.9.1-py3-none-any.whl
  hash:
    sha256: {SHA}
  category: main
  optional: false
"""
CUT_HINT = ("its last entry is incomplete: the file looks cut short; restore it (git checkout) "
            "or re-create it with `samebits lock`")
RESTORE = "restore it (git checkout) or re-create it with `samebits lock`"
PIP = "package[1] cuda-pathfinder (linux-64)"
CONDA = "package[0] python (linux-64)"


def test_the_good_lock_is_one_conda_lock_reads() -> None:
    """The base of every case below is a valid lock by conda-lock's own parser and ours."""
    doc = yaml.safe_load(GOOD)
    assert [p["name"] for p in doc["package"]] == ["python", "cuda-pathfinder"]


def _cut(after: str) -> str:
    return GOOD[:GOOD.index(after) + len(after)]


CASES = [
    ("empty", "", "{f}: not a conda-lock file: empty file", RESTORE),
    ("only a comment", "# nothing\n", "{f}: not a conda-lock file: empty file", RESTORE),
    ("a list", "- 1\n- 2\n", "{f}: not a conda-lock file: the document is a list, not a "
     "mapping with version, metadata and package", RESTORE),
    ("cut inside the last entry", _cut("  url: https://files.pythonhosted.org/packages/"
                                       "cuda_pathfinder-1.9.1-py3-none-any.whl\n"),
     f"{{f}}: 2 problems:\n  {PIP}: hash: missing\n  {PIP}: optional: missing", CUT_HINT),
    ("cut after a name", _cut("- name: cuda-pathfinder\n"),
     "{f}: 6 problems:\n" + "".join(f"  package[1] cuda-pathfinder: {k}: missing\n" for k in (
         "version", "manager", "platform", "url", "hash")) +
     "  package[1] cuda-pathfinder: optional: missing", CUT_HINT),
    ("cut inside a quoted value", _cut("  - ../environments/env.toml\n") + "package:\n- name: '",
     "{f}: not YAML (line 13, column 10): found unexpected end of stream while scanning a "
     "quoted scalar (the file may be cut short)", RESTORE),
    ("no package list", _cut("  - ../environments/env.toml\n"),
     "{f}: not a conda-lock file: package: missing",
     RESTORE),
    ("non-hex sha256", GOOD.replace(f"    sha256: {SHA}\n  build:", "    sha256: not-a-hash\n"
                                    "  build:"),
     f'{{f}}: {CONDA}: hash.sha256 = "not-a-hash": not a sha256 (64 hex digits)', RESTORE),
    ("short sha256", GOOD[::-1].replace(SHA[::-1], SHA[:40][::-1], 1)[::-1],
     f'{{f}}: {PIP}: hash.sha256 = "{SHA[:40]}": 40 hex digits; a sha256 has 64', RESTORE),
    ("md5 too long", GOOD.replace(MD5, MD5 + "0"),
     f'{{f}}: {CONDA}: hash.md5 = "{MD5}0": 33 hex digits; a md5 has 32', RESTORE),
    ("a hash that is a number", GOOD.replace(f"md5: {MD5}", "md5: 12"),
     f"{{f}}: {CONDA}: hash.md5 = 12: not a md5 (32 hex digits)", RESTORE),
    ("conda without md5", GOOD.replace(f"    md5: {MD5}\n", ""),
     f"{{f}}: {CONDA}: hash.md5: missing: every conda package needs its md5", RESTORE),
    ("pip without sha256", GOOD[::-1].replace(f"    sha256: {SHA}\n"[::-1], "    md5: x\n"[::-1],
                                              1)[::-1],
     f'{{f}}: 2 problems:\n  {PIP}: hash.md5 = "x": not a md5 (32 hex digits)\n'
     f"  {PIP}: hash.sha256: missing: every pip package needs its sha256", RESTORE),
    ("an unknown hash", GOOD.replace(f"    md5: {MD5}\n", f"    md5: {MD5}\n    sha1: abc\n"),
     f'{{f}}: {CONDA}: hash.sha1 = "abc": unknown hash (md5 and sha256 are known)', RESTORE),
    ("another manager", GOOD.replace("manager: pip", "manager: npm"),
     f'{{f}}: {PIP}: manager = "npm": must be conda or pip', RESTORE),
    ("a platform the lock lacks", GOOD.replace("  platform: linux-64\n  dependencies: {}\n"
                                               "  url: https://files",
                                               "  platform: osx-64\n  dependencies: {}\n"
                                               "  url: https://files"),
     '{f}: package[1] cuda-pathfinder (osx-64): platform = "osx-64": not one of '
     "metadata.platforms (linux-64)", RESTORE),
    ("unknown version", GOOD.replace("version: 1\n", "version: 3\n", 1),
     "{f}: not a conda-lock file: version = 3: unknown (conda-lock files are version 1 or 2)",
     RESTORE),
    ("dependencies as a list (conda-lock's model)",
     GOOD.replace("  dependencies: {}\n  url: https://files",
                  "  dependencies: [a]\n  url: https://files"),
     f"{{f}}: {PIP}: dependencies = ['a']: input should be a valid dictionary", RESTORE),
    ("a megabyte hash is quoted short", GOOD.replace(f"md5: {MD5}", "md5: " + "g" * 1_000_000),
     f'{{f}}: {CONDA}: hash.md5 = "{"g" * 75}..." (1,000,000 characters): not a md5 '
     "(32 hex digits)", RESTORE),
]


@pytest.mark.parametrize(("name", "text", "message", "hint"), CASES, ids=[c[0] for c in CASES])
def test_bad_lockfile_names_file_package_and_field(tmp_path: Path, name: str, text: str,
                                                   message: str, hint: str) -> None:
    """Each malformed lock: one LockfileError with the exact message and hint."""
    path = tmp_path / "x.conda-lock.yml"
    path.write_text(text)
    with pytest.raises(LockfileError) as info:
        parse_lock(path)
    assert info.value.message == message.format(f=path)
    assert info.value.hint == hint


def test_conda_lock_reads_the_good_lock(tmp_path: Path) -> None:
    """The lock the cases start from is valid for conda-lock's own parser and for ours."""
    path = tmp_path / "good.conda-lock.yml"
    path.write_text(GOOD)
    assert len(parse_conda_lock_file(path).package) == 2
    lock = parse_lock(path)
    assert [(p.name, p.md5, p.sha256) for p in lock.packages] == [
        ("python", MD5, SHA), ("cuda-pathfinder", None, SHA)]


def test_problems_in_json(tmp_path: Path) -> None:
    """--json carries each problem with its key and a shortened value."""
    path = tmp_path / "x.conda-lock.yml"
    path.write_text(GOOD.replace(f"md5: {MD5}", "md5: " + "g" * 100_000))
    proc = subprocess.run([sys.executable, "-m", "samebits", "lock", "diff", str(path),
                           str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr == ""
    err = json.loads(proc.stdout)["error"]
    assert err["problems"] == [{
        "file": str(path), "key": f"{CONDA}: hash.md5", "message": "not a md5 (32 hex digits)",
        "value": f'"{"g" * 75}..." (100,000 characters)'}]
    assert len(proc.stdout) < 2000


# A non-hex sha256 stops every command that reads a lock before it writes anything.
BAD_HASH = GOOD.replace(f"    sha256: {SHA}\n  build:", "    sha256: zz\n  build:")
COMMANDS = [
    ("verify env", ["verify", "env", "--prefix", sys.prefix, "{lock}"]),
    ("render conda", ["render", "conda", "{lock}", "--out", "{out}"]),
    ("render containerfile", ["render", "containerfile", "{lock}", "--out", "{out}"]),
    ("render oci", ["render", "oci", "{lock}", "--platform", "linux-64", "--out", "{out}"]),
    ("install", ["install", "{lock}", "--target", "{out}", "--cache-dir", "{cache}"]),
    ("attest", ["attest", "{lock}", "--prefix", sys.prefix, "--out", "{out}"]),
    ("audit", ["audit", "{lock}", "--attestation", "{att}", "--prefix",
               sys.prefix, "--out", "{out}"]),
    ("verify gpu", ["verify", "gpu", "{lock}", "--out", "{out}"]),
]


@pytest.fixture(scope="module")
def attestation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real statement of this machine (no workloads run) for audit to read first."""
    from verify.gpu.attest import build_statement, statement_bytes
    from verify.gpu.facts import detect

    path = tmp_path_factory.mktemp("att") / "ref.attestation.json"
    path.write_bytes(statement_bytes(build_statement(
        facts=detect(), device="cpu", settings={"profile": "deterministic"}, workloads={},
        suite_version=1, environment={"environment": "e" * 64})))
    return path


@pytest.mark.parametrize(("name", "args"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_non_hex_sha256_stops_every_command_first(tmp_path: Path, attestation: Path,
                                                    name: str, args: list[str]) -> None:
    """Exit 2 naming the entry; no output, no prefix, nothing in the download cache."""
    lock = tmp_path / "paper.conda-lock.yml"
    lock.write_text(BAD_HASH)
    fill = {"lock": str(lock), "out": str(tmp_path / "out"), "cache": str(tmp_path / "cache"),
            "att": str(attestation)}
    proc = subprocess.run([sys.executable, "-m", "samebits", *(a.format(**fill) for a in args)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f'error: {lock}: {CONDA}: hash.sha256 = "zz": not a sha256 '
                           f"(64 hex digits)\nhint: {RESTORE}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["paper.conda-lock.yml"]


def test_locked_problems_for_other_readers() -> None:
    """Packages another reader built get the same hash rules, named by name and version,
    once for an artifact several platforms share."""
    from samebits.lock.model import LockedPackage
    from samebits.lock.validate import locked_problems

    good = LockedPackage(name="numpy", version="2.0", manager="pip", platform="linux-64",
                         url="https://x/numpy.whl", sha256=SHA)
    bad = [good, *(LockedPackage(name="python", version="3.12", manager="conda", platform=plat,
                                 url="https://x/python.conda", sha256="zz")
                   for plat in ("linux-64", "linux-aarch64"))]
    assert locked_problems([good], "uv.lock") == []
    assert [str(p) for p in locked_problems(bad, "pixi.lock")] == [
        'pixi.lock: python 3.12 (conda): hash.sha256 = "zz": not a sha256 (64 hex digits)',
        "pixi.lock: python 3.12 (conda): hash.md5: missing: every conda package needs its md5"]
    assert [str(p) for p in locked_problems(bad, "pixi.lock", required=False)] == [
        'pixi.lock: python 3.12 (conda): hash.sha256 = "zz": not a sha256 (64 hex digits)']


FOREIGN = Path(__file__).parents[1] / "data" / "foreign" / "pypi"
IDNA_SHA = "946d195a0d259cbba61165e88e65941f16e9b36ea6ddb97f00452bae8b1287d3"
FOREIGN_CASES = [  # (file, the bad hash as the format writes it, that hash's value)
    ("uv.lock", "sha256:zz", "zz"),
    ("pylock.toml", "0" * 63, "0" * 63),
]
FOREIGN_COMMANDS = [
    ("render conda", ["render", "conda", "{lock}", "--out", "{out}"]),
    ("install", ["install", "{lock}", "--target", "{out}", "--cache-dir", "{cache}"]),
    ("verify env", ["verify", "env", "--prefix", sys.prefix, "{lock}"]),
]


@pytest.mark.parametrize(("name", "args"), FOREIGN_COMMANDS, ids=[c[0] for c in FOREIGN_COMMANDS])
@pytest.mark.parametrize(("file", "written", "value"), FOREIGN_CASES,
                         ids=[c[0] for c in FOREIGN_CASES])
def test_a_bad_hash_in_a_converted_lock_stops_every_command_first(
        tmp_path: Path, file: str, written: str, value: str, name: str, args: list[str]) -> None:
    """uv.lock and pylock.toml (converted on read): a malformed wheel hash is exit 2 naming
    the package and the value; nothing rendered, installed or downloaded."""
    text = (FOREIGN / file).read_text()
    old = f"sha256:{IDNA_SHA}" if file == "uv.lock" else IDNA_SHA
    assert old in text
    lock = tmp_path / file
    lock.write_text(text.replace(old, written))
    fill = {"lock": str(lock), "out": str(tmp_path / "out"), "cache": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "samebits", *(a.format(**fill) for a in args),
                           "--lock-python", "3.12"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    length = "not a sha256 (64 hex digits)" if value == "zz" else \
        "63 hex digits; a sha256 has 64"
    assert proc.stderr == (f'error: {lock}: idna 3.10 (pip): hash.sha256 = "{value}": '
                           f"{length}\nhint: fix the {file} file's URLs and hashes or re-create it "
                           "with the tool that wrote it\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [file]


ROOT = Path(__file__).resolve().parents[2]
SIX = "six-1.17.0-py2.py3-none-any.whl"
IDNA = "idna-3.10-py3-none-any.whl"
ONE_RULE = [  # (file, the text replaced, by what, the error's first line after the file name)
    ("pixi/v6.pixi.lock",
     "sha256: 4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274",
     "sha256: 4721f391ed90541fddacab5acf947aa0d3dc7d27",
     f'packages: pypi: {SIX}: sha256 = "4721f391ed90541fddacab5acf947aa0d3dc7d27": not a '
     "sha256 (64 hex digits)"),
    ("pixi/v6.pixi.lock", f"/{SIX}", f"/%2E%2E%2F{SIX}",
     f"six 1.17.0 (pip): url = \"https://files.pythonhosted.org/packages/b7/ce/...\" (147 "
     f"characters): its file name decodes to '../{SIX}', not a plain file name"),
    ("pypi/uv.lock", f"/{IDNA}", f"/%2E%2E%2F{IDNA}",
     "idna 3.10: wheels = \"https://files.pythonhosted.org/packages/76/c6/...\" (142 "
     f"characters): its file name decodes to '../{IDNA}', not a plain file name"),
    ("lockfiles/cpu.conda-lock.yml", "/filelock-4.3.2-py3-none-any.whl",
     "/%2E%2E%2Ffilelock-4.3.2-py3-none-any.whl",
     "2 problems:\n  package[3] filelock (linux-64): url = \"https://files.pythonhosted.org/"
     "packages/d7/4f/...\" (147 characters): its file name decodes to "
     "'../filelock-4.3.2-py3-none-any.whl', not a plain file name\n  package[35] filelock "
     "(linux-aarch64)"),
]


@pytest.mark.parametrize(("file", "old", "new", "first"), ONE_RULE,
                         ids=["pixi 40-hex sha256", "pixi ../ url", "uv.lock ../ url",
                              "conda-lock ../ url"])
def test_one_rule_for_every_reader(tmp_path: Path, file: str, old: str, new: str,
                                   first: str) -> None:
    """A malformed hash and a URL whose file name decodes to ``../`` are refused when the lock
    is read (exit 2, nothing downloaded), whichever format holds them: py-rattler reads a
    pixi PyPI entry's 40-hex sha256 as no hash, and fetched it."""
    source = ROOT / file if file.startswith("lockfiles/") else FOREIGN.parent / file
    text = source.read_text()
    assert old in text
    lock = tmp_path / source.name
    lock.write_text(text.replace(old, new))
    proc = subprocess.run([sys.executable, "-m", "samebits", "install", str(lock), "--target",
                           str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
                           "--platform", "linux-64", "--lock-python", "3.12"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.startswith(f"error: {lock}: {first}"), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [lock.name]

"""The sweep's written rule (tests/sweep/compare.py) on small trees: what it explains and what
stays a divergence. The METADATA files are the real ones two setuptools write for sklearn 0.0
(tests/data/sweep/sklearn-0.0/README.md)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.sweep.compare import compare
from tests.sweep.sweep import Row, _linkage_said

DATA = Path(__file__).resolve().parents[1] / "data" / "sweep" / "sklearn-0.0"
SITE = "lib/python3.10/site-packages"


def dist(root: Path, name: str, version: str, files: dict[str, bytes],
         metadata: bytes | None = None) -> None:
    """An installed distribution: its files, METADATA and a RECORD of them."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": metadata if metadata is not None else
             f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()}
    rows = []
    for rel, data in files.items():
        (root / SITE / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / SITE / rel).write_bytes(data)
        rows.append(f"{rel},sha256={hashlib.sha256(data).hexdigest()},{len(data)}\n")
    (root / SITE / info / "RECORD").write_text("".join(rows) + f"{info}/RECORD,,\n")


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    """samebits' tree with sklearn 0.0 built by setuptools 65 and what it requires; pip's with
    it built by setuptools 80 and nothing else; one stray file on samebits' side."""
    ours, pips = tmp_path / "ours", tmp_path / "pip"
    stub = {"wheel-platform-tag-is-broken-on-empty-wheels-see-issue-141.py": b""}
    dist(ours, "sklearn", "0.0", stub, (DATA / "METADATA.setuptools-65.4.1").read_bytes())
    dist(pips, "sklearn", "0.0", stub, (DATA / "METADATA.setuptools-80.9.0").read_bytes())
    dist(ours, "scikit-learn", "1.1.2", {"sklearn/__init__.py": b"import joblib\n"},
         b"Metadata-Version: 2.1\nName: scikit-learn\nVersion: 1.1.2\n"
         b"Requires-Dist: joblib (>=1.0.0)\nRequires-Dist: numpy>=1.17.3\n")
    dist(ours, "joblib", "1.2.0", {"joblib/__init__.py": b""})
    (ours / SITE / "stray.py").write_bytes(b"")
    return ours, pips


def test_a_requirement_only_samebits_build_declares_is_explained(
        trees: tuple[Path, Path]) -> None:
    """scikit-learn (sklearn 0.0's requirement in setuptools 65's METADATA, not read in 80's)
    and joblib (which only it needs) are build-requires; the build's METADATA and RECORD
    sdist-build; a
    file no such reason covers stays only-samebits."""
    kinds = {d.path: (d.kind, d.detail) for d in compare(*trees, built={"sklearn"})}
    why = "sklearn: pip's build of it does not require scikit-learn"
    for path in ("scikit_learn-1.1.2.dist-info", "scikit_learn-1.1.2.dist-info/RECORD",
                 "sklearn", "sklearn/__init__.py", "joblib", "joblib/__init__.py",
                 "joblib-1.2.0.dist-info/METADATA"):
        assert kinds.pop(f"{SITE}/{path}") == ("build-requires", why), path
    for path in ("METADATA", "RECORD"):
        assert kinds.pop(f"{SITE}/sklearn-0.0.dist-info/{path}")[0] == "sdist-build"
    assert kinds.pop(f"{SITE}/stray.py") == ("only-samebits", "")
    assert all(kind == "build-requires" for kind, _ in kinds.values()), kinds


def test_without_an_sdist_build_nothing_is_explained(trees: tuple[Path, Path]) -> None:
    """sklearn not built from an sdist: the same trees are plain divergences."""
    kinds = {d.kind for d in compare(*trees, built=set())}
    assert kinds == {"only-samebits", "bytes", "record"}


def test_a_licence_file_where_each_setuptools_puts_it(tmp_path: Path) -> None:
    """The sweep's tfb: pyod 2.0.0 is an sdist; samebits' build (setuptools of the paper's
    date) wrote LICENSE beside METADATA, pip's (setuptools 80, PEP 639) under licenses/. Both
    sides' files of that build are sdist-build, the folder too; not built from an sdist, they
    are plain only-samebits and only-pip."""
    ours, pips = tmp_path / "ours", tmp_path / "pip"
    info = "pyod-2.0.0.dist-info"
    dist(ours, "pyod", "2.0.0", {"pyod/__init__.py": b"", f"{info}/LICENSE": b"BSD\n"})
    dist(pips, "pyod", "2.0.0", {"pyod/__init__.py": b"",
                                 f"{info}/licenses/LICENSE": b"BSD\n"})
    kinds = {d.path: (d.kind, d.detail) for d in compare(ours, pips, built={"pyod"})}
    assert kinds.pop(f"{SITE}/{info}/LICENSE") == ("sdist-build", "only in samebits' build")
    for path in ("licenses", "licenses/LICENSE"):
        assert kinds.pop(f"{SITE}/{info}/{path}") == ("sdist-build", "only in pip's build")
    assert {k for k, _ in kinds.values()} == {"sdist-build"}, kinds
    plain = {d.kind for d in compare(ours, pips, built=set())}
    assert {"only-samebits", "only-pip"} <= plain


def test_a_built_packages_script_is_compared_past_its_shebang(tmp_path: Path) -> None:
    """The sweep's RWKV-LM and Time-LLM: deepspeed is an sdist, and its ``bin/deepspeed``
    (2 bytes longer on pip's side: ``theirs`` against ``ours`` in the shebang) was called a
    difference of builds. Each shebang names its own prefix's interpreter: past it the same
    bytes are no divergence at all, and other bytes are still the build's."""
    ours, pips = tmp_path / "ours", tmp_path / "theirs"
    body = b"import deepspeed.launcher.runner\ndeepspeed.launcher.runner.main()\n"
    for root, tail in ((ours, body), (pips, body)):
        script = b"#!" + str(root / "bin" / "python").encode() + b"\n" + tail
        dist(root, "deepspeed", "0.9.5", {"../../../bin/deepspeed": script})
    found = compare(ours, pips, built={"deepspeed"})
    assert [d for d in found if d.path == "bin/deepspeed"] == []
    (pips / "bin" / "deepspeed").write_bytes(
        b"#!" + str(pips / "bin" / "python").encode() + b"\n" + body + b"# other\n")
    kinds = {d.path: d.kind for d in compare(ours, pips, built={"deepspeed"})}
    assert kinds["bin/deepspeed"] == "sdist-build"
    kinds = {d.path: d.kind for d in compare(ours, pips, built=set())}
    assert kinds["bin/deepspeed"] == "bytes"


def test_a_real_lib64_folder_is_compared(tmp_path: Path) -> None:
    """The sweep's tsl: blosc2 2.0.0's data files under ``lib64/``. pip's venv has the venv
    module's ``lib64`` -> ``lib`` link, so they are in its ``lib/``; samebits' venv had a real
    ``lib64/`` folder, which the rule's ``lib64`` (meant for the link) left out whole: a
    difference of layout unseen. The link stays out; a folder of files is compared."""
    ours, pips = tmp_path / "ours", tmp_path / "pip"
    (ours / "lib64").mkdir(parents=True)
    (ours / "lib64" / "libblosc2.so").write_bytes(b"lib")
    (pips / "lib").mkdir(parents=True)
    (pips / "lib" / "libblosc2.so").write_bytes(b"lib")
    (pips / "lib64").symlink_to("lib")
    kinds = {d.path: d.kind for d in compare(ours, pips)}
    assert kinds == {"lib64": "only-samebits", "lib64/libblosc2.so": "only-samebits",
                     "lib": "only-pip", "lib/libblosc2.so": "only-pip"}


# verify env --json of a real environment: numba 0.53.1 and numpy 1.25.0 on Python 3.9, as the
# sweep's s4 (state-spaces/s4's requirements.txt) locks them; trimmed to what the sweep reads
S4_REPORT = {"findings": [], "ok": False, "linkage": {"unresolved": [{
    "detail": "import numba: SystemError: initialization of _internal failed without raising "
              "an exception (not a missing library: the static verdict stands)",
    "file": "lib/python3.9/site-packages/numba/np/ufunc/tbbpool.cpython-39-x86_64-linux-gnu.so",
    "needed": "libtbb.so.2", "package": "pip:numba==0.53.1", "status": "unresolved"}]}}


def test_an_environment_both_write_broken_is_named_with_its_import_error() -> None:
    """The unresolved library and the import probe's error, from verify's JSON; nothing from
    a report without linkage or from text that is no report."""
    said = _linkage_said(json.dumps(S4_REPORT) + "\nresult: ... (exit 1)\n")
    assert said == ("lib/python3.9/site-packages/numba/np/ufunc/tbbpool.cpython-39-x86_64-"
                    "linux-gnu.so needs libtbb.so.2 (import numba: SystemError: initialization "
                    "of _internal failed without raising an exception (not a missing library: "
                    "the static verdict stands))")
    assert _linkage_said("error: no such prefix") == ""
    assert _linkage_said(json.dumps({"findings": []})) == ""
    row = Row(name="s4", repo="r", kind="requirements.txt", field="nlp", year="2023",
              steps={"install": (1, 1.0), "verify": (1, 1.0)}, reason=f"samebits right: {said}")
    assert row.outcome == "samebits right"

"""samebits_app.paper.tree and .inputs: the paper's files and data, recorded and checked."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from samebits_app.paper import tree
from samebits_app.paper.inputs import against_attested, check_inputs
from samebits_app.paper.manifest import ManifestError, PaperManifest, read_manifest

CODE = "import json\nx = 1\nprint(x)\n"
DATA = b"a,b\n1,2\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_text(inputs: str = "") -> str:
    return f"""format = 1
outputs = "saved"
[[commands]]
name = "train"
run = "python train.py"
[[commands.outputs]]
path = "out/metrics.json"
kind = "metrics"
{inputs}"""


def paper(root: Path, inputs: str | None = None) -> PaperManifest:
    """A paper folder with code, data, caches, saved outputs and a declared output."""
    root.mkdir(parents=True, exist_ok=True)
    files = {"train.py": CODE, "lib/util.py": "def f():\n    return 2\n",
             "data/train.csv": DATA.decode(), "conda-lock.yml": "lock\n",
             "reference.attestation.json": "{}", "saved/commands/train/stdout.txt": "old\n",
             "out/metrics.json": "{}", "__pycache__/train.cpython-311.pyc": "",
             "lib/__pycache__/util.cpython-311.pyc": "", ".pytest_cache/v": "",
             "lib/x.pyc": "", ".DS_Store": "", ".venv/pyvenv.cfg": "home = /usr\n",
             ".venv/lib/site.py": ""}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    os.symlink("lib/util.py", root / "util.py")
    if inputs is None:
        inputs = f'[[inputs]]\npath = "data/train.csv"\nsha256 = "{sha(DATA)}"\n'
    (root / "samebits-paper.toml").write_text(manifest_text(inputs))
    return read_manifest(root)


def test_tree_takes_the_code_and_leaves_out_the_rest(tmp_path: Path) -> None:
    """The tree is the paper's code: not the manifest, lock, attestation, saved outputs,
    declared outputs, inputs, caches or a Python environment; a link is recorded as a link;
    text files get line digests."""
    m = paper(tmp_path / "paper")
    t = tree.tree_of(m)
    assert t.paths == ("lib/util.py", "train.py", "util.py")
    assert (t.rule, t.git) == (tree.RULE_PLAIN, None)
    files = {f.path: f for f in t.files}
    assert files["util.py"].link == "lib/util.py"
    assert files["train.py"].sha256 == sha(CODE.encode())
    assert files["train.py"].lines is not None and len(files["train.py"].lines) == 3
    assert set(t.subjects()) == {"paper/lib/util.py", "paper/train.py", "paper/util.py"}


def test_same_tree_same_record(tmp_path: Path) -> None:
    """Byte-stable: the same files in another folder, made in another order, give the same
    record."""
    a = tree.tree_of(paper(tmp_path / "a")).to_json()
    b_manifest = paper(tmp_path / "b")
    os.utime(b_manifest.folder / "train.py", (0, 0))
    assert tree.tree_of(b_manifest).to_json() == a


def git(folder: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@b")
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, env=env)


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_git_checkout_records_commit_and_changes(tmp_path: Path) -> None:
    """In a git checkout: the files git tracks or would add (.gitignore applies), the commit,
    and every uncommitted change under the paper folder."""
    root = tmp_path / "repo"
    m = paper(root / "paper")
    (root / ".gitignore").write_text("*.log\n")  # .venv is not ignored: an environment anyway
    (root / "paper" / "run.log").write_text("noise\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "paper")
    (root / "paper" / "train.py").write_text(CODE + "# tuned\n")
    (root / "paper" / "new.py").write_text("")
    (root / "paper" / "lib" / "util.py").unlink()
    t = tree.tree_of(m)
    assert t.rule == tree.RULE_GIT
    assert t.paths == ("new.py", "train.py", "util.py")  # util.py: a (dangling) link
    assert t.git is not None and len(t.git["commit"]) == 40
    assert t.git["changes"] == {"lib/util.py": "deleted", "new.py": "untracked",
                                "train.py": "modified"}


@pytest.mark.skipif(shutil.which("git") is None, reason="no git")
def test_a_paper_folder_its_checkout_ignores_is_a_plain_folder(tmp_path: Path) -> None:
    """A paper unpacked into a checkout's ignored build/ folder: git tracks none of its files,
    so the git rule would record no code at all (and run the commands in an empty copy); it is
    taken as a plain folder, every file of it recorded."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("build/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "repo")
    m = paper(root / "build" / "paper")
    t = tree.tree_of(m)
    assert (t.rule, t.git) == (tree.RULE_PLAIN, None)
    assert t.paths == ("lib/util.py", "train.py", "util.py")
    assert tree.git_files(root / "build" / "paper") is None
    assert tree.git_files(root) is not None


@pytest.mark.parametrize(("a", "b", "text"), [
    ("x\ny\nz\n", "x\nY\nz\n", "1 line changed (at line 2)"),
    ("x\ny\nz\n", "x\ny\nw\nz\n", "1 line added (at line 3)"),
    ("x\ny\nz\n", "x\nz\n", "1 line removed (at line 1)"),
    ("x\ny\nz\n", "X\ny\nz\nq\nr\n", "1 line changed, 2 lines added (at lines 1, 4)"),
    ("x\ny\n", "x\r\ny\r\n", "the same lines, other bytes (line endings or the final newline)"),
])
def test_change_text(a: str, b: str, text: str) -> None:
    """What changed in a text file, in lines, from the line digests alone."""
    fa = tree.TreeFile(path="f", sha256=sha(a.encode()), size=len(a),
                       lines=tree.line_digests(a.encode()))
    fb = tree.TreeFile(path="f", sha256=sha(b.encode()), size=len(b),
                       lines=tree.line_digests(b.encode()))
    assert tree.change_text(fa, fb) == text


def test_check_names_every_difference(tmp_path: Path) -> None:
    """The reviewer's files at the authors' paths: a changed file and a missing one are named;
    a file the authors did not have is not given to the commands, and a note says so."""
    attested = tree.tree_of(paper(tmp_path / "authors"))
    m = paper(tmp_path / "reviewer")
    (m.folder / "train.py").write_text(CODE.replace("x = 1", "x = 2"))
    (m.folder / "lib" / "util.py").unlink()
    (m.folder / "extra.py").write_text("")
    check = tree.check(attested, m)
    assert check.differences == (
        f"code differs: lib/util.py is missing (the authors' sha256 "
        f"{sha(b'def f():' + bytes([10]) + b'    return 2' + bytes([10]))[:12]})",
        f"code differs: train.py (sha256 {sha(CODE.replace('x = 1', 'x = 2').encode())[:12]}, "
        f"the authors' {sha(CODE.encode())[:12]}): 1 line changed (at line 2)")
    assert check.tree.paths == ("train.py", "util.py")
    assert check.extra == ("extra.py",)
    assert check.notes == ("1 file of this paper folder is not in the authors' tree and was "
                           "not given to the commands: extra.py",)


def test_left_out_keeps_exactly_the_tree(tmp_path: Path) -> None:
    """What the scratch copy must leave out so that it holds exactly the kept files: whole
    folders where nothing in them is kept."""
    m = paper(tmp_path / "paper")
    gone = tree.left_out(m.folder, {"train.py", "lib/util.py"})
    rel = sorted(str(p.relative_to(m.folder.absolute())) for p in gone)
    assert rel == [".DS_Store", ".pytest_cache", ".venv", "__pycache__", "conda-lock.yml", "data",
                   "lib/__pycache__", "lib/x.pyc", "out", "reference.attestation.json",
                   "samebits-paper.toml", "saved", "util.py"]


# ------------------------------------------------------------------------------ inputs

@pytest.mark.parametrize(("inputs", "message"), [
    ('[[inputs]]\nsha256 = "{h}"\n', "inputs[0].path: missing: where the commands "
     "read it"),
    ('[[inputs]]\npath = "data/train.csv"\nsha256 = "ABC"\n', 'inputs[0].sha256 = "ABC": '
     "expected the file's sha256: 64 lowercase hex digits"),
    ('[[inputs]]\npath = "../x"\nsha256 = "{h}"\n', 'inputs[0].path = "../x": expected a '
     "relative path inside the paper folder"),
    ('[[inputs]]\npath = "out/metrics.json"\nsha256 = "{h}"\n', 'inputs[0].path = '
     '"out/metrics.json": a declared output'),
    ('[[inputs]]\npath = "saved/x"\nsha256 = "{h}"\n', 'inputs[0].path = "saved/x": inside '
     "the outputs folder"),
    ('[[inputs]]\npath = "d"\nsha256 = "{h}"\nurl = "ftp://x/d"\n', 'inputs[0].url = '
     '"ftp://x/d": expected a https, http, file URL'),
    ('[[inputs]]\npath = "d"\nsha256 = "{h}"\n[[inputs]]\npath = "d"\nsha256 = "{h}"\n',
     'inputs[1].path = "d": declared twice'),
    ('[[inputs]]\npath = "d"\nsha = "{h}"\n', 'inputs[0].sha = '),
])
def test_inputs_in_the_manifest(tmp_path: Path, inputs: str, message: str) -> None:
    """Each problem of an [[inputs]] table is named with its key and value."""
    with pytest.raises(ManifestError) as err:
        paper(tmp_path / "paper", inputs.replace("{h}", sha(DATA)))
    assert message in str(err.value)


def test_inputs_read_and_fetched(tmp_path: Path) -> None:
    """A file in the paper folder is hashed in place; a URL is fetched into the cache once,
    proved by its hash; a file that is not its pin, or missing, is a problem named."""
    source = tmp_path / "remote.csv"
    source.write_bytes(DATA)
    url = source.as_uri()
    m = paper(tmp_path / "paper", f'[[inputs]]\npath = "data/train.csv"\nsha256 = "{sha(DATA)}"'
              f'\n[[inputs]]\npath = "data/remote.csv"\nsha256 = "{sha(DATA)}"\nurl = "{url}"'
              '\n[[inputs]]\npath = "data/none.csv"\nsha256 = "' + "0" * 64 + '"\n')
    fetched: list[str] = []

    def fetch(u: str, dest: Path) -> None:
        fetched.append(u)
        shutil.copyfile(Path(u.removeprefix("file://")), dest)

    cache = tmp_path / "cache"
    states = check_inputs(m, cache=cache, fetch=fetch)
    assert [(s.spec.path, s.problem) for s in states] == [
        ("data/train.csv", None), ("data/remote.csv", None),
        ("data/none.csv", f"input missing: data/none.csv (no such file in {m.folder})")]
    assert states[1].source == cache / "inputs" / sha(DATA) / "remote.csv"
    check_inputs(m, cache=cache, fetch=fetch)
    assert fetched == [url]  # the second time, from the cache
    assert states[0].record() == {"path": "data/train.csv", "sha256": sha(DATA), "url": None}
    source.write_bytes(b"other\n")
    (cache / "inputs").rename(tmp_path / "gone")
    bad = check_inputs(m, cache=cache, fetch=fetch)[1]
    assert bad.problem == (f"input differs: data/remote.csv from {url} (sha256 "
                           f"{sha(b'other' + bytes([10]))[:12]}, the manifest pins "
                           f"{sha(DATA)[:12]})")
    assert not (cache / "inputs" / sha(DATA) / "remote.csv").exists()


def test_file_inputs_read_only_from_named_folders(tmp_path: Path) -> None:
    """A file:// input (the real fetch) is read from below the paper folder or a folder the
    reviewer names (--find-links), never from elsewhere or from a device: a hostile manifest
    cannot make the audit read /dev/zero or a private file into its cache."""
    outside = tmp_path / "outside" / "remote.csv"
    outside.parent.mkdir()
    outside.write_bytes(DATA)
    m = paper(tmp_path / "paper", f'[[inputs]]\npath = "data/x.csv"\nsha256 = "{sha(DATA)}"\n'
              f'url = "{outside.as_uri()}"\n[[inputs]]\npath = "data/z"\nsha256 = "{sha(DATA)}"'
              '\nurl = "file:///dev/zero"\n')
    states = check_inputs(m, cache=tmp_path / "cache")
    assert states[0].problem is not None and "outside the folders" in states[0].problem
    assert states[1].problem is not None and "outside the folders" in states[1].problem
    named = check_inputs(m, cache=tmp_path / "cache", roots=[outside.parent, Path("/dev")])
    assert named[0].problem is None
    assert named[1].problem is not None and "not a regular file" in named[1].problem
    assert [p.name for p in (tmp_path / "cache" / "inputs").rglob("*") if p.is_file()] == [
        "remote.csv"]


def test_inputs_against_the_attested(tmp_path: Path) -> None:
    """The reviewer's inputs against the attested ones: a changed file names the input and
    both digests (and a moved pin), an input declared on one side only is named."""
    m = paper(tmp_path / "paper")
    (m.folder / "data" / "train.csv").write_bytes(b"a,b\n1,3\n")
    states = check_inputs(m)
    assert states[0].record()["sha256"] == sha(b"a,b\n1,3\n")  # what this run read
    attested = [{"path": "data/train.csv", "sha256": sha(DATA), "url": None},
                {"path": "data/test.csv", "sha256": "f" * 64, "url": None}]
    changed = sha(b"a,b\n1,3\n")[:12]
    assert against_attested(states, attested) == [
        f"input differs: data/train.csv (sha256 {changed}, the authors' {sha(DATA)[:12]})",
        "input differs: data/test.csv is an input the authors attested (sha256 ffffffffffff); "
        "the manifest here does not declare it"]
    assert against_attested(check_inputs(paper(tmp_path / "other")), []) == [
        "input differs: data/train.csv is declared here, not in the authors' attestation"]

"""Hostile paper folders: what the authors ship cannot pass for a result, nor run unbidden.

Each case is an attack tried against samebits (issue 24): a signature that fails ``--trust``,
declared outputs that are links out of the scratch copy, a command that writes outside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits import dsse
from samebits_app.paper.manifest import read_manifest
from tests.fixtures.install import locked_wheel, wheel, write_lock
from tests.fixtures.samples import sample_facts
from verify.gpu.attest import build_statement, statement_bytes


def _keys(root: Path) -> dict[str, Path]:
    out = {}
    for name in ("authors", "forger"):
        private, public = dsse.generate_keypair()
        (root / name).write_bytes(private)
        (root / f"{name}.pub").write_bytes(public)
        out[name] = root / name
    return out


def _paper(root: Path, manifest: str) -> Path:
    """A paper folder: a one-wheel lock and ``manifest`` as samebits-paper.toml."""
    root.mkdir(parents=True, exist_ok=True)
    whl = wheel(root / "wheels", "tiny", "1.0", {"tiny/__init__.py": b""})
    write_lock(root / "conda-lock.yml", [locked_wheel(whl)], python="3.11")
    (root / "samebits-paper.toml").write_text(manifest)
    return root


def test_a_failed_trust_stops_the_audit_before_anything_of_the_paper_runs(
        tmp_path: Path) -> None:
    """audit --trust KEY.pub of an attestation signed by another key: the signature step
    fails, and nothing is installed, no interpreter of the environment is started, no paper
    command runs; every later step is skipped saying why, the verdict is not-reproduced."""
    from samebits_app.audit.document import build_document
    from samebits_app.audit.pipeline import UNTRUSTED, AuditRequest, run_audit
    from samebits_app.cmd_audit import audit_text

    keys = _keys(tmp_path)
    marker = tmp_path / "the-paper-ran"
    paper = _paper(tmp_path / "paper", f"""format = 1
[[commands]]
name = "evil"
run = ["{sys.executable}", "-c", "open('{marker}', 'w')"]
""")
    statement = build_statement(facts=sample_facts(), device="cpu",
                                settings={"profile": "deterministic"},
                                workloads={}, suite_version=1,
                                environment={"environment": "e" * 64})
    att = paper / "reference.attestation.json"
    att.write_bytes(dsse.signed_bytes(statement_bytes(statement),
                                      dsse.load_signing_key(keys["forger"])))
    started: list[str] = []

    def runtime_for(python: str) -> object:
        started.append(python)
        raise AssertionError(f"an interpreter of the paper's environment started: {python}")

    req = AuditRequest(lockfile=paper / "conda-lock.yml", attestation=att, out=tmp_path / "out",
                       install=tmp_path / "env", cache=tmp_path / "cache",
                       paper=read_manifest(paper),
                       trust=dsse.load_public_key(Path(f"{keys['authors']}.pub")))
    result = run_audit(req, runtime_for=runtime_for)
    assert started == [] and not marker.exists() and not (tmp_path / "env").exists()
    assert not (tmp_path / "cache").exists()
    steps = {s.name: s for s in result.steps}
    assert steps["signature"].status == "failed"
    assert [(n, s.status, s.summary) for n, s in steps.items() if n not in (
        "signature", "lockfile")] == [(n, "skipped", UNTRUSTED) for n in (
            "code", "inputs", "environment", "preflight", "verify-env", "workloads", "compare",
            "paper")]
    assert result.verdict.level == "not-reproduced"
    text = audit_text(build_document(result), {}, 1)
    assert f"environment  skipped  {UNTRUSTED}" in text
    assert "not signed by" in text


# ------------------------------------------------------------ outputs that are links out

STALE = b'{"acc": 0.99}\n'


def _link_paper(root: Path, how: str, stale: Path) -> Path:
    """A paper whose one command writes nothing (or a link) and declares out/m.json; the
    authors' stale result lies outside the paper, reached by ``how``."""
    stale.mkdir(parents=True)
    (stale / "m.json").write_bytes(STALE)
    run = "pass" if how != "written by the command" else (
        f"import os; os.makedirs('out'); os.symlink('{stale / 'm.json'}', 'out/m.json')")
    paper = _paper(root, f"""format = 1
[run]
deterministic = false
[[commands]]
name = "train"
run = ["{sys.executable}", "-c", "{run}"]
[[commands.outputs]]
path = "out/m.json"
kind = "metrics"
""")
    if how == "the output is a link":
        (paper / "out").mkdir()
        (paper / "out" / "m.json").symlink_to(stale / "m.json")
    elif how == "a folder on its path is a link":
        (paper / "out").symlink_to(stale)
    return paper


def _run(paper: Path, bin_dir: Path | None = None) -> dict:
    from samebits_app.paper.runner import Host
    from samebits_app.paper.session import run_commands

    return run_commands(read_manifest(paper), host=Host(
        bin=bin_dir or Path(sys.executable).parent, environ={}),
        settings={}, runtime=None, save=None)["train"]


@pytest.mark.parametrize("how", ["the output is a link", "written by the command"])
def test_a_link_to_a_stale_file_never_passes_for_an_output(tmp_path: Path, how: str) -> None:
    """A declared output that is a link out of the scratch copy (shipped in the paper, or
    made by the command) is not read through: missing or an error naming the link, so the
    judge cannot call the stale file bit-identical."""
    import hashlib

    from samebits_app.paper.judge import judge_output

    stale = tmp_path / "elsewhere"
    rec = _run(_link_paper(tmp_path / "paper", how, stale))
    (out,) = rec["outputs"]
    assert "sha256" not in out, out
    if how == "the output is a link":
        assert out.get("missing") is True   # left out of the copy by its place: not run
    else:
        assert out["error"] == (
            f"out/m.json: is a symbolic link to {stale / 'm.json'}, outside the paper's "
            "scratch copy: samebits reads a command's outputs only as plain files inside the "
            "scratch copy, never through a link")
    authors = {**out, "sha256": hashlib.sha256(STALE).hexdigest(), "missing": None,
               "error": None, "values": {"acc": 0.99}}
    assert judge_output(authors, out).level in ("missing", "unreadable")


def test_a_folder_on_an_outputs_path_that_links_out_is_refused_before_running(
        tmp_path: Path) -> None:
    """out -> a folder outside the paper: refused before any command runs, naming it."""
    from samebits_app.paper.confine import UnsafeOutput

    stale = tmp_path / "elsewhere"
    paper = _link_paper(tmp_path / "paper", "a folder on its path is a link", stale)
    with pytest.raises(UnsafeOutput) as info:
        _run(paper)
    assert info.value.message == (
        f"out/m.json: the folder out on its path is a symbolic link to {stale}, outside the "
        "paper's scratch copy: samebits reads a command's outputs only as plain files inside "
        "the scratch copy, never through a link")


# ------------------------------------------------------------------------- the sandbox

def _one_command(root: Path, code: str, *, network: bool = False,
                 python: str = sys.executable) -> Path:
    return _paper(root, f"""format = 1
[run]
deterministic = false
network = {str(network).lower()}
[[commands]]
name = "train"
run = ["{python}", "-c", {code!r}]
[[commands.outputs]]
path = "out.txt"
kind = "file"
""")


@pytest.mark.requires("bwrap")
def test_a_command_cannot_write_outside_its_scratch_copy(tmp_path: Path) -> None:
    """A paper command that writes beside the paper, and into /tmp: the first write fails,
    /tmp is its own; it still runs the environment's interpreter (``python`` of a venv under
    the host's /tmp, whose base Python is under ~/.pyenv), reads the paper copy and writes
    inside it; the record says which sandbox ran."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    outside = tmp_path / "outside.txt"
    spy = Path("/tmp") / f"samebits-hostile-{os.getpid()}.txt"
    code = ("import sys\n"
            f"open('{spy}', 'w').write('x')\n"
            "open('out.txt', 'w').write(open('samebits-paper.toml').read()[:6])\n"
            f"try:\n    open('{outside}', 'w').write('x')\nexcept OSError as e:\n"
            "    print(e.strerror, file=sys.stderr); sys.exit(3)\n")
    rec = _run(_one_command(tmp_path / "paper", code, python="python"), venv / "bin")
    assert not outside.exists() and not spy.exists()
    # a host folder that is not under /tmp (the sandbox's /tmp is its own): the checkout's
    # tests/ where the checkout is not under /tmp (CI may clone there), else HOME, /var/tmp
    folder = next(d for d in (Path(__file__).resolve().parent, Path.home(), Path("/var/tmp"))
                  if not d.is_relative_to("/tmp") and os.access(d, os.W_OK))
    here = folder / f".hostile-probe-{os.getpid()}"
    try:
        code = f"open('out.txt', 'w')\nopen('{here}', 'w').write('x')\n"
        ro = _run(_one_command(tmp_path / "paper2", code))
        assert not here.exists()
        assert (ro["status"], ro["tail"][-1]) == (
            "failed", f"OSError: [Errno 30] Read-only file system: '{here}'")
    finally:
        here.unlink(missing_ok=True)
    # beside the paper is under the host's /tmp: the write lands in the sandbox's own /tmp,
    # gone with it (or fails where that folder is not there); the host's is untouched
    assert rec["status"] in ("ok", "failed"), rec
    assert rec["status"] == "ok" or rec["tail"] == ["No such file or directory"]
    (out,) = rec["outputs"]
    import hashlib

    assert out["sha256"] == hashlib.sha256(b"format").hexdigest()  # read the copy, wrote
    box = rec["sandbox"]
    assert (box["kind"], box["network"]) == ("bubblewrap", False) and box["version"]


@pytest.mark.requires("bwrap")
@pytest.mark.parametrize("network", [False, True])
def test_the_network_is_off_unless_the_manifest_asks(tmp_path: Path, network: bool) -> None:
    """A server on this machine's loopback: out of reach of a command in the sandbox,
    reachable with ``network = true``."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        code = ("import socket\n"
                f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
                "    r = 'reached'\nexcept OSError:\n    r = 'unreachable'\n"
                "open('out.txt', 'w').write(r)\n")
        paper = _one_command(tmp_path / "paper", code, network=network)
        from samebits_app.paper.runner import Host
        from samebits_app.paper.session import run_commands

        save = tmp_path / "saved"
        rec = run_commands(read_manifest(paper), host=Host(bin=Path(sys.executable).parent,
                                                           environ={}),
                           settings={}, runtime=None, save=save)["train"]
    assert rec["status"] == "ok" and rec["sandbox"]["network"] is network
    assert (save / "train" / "files" / "." / "out.txt").read_text() == (
        "reached" if network else "unreachable")


def test_without_a_sandbox_the_record_says_so(tmp_path: Path) -> None:
    """No sandbox (here: SAMEBITS_SANDBOX=none): the command runs, and its record and the
    audit's notes carry the warning."""
    from samebits_app.paper.sandbox import detect
    from samebits_app.paper.session import sandbox_notes

    box = detect({"SAMEBITS_SANDBOX": "none", "PATH": os.environ["PATH"]})
    assert box.kind == "none"
    from samebits_app.paper.runner import Host
    from samebits_app.paper.session import run_commands

    rec = run_commands(read_manifest(_one_command(tmp_path / "paper", "open('out.txt','w')")),
                       host=Host(bin=Path(sys.executable).parent, environ={}), settings={},
                       runtime=None, save=None, sandbox=box)["train"]
    assert rec["status"] == "ok" and rec["sandbox"] == {
        "kind": "none", "network": True, "warning": (
            "no sandbox: SAMEBITS_SANDBOX=none; the paper's commands ran with the caller's "
            "rights (they could write outside the scratch copy and reach the network)")}
    assert sandbox_notes({}, {"train": rec}) == [
        f"paper commands of this audit ran in: {rec['sandbox']['warning']}"]


@pytest.mark.parametrize("what", ["manifest", "lockfile", "attestation"])
def test_a_fifo_in_a_paper_is_refused_not_read(tmp_path: Path, what: str) -> None:
    """A paper whose manifest, lock or attestation is a FIFO nobody writes: refused at once
    with an error naming it, never a reader blocked for ever."""
    import threading

    from samebits.errors import SamebitsError
    from samebits.lock.model import parse_lock
    from samebits_app.paper.manifest import ManifestError
    from verify.gpu.attest import read_attestation

    name = {"manifest": "samebits-paper.toml", "lockfile": "conda-lock.yml",
            "attestation": "reference.attestation.json"}[what]
    os.mkfifo(tmp_path / name)
    read = {"manifest": lambda: read_manifest(tmp_path),
            "lockfile": lambda: parse_lock(tmp_path / name),
            "attestation": lambda: read_attestation(tmp_path / name)}[what]
    got: list[BaseException] = []

    def run() -> None:
        try:
            read()
        except BaseException as exc:  # noqa: BLE001  (handed to the test's thread)
            got.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # unblock it: open the FIFO for writing and close it
        os.close(os.open(tmp_path / name, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading a FIFO {name} blocked")
    (exc,) = got
    assert isinstance(exc, SamebitsError | ManifestError)
    assert f"{tmp_path / name}: " in exc.message and "cannot read: not a regular file" in \
        exc.message


def test_an_attestation_with_a_list_for_a_table_is_bad_input() -> None:
    """predicate.facts.cpu = [] (found by `nox -s fuzz`): an InputError naming the source,
    not an AttributeError."""
    from samebits.errors import InputError
    from verify.gpu.attest import parse_attestation

    doc = build_statement(facts=sample_facts(), device="cpu",
                          settings={"profile": "deterministic"}, workloads={}, suite_version=1,
                          environment={"environment": "e" * 64})
    doc["predicate"]["facts"]["cpu"] = []
    with pytest.raises(InputError) as info:
        parse_attestation(doc, source="paper/ref.json")
    assert info.value.message.startswith("paper/ref.json: ")

"""Property and fuzz tests: every reader of hostile input (specs, locks of every format,
attestations, signed envelopes, paper manifests and their regexes, bundles, fatbins).

Whatever they are fed, they return a value or raise the samebits error for their input kind,
whose message names the file; never another exception, never a hang, and nothing written
outside their temp folders (``test_nothing_written_outside_temp_folders`` checks the
checkout, HOME and the default cache last). A foreign lock that reads is then fetched, as install
would, with the network refused: its file:// URLs meet the fetcher's rules. CI runs a small
sample (profile "ci"); `nox -s fuzz` runs the "fuzz" profile, >= 10,000 cases per reader
(SAMEBITS_FUZZ_PROFILE=fuzz).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samebits.dsse import open_document
from samebits.errors import InputError, LockfileError, SpecError
from samebits.lock.model import Lock, parse_lock
from samebits.spec.model import PLATFORMS, TABLE_KEYS, TOP_KEYS, EnvironmentSpec
from samebits.spec.read import read_spec
from verify.gpu.attest import parse_attestation, read_attestation

# Coverage pauses while the generated cases run (pytest-cov's no_cover): the lines they reach
# are the readers' own, which the other tests cover, and tracing every case more than doubled
# the file's time under `nox -s tests` (53 s -> 121 s on 2 cores).
pytestmark = pytest.mark.no_cover

# database=None: the fuzz writes nothing outside its temp folders (no .hypothesis/ either)
settings.register_profile("ci", max_examples=150, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow])
settings.register_profile("fuzz", max_examples=10_000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                 HealthCheck.too_slow])
settings.load_profile(os.environ.get("SAMEBITS_FUZZ_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "lockfiles" / "hopper.conda-lock.yml"

scalars = st.one_of(
    st.text(max_size=12), st.integers(), st.booleans(),
    st.floats(allow_nan=False), st.dates(), st.datetimes(timezones=st.just(dt.timezone.utc)),
    st.sampled_from(["3.12", "12.4", "13.0", "2.28", "hopper", "cpu", "linux-64", "torch==2.13.0",
                     "numpy >=2", "file:///nope", "https://pypi.org/simple", "2026-11-29"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
known_tables = {
    name: st.dictionaries(st.sampled_from([*subkeys, "bogus"]), values, max_size=3)
    for name, subkeys in TABLE_KEYS.items()
}
platforms = st.dictionaries(st.sampled_from([*PLATFORMS, "linux64", "osx-arm64"]),
                            st.one_of(st.dictionaries(st.sampled_from(["glibc", "libc"]), values,
                                                      max_size=2), values), max_size=3)
spec_maps = st.fixed_dictionaries({}, optional={
    **{k: values for k in TOP_KEYS}, **known_tables, "platforms": platforms,
    "genration": values,
})


def _check_spec_error(exc: SpecError, file: str) -> None:
    assert exc.problems, "a SpecError lists at least one problem"
    json.dumps(exc.to_json())  # --json can print it, whatever the values were
    for p in exc.problems:
        assert p.file == file and isinstance(p.key, str) and p.message
        assert str(p).startswith(file)


@given(spec_maps)
def test_spec_validation_never_crashes(data: dict[str, Any]) -> None:
    """Any mapping validates or gives SpecError problems naming the file and the key."""
    try:
        spec = EnvironmentSpec.from_mapping(data, file="environments/f.toml")
    except SpecError as exc:
        _check_spec_error(exc, "environments/f.toml")
    else:
        assert spec.platforms and (spec.conda_dependencies or spec.pypi_requirements)


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_spec_file_bytes_never_crash(tmp_path: Path, blob: bytes) -> None:
    """Arbitrary bytes in environments/x.toml give a SpecError naming that file."""
    envs = tmp_path / "environments"
    envs.mkdir(exist_ok=True)
    (envs / "x.toml").write_bytes(blob)
    try:
        read_spec(envs / "x.toml", root=tmp_path)
    except SpecError as exc:
        assert exc.message.startswith("environments/x.toml") or \
            "environments/x.toml" in exc.message


def _mutate(doc: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace, delete or retype one node somewhere in ``doc``."""
    if isinstance(doc, dict) and doc and depth < 6 and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc, key=str)))
        action = data.draw(st.sampled_from(["descend", "delete", "replace"]))
        if action == "delete":
            del doc[key]
        elif action == "replace":
            doc[key] = data.draw(values)
        else:
            doc[key] = _mutate(doc[key], data, depth + 1)
        return doc
    if isinstance(doc, list) and doc and depth < 6 and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        doc[i] = _mutate(doc[i], data, depth + 1)
        return doc
    return data.draw(values)


_LOCK_DOC = yaml.safe_load(LOCK.read_text())


@given(st.data())
def test_lockfile_reader_never_crashes(tmp_path: Path, data: st.DataObject) -> None:
    """A mutated lockfile parses or gives a LockfileError naming the file."""
    doc = _mutate(copy.deepcopy(_LOCK_DOC), data)
    path = tmp_path / "x.conda-lock.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        lock = parse_lock(path)
    except LockfileError as exc:
        assert exc.message.startswith(str(path))
        json.dumps(exc.to_json())  # --json can print it, whatever the values were
    else:
        _assert_well_formed(lock)


def _assert_well_formed(lock: Lock) -> None:
    """What parse_lock promises of every lock it returns: the fields install and verify use."""
    for p in lock.packages:
        assert p.name and p.version and p.url and p.platform in lock.platforms
        need = {"conda": p.md5, "pip": p.sha256}[p.manager]
        assert need is not None
        for digest, length in ((p.md5, 32), (p.sha256, 64)):
            assert digest is None or re.fullmatch(f"[0-9a-fA-F]{{{length}}}", digest)


hashes = st.one_of(st.text(alphabet="0123456789abcdefABCDEFxz -", max_size=70),
                   st.sampled_from(["", "0" * 63, "0" * 64, "0" * 65, "f" * 32, "g" * 64]),
                   values)


@given(st.data())
def test_lockfile_reader_checks_every_hash(tmp_path: Path, data: st.DataObject) -> None:
    """A hash mutated into anything: a well-formed lock, or an error naming that entry."""
    doc = copy.deepcopy(_LOCK_DOC)
    i = data.draw(st.integers(0, len(doc["package"]) - 1))
    entry = doc["package"][i]
    algo = data.draw(st.sampled_from(["sha256", "md5", "sha1"]))
    entry["hash"][algo] = data.draw(hashes)
    if data.draw(st.booleans()):
        entry["manager"] = "conda"
    path = tmp_path / "h.conda-lock.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        lock = parse_lock(path)
    except LockfileError as exc:
        assert exc.message.startswith(str(path))
        assert f"package[{i}] {entry['name']} ({entry['platform']}): hash" in exc.message
    else:
        _assert_well_formed(lock)


@given(st.binary(max_size=300))
def test_lockfile_bytes_never_crash(tmp_path: Path, blob: bytes) -> None:
    """Arbitrary bytes as a lockfile give a LockfileError naming the file."""
    path = tmp_path / "y.conda-lock.yml"
    path.write_bytes(blob)
    try:
        parse_lock(path)
    except LockfileError as exc:
        assert exc.message.startswith(str(path))


@pytest.fixture(scope="module")
def statement() -> dict[str, Any]:
    """A statement built from this machine's real facts (no workloads run)."""
    from verify.gpu.attest import build_statement
    from verify.gpu.facts import detect

    return build_statement(
        facts=detect(), device="cpu", settings={"profile": "deterministic"},
        workloads={"gemm_fp32": {"status": "ok", "sha256": "0" * 64, "outputs": []},
                   "sdpa_cudnn": {"status": "unavailable", "detail": "cpu"}},
        suite_version=1, environment={"environment": "e" * 64})


@given(data=st.data())
def test_attestation_reader_never_crashes(statement: dict[str, Any], data: st.DataObject) -> None:
    """A mutated attestation parses or gives an InputError naming its source."""
    doc = _mutate(copy.deepcopy(statement), data)
    try:
        parse_attestation(doc, source="paper/ref.json")
    except InputError as exc:
        assert exc.message.startswith("paper/ref.json")


@given(st.binary(max_size=300))
def test_attestation_bytes_never_crash(tmp_path: Path, blob: bytes) -> None:
    """Arbitrary bytes as an attestation file give an InputError naming the file."""
    path = tmp_path / "a.json"
    path.write_bytes(blob)
    try:
        read_attestation(path)
    except InputError as exc:
        assert exc.message.startswith(str(path))


def test_statement_round_trips(statement: dict[str, Any]) -> None:
    """An unmutated statement parses back with its facts and workloads."""
    att = parse_attestation(json.loads(json.dumps(statement)), source="s")
    assert att.device == "cpu" and set(att.workloads) == {"gemm_fp32", "sdpa_cudnn"}


# ------------------------------------------------------------------ paper manifest (paper)

def _paper_maps() -> st.SearchStrategy[dict[str, Any]]:
    from samebits_app.paper.manifest import COMMAND_KEYS, OUTPUT_KEYS, RUN_KEYS, TOP_KEYS

    words = st.sampled_from(["curve", "metrics", "tensors", "file", "stdout", "out/m.json",
                             "../x", "/abs", r"step (\d+) loss (\S+)", "(", "python t.py",
                             "a b", "json", "loss", "PATH"])
    val = st.one_of(values, words, st.lists(words, max_size=3))
    output = st.dictionaries(st.sampled_from([*OUTPUT_KEYS, "bogus"]), val, max_size=6)
    command = st.dictionaries(st.sampled_from([*COMMAND_KEYS, "bogus"]), st.one_of(
        val, st.lists(output, max_size=3)), max_size=6)
    run = st.dictionaries(st.sampled_from([*RUN_KEYS, "bogus"]), st.one_of(
        val, st.dictionaries(st.text(max_size=6), val, max_size=3)), max_size=4)
    return st.fixed_dictionaries({}, optional={
        **{k: val for k in TOP_KEYS}, "format": st.sampled_from([1, 2, "1"]), "run": run,
        "commands": st.one_of(val, st.lists(command, max_size=3))})


@given(st.deferred(_paper_maps))
def test_paper_manifest_never_crashes(data: dict[str, Any]) -> None:
    """Any mapping: a manifest, or ManifestError whose every problem names the file."""
    from samebits_app.paper.manifest import ManifestError, PaperManifest

    try:
        PaperManifest.from_mapping(data, file=Path("p/samebits-paper.toml"))
    except ManifestError as exc:
        assert exc.problems and all(p.file == "p/samebits-paper.toml" for p in exc.problems)


@given(st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_paper_manifest_bytes_never_crash(tmp_path: Path, blob: bytes) -> None:
    """Any bytes in samebits-paper.toml: a manifest or a ManifestError naming the file."""
    from samebits_app.paper.manifest import ManifestError, read_manifest

    path = tmp_path / "samebits-paper.toml"
    path.write_bytes(blob)
    try:
        read_manifest(tmp_path)
    except ManifestError as exc:
        assert str(path) in exc.message


@given(data=st.data())
def test_envelope_reader_never_crashes(statement: dict[str, Any], data: st.DataObject) -> None:
    """A mutated DSSE envelope (samebits.dsse) opens or gives an InputError naming its source."""
    import base64

    from samebits._io import canonical_json

    envelope = {"payload": base64.b64encode(canonical_json(statement)).decode(),
                "payloadType": "application/vnd.in-toto+json",
                "signatures": [{"keyid": "k" * 64, "sig": base64.b64encode(b"s" * 64).decode()}]}
    doc = _mutate(envelope, data)
    try:
        open_document(doc, source="paper/signed.json")
    except InputError as exc:
        assert exc.message.startswith("paper/signed.json")


@given(st.binary(max_size=300))
def test_bundle_bytes_never_crash(tmp_path: Path, blob: bytes) -> None:
    """Arbitrary bytes as a bundle (samebits bundle check) give an InputError naming it."""
    from samebits.bundle.read import check

    path = tmp_path / "b.tar"
    path.write_bytes(blob)
    try:
        check(path)
    except InputError as exc:
        assert exc.message.startswith(str(path))


# ------------------------------------------------------------------ the fatbin reader

def _fatbin_seed() -> bytes:
    from tests.fixtures.fatbin import Sec, cubin, elf, fatbin, ptx, sass

    fat = fatbin([sass(75), sass(90, "a"), ptx(120, header_size=80),
                  sass(100, "f", header_size=112), sass(80, compression="none",
                                                        payload=cubin(["_Z1kv"]))])
    return elf([Sec(".nv_fatbin", fat + b"\0" * 8 + fat), Sec(".rodata", b"ab" + fat)])


@given(st.data())
def test_fatbin_reader_never_crashes(data: st.DataObject) -> None:
    """A real-shaped ELF file with fatbins, its bytes mutated anywhere: read_code returns
    fatbins and at most an error message, never an exception."""
    from verify.kernels.fatbin import read_code

    blob = bytearray(_fatbin_seed())
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    code = read_code(bytes(blob[:cut]), cut)
    assert code.error is None or isinstance(code.error, str)
    for fat in code.fatbins:
        assert fat.size >= 16 and all(e.name for e in fat.entries)


@given(st.binary(max_size=600))
def test_fatbin_bytes_never_crash(blob: bytes) -> None:
    """Random bytes, with and without the ELF and fatbin magics in front: no exception."""
    from verify.kernels.fatbin import MAGIC_BYTES, read_code, search_fatbins

    for data in (blob, b"\x7fELF\x02\x01\x01" + blob, MAGIC_BYTES + b"\x01\x00\x10\x00" + blob):
        read_code(data, len(data))
        list(search_fatbins(data, 0, len(data)))



# ------------------------------------------------------------ foreign locks, then fetched

FOREIGN = ROOT / "tests" / "data" / "foreign"
HOSTILE_URLS = st.sampled_from([
    "file:///dev/zero", "file:///etc/hostname", "file:///proc/self/environ", "file:///",
    "file:///tmp/../dev/zero", "file://host/share/x.whl", "ftp://x/y.whl", "gopher://x",
    "http://127.0.0.1:1/x-1.0-py3-none-any.whl", "https://[::1]:1/y-1-py3-none-any.whl",
    "file:///dev/zero#x-1.0-py3-none-any.whl", "x-1.0-py3-none-any.whl", "../../etc/passwd",
    "/dev/zero", "https://files.example.invalid/a-1.0-py3-none-any.whl"])
hostile = st.one_of(values, HOSTILE_URLS)


def _mutate_hostile(doc: Any, data: st.DataObject) -> Any:
    """``_mutate``, with URLs and paths an attacker would write among the new values."""
    if isinstance(doc, dict) and doc and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc, key=str)))
        if data.draw(st.booleans()):
            doc[key] = data.draw(hostile)
        else:
            doc[key] = _mutate_hostile(doc[key], data)
        return doc
    if isinstance(doc, list) and doc and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        doc[i] = _mutate_hostile(doc[i], data)
        return doc
    return _mutate(doc, data)


def _offline(url: str, dest: Path, limits: Any = None) -> None:
    """The fetcher of the fuzz: the network refused, file:// read by the real rules."""
    from samebits.errors import UnreachableError
    from samebits.install.fetch import fetch_url

    if url.startswith("file:"):
        fetch_url(url, dest, limits)
        return
    raise UnreachableError(f"{url}: no network in the fuzz")


def _read_then_fetch(path: Path, tmp: Path) -> None:
    """``path`` read as install reads it; when it reads, its first packages fetched into a
    cache under ``tmp``: only a SamebitsError may come out, and nothing lands outside."""
    from samebits.errors import SamebitsError
    from samebits.foreign.model import ReadOptions
    from samebits.install.fetch import prove
    from samebits.lock.read import load_lock

    try:
        lock = load_lock(path, ReadOptions(platforms=("linux-64",), python="3.11"))
    except SamebitsError as exc:
        assert exc.message
        json.dumps(exc.to_json())
        return
    for p in lock.lock.packages[:3]:
        try:
            prove(p, tmp / "cache", fetch=_offline)
        except SamebitsError as exc:
            assert exc.message
    leftovers = [q for q in (tmp / "cache").rglob("*") if q.is_file()] \
        if (tmp / "cache").exists() else []
    assert all(q.stat().st_size < (1 << 20) for q in leftovers)


def _toml_target(name: str) -> Any:
    import tomli_w
    import tomllib

    seed = tomllib.loads((FOREIGN / "pypi" / name).read_text())

    @given(st.data())
    def target(tmp_path: Path, data: st.DataObject) -> None:
        doc = _mutate_hostile(copy.deepcopy(seed), data)
        path = tmp_path / name
        try:
            text = tomli_w.dumps(doc) if isinstance(doc, dict) else ""
        except (TypeError, ValueError):
            return  # not a TOML document at all: the bytes targets cover those
        path.write_text(text)
        _read_then_fetch(path, tmp_path)

    return target


test_uv_lock_reader_never_crashes = _toml_target("uv.lock")
test_uv_lock_reader_never_crashes.__doc__ = "A mutated uv.lock reads, then fetches, safely."
test_pylock_reader_never_crashes = _toml_target("pylock.toml")
test_pylock_reader_never_crashes.__doc__ = "A mutated pylock.toml reads, then fetches, safely."

_PIXI = yaml.safe_load((FOREIGN / "pixi" / "v6.pixi.lock").read_text())


@given(st.data())
def test_pixi_lock_reader_never_crashes(tmp_path: Path, data: st.DataObject) -> None:
    """A mutated pixi.lock (read by py-rattler) reads, then fetches, safely."""
    doc = _mutate_hostile(copy.deepcopy(_PIXI), data)
    path = tmp_path / "pixi.lock"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    _read_then_fetch(path, tmp_path)


_LINES = {
    "requirements.txt": (FOREIGN / "pypi" / "requirements.txt").read_text().splitlines(),
    "explicit.txt": (FOREIGN / "explicit" / "cpu-linux-64.explicit.txt").read_text()
    .splitlines(),
}
hostile_lines = st.one_of(
    st.text(max_size=60), HOSTILE_URLS,
    HOSTILE_URLS.map(lambda u: f"evil @ {u} --hash=sha256:{'0' * 64}"),
    HOSTILE_URLS.map(lambda u: f"{u}#{'0' * 32}"),
    HOSTILE_URLS.map(lambda u: f"# pip evil @ {u}#sha256={'0' * 64}"),
    st.sampled_from(["--find-links /etc", "-r /etc/passwd", "-c /dev/zero", "-e .",
                     "--index-url file:///", "@EXPLICIT", "evil==1.0 \\", "    --hash=md5:0"]))


@pytest.mark.parametrize("name", sorted(_LINES))
@given(data=st.data())
def test_line_lock_readers_never_crash(tmp_path: Path, name: str,
                                       data: st.DataObject) -> None:
    """requirements.txt and conda explicit files with lines replaced, inserted or dropped,
    hostile URLs and options among them: read, then fetched, safely."""
    lines = list(_LINES[name])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(lines)))
        action = data.draw(st.sampled_from(["insert", "replace", "drop"]))
        if action == "insert" or at == len(lines):
            lines.insert(at, data.draw(hostile_lines))
        elif action == "replace":
            lines[at] = data.draw(hostile_lines)
        else:
            del lines[at]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    _read_then_fetch(path, tmp_path)


@pytest.mark.parametrize("name", ["uv.lock", "pylock.toml", "pixi.lock", "requirements.txt",
                                  "x.explicit.txt"])
@given(blob=st.binary(max_size=300))
def test_foreign_lock_bytes_never_crash(tmp_path: Path, name: str, blob: bytes) -> None:
    """Arbitrary bytes under each foreign lock's name: a samebits error, never a crash."""
    path = tmp_path / name
    path.write_bytes(blob)
    _read_then_fetch(path, tmp_path)


# ------------------------------------------------------------- a paper's curve regexes

regex_parts = st.lists(st.sampled_from([
    r"(\d+)", r"(\S+)", "(", ")", "(?:", "a", "aa", "|", "+", "*", "?", "{2,}", "x", "$", "^",
    r"\s", ".", "(?P<step>\\d+)", "(?P<v>[0-9.e-]+)", "[", "]", "\\", "(?=a)", "(?<=a)", "\\1"]),
    min_size=1, max_size=12).map("".join)


@given(pattern=regex_parts, text=st.text(alphabet="a x0123456789.\n-e", max_size=200))
def test_curve_regexes_never_hang_or_crash(pattern: str, text: str) -> None:
    """Any regex a manifest accepts, over any output: points, or a ValueError (no match, a
    value that is not a number, the time limit), and never longer than the limit."""
    import time

    from samebits_app.paper.manifest import ManifestError, PaperManifest
    from samebits_app.paper.values import curve

    doc = {"format": 1, "commands": [{"name": "a", "run": "x", "outputs": [
        {"kind": "curve", "stream": "stdout", "regex": pattern}]}]}
    try:
        manifest = PaperManifest.from_mapping(doc, file=Path("p/samebits-paper.toml"))
    except ManifestError as exc:
        assert all(p.file == "p/samebits-paper.toml" for p in exc.problems)
        return
    (spec,) = manifest.commands[0].outputs
    start = time.monotonic()
    try:
        curve(text, spec, regex_seconds=0.05)
    except ValueError as exc:
        assert str(exc)
    assert time.monotonic() - start < 30  # a hang is without end; a busy machine is slow


# ------------------------------------------------------------------- bundles, unpacked

_BUNDLE_NAMES = st.sampled_from(["bundle.json", "archives/a.whl", "archives/x/../../../e",
                                 "/abs/x", "lockfiles/x.conda-lock.yml", "archives/", "a/b/c",
                                 "SHA256SUMS", "README.txt", "..", "."])


@given(members=st.lists(st.tuples(_BUNDLE_NAMES, st.sampled_from(
    ["file", "dir", "symlink", "hardlink", "fifo", "chr"]), st.binary(max_size=64)),
    max_size=6), manifest=values)
def test_bundle_unpack_never_crashes_or_escapes(tmp_path: Path, members: list,
                                                manifest: Any) -> None:
    """A tar with a bundle.json (any JSON) and hostile members (.., absolute, links, devices)
    unpacked for install: an InputError naming it, and nothing outside the cache."""
    import io
    import tarfile

    from samebits.bundle.read import scan

    path = tmp_path / "b.tar"
    with tarfile.open(path, "w") as tar:
        head = json.dumps(manifest, default=str).encode()
        info = tarfile.TarInfo("bundle.json")
        info.size = len(head)
        tar.addfile(info, io.BytesIO(head))
        for name, kind, blob in members:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE,
                         "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("symlink", "hardlink"):
                info.linkname = "/etc/passwd"
            if kind == "file":
                info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob) if kind == "file" else None)
    before = set(tmp_path.iterdir())
    try:
        scan(path, cache=tmp_path / "cache", platform="linux-64")
    except InputError as exc:
        assert exc.message.startswith(str(path))
    assert set(tmp_path.iterdir()) <= before | {tmp_path / "cache"}


# ------------------------------------------------------------------ the last check

def _tree_state(home: Path, cache: Path) -> set[str]:
    """The checkout's files git does not ignore, every file under this module's home, and the
    entries of the samebits cache the readers default to."""
    import subprocess

    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                          cwd=ROOT, capture_output=True, text=True)
    names = {f"home:{p.relative_to(home)}" for p in home.rglob("*")}
    names |= ({f"cache:{p.relative_to(cache)}" for p in cache.glob("*/*")}
              if cache.is_dir() else set())
    return set(proc.stdout.splitlines()) | names


_STATE: dict[str, set[str]] = {}


@pytest.fixture(scope="module", autouse=True)
def _home_of_its_own(tmp_path_factory: pytest.TempPathFactory,
                     session_cache_home: Path) -> Iterator[Path]:
    """HOME is an empty folder of this module's own while it runs, so a reader that wrote to
    ~/.cache (or anywhere under HOME) is seen, and what other processes of this machine
    write to the real user's cache cannot count; the samebits cache the readers default to
    (XDG_CACHE_HOME: the session's, tests/fixtures/plugin.py) is read before the first test.
    Module-scoped: under pytest-xdist the module's tests run in one worker, one after another
    (``--dist loadfile``), so no other test writes to that cache meanwhile."""
    home = tmp_path_factory.mktemp("fuzz-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        _STATE["before"] = _tree_state(home, session_cache_home / "samebits")
        yield home


def test_nothing_written_outside_temp_folders(_home_of_its_own: Path,
                                              session_cache_home: Path) -> None:
    """Run last in this module: the fuzz left the checkout, HOME and the default cache as they
    were (every reader above wrote only under its tmp_path)."""
    assert _tree_state(_home_of_its_own, session_cache_home / "samebits") == _STATE["before"]

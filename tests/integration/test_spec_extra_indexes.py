"""[pypi] extra-indexes: validated like the index, passed to uv after it (a folder of wheels
as --find-links), and locked for real: a local-version wheel from a folder beside an index."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import tomli_w

from samebits.errors import SpecError
from samebits.lock.model import parse_lock
from samebits.solve.pypi import extra_index_args
from samebits.spec.model import EnvironmentSpec
from samebits_app.cli import main
from tests.fixtures.fakewheels import Wheel, write_wheels
from tests.fixtures.pypi_index import LocalIndex, Serving

BASE = {"generation": "cpu", "python": "3.12", "platforms": {"linux-64": {"glibc": "2.28"}},
        "pypi": {"requirements": ["six"]}}


@pytest.mark.parametrize(("extra", "message"), [
    (["ftp://x/simple"], 'env.toml: pypi.extra-indexes = "ftp://x/simple": must be an '
     "http(s):// or file:// URL"),
    (["https://a/simple", "https://a/simple/"], 'env.toml: pypi.extra-indexes = '
     '"https://a/simple/": is given twice'),
    ("https://a/simple", 'env.toml: pypi.extra-indexes = "https://a/simple": must be a list of '
     "non-empty strings"),
])
def test_bad_extra_indexes(extra: object, message: str) -> None:
    """Each bad entry named with its key and value."""
    data = {**BASE, "pypi": {**BASE["pypi"], "extra-indexes": extra}}
    with pytest.raises(SpecError) as err:
        EnvironmentSpec.from_mapping(data, file="env.toml")
    assert str(err.value) == message


def test_uv_arguments(tmp_path: Path) -> None:
    """A URL is an --extra-index-url; a file:// folder of wheels is --find-links."""
    assert extra_index_args(("https://download.pytorch.org/whl/cpu", tmp_path.as_uri())) == [
        "--extra-index-url", "https://download.pytorch.org/whl/cpu", "--find-links",
        str(tmp_path)]


def test_lock_takes_a_wheel_from_an_extra_index(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """A requirements.txt with --extra-index-url (a folder holding a 1.0+cpu wheel) beside a
    real index: init writes both, and the real uv locks the local version from the folder and
    six from the index."""
    index_dir = write_wheels(tmp_path / "index", [Wheel(name="six", version="1.16.0")])
    extra = write_wheels(tmp_path / "extra", [Wheel(name="tinylocal", version="1.0+cpu")])
    times = {w.name: "2021-05-05T14:18:17Z" for w in index_dir.glob("*.whl")}
    req = tmp_path / "requirements.txt"
    req.write_text(f"--extra-index-url {extra.as_uri()}\ntinylocal==1.0+cpu\nsix\n")
    with Serving(LocalIndex(folder=index_dir, upload_times=times)) as url:
        rc = main(["init", "x", "--from", str(req), "--root", str(tmp_path), "--index", url,
                   "--exclude-newer", "2024-06-01", "--python-version", "3.12", "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert rc == 0, doc
        assert doc["pypi"]["extra_indexes"] == [extra.as_uri()]
        assert doc["python"] == {"value": "3.12", "why": "--python-version"}
        assert main(["lock", "x", "--root", str(tmp_path), "--cache-dir",
                     str(tmp_path / "c")]) == 0
    capsys.readouterr()
    locked = {p.name: p.url for p in parse_lock(tmp_path / "lockfiles" /
                                                "x.conda-lock.yml").packages}
    assert locked["tinylocal"].startswith(extra.as_uri() + "/tinylocal-1.0")
    assert locked["six"].startswith(url.removesuffix("/simple"))


def test_an_extra_index_that_does_not_answer_is_the_one_named(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The sweep's dinov2 (``--extra-index-url https://download.pytorch.org/whl/cu117``, where
    that host cannot be reached) was told "the index https://pypi.org/simple did not answer":
    the index named is the one uv could not fetch from, here an extra index whose port refuses
    connections beside a main index that answers."""
    index_dir = write_wheels(tmp_path / "index", [Wheel(name="six", version="1.16.0")])
    times = {w.name: "2021-05-05T14:18:17Z" for w in index_dir.glob("*.whl")}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{s.getsockname()[1]}/whl/cu117"
    with Serving(LocalIndex(folder=index_dir, upload_times=times)) as url:
        spec = {**BASE, "exclude-newer": "2024-06-01",
                "pypi": {"index": url, "extra-indexes": [refused], "requirements": ["six"]}}
        (tmp_path / "environments").mkdir()
        (tmp_path / "environments" / "x.toml").write_text(tomli_w.dumps(spec))
        rc = main(["lock", "x", "--root", str(tmp_path), "--cache-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err
    assert rc == 4, err
    assert f"the index {refused} did not answer" in err, err
    assert f"the index {url} did not answer" not in err

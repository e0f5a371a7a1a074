"""Locking from the immutable past: PyPI answers at a final exclude-newer, cached and read first.

Against a real HTTP index on loopback (tests/fixtures/pypi_index.py) and the real uv: the cached
route
gives what uv gives reading the index directly, a warm lock asks the index nothing (and works
with the index gone), only what is missing is fetched, another instant never reads these pages,
yanks count as of the cache until --refresh.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samebits.lock.model import parse_lock
from samebits.solve.indexcache import BadPage, IndexView, cut_page, is_final
from samebits.solve.indexproxy import IndexProxy
from samebits.solve.pypi import solve_pypi
from samebits.solve.wheelmeta import BadWheel, metadata_member
from samebits.spec.read import read_spec
from tests.fixtures.fakewheels import Wheel, write_wheels
from tests.fixtures.lock import TmpProject
from tests.fixtures.pypi_index import LocalIndex, Serving

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 30, tzinfo=UTC)
OLD, NEW = "2026-01-01T00:00:00Z", "2026-06-01T00:00:00Z"
CUTOFF, LATER = "2026-03-01T00:00:00Z", "2026-07-01T00:00:00Z"


def _wheels() -> list[Wheel]:
    out = [Wheel(name="numpy", version="2.1.0"), Wheel(name="numpy", version="2.2.0"),
           Wheel(name="elfish", version="0.31")]
    for arch in ("x86_64", "aarch64"):
        tag = f"py3-none-manylinux_2_28_{arch}"
        out.append(Wheel(name="nvidia-cuda-runtime", version="13.0.96", tag=tag))
        out.append(Wheel(name="torch", version="2.13.0", tag=tag,
                         requires=("nvidia-cuda-runtime==13.0.96", "numpy")))
    return out


@pytest.fixture(scope="module")
def index_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wheels(tmp_path_factory.mktemp("index-wheels"), _wheels())


def _index(folder: Path, **kw: object) -> LocalIndex:
    times = {w.name: (NEW if "2.2.0" in w.name else OLD) for w in folder.glob("*.whl")}
    return LocalIndex(folder=folder, upload_times=times, **kw)  # type: ignore[arg-type]


@pytest.fixture
def index(index_wheels: Path) -> Iterator[LocalIndex]:
    idx = _index(index_wheels)
    with Serving(idx):
        yield idx


SPEC = """\
generation = "cpu"
python = "3.12"
exclude-newer = "{cutoff}"
[platforms.linux-64]
glibc = "2.28"
[platforms.linux-aarch64]
glibc = "2.28"
[pypi]
index = "{url}"
requirements = [{reqs}]
"""


def spec_text(url: str, reqs: str = '"torch==2.13.0"', cutoff: str = CUTOFF) -> str:
    return SPEC.format(url=url, reqs=reqs, cutoff=cutoff)


def lock(project: TmpProject, cache: Path, *args: str) -> tuple[int, str, bytes]:
    res = project.samebits("lock", "--cache-dir", str(cache), *args)
    path = project.lockfile("env")
    return res.returncode, res.stderr, path.read_bytes() if path.exists() else b""


def versions(project: TmpProject) -> dict[str, str]:
    return {p.name: p.version for p in parse_lock(project.lockfile("env")).packages}


async def _both(spec_path: Path, root: Path, cache: Path) -> tuple[list, list, IndexProxy]:
    spec = read_spec(spec_path, root=root)
    direct = [await solve_pypi(spec, t, timeout=10) for t in spec.platforms]
    with IndexProxy(root=cache, timeout=10, now=NOW) as proxy:
        cached = [await solve_pypi(spec, t, timeout=10, proxy=proxy) for t in spec.platforms]
    return direct, cached, proxy


@pytest.mark.parametrize("pep658", [False, True])
def test_cached_route_equals_direct_uv(project: TmpProject, index_wheels: Path, tmp_path: Path,
                                       pep658: bool) -> None:
    """Through the cache, uv picks the packages, URLs and hashes it picks reading the index."""
    idx = _index(index_wheels, pep658=pep658)
    with Serving(idx) as url:
        path = project.spec("env", spec_text(url, '"torch==2.13.0"'))
        direct, cached, proxy = asyncio.run(_both(path, project.root, tmp_path / "cache"))
    assert cached == direct
    names = {p.name: p for p in cached[0]}
    assert names["numpy"].version == "2.1.0"  # 2.2.0 was uploaded after the cutoff
    assert names["torch"].url == f"{url.removesuffix('/simple')}/files/" \
                                 "torch-2.13.0-py3-none-manylinux_2_28_x86_64.whl"
    (route,) = proxy.routes()
    assert route.fetched > 0 and not route.problems and route.unsupported is None
    metadata = [p for p in idx.log if p.endswith(".metadata")]
    assert bool(metadata) == pep658  # without PEP 658 the wheel's zip is read by ranges


def test_html_only_index_is_read_directly(project: TmpProject, index_wheels: Path,
                                          tmp_path: Path) -> None:
    """An index without PEP 691 JSON is not cached; the solve reads it directly, as before."""
    with Serving(_index(index_wheels, mode="html")) as url:
        path = project.spec("env", spec_text(url, '"elfish"'))
        spec = read_spec(path, root=project.root)

        async def run() -> tuple[object, object]:
            outcome = []
            for proxy in (None, IndexProxy(root=tmp_path / "cache", timeout=10, now=NOW)):
                try:
                    if proxy is None:
                        outcome.append(await solve_pypi(spec, spec.platforms[0], timeout=10))
                    else:
                        with proxy:
                            outcome.append(await solve_pypi(spec, spec.platforms[0], timeout=10,
                                                            proxy=proxy))
                except Exception as exc:  # noqa: BLE001 (the same failure is the point)
                    outcome.append(str(exc))
            return outcome[0], outcome[1]

        direct, cached = asyncio.run(run())
    assert cached == direct
    # uv's own verdict: HTML has no upload times, so exclude-newer leaves nothing
    assert "elfish` was filtered by `exclude-newer`" in str(cached)
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_warm_lock_asks_nothing_and_survives_the_index_going_away(
        project: TmpProject, index_wheels: Path, tmp_path: Path) -> None:
    """A warm lock makes no request; with the index down it still writes the same bytes."""
    cache = tmp_path / "cache"
    idx = _index(index_wheels)
    with Serving(idx) as url:
        project.spec("env", spec_text(url))
        code, err, first = lock(project, cache)
        assert code == 0, err
        assert idx.requests_for("simple") and idx.requests_for("files")
        idx.log.clear()
        code, err, second = lock(project, cache)
        assert (code, idx.log, second) == (0, [], first), err
        assert (f"PyPI at a final exclude-newer: 0 answers fetched from the index, the rest "
                f"read from the cache in {cache}") in err
    project.lockfile("env").unlink()
    code, err, third = lock(project, cache)  # the index no longer answers at all
    assert (code, third) == (0, first), err
    code, err, fourth = lock(project, cache, "--offline")
    assert (code, fourth) == (0, first), err


def test_offline_with_a_cold_cache_names_what_is_missing(project: TmpProject,
                                                         index: LocalIndex,
                                                         tmp_path: Path) -> None:
    """--offline never asks the index; what the cache lacks is named, exit 4, nothing written."""
    project.spec("env", spec_text(index.url, '"elfish"'))
    code, err, data = lock(project, tmp_path / "cache", "--offline")
    assert code == 4
    assert (f"error: environments/env.toml: [pypi] requirements on linux-64 (Python 3.12, "
            f"x86_64-manylinux_2_28): --offline, and the cache of {index.url} at {CUTOFF} "
            f"lacks the page of elfish\nhint: lock once without --offline where the index is "
            f"reachable") in err
    assert data == b"" and index.log == []


def test_only_what_is_missing_is_fetched(project: TmpProject, index: LocalIndex,
                                         tmp_path: Path) -> None:
    """A requirement added later fetches its own page and metadata, nothing already cached."""
    cache = tmp_path / "cache"
    project.spec("env", spec_text(index.url, '"numpy"'))
    assert lock(project, cache)[0] == 0
    index.log.clear()
    project.spec("env", spec_text(index.url, '"numpy", "elfish"'))
    code, err, _ = lock(project, cache)
    assert code == 0, err
    assert index.requests_for("simple") == ["/simple/elfish/"]
    assert {p.rsplit("/", 1)[1] for p in index.requests_for("files")} == {
        "elfish-0.31-py3-none-any.whl"}
    assert versions(project) == {"numpy": "2.1.0", "elfish": "0.31"}


def test_another_instant_never_reads_these_pages(project: TmpProject, index: LocalIndex,
                                                 tmp_path: Path) -> None:
    """exclude-newer moved later: the index is asked again and the newer release is seen."""
    cache = tmp_path / "cache"
    project.spec("env", spec_text(index.url, '"numpy"'))
    assert lock(project, cache)[0] == 0
    assert versions(project) == {"numpy": "2.1.0"}
    index.log.clear()
    project.spec("env", spec_text(index.url, '"numpy"', cutoff=LATER))
    assert lock(project, cache)[0] == 0
    assert index.requests_for("simple") == ["/simple/numpy/"]
    assert versions(project) == {"numpy": "2.2.0"}
    folders = sorted(p.name for p in next((cache / "pypi-v1").iterdir()).iterdir()
                     if p.is_dir() and p.name != "metadata")
    assert folders == ["20260301T000000Z", "20260701T000000Z"]


def test_a_later_yank_counts_from_refresh_on(project: TmpProject, index: LocalIndex,
                                             tmp_path: Path) -> None:
    """A yank after caching changes nothing until --refresh; from then on it counts."""
    cache = tmp_path / "cache"
    project.spec("env", spec_text(index.url, '"numpy"', cutoff=LATER))
    assert lock(project, cache)[0] == 0
    assert versions(project) == {"numpy": "2.2.0"}
    index.yanked.add("numpy-2.2.0-py3-none-any.whl")
    assert lock(project, cache)[0] == 0
    assert versions(project) == {"numpy": "2.2.0"}
    code, err, _ = lock(project, cache, "--refresh")
    assert code == 0, err
    assert versions(project) == {"numpy": "2.1.0"}
    index.log.clear()
    assert lock(project, cache)[0] == 0
    assert versions(project) == {"numpy": "2.1.0"} and index.log == []


def test_a_damaged_cache_entry_is_fetched_again(project: TmpProject, index: LocalIndex,
                                                tmp_path: Path) -> None:
    """A cache file that does not parse is a miss: fetched again, the lock unchanged."""
    cache = tmp_path / "cache"
    project.spec("env", spec_text(index.url, '"numpy"'))
    first = lock(project, cache)[2]
    (page,) = cache.rglob("numpy.json")
    page.write_text("{ torn")
    index.log.clear()
    code, err, again = lock(project, cache)
    assert (code, again) == (0, first), err
    assert index.requests_for("simple") == ["/simple/numpy/"]
    assert json.loads(page.read_text())["project"] == "numpy"


def test_offline_and_refresh_contradict(project: TmpProject, tmp_path: Path) -> None:
    """--offline --refresh is a usage error (exit 2), said before anything runs."""
    project.spec("env", spec_text("https://pypi.org/simple"))
    code, err, _ = lock(project, tmp_path / "cache", "--offline", "--refresh")
    assert code == 2
    assert "error: --offline and --refresh contradict each other" in err


@pytest.mark.parametrize(("cutoff", "final"), [
    (None, False),
    (NOW, False),
    (NOW - dt.timedelta(hours=23), False),
    (NOW - dt.timedelta(days=1), True),
    (dt.datetime(2026, 3, 1, tzinfo=UTC), True),
])
def test_is_final(cutoff: dt.datetime | None, final: bool) -> None:
    """Only an instant at least a day in the past is final."""
    assert is_final(cutoff, NOW) is final


PAGE = {"meta": {"api-version": "1.1"}, "name": "numpy", "files": [
    {"filename": "numpy-2.1.0-py3-none-any.whl", "url": "../../f/numpy-2.1.0-py3-none-any.whl",
     "upload-time": "2026-01-01T00:00:00.123456Z", "hashes": {}},
    {"filename": "numpy-2.2.0-py3-none-any.whl", "url": "https://h/numpy-2.2.0-py3-none-any.whl",
     "upload-time": "2026-06-01T00:00:00Z", "hashes": {}},
    {"filename": "numpy-2.0.0.tar.gz", "url": "numpy-2.0.0.tar.gz", "hashes": {}},
]}


@pytest.mark.parametrize(("cutoff", "kept"), [
    ("2026-03-01T00:00:00+00:00", ["https://i/f/numpy-2.1.0-py3-none-any.whl",
                                   "https://i/simple/numpy/numpy-2.0.0.tar.gz"]),
    ("2026-06-01T00:00:00+00:00", ["https://i/f/numpy-2.1.0-py3-none-any.whl",
                                   "https://h/numpy-2.2.0-py3-none-any.whl",
                                   "https://i/simple/numpy/numpy-2.0.0.tar.gz"]),
])
def test_cut_page(cutoff: str, kept: list[str]) -> None:
    """Later files go, files without an upload time stay (uv decides), URLs become absolute."""
    page = cut_page(PAGE, page_url="https://i/simple/numpy/",
                    exclude_newer=dt.datetime.fromisoformat(cutoff))
    assert [f["url"] for f in page["files"]] == kept
    assert page["meta"] == PAGE["meta"] and page["name"] == "numpy"


@pytest.mark.parametrize(("doc", "message"), [
    ([], "not a PEP 691 project page (no 'files' list)"),
    ({"meta": {"api-version": "2.0"}, "files": []}, "api-version '2.0'; samebits reads 1.x"),
    ({"meta": {"api-version": "1.0"}, "files": [{"filename": "x"}]}, "a file without a url"),
])
def test_cut_page_refuses(doc: object, message: str) -> None:
    """What is not a PEP 691 page is refused by name (the index is then read directly)."""
    with pytest.raises(BadPage) as err:
        cut_page(doc, page_url="https://i/", exclude_newer=NOW)
    assert str(err.value) == message


def test_cache_keys_separate_indexes_and_instants(tmp_path: Path) -> None:
    """Another index or another instant is another folder; a credential never names one."""
    a = IndexView(index="https://pypi.org/simple", exclude_newer=NOW, root=tmp_path)
    b = IndexView(index="https://mirror/simple", exclude_newer=NOW, root=tmp_path)
    c = IndexView(index="https://pypi.org/simple/", exclude_newer=NOW - dt.timedelta(1),
                  root=tmp_path)
    assert len({a.page_path("numpy"), b.page_path("numpy"), c.page_path("numpy")}) == 3
    assert a.folder == c.folder  # a trailing slash is the same index
    d = IndexView(index="https://user:secret@mirror/simple", exclude_newer=NOW, root=tmp_path)
    d.write_page("numpy", None)
    assert "secret" not in "".join(p.read_text() for p in d.folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(("names", "filename", "found"), [
    (["a/x.py", "a-1.0.dist-info/METADATA"], "a-1.0-py3-none-any.whl", "a-1.0.dist-info/METADATA"),
    (["b-2.0.dist-info/METADATA", "a-1.0.dist-info/METADATA"], "a-1.0-py3-none-any.whl",
     "a-1.0.dist-info/METADATA"),
    (["x/a-1.0.dist-info/METADATA"], "a-1.0-py3-none-any.whl", None),
])
def test_metadata_member(names: list[str], filename: str, found: str | None) -> None:
    """The wheel's own top-level .dist-info/METADATA is the one read."""
    if found is None:
        with pytest.raises(BadWheel):
            metadata_member(names, filename)
    else:
        assert metadata_member(names, filename) == found


@pytest.mark.parametrize(("stored", "read_back"), [
    ('{"linux-64": "from-the-cache"}', True),   # a well-formed entry is the answer
    ("[]", False),                              # not a map: computed again
    ("{ torn", False),                          # not JSON: computed again
])
def test_content_hash_cache(project: TmpProject, tmp_path: Path, stored: str,
                            read_back: bool) -> None:
    """conda-lock's content hash is kept by its inputs; a bad entry is computed again."""
    from samebits.lock.make import content_hashes

    spec = read_spec(project.spec("env", spec_text("https://pypi.org/simple")),
                     root=project.root)
    computed = content_hashes(spec)
    assert content_hashes(spec, cache=tmp_path) == computed
    (entry,) = (tmp_path / "content-hash-v1").iterdir()
    assert json.loads(entry.read_text()) == computed
    entry.write_text(stored)
    again = content_hashes(spec, cache=tmp_path)
    assert again == ({"linux-64": "from-the-cache"} if read_back else computed)


def test_a_silent_index_fails_within_seconds(project: TmpProject, silent_server: str,
                                             tmp_path: Path) -> None:
    """Through the cache too, an index that never answers is 'did not answer', exit 4."""
    project.spec("env", spec_text(f"{silent_server}/simple", '"numpy"').replace(
        "[platforms.linux-aarch64]\nglibc = \"2.28\"\n", ""))
    start = time.monotonic()
    code, err, data = lock(project, tmp_path / "cache", "--timeout", "2")
    assert code == 4, err
    assert (f"[pypi] requirements on linux-64 (Python 3.12, x86_64-manylinux_2_28): the index "
            f"{silent_server}/simple did not answer:\n  {silent_server}/simple/numpy/: timed out"
            ) in err
    assert time.monotonic() - start < 60 and data == b""

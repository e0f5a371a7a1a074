"""verify fleet across hosts: 4 network namespaces x 2 ranks, gloo over real sockets on the
veths between them (tests/fixtures/netns.py), one host whose prefix has one file changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures import ROOT
from tests.fixtures.netns import Hosts, exists, make_or_skip

HOSTS, PER_HOST = 4, 2
ONLY = "randn,sum_fp32"
DEADLINE = 480  # the whole fleet, generous at load 10


def small_prefix(folder: Path) -> tuple[Path, Path]:
    """A venv of its own (so its digest is quick to take) that imports this checkout's
    torch and samebits through a .pth, and holds one data file: (python, that file)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=120)
    ours = sysconfig.get_paths()["purelib"]
    site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages"
    (site / "checkout.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    data = folder / "share" / "fleet" / "settings.txt"
    data.parent.mkdir(parents=True)
    data.write_text("the same on every host\n")
    return folder / "bin" / "python", data


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    """Four namespace hosts, torn down after the test (skips where none can be made)."""
    with make_or_skip(HOSTS) as made:
        yield made


@pytest.mark.slow  # 8 torch processes: ~50 s on 2 busy cores
def test_four_hosts_name_the_one_whose_prefix_differs(tmp_path: Path, hosts: Hosts) -> None:
    """Eight ranks on four namespace hosts agree bit for bit over gloo between namespaces;
    the report names 4 hosts and 8 ranks, and host3, whose prefix has one file changed (a
    bind mount seen by host3 alone), is the odd one: its environment differs."""
    python, data = small_prefix(tmp_path / "prefix")
    changed = tmp_path / "host3-settings.txt"
    changed.write_text("changed on host3 only\n")
    out, html = tmp_path / "fleet.json", tmp_path / "fleet.html"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "MASTER_"))}
    procs = []
    started = time.monotonic()
    for h in hosts:
        for local in range(PER_HOST):
            rank = h.index * PER_HOST + local
            env = {**base, "RANK": str(rank), "LOCAL_RANK": str(local),
                   "WORLD_SIZE": str(HOSTS * PER_HOST), "MASTER_ADDR": hosts[0].address,
                   "MASTER_PORT": "29400", "GLOO_SOCKET_IFNAME": Hosts.IFNAME,
                   "OMP_NUM_THREADS": "1"}
            procs.append(hosts.popen(
                h, [str(python), "-m", "verify", "fleet", "--only", ONLY, "--out", str(out),
                    "--html", str(html), "--rank-timeout", "300"],
                binds={data: changed} if h.index == 3 else None, env=env, cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = []
    for p in procs:
        o, e = p.communicate(timeout=max(DEADLINE - (time.monotonic() - started), 1))
        results.append((p.returncode, o, e))
    assert [r[0] for r in results] == [0] * len(procs), [r[2][-1500:] for r in results]
    report = json.loads(out.read_text())
    assert report["world_size"] == 8 and report["verdict"] == "consistent"
    assert sorted({r["host"] for r in report["ranks"]}) == ["host0", "host1", "host2", "host3"]
    assert [(h["host"], h["ranks"], h["odd"]) for h in report["hosts"]] == [
        ("host0", [0, 1], []), ("host1", [2, 3], []), ("host2", [4, 5], []),
        ("host3", [6, 7], ["environment"])]
    assert [e["ranks"] for e in report["environments"]] == [[0, 1, 2, 3, 4, 5], [6, 7]]
    assert report["collectives"]["all_reduce/large"] == {"ranks_agree": True,
                                                         "repetitions_agree": True}
    text = results[0][1]
    assert "fleet: 8 ranks on 4 hosts" in text
    assert "ODD host host3 (ranks 6,7): its environment differs from the 3 hosts that agree" \
        in text
    assert "environment of ranks 6,7 (host3) differs" in text
    assert 'id="hosts"' in html.read_text()
    assert data.read_text() == "the same on every host\n"  # the bind mount stayed on host3


def test_hosts_are_torn_down_after_a_failure() -> None:
    """A failure inside the block still deletes every namespace and the bridge."""
    hosts = make_or_skip(2)
    names = [h.netns for h in hosts]
    with pytest.raises(RuntimeError, match="boom"), hosts:
        assert all(exists(n) for n in names)
        proc = hosts.popen(hosts[1], ["sleep", "600"])
        raise RuntimeError("boom")
    assert not any(exists(n) for n in names)
    assert proc.poll() is not None
    link = subprocess.run(["ip", "link", "show", hosts.bridge], capture_output=True,
                          timeout=20, check=False)
    assert link.returncode != 0


def _rank(rank: int, host: str, cls: str = "c1", env: str = "e") -> dict:
    return {"rank": rank, "host": host, "class": cls,
            "environment": {"environment": env * 64}}


@pytest.mark.parametrize(("ranks", "odd"), [
    ([_rank(0, "a"), _rank(1, "b"), _rank(2, "c", env="f")], {"c": ["environment"]}),
    ([_rank(0, "a"), _rank(1, "b"), _rank(2, "c", cls="c2")], {"c": ["class"]}),
    ([_rank(0, "a"), _rank(1, "b"), _rank(2, "c", cls="c2", env="f")],
     {"c": ["class", "environment"]}),
    ([_rank(0, "a"), _rank(1, "b", env="f")], {}),                      # no majority of two
    ([_rank(0, "a"), _rank(1, "a"), _rank(2, "b"), _rank(3, "c")], {}),  # all agree
    ([{**_rank(r, h), "environment": {"host": h * 64}} for r, h in enumerate("abc")], {}),
])
def test_odd_host_is_the_one_off_the_majority_of_hosts(ranks: list, odd: dict) -> None:
    """A host whose classes or environment leave the strict majority of hosts is odd; with no
    majority, or with the --no-env-digest host stand-in, nobody is."""
    from verify.fleet.hosts import host_docs

    assert {h["host"]: h["odd"] for h in host_docs(ranks) if h["odd"]} == odd

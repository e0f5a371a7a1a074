"""Node statements in the fleet report (verify.fleet.nodes): lemon nodes by canary class,
unhealthy nodes, signatures checked with --trust, and `verify fleet-report --node-statements`."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from samebits import dsse
from samebits._io import canonical_json
from samebits_app.cli import main
from tests.fixtures.node_statements import canary, keypair, node_predicate, write_node
from tests.fixtures.samples import BASE, DET, sample_facts
from verify.fleet.html import render_html
from verify.fleet.nodes import analyse_nodes, read_statements, with_nodes
from verify.fleet.report import analyse, format_report
from verify.gpu.attest import build_statement


def judge(folder: Path, trust: Path | None = None) -> dict[str, Any]:
    key = dsse.load_public_key(trust) if trust else None
    nodes, rejected = read_statements([folder], key)
    return analyse_nodes(nodes, rejected, trusted_keyid=key.keyid if key else None)


@pytest.mark.parametrize(("digests", "suspects", "undecided"), [
    ("aaaa", [], []),
    ("aaab", [("n3", 3, 4)], []),
    ("aaaab", [("n4", 4, 5)], []),
    ("aabb", [], ["h200-580"]),
    ("ab", [], ["h200-580"]),
    ("a", [], []),
    ("abc", [], ["h200-580"]),
])
def test_lemon_node_leaves_its_class_majority(tmp_path: Path, digests: str,
                                              suspects: list, undecided: list) -> None:
    """In one canary class the node off the strict majority is the suspect, with the count of
    peers that agree; without a majority the class is undecided and nobody is blamed."""
    for i, d in enumerate(digests):
        write_node(tmp_path, node_predicate(f"n{i}", canary(d)))
    doc = judge(tmp_path)
    assert [(s["host"], s["peers"], s["class_runs"]) for s in doc["suspects"]] == suspects
    assert [u["class"] for u in doc["undecided"]] == undecided
    assert doc["verdict"] == ("suspects" if suspects else "undecided" if undecided
                              else "consistent")


def test_suspect_even_when_its_expected_digest_was_unknown(tmp_path: Path) -> None:
    """The lemon's own `expected` is null (never committed): its peers still outvote it; a
    second class is judged on its own, and its lone node is compared with nobody."""
    for i in range(3):
        write_node(tmp_path, node_predicate(f"h{i}", canary("a", expected="a")))
    write_node(tmp_path, node_predicate("h3", canary("f")))
    write_node(tmp_path, node_predicate("b0", canary("c", cls="b200-590")))
    doc = judge(tmp_path)
    [s] = doc["suspects"]
    assert (s["host"], s["class"], s["expected"], s["peers"]) == ("h3", "h200-580", None, 3)
    line = next(x for x in format_report(with_nodes(_report(), doc)).splitlines()
                if x.startswith("SUSPECT node"))
    assert line == ("SUSPECT node h3 (cuda:0, canary class h200-580): digest ffffffffffff "
                    "differs from the 3 of 4 peers that agree on aaaaaaaaaaaa (its committed "
                    "expected digest: unknown): a lemon node")
    assert [c["class"] for c in doc["classes"]] == ["b200-590", "h200-580"]


def test_a_suspect_whose_setting_differs_is_named_with_that_setting(tmp_path: Path) -> None:
    """Same class (the hardware), one node's ATen CPU capability lowered: it is still the
    suspect, 2 peers agreeing, and its reason names the settings all its peers share and it
    does not; a setting the peers disagree on (threads_asked) explains nothing."""
    native = {"cpu_capability": "AVX2", "ATEN_CPU_CAPABILITY": None, "threads": 1}
    write_node(tmp_path, node_predicate("n1", canary("a", settings={**native,
                                                                    "threads_asked": 1})))
    write_node(tmp_path, node_predicate("n2", canary("a", settings={**native,
                                                                    "threads_asked": 2})))
    write_node(tmp_path, node_predicate("n3", canary("b", settings={
        **native, "cpu_capability": "DEFAULT", "ATEN_CPU_CAPABILITY": "default",
        "threads_asked": 1})))
    doc = judge(tmp_path)
    [s] = doc["suspects"]
    assert (s["host"], s["peers"], doc["verdict"]) == ("n3", 2, "suspects")
    assert s["explained_by"] == [
        {"setting": "ATEN_CPU_CAPABILITY", "value": "default", "peers": None},
        {"setting": "cpu_capability", "value": "DEFAULT", "peers": "AVX2"}]
    line = next(x for x in format_report(with_nodes(_report(), doc)).splitlines()
                if x.startswith("SUSPECT node"))
    assert line.endswith('(its committed expected digest: unknown): explained by a different '
                         'setting: ATEN_CPU_CAPABILITY "default" (its peers unset), '
                         'cpu_capability "DEFAULT" (its peers "AVX2")'), line


def test_unhealthy_nodes_are_listed_with_their_reasons(tmp_path: Path) -> None:
    """healthy: false nodes are named with each reason code and detail."""
    write_node(tmp_path, node_predicate("n0", canary("a")))
    write_node(tmp_path, node_predicate("n1", canary("a"), healthy=False, reasons=(
        ("env-drift", "2 files differ"), ("ecc", "uncorrectable errors: 3"))))
    doc = judge(tmp_path)
    assert doc["verdict"] == "unhealthy"
    assert [(u["host"], [r["code"] for r in u["reasons"]]) for u in doc["unhealthy"]] == [
        ("n1", ["env-drift", "ecc"])]
    assert "UNHEALTHY node n1: env-drift: 2 files differ; ecc: uncorrectable errors: 3" in (
        format_report(with_nodes(_report(), doc)))


def _signed_set(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """Four node statements: signed by the trusted key, bare, by another key, altered."""
    key, pub = keypair(tmp_path / "keys")
    other, _ = keypair(tmp_path / "keys", "other")
    folder = tmp_path / "nodes"
    write_node(folder, node_predicate("good", canary("a")), key=key)
    write_node(folder, node_predicate("bare", canary("a")))
    write_node(folder, node_predicate("stranger", canary("a")), key=other)
    altered = write_node(folder, node_predicate("altered", canary("a")), key=key)
    env = json.loads(altered.read_text())
    statement = json.loads(dsse.parse_envelope(env, source="x").payload)
    statement["predicate"]["healthy"] = False
    env["payload"] = base64.b64encode(canonical_json(statement)).decode()
    altered.write_text(json.dumps(env))
    expected = {
        "bare.json": "not signed: a bare Statement, and --trust",
        "stranger.json": "not signed by",
        "altered.json": "does not verify",
    }
    return folder, pub, expected


def test_trust_rejects_bare_foreign_and_altered_statements(tmp_path: Path) -> None:
    """With --trust only the statement signed by that key counts; each other one is rejected,
    named with its file and why, and the verdict is untrusted."""
    folder, pub, expected = _signed_set(tmp_path)
    doc = judge(folder, pub)
    assert [n["host"] for n in doc["nodes"]] == ["good"]
    got = {Path(r["source"]).name: r["reason"] for r in doc["rejected"]}
    assert sorted(got) == sorted(expected)
    for name, text in expected.items():
        assert text in got[name], (name, got[name])
    assert doc["verdict"] == "untrusted" and doc["trusted_keyid"]


def test_without_trust_signatures_are_named_not_checked(tmp_path: Path) -> None:
    """Without --trust every well-formed statement is read and its key ids are named."""
    folder, _, _ = _signed_set(tmp_path)
    doc = judge(folder)
    assert sorted(n["host"] for n in doc["nodes"]) == ["altered", "bare", "good", "stranger"]
    assert "signatures not checked" in format_report(with_nodes(_report(), doc))


@pytest.mark.parametrize(("content", "reason"), [
    ("{", "not JSON"),
    ('{"_type": "https://in-toto.io/Statement/v1", "predicateType": "x", "predicate": {}}',
     'predicateType = "x": expected https://samebits.dev/node/v1'),
    (None, 'predicate.healthy = "yes": expected true or false'),
    (None, "predicate.canary[0].digest = 7: expected a string"),
])
def test_malformed_statements_are_rejected_naming_key_and_value(
        tmp_path: Path, content: str | None, reason: str) -> None:
    """A statement that cannot be read is rejected with its file, key and value; the good
    ones are still judged."""
    write_node(tmp_path, node_predicate("n0", canary("a")))
    bad = tmp_path / "zz.json"
    if content is None:
        pred = node_predicate("zz", canary("a"))
        if "healthy" in reason:
            pred["healthy"] = "yes"
        else:
            pred["canary"][0]["digest"] = 7
        bad = write_node(tmp_path, pred)
    else:
        bad.write_text(content)
    doc = judge(tmp_path)
    assert [n["host"] for n in doc["nodes"]] == ["n0"]
    [r] = doc["rejected"]
    assert r["source"] == str(bad) and reason in r["reason"], r


def test_a_second_statement_for_one_host_is_rejected(tmp_path: Path) -> None:
    """One node, one vote: the later file (by path) for a host already read is rejected."""
    write_node(tmp_path / "a", node_predicate("n0", canary("a")))
    write_node(tmp_path / "b", node_predicate("n0", canary("b")))
    nodes, rejected = read_statements([tmp_path / "a", tmp_path / "b"], None)
    assert [n.source for n in nodes] == [str(tmp_path / "a" / "n0.json")]
    assert [r.reason for r in rejected] == [
        f'host "n0" again: already read from {tmp_path / "a" / "n0.json"} (one statement per '
        "node)"]


# ------------------------------------------------------------------ the CLI: fleet-report


def _report() -> dict[str, Any]:
    """A fleet report of two consistent CPU ranks, from real statements."""
    statement = build_statement(facts=sample_facts(), device="cpu", settings=DET,
                                workloads=BASE, suite_version=1,
                                environment={"environment": "e" * 64},
                                samebits_version="0.0.0")
    return analyse([{"rank": r, "local_rank": 0, "host": f"node{r}", "device": "cpu",
                     "gpu_uuid": None, "backend": "gloo", "collective_env": {},
                     "collectives": {}, "statement": statement} for r in range(2)])


def test_fleet_report_with_node_statements_is_byte_stable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`verify fleet-report R --node-statements DIR --trust PUB`: the lemon and the rejected
    files in the text, the JSON and the HTML, exit 1; twice, the same bytes."""
    key, pub = keypair(tmp_path / "keys")
    folder = tmp_path / "nodes"
    for i, d in enumerate("aaab"):
        write_node(folder, node_predicate(f"n{i}", canary(d)), key=key)
    write_node(folder, node_predicate("unsigned", canary("a")))
    report = tmp_path / "fleet.json"
    report.write_text(json.dumps(_report()))
    outs = []
    for run in ("a", "b"):
        html = tmp_path / f"{run}.html"
        code = main(["verify", "fleet-report", str(report), "--node-statements", str(folder),
                     "--trust", str(pub), "--html", str(html), "--json"])
        assert code == 1
        outs.append((capsys.readouterr().out, html.read_bytes()))
    assert outs[0] == outs[1]
    doc = json.loads(outs[0][0])
    assert doc["verdict"] == "suspects"
    assert [s["host"] for s in doc["nodes"]["suspects"]] == ["n3"]
    assert [Path(r["source"]).name for r in doc["nodes"]["rejected"]] == ["unsigned.json"]
    page = outs[0][1].decode()
    assert 'id="node-table"' in page and "SUSPECT node n3" in page
    assert render_html(with_nodes(_report(), doc["nodes"])) == page
    assert main(["verify", "fleet-report", str(report), "--node-statements", str(folder),
                 "--trust", str(pub)]) == 1
    text = capsys.readouterr().out
    assert "nodes: 4 statements read, 1 rejected" in text
    assert f"REJECTED {folder / 'unsigned.json'}: not signed" in text


@pytest.mark.parametrize(("extra", "message"), [
    (["--node-statements", "NOPE"], "--node-statements NOPE: no such file or folder"),
    (["--node-statements", "EMPTY"], "--node-statements EMPTY: no *.json file in this folder"),
    (["--trust", "PUB"], "--trust goes with --node-statements"),
])
def test_node_statement_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     extra: list[str], message: str) -> None:
    """Bad paths and a lone --trust are usage errors: exit 2, the path named, no traceback."""
    report = tmp_path / "fleet.json"
    report.write_text(json.dumps(_report()))
    (tmp_path / "EMPTY").mkdir()
    _, pub = keypair(tmp_path)
    names = {"NOPE": str(tmp_path / "NOPE"), "EMPTY": str(tmp_path / "EMPTY"),
             "PUB": str(pub)}
    args = [names.get(a, a) for a in extra]
    assert main(["verify", "fleet-report", str(report), *args]) == 2
    err = capsys.readouterr().err
    expect = message
    for name, value in names.items():
        expect = expect.replace(f" {name}:", f" {value}:")
    assert f"error: {expect}" in err and "Traceback" not in err

"""verify node's pure parts: the reason table and its page, GPU health through a faked NVML
(nvidia-ml-py's own error classes), the Prometheus file, the canary's class and table, the
--full-every counter, --drain without scontrol and the statement's subject."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pynvml
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.nvml_fake import Gpu, Health, Machine, fake_nvml
from verify.node import canary, envgate, prometheus
from verify.node.drain import drain, node_name
from verify.node.gate import canary_reasons, gpu_part
from verify.node.health import judge, read_health
from verify.node.reasons import REASONS, Reason, draining, reasons_markdown
from verify.node.statement import build_node_statement, predicate_digest

ROOT = Path(__file__).resolve().parents[2]


def test_the_reasons_page_is_the_table() -> None:
    """docs/reference/node-reasons.md is what `python -m verify.node.reasons` writes."""
    page = ROOT / "docs/reference/node-reasons.md"
    assert page.read_text() == reasons_markdown(), "run python -m verify.node.reasons > " + \
        str(page.relative_to(ROOT))


def test_every_code_has_a_level_and_unknown_codes_are_refused() -> None:
    """Each code is drain or warn; a code outside the table is a programming error."""
    assert {level for level, _ in REASONS.values()} == {"drain", "warn"}
    with pytest.raises(ValueError, match="unknown node reason code 'env-drifted'"):
        Reason(code="env-drifted", detail="")
    warn = Reason(code="canary-unknown", detail="x")
    assert draining([warn]) == [] and draining([warn], strict=True) == [warn]


HEALTH_CASES = [
    ("healthy", Health(), []),
    ("ecc volatile", Health(ecc_volatile=2), ["ecc-uncorrected"]),
    ("ecc aggregate", Health(ecc_aggregate=1), ["ecc-uncorrected"]),
    ("retired pages", Health(retired_pending=True), ["retired-pages-pending"]),
    ("remap pending", Health(remapped=(0, 1, True, False)), ["remapped-rows-pending"]),
    ("remap failed", Health(remapped=(0, 1, False, True)), ["remapped-rows-failed"]),
    ("hw slowdown", Health(throttle=0x8), ["throttle-hw"]),
    ("power brake", Health(throttle=0x80 | 0x1), ["throttle-hw"]),
    ("sw thermal", Health(throttle=0x20), ["throttle-thermal"]),
    ("narrow link", Health(pcie=(5, 5, 8, 16)), ["pcie-degraded"]),
    ("idle gen", Health(pcie=(1, 5, 16, 16)), ["pcie-gen-low"]),
    ("replays", Health(replay=101), ["pcie-replay"]),
    ("replays at the limit", Health(replay=100), []),
    ("nvlink down", Health(nvlinks=(True, False, True)), ["nvlink-down"]),
    ("nvlink unused", Health(nvlinks=(False, False)), []),
    ("nvlink errors", Health(nvlinks=(True, True), nvlink_errors=13), ["nvlink-errors"]),
    ("xid", Health(xids=(79,)), ["xid"]),
]


@pytest.mark.parametrize(("health", "codes"), [c[1:] for c in HEALTH_CASES],
                         ids=[c[0] for c in HEALTH_CASES])
def test_health_thresholds(health: Health, codes: list[str]) -> None:
    """Each NVML fact over its threshold gives its code, and nothing else does."""
    m = Machine(gpus=[Gpu(health=health)])
    state, docs, driver = read_health(fake_nvml(m), xid_wait=0)
    assert (state, driver) == ("ok", "580.65.06")
    assert [r.code for r in judge(docs[0])] == codes
    assert all(r.gpu == 0 for r in judge(docs[0]))


def test_xid_detail_names_the_xid() -> None:
    """The Xid numbers that arrived are in the detail; the wait is bounded."""
    m = Machine(gpus=[Gpu(health=Health(xids=(79, 48)))])
    _, docs, _ = read_health(fake_nvml(m), xid_wait=0.05)
    (reason,) = judge(docs[0])
    assert reason.detail.endswith("Xid 79, 48") and docs[0]["values"]["xids"] == [79, 48]
    assert "event set free" in m.calls


def test_not_supported_and_no_permission_are_not_readable_never_failures() -> None:
    """A GPU whose every health field is NOT_SUPPORTED or NO_PERMISSION: no reason at all,
    each field named as not readable with NVML's error."""
    fields = frozenset({"ecc_errors", "retired_pages", "remapped_rows", "throttle", "pcie",
                        "replay", "nvlink", "events"})
    bad = Health(ecc_volatile=9, retired_pending=True, throttle=0x8)
    m = Machine(gpus=[Gpu(health=bad, unsupported=fields - {"pcie", "replay"}),
                      Gpu(health=bad, denied=frozenset({"pcie", "replay", "ecc_errors",
                                                        "retired_pages", "throttle"}),
                          unsupported=frozenset({"remapped_rows", "nvlink", "events"}))])
    _, docs, _ = read_health(fake_nvml(m))
    for doc in docs:
        assert judge(doc) == [] and doc["errors"] == {}
    assert docs[0]["unreadable"]["ecc_volatile_uncorrected"] == "NVML_ERROR_NOT_SUPPORTED"
    assert docs[1]["unreadable"]["pcie_replay"] == "NVML_ERROR_NO_PERMISSION"
    assert docs[1]["unreadable"]["xid"] == "NVML_ERROR_NOT_SUPPORTED"


def test_a_lost_gpu_is_gpu_lost() -> None:
    m = Machine(gpus=[Gpu(), Gpu(lost=True)])
    _, docs, _ = read_health(fake_nvml(m))
    assert [[r.code for r in judge(d)] for d in docs] == [[], ["gpu-lost"]]


@pytest.mark.parametrize(("error", "state", "codes"), [
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no-driver", []),
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no-driver", []),
    (pynvml.NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION", ["nvml-unavailable"]),
])
def test_nvml_that_cannot_start(error: int, state: str, codes: list[str]) -> None:
    """No driver: the GPU checks do not apply (no reason); NVML refusing is a warning."""
    got_state, gpus, _, reasons = gpu_part(fake_nvml(Machine(init_error=error)), xid_wait=0,
                                           expect=None)
    assert (got_state, gpus, [r.code for r in reasons]) == (state, [], codes)
    assert all(r.level == "warn" for r in reasons)


def test_fewer_gpus_than_expected() -> None:
    _, _, _, reasons = gpu_part(fake_nvml(Machine(gpus=[Gpu()])), xid_wait=0, expect=2)
    assert [(r.code, r.detail) for r in reasons] == [
        ("gpu-missing", "1 GPU(s) found, --gpus 2 expected (ok)")]


def _predicate(**over: object) -> dict:
    m = Machine(gpus=[Gpu(health=Health(ecc_volatile=1)), Gpu(uuid='GPU-"odd\\name"')])
    _, gpus, _ = read_health(fake_nvml(m))
    reasons = [r.to_dict() for g in gpus for r in judge(g)]
    pred = {"host": "n1", "healthy": False, "reasons": reasons,
            "env": {"files": 10, "drift": 2}, "gpus": gpus, "seconds": 1.25,
            "canary": [{"device": "cuda:0", "class": "gpu/x", "ok": True},
                       {"device": "cuda:1", "class": None, "ok": None}]}
    return {**pred, **over}


def test_prometheus_file_is_byte_stable_and_parses() -> None:
    """The same predicate gives the same bytes; prometheus-client's parser reads every metric,
    label values escaped."""
    text = prometheus.render(_predicate())
    assert text == prometheus.render(json.loads(json.dumps(_predicate())))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    value = {f: [(s.labels, s.value) for s in fam.samples] for f, fam in families.items()}
    assert value["samebits_node_healthy"] == [({"host": "n1"}, 0.0)]
    assert value["samebits_env_drift_files"] == [({"host": "n1"}, 2.0)]
    assert value["samebits_node_check_seconds"] == [({"host": "n1"}, 1.25)]
    assert value["samebits_canary_ok"] == [
        ({"host": "n1", "device": "cuda:0", "class": "gpu/x"}, 1.0),
        ({"host": "n1", "device": "cuda:1", "class": ""}, 0.0)]
    assert [(s[0]["gpu"], s[1]) for s in value["samebits_gpu_healthy"]] == [("0", 0.0),
                                                                           ("1", 1.0)]
    assert value["samebits_gpu_healthy"][1][0]["uuid"] == 'GPU-"odd\\name"'
    assert ({"host": "n1", "code": "ecc-uncorrected", "level": "drain"}, 1.0) in \
        value["samebits_node_reason"]
    assert value["samebits_gpu_ecc_volatile_uncorrected"][0][1] == 1.0


def test_prometheus_write_is_atomic(tmp_path: Path) -> None:
    """Written by a rename: no temporary file is left beside it."""
    path = tmp_path / "samebits.prom"
    prometheus.write(path, _predicate())
    prometheus.write(path, _predicate(healthy=True))
    assert [p.name for p in tmp_path.iterdir()] == ["samebits.prom"]
    assert "samebits_node_healthy{host=\"n1\"} 1\n" in path.read_text()


RUN = {"device": "cpu", "digest": "a" * 64, "cpu_model": "AMD EPYC 7B13",
       "cpu_supports": "avx2+fma",
       "settings": {"torch": "2.13.0+cpu", "cpu_capability": "AVX2", "threads": 1}}


def test_canary_class_and_verdicts() -> None:
    """The class names the CPU model, the vector extensions it supports, torch and the lock; a
    known class matches or mismatches, an unknown one is a warning."""
    key = canary.class_key(RUN, lock_sha256="d7cfce9e84e5" + "0" * 52)
    assert key == "cpu/AMD-EPYC-7B13/supports-avx2+fma/torch-2.13.0+cpu/lock-d7cfce9e84e5"
    gpu = {**RUN, "device": "cuda:0", "gpu_name": "NVIDIA H200", "sm_count": 132,
           "driver": "580.65.06"}
    assert canary.class_key(gpu, lock_sha256=None) == \
        "gpu/NVIDIA-H200/sm132/driver580/torch-2.13.0+cpu/lock-none"
    lock = "d7cfce9e84e5" + "0" * 52
    ok = canary.verdict(RUN, lock_sha256=lock, table={key: {"digest": "a" * 64}})
    bad = canary.verdict(RUN, lock_sha256=lock, table={key: {"digest": "b" * 64}})
    unknown = canary.verdict(RUN, lock_sha256=None, table={key: {"digest": "a" * 64}})
    failed = canary.verdict({"device": "cpu", "error": "torch cannot be imported"},
                            lock_sha256=None, table={})
    assert [ok["ok"], bad["ok"], unknown["ok"]] == [True, False, None]
    assert [r.code for r in canary_reasons([ok, bad, unknown, failed])] == [
        "canary-mismatch", "canary-unknown", "canary-failed"]


@pytest.mark.parametrize(("flags", "supports"), [
    (("sse2", "fma", "avx2", "avx"), "avx2+fma"),
    (("avx512vl", "avx2", "avx512f", "fma", "avx512dq", "avx512bw"),
     "avx2+fma+avx512f+avx512bw+avx512dq+avx512vl"),
    (("fp", "asimd", "sve"), "asimd+sve"), (("sse2",), "none"), ((), "none"),
])
def test_cpu_supports_names_the_vector_flags(flags: tuple[str, ...], supports: str) -> None:
    """The class's CPU part: the vector extensions ATen dispatches on, in a fixed order."""
    assert canary.cpu_supports(flags) == supports


def test_a_lowered_capability_is_the_same_class_and_not_judged() -> None:
    """ATEN_CPU_CAPABILITY=default on the same CPU: the same class (the hardware), but the
    committed digest was recorded under AVX2, so the run is not judged by it (ok None) and
    the canary-unknown detail names the setting."""
    lock = "d7cfce9e84e5" + "0" * 52
    low = {**RUN, "digest": "b" * 64,
           "settings": {**RUN["settings"], "cpu_capability": "DEFAULT",
                        "ATEN_CPU_CAPABILITY": "default"}}
    key = canary.class_key(RUN, lock_sha256=lock)
    assert canary.class_key(low, lock_sha256=lock) == key
    table = {key: {"digest": "a" * 64, "cpu_capability": "AVX2", "threads": 1}}
    v = canary.verdict(low, lock_sha256=lock, table=table)
    assert (v["ok"], v["expected"]) == (None, "a" * 64)
    assert v["settings_differ"] == [{"setting": "cpu_capability", "value": "DEFAULT",
                                     "recorded": "AVX2"}]
    [reason] = canary_reasons([v])
    assert (reason.code, reason.detail) == ("canary-unknown", f"cpu: class {key}'s digest "
                                            "was recorded under other settings: "
                                            "cpu_capability DEFAULT (recorded with AVX2) "
                                            "(digest bbbbbbbbbbbbbbbb)")
    assert canary.verdict(RUN, lock_sha256=lock, table=table)["ok"] is True


def test_a_statement_without_digests_names_its_predicate_digest() -> None:
    """No environment digests and no lock: the subject is node/<host> with the sha256 of the
    predicate's canonical JSON (sorted keys, compact separators), not a stand-in."""
    doc = build_node_statement(host="n1", healthy=True, reasons=[], env=None, gpus=[],
                               canary=[], settings={"full": False}, seconds=0.1234)
    [subject] = doc["subject"]
    text = json.dumps(doc["predicate"], sort_keys=True, separators=(",", ":"))
    assert subject == {"name": "node/n1",
                       "digest": {"sha256": hashlib.sha256(text.encode()).hexdigest()}}
    assert subject["digest"]["sha256"] == predicate_digest(doc["predicate"])
    again = build_node_statement(host="n1", healthy=False, reasons=[], env=None, gpus=[],
                                 canary=[], settings={"full": False}, seconds=0.1234)
    assert again["subject"][0]["digest"] != subject["digest"]
    with_lock = build_node_statement(host="n1", healthy=True, reasons=[], env=None, gpus=[],
                                     canary=[], settings={}, seconds=0.1,
                                     lock=("small.conda-lock.yml", "c" * 64))
    assert with_lock["subject"] == [{"name": "small.conda-lock.yml",
                                     "digest": {"sha256": "c" * 64}}]


def test_canary_table_round_trip_and_errors(tmp_path: Path) -> None:
    """--record writes a byte-stable file the table reads back; a bad file is named."""
    path = tmp_path / "canary.toml"
    entry = {"key": "cpu/x", "digest": "c" * 64, "torch": "2.13.0"}
    canary.record_into(path, entry)
    canary.record_into(path, {**entry, "key": "cpu/a"})
    first = path.read_bytes()
    canary.record_into(path, entry)
    assert path.read_bytes() == first and list(canary.load_digests(path)) == ["cpu/a", "cpu/x"]
    path.write_text('format = 1\n[[class]]\nkey = "k"\ndigest = "xyz"\n')
    with pytest.raises(Exception, match=r'class\[0\]: needs key = "..." and digest = 64 hex '
                       r'digits \(got key = "k", digest = "xyz"\)'):
        canary.load_digests(path)
    path.write_text("format = 2\n")
    with pytest.raises(Exception, match="format = 2: this samebits reads canary digests "
                       "format 1"):
        canary.load_digests(path)


def test_the_committed_table_reads() -> None:
    table = canary.load_digests()
    assert table and all(k.startswith(("cpu/", "gpu/")) for k in table)


def test_full_every_counts_runs_per_prefix(tmp_path: Path) -> None:
    """--full-every 3: two runs by the seal, the third hashes, and the count starts again;
    another prefix counts on its own; --full always hashes."""
    seen = []
    for prefix in ("/a", "/a", "/b", "/a", "/a"):
        hashed, why, state = envgate.choose_proof(tmp_path, Path(prefix), full=False, every=3)
        envgate.save_state(tmp_path, state)
        seen.append(hashed)
    assert seen == [False, False, False, True, False]
    assert "--full-every 2: run 2 since the last full hash" in envgate.choose_proof(
        tmp_path, Path("/b"), full=False, every=2)[1]
    assert envgate.choose_proof(tmp_path, Path("/a"), full=True, every=None)[:2] == (
        True, "--full: every byte hashed")
    envgate.state_file(tmp_path).write_text("not json")
    assert envgate.choose_proof(tmp_path, Path("/a"), full=False, every=3)[0] is False


def test_drain_without_scontrol_is_reported(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    """scontrol not on PATH: the command and why, no exception."""
    monkeypatch.setenv("PATH", str(tmp_path))
    ok, what = drain("n1", "env-drift")
    assert not ok and what == ('scontrol update nodename=n1 state=drain '
                               'reason="samebits: env-drift": scontrol is not on PATH')


def test_node_name() -> None:
    assert node_name("given", {"SLURMD_NODENAME": "n3"}) == "given"
    assert node_name(None, {"SLURMD_NODENAME": "n3"}) == "n3"
    assert node_name(None, {}) and "." not in node_name(None, {})

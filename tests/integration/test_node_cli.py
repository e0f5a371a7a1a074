"""`python -m verify node` on a real installed prefix (a small lock installed by samebits from
its own wheels): healthy and exit 0, a changed file is env-drift and exit 1, --full and
--full-every say which proof ran, the canary's class unknown then recorded then matched, the
real effect of ATEN_CPU_CAPABILITY on the canary's bits, bad input exit 2 and no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.install import locked_wheel, wheel, write_lock
from verify.node.canary import class_key

pytestmark = pytest.mark.slow  # an install, then gates each starting torch for the canary

ROOT = Path(__file__).resolve().parents[2]
LINE = f"{sys.version_info[0]}.{sys.version_info[1]}"
SITE = f"lib/python{LINE}/site-packages"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """(lock, prefix, cache)."""
    base = tmp_path_factory.mktemp("node")
    w1 = wheel(base / "wheels", "alpha", "1.0", {"alpha/__init__.py": b"A = 1\n"})
    lock = write_lock(base / "lockfiles" / "small.conda-lock.yml", [locked_wheel(w1)],
                      python=LINE).path
    proc = _run("samebits", "install", str(lock), "--target", str(base / "env"), "--platform",
                "linux-64", "--python", sys.executable, "--cache-dir", str(base / "cache"),
                "-q", env={"SAMEBITS_FIND_LINKS": str(base / "wheels")})
    assert proc.returncode == 0, proc.stderr
    yield lock, base / "env", base / "cache"


def gate(installed: tuple[Path, Path, Path], *extra: str, env: dict[str, str] | None = None
         ) -> tuple[int, dict]:
    lock, prefix, cache = installed
    proc = _run("verify", "node", str(lock), "--prefix", str(prefix), "--cache-dir", str(cache),
                "--json", *extra, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_healthy_then_canary_recorded_then_matched(installed: tuple[Path, Path, Path],
                                                   tmp_path: Path) -> None:
    """A fresh install is healthy (the seal proves the linked files); the canary's class is
    unknown (a warning: exit 0, exit 1 with --strict), --record adds it, then it matches."""
    digests = tmp_path / "canary.toml"
    canary = ("--workload-python", sys.executable, "--canary-digests", str(digests))
    rc, doc = gate(installed, *canary, "--out", str(tmp_path / "gate.json"))
    assert rc == 0 and doc["healthy"] is True and doc["exit"] == 0
    assert [r["code"] for r in doc["reasons"]] == ["canary-unknown"]
    assert doc["env"]["proof"] == "seal" and doc["env"]["proven_by_identity"] > 0
    assert doc["env"]["drift"] == 0 and doc["gpus"] == []
    (c,) = doc["canary"]
    assert c["device"] == "cpu" and c["ok"] is None and c["class"].startswith("cpu/")
    for key in ("threads", "cpu_capability", "torch", "CUBLAS_WORKSPACE_CONFIG",
                "ATEN_CPU_CAPABILITY", "deterministic_algorithms"):
        assert key in c["settings"]
    statement = json.loads((tmp_path / "gate.json").read_text())
    assert statement["predicateType"] == "https://samebits.dev/node/v1"
    assert set(statement["predicate"]) >= {"host", "healthy", "reasons", "env", "gpus",
                                           "canary", "settings", "seconds"}
    assert gate(installed, *canary, "--strict")[0] == 1
    proc = _run("verify", "node", str(installed[0]), "--prefix", str(installed[1]), "--record",
                *canary)
    assert proc.returncode == 0, proc.stderr
    assert c["digest"] in digests.read_text() and c["class"] in proc.stdout
    rc, doc = gate(installed, *canary, "--strict")
    assert rc == 0 and doc["reasons"] == [] and doc["canary"][0]["ok"] is True


def test_aten_cpu_capability_changes_the_canary(tmp_path: Path) -> None:
    """The real effect: on a vectorising CPU, ATEN_CPU_CAPABILITY=default gives other bits
    (and names another capability in its settings; the class, the hardware, is the same)."""
    def run(env: dict[str, str]) -> dict:
        proc = subprocess.run([sys.executable, "-m", "verify.node.canaryrun"], cwd=ROOT,
                              capture_output=True, text=True, timeout=300,
                              env={k: v for k, v in {**os.environ, **env}.items()
                                   if k != "ATEN_CPU_CAPABILITY" or "ATEN_CPU_CAPABILITY" in env})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    native = run({})
    if native["settings"]["cpu_capability"] == "DEFAULT":
        pytest.skip("this CPU has no vector capability ATen dispatches to")
    plain = run({"ATEN_CPU_CAPABILITY": "default"})
    assert plain["settings"]["cpu_capability"] == "DEFAULT"
    assert plain["digest"] != native["digest"]
    assert run({})["digest"] == native["digest"]  # and the native bits are stable
    facts = {"cpu_model": "AMD EPYC", "cpu_supports": "avx2+fma"}
    assert class_key({**plain, **facts}, lock_sha256=None) == \
        class_key({**native, **facts}, lock_sha256=None)


def test_a_changed_file_is_env_drift(installed: tuple[Path, Path, Path]) -> None:
    """A file replaced in the prefix: env-drift naming it, exit 1, by the seal and by --full;
    --full-every 2 hashes every second run and says so."""
    prefix = installed[1]
    target = prefix / SITE / "alpha" / "__init__.py"
    original = target.read_bytes()
    target.unlink()
    target.write_bytes(b"A = 2\n")
    try:
        for extra in ((), ("--full",)):
            rc, doc = gate(installed, "--no-canary", *extra)
            assert rc == 1 and doc["healthy"] is False
            (reason,) = doc["reasons"]
            assert reason["code"] == "env-drift" and reason["level"] == "drain"
            assert f"{SITE}/alpha/__init__.py (modified)" in reason["detail"]
            assert doc["env"]["drift"] == 1
            assert doc["env"]["proof"] == ("hash" if extra else "seal")
    finally:
        target.unlink()
        target.write_bytes(original)
    proofs = [gate(installed, "--no-canary", "--full-every", "2")[1]["env"]["proof"]
              for _ in range(2)]
    assert "hash" in proofs and "seal" in proofs


@pytest.mark.parametrize(("args", "message"), [
    (("--prefix", "/nonexistent/env"), "error: --prefix /nonexistent/env: no such folder"),
    (("--full-every", "0"), "error: --full-every 0: must be at least 1"),
    (("--xid-wait", "90"), "error: --xid-wait 90: must be between 0 and 60 seconds"),
    (("./missing.conda-lock.yml",), "error: missing.conda-lock.yml: no such lockfile"),
])
def test_bad_input_is_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = _run("verify", "node", "--no-canary", *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_the_canary_is_deterministic_without_importing_the_compiler() -> None:
    """The canary sets ATen's deterministic algorithms without importing torch._inductor
    (0.8 s of the prolog on torch 2.13), and torch says they are on; its bits are those of
    ``torch.use_deterministic_algorithms(True)``, which sets the same flag and inductor's."""
    code = ("import json, sys; from verify.node import canaryrun as c; doc = c.run('cpu', 1); "
            "import torch; print(json.dumps([doc['digest'], "
            "doc['settings']['deterministic_algorithms'], "
            "'torch._inductor.config' in sys.modules, "
            "torch.are_deterministic_algorithms_enabled()]))")
    public = code.replace("doc = c.run('cpu', 1)", "import torch; c.deterministic = lambda t: "
                          "t.use_deterministic_algorithms(True); doc = c.run('cpu', 1)")
    got = [json.loads(subprocess.run([sys.executable, "-c", text], cwd=ROOT, check=True,
                                     capture_output=True, text=True, timeout=300
                                     ).stdout.splitlines()[-1]) for text in (code, public)]
    assert got[0][1:] == [True, False, True]
    assert got[1][1:] == [True, True, True]  # the public call imports the compiler
    assert got[0][0] == got[1][0]

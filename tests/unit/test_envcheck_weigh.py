"""samebits_app.audit.envcheck.weigh: the verify-env step's reasons name their cause first and
say where the whole list is (issue 45: attest against an environment of another Python listed
25 drifts and "... and 17 more (see the drift list)", a list that existed nowhere)."""

from __future__ import annotations

from samebits_app.audit.envcheck import weigh, whole_list


def _report(version: str, n: int) -> dict:
    findings = [{"kind": "package-version" if i % 2 else "package-missing", "source": "lockfile",
                 "package": f"p{i}", "expected": "1.0", "actual": "2.0"} for i in range(n)]
    return {"interpreter": {"version": version}, "findings": findings,
            "summary": {"entries": 10, "packages": {"conda": 0, "pip": n}}, "digests": {}}


def test_another_python_is_the_first_reason_and_the_whole_list_is_named() -> None:
    whole = whole_list("/envs/p", "paper/conda-lock.yml", "linux-64")
    step = weigh(_report("3.11.7", 42), {}, whole=whole, lock_python="3.13")
    assert step.reasons[0] == (
        "the environment is Python 3.11, the lock is Python 3.13: its packages are the wheels "
        "of another Python (install the lock into a new environment: samebits install LOCK "
        "--target DIR)")
    assert step.reasons[1] == ("environment drift: 42 findings against the lock (21 "
                               "package-missing, 21 package-version)")
    assert step.reasons[-1] == ("drift: ... and 17 more: samebits verify env --prefix /envs/p "
                                "paper/conda-lock.yml --platform linux-64 lists every one")
    assert len(step.reasons) == 2 + 25 + 1


def test_the_same_python_names_no_python_cause() -> None:
    step = weigh(_report("3.13.1", 2), {}, lock_python="3.13")
    assert step.reasons[0] == ("environment drift: 2 findings against the lock (1 "
                               "package-missing, 1 package-version)")
    assert not any("more" in r for r in step.reasons)

"""A failed paper command's last lines, where samebits' way of running it is the cause: the
hint names the manifest key that cures it; anything else gets none."""

from __future__ import annotations

import pytest

from samebits_app.paper.failures import failure_hint
from samebits_app.paper.session import attest_problems

# librosa 0.8 under the sandbox, as numba words it (numba/core/caching.py)
NUMBA = [
    'File "/env/lib/python3.9/site-packages/numba/core/caching.py", line 349, in __init__',
    '"for file %r" % (qualname, source_path))',
    "RuntimeError: cannot cache function '__shear_dense': no locator available for file "
    "'/env/lib/python3.9/site-packages/librosa/util/utils.py'"]


@pytest.mark.parametrize(("tail", "expected"), [
    (NUMBA, 'NUMBA_CACHE_DIR = "/tmp/numba"'),
    (["OSError: [Errno 30] Read-only file system: '/home/me/.cache/huggingface'"],
     "/tmp"),
    (["urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name "
      "resolution>"], "network = true"),
    (["ValueError: shapes (3,) and (4,) not aligned"], None),
])
def test_failure_hint(tail: list[str], expected: str | None) -> None:
    got = failure_hint(tail)
    assert (got is None) if expected is None else (expected in (got or ""))


def test_attest_names_the_cure() -> None:
    (problem,) = attest_problems({"train": {"run": ["python", "train.py"], "status": "failed",
                                            "exit_code": 1, "tail": NUMBA}})
    assert problem.startswith("train: `python train.py` failed (exit 1); its last lines:\n")
    assert problem.endswith('\n  hint: numba could not write its cache (beside the package or '
                            'in ~/.cache, both read-only to the command): give the command '
                            'env = { NUMBA_CACHE_DIR = "/tmp/numba" }')

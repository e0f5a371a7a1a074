"""samebits.install.wheels: RECORD written without the csv module's per-row call is the same
bytes csv.writer writes (installer's own format), whatever the paths hold."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from samebits.install.wheels import SCHEMES, _b64, layout_for, record_file

LAYOUT = layout_for("3.12", "/opt/env/bin/python", venv=True)
# paths as wheels name their files, and the characters csv must quote
PATHS = st.text(alphabet=st.sampled_from('ab/._-, "\r\né'), min_size=1, max_size=12)
ROWS = st.lists(st.tuples(st.sampled_from(SCHEMES), PATHS,
                          st.sampled_from(["", "sha256=abc-_", "sha256=x"]),
                          st.sampled_from(["", "0", "123"])), max_size=30)


def _with_csv(records: list[tuple[str, str, str, str]], root: str) -> bytes:
    """What installer's ``construct_record_file`` writes: csv.writer, row by row."""
    import posixpath

    prefixes = {s: "" if s == root else
                posixpath.relpath(LAYOUT.scheme_dir(s, "pkg") or ".", LAYOUT.site) + "/"
                for s in SCHEMES}
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=",", quotechar='"', lineterminator="\n")
    for scheme, path, digest, size in sorted(records, key=lambda r: r[1]):
        writer.writerow((prefixes[scheme] + path, digest, size))
    return out.getvalue().encode()


@settings(max_examples=300, deadline=None)
@given(ROWS, st.sampled_from(["purelib", "platlib"]))
def test_record_file_is_what_csv_writes(records: list[tuple[str, str, str, str]],
                                        root: str) -> None:
    assert record_file(records, root, LAYOUT, "pkg") == _with_csv(records, root)


def test_b64_is_records_digest() -> None:
    """Every byte value, padded lengths included: the unpadded urlsafe base64 of the bytes."""
    for data in (b"", b"\xfb\xff", os.urandom(40), bytes(range(256))):
        raw = hashlib.sha256(data).digest()
        assert _b64(raw.hex()) == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    raw = bytes(range(250, 256)) * 5 + b"\xfb"
    assert _b64(raw.hex()) == base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

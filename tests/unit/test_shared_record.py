"""samebits.lock.shared: which paths count as shared, the record's canonical text, and every
record this samebits did not write refused by file, key and value."""

from __future__ import annotations

import pytest

from samebits.errors import LockfileError
from samebits.lock.shared import (
    SharedGroup,
    SharedPaths,
    in_order,
    shared_metadata,
    shared_of,
    shared_paths,
)

SHA_A, SHA_B = "a" * 64, "b" * 64


@pytest.mark.parametrize(("writes", "expected"), [
    ({"x": {"p": SHA_A}, "y": {"q": SHA_A}}, {}),
    ({"x": {"p": SHA_A}, "y": {"p": SHA_A}}, {}),
    ({"x": {"p": SHA_A}, "y": {"p": SHA_B}}, {"p": ("x", "y")}),
    ({"y": {"p": SHA_A}, "x": {"p": ""}}, {"p": ("x", "y")}),
    ({"x": {"p": ""}, "y": {"p": ""}}, {"p": ("x", "y")}),
    ({"x": {"p": SHA_A}, "y": {"p": SHA_A}, "z": {"p": SHA_B, "o": SHA_A}},
     {"p": ("x", "y", "z")}),
], ids=["nothing shared", "the same hash (nvidia/__init__.py)", "different hashes",
        "a hash RECORD does not give", "no hash on either side", "three writers, one differs"])
def test_shared_paths(writes: dict[str, dict[str, str]],
                      expected: dict[str, tuple[str, ...]]) -> None:
    """A path is shared when two or more packages write it and their contents are not all
    known to be the same; its writers sorted by name (pip's order comes later)."""
    assert shared_paths(writes) == expected


def test_in_order_groups_by_writers() -> None:
    """Writers in pip's order, paths grouped by the sequence of their writers, all sorted."""
    record = in_order("linux-64", {"b/2": ("x", "y"), "b/1": ("x", "y"), "c": ("x", "y", "z")},
                      order=["z", "y", "x"])
    assert record.groups == (SharedGroup(writers=("y", "x"), paths=("b/1", "b/2")),
                             SharedGroup(writers=("z", "y", "x"), paths=("c",)))
    assert record.writers() == {"b/1": ("y", "x"), "b/2": ("y", "x"), "c": ("z", "y", "x")}


def test_the_record_round_trips_as_canonical_json() -> None:
    """One key per platform, compact sorted JSON, read back to the same record."""
    record = in_order("linux-64", {"lib/cv2/cv2.abi3.so": ("opencv-python",
                                                           "opencv-python-headless")},
                      order=["numpy", "opencv-python-headless", "opencv-python"])
    meta = shared_metadata([record])
    assert meta == {"samebits.shared.linux-64": (
        '{"format":1,"order":"pip 26.3","shared":[{"paths":["lib/cv2/cv2.abi3.so"],'
        '"writers":["opencv-python-headless","opencv-python"]}]}')}
    assert shared_of(meta, "linux-64", file="x.yml") == record
    assert shared_of(meta, "linux-aarch64", file="x.yml") is None


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not JSON"),
    ('{"format":2,"order":"pip 26.3","shared":[]}', "not a shared-paths record of format 1"),
    ('{"format":1,"shared":[]}', "incomplete shared-paths record (KeyError: 'order')"),
    ('{"format":1,"order":"pip 26.3","shared":[{"writers":["a"],"paths":["p"]}]}',
     "writers ['a']: two or more packages, each once"),
    ('{"format":1,"order":"pip 26.3","shared":[{"writers":["a","a"],"paths":["p"]}]}',
     "writers ['a', 'a']: two or more packages, each once"),
    ('{"format":1,"order":"pip 26.3","shared":[{"writers":["a","b"],"paths":[1]}]}',
     "incomplete shared-paths record (ValueError: not a list of names: [1])"),
    ('{"format":1,"order":"pip 26.3","shared":[{"writers":["a","b"],"paths":["p"]},'
     '{"writers":["b","a"],"paths":["p"]}]}', "p is in two groups"),
])
def test_a_foreign_record_is_refused(text: str, message: str) -> None:
    """What this samebits did not write: a LockfileError naming the file, the key, the
    value and what is wrong, with a hint to re-lock."""
    with pytest.raises(LockfileError) as err:
        shared_of({"samebits.shared.linux-64": text}, "linux-64", file="env.conda-lock.yml")
    (problem,) = err.value.problems
    assert (problem.file, problem.key, problem.value, problem.message) == (
        "env.conda-lock.yml", "metadata.custom_metadata.samebits.shared.linux-64", text,
        message)
    assert err.value.hint == ("re-lock it with `samebits lock`, which records the paths two "
                              "wheels write")


def test_a_record_is_a_record_of_its_platform() -> None:
    """The platform is the key's."""
    record = SharedPaths(platform="linux-aarch64",
                         groups=(SharedGroup(writers=("a", "b"), paths=("p",)),))
    assert record.key == "samebits.shared.linux-aarch64"
    assert SharedPaths.from_text(record.key, record.to_text(), file="f") == record

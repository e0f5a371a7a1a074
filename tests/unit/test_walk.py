"""How the tutorial walk reads a page (tests/fixtures/walk.py): the marked blocks, their
commands, exit codes and shown lines, and how shown lines match real output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.walk import Result, Step, page_steps, parse, unmatched

ROOT = Path(__file__).resolve().parents[2]

PAGE = """\
# A page

```sh
samebits not-walked
```

<!-- walk: demo -->

```sh
mkdir ~/w && cd ~/w     # a comment
# a comment line
samebits lock --check \\
    mypaper   # exit 1
```

<!-- walk: demo file=requirements.txt -->
```text
torch==2.13.0
```

<!-- walk: other -->

```
$ samebits init mypaper --from requirements.txt    # exits 2: a choice to make
error: ...
hint: samebits init mypaper --from requirements.txt --generation G
$ samebits lock mypaper
...
mypaper: created lockfiles/mypaper.conda-lock.yml (linux-64: 30 packages)
```
"""


def test_parse_reads_marked_blocks_in_page_order() -> None:
    """Unmarked blocks are left alone; sh lines, files and `$` commands with their output."""
    steps = parse(PAGE, "p.md")
    assert [(s.walk, s.line, s.command, s.exit, s.file) for s in steps] == [
        ("demo", 10, "mkdir ~/w && cd ~/w     # a comment", 0, None),
        ("demo", 12, "samebits lock --check mypaper   # exit 1", 1, None),
        ("demo", 18, "", 0, "requirements.txt"),
        ("other", 24, "samebits init mypaper --from requirements.txt    # exits 2: a choice "
         "to make", 2, None),
        ("other", 27, "samebits lock mypaper", 0, None),
    ]
    assert steps[2].text == "torch==2.13.0\n"
    assert steps[3].shown == ("error: ...",
                              "hint: samebits init mypaper --from requirements.txt "
                              "--generation G")
    assert steps[4].shown[0] == "..."


@pytest.mark.parametrize(("text", "message"), [
    ("<!-- walk: a -->\n\nplain text\n", "p.md:1: a walk mark is not followed by a code block"),
    ("<!-- walk: a -->\n```sh\nls\n", "p.md:2: the code block never ends"),
    ("<!-- walk: a when=later -->\n```sh\nls\n```\n", "p.md:1: unknown walk option"),
    ("<!-- walk: a -->\n```\nan output line\n$ ls\n```\n",
     "p.md:3: output before the first `$ ` command"),
])
def test_parse_refuses_what_it_cannot_walk(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("$", r"\$")):
        parse(text, "p.md")


def _result(stdout: str, stderr: str = "") -> Result:
    return Result(rc=0, stdout=stdout, stderr=stderr, cwd=Path("."))


@pytest.mark.parametrize(("shown", "stdout", "stderr", "missing"), [
    # in order, with lines between them
    (["a", "c"], "a\nb\nc\n", "", []),
    # out of order: the second is not after the first
    (["c", "a"], "a\nb\nc\n", "", ["a"]),
    # `...` alone is any lines; inside a line, any text
    (["...", "sha256 ... (12 bytes)"], "x\nsha256 abc (12 bytes)\n", "", []),
    (["sha256 ... (12 bytes)"], "sha256 abc (13 bytes)\n", "", ["sha256 ... (12 bytes)"]),
    # a whole line, not a part of one
    (["result: identical"], "result: identical (exit 0)\n", "", ["result: identical"]),
    # errors and notes on stderr, whatever the interleaving
    (["verdict", "error: no"], "verdict\n", "error: no\n", []),
    # the reader's home
    (["/home/me/envs/x: done"], "/tmp/h/envs/x: done\n", "", []),
    # regex characters are text
    (["a (b) [c]"], "a (b) [c]\n", "", []),
])
def test_shown_lines_match_in_order(shown: list[str], stdout: str, stderr: str,
                                    missing: list[str]) -> None:
    assert unmatched(shown, _result(stdout, stderr), "/tmp/h") == missing


@pytest.mark.parametrize(("page", "walks"), [
    ("docs/tutorials/author.md", {"author"}),
    ("docs/tutorials/reviewer.md", {"reviewer", "reviewer-example"}),
    ("docs/tutorials/cluster-admin.md", {"cluster-admin", "cluster-admin-install"}),
])
def test_each_tutorial_marks_its_walks(page: str, walks: set[str]) -> None:
    """Every tutorial has blocks to walk, each a command or a file (a mark left on an
    unrunnable block fails here, not in the slow walk)."""
    steps = parse((ROOT / page).read_text(), page)
    assert {s.walk for s in steps} >= walks
    assert all(isinstance(s, Step) and (s.command or s.file) for s in steps)
    assert page_steps(ROOT, page, sorted(walks)[0])

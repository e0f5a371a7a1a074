"""The committee's list (samebits_app.audit.papers), a paper's source words
(samebits_app.audit.source) and the summary (samebits_app.audit.summary): every bad entry
named by entry and key; the summary's bytes fixed by the rows alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from samebits.errors import InputError
from samebits_app.audit.papers import DEFAULT_TIMEOUT, read_papers
from samebits_app.audit.source import check_commit, check_path, looks_like_url, source_words
from samebits_app.audit.summary import render_html, render_markdown, summary_doc

C = "0123456789abcdef0123456789abcdef01234567"
H = "ab" * 32


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "papers.toml"
    path.write_text(text)
    return path


def test_a_list_with_defaults(tmp_path: Path) -> None:
    """Defaults apply where an entry says nothing; trust is relative to the list."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "a.pub").write_text("key\n")
    entries = read_papers(write(tmp_path, f"""
[defaults]
require = "explained"
[[paper]]
name = "a"
url = "https://github.com/lab/a"
commit = "{C.upper()}"
path = "artifact/"
trust = "keys/a.pub"
timeout = 60
[[paper]]
name = "b.2"
url = "https://zenodo.org/records/1/files/b.zip?download=1"
sha256 = "{H}"
require = "bit-identical"
"""))
    a, b = entries
    assert (a.index, a.commit, a.path, a.require, a.timeout) == (0, C, "artifact", "explained",
                                                                 60.0)
    assert a.trust == (tmp_path / "keys" / "a.pub").absolute()
    assert (b.index, b.sha256, b.require, b.timeout, b.trust) == (1, H, "bit-identical",
                                                                  DEFAULT_TIMEOUT, None)
    assert a.source_words() == ["https://github.com/lab/a", "--commit", C, "--path",
                                "artifact"]


BASE = 'name = "a"\nurl = "https://h/a"\n'


@pytest.mark.parametrize(("text", "message"), [
    ("", "papers.toml: no [[paper]] entries"),
    (f"[[paper]]\n{BASE}", "papers.toml: [[paper]] 1 (a): give one of commit (a git "
     "repository) or sha256 (an archive)"),
    (f'[[paper]]\n{BASE}commit = "{C}"\nsha256 = "{H}"\n', "[[paper]] 1 (a): give one of"),
    (f'[[paper]]\n{BASE}commit = "abc123"\n', '[[paper]] 1 (a): commit = "abc123": expected '
     "a full commit id (40 hex digits)"),
    (f'[[paper]]\n{BASE}sha256 = "12"\n', '[[paper]] 1 (a): sha256 = "12": expected 64 hex'),
    (f'[[paper]]\nname = "a"\nurl = "paper/"\ncommit = "{C}"\n', '[[paper]] 1 (a): url = '
     '"paper/": expected a URL'),
    (f'[[paper]]\nname = "../x"\nurl = "https://h/a"\ncommit = "{C}"\n',
     '[[paper]] 1 (../x): name = "../x": a folder name of letters'),
    (f'[[paper]]\nname = "slurm"\nurl = "https://h/a"\ncommit = "{C}"\n',
     '[[paper]] 1 (slurm): name = "slurm": a folder name'),
    (f'[[paper]]\n{BASE}commit = "{C}"\nbranch = "main"\n', "[[paper]] 1 (a): unknown key "
     "branch (known: commit, name, path, require, sha256, timeout, trust, url)"),
    (f'[[paper]]\n{BASE}commit = "{C}"\nrequire = "perfect"\n', '[[paper]] 1 (a): require = '
     '"perfect": one of bit-identical, within-tolerance, explained, environment-identical'),
    (f'[[paper]]\n{BASE}commit = "{C}"\ntimeout = -1\n', "[[paper]] 1 (a): timeout = -1: "
     "expected seconds > 0"),
    (f'[[paper]]\n{BASE}commit = "{C}"\npath = "../up"\n', "[[paper]] 1 (a): path: --path "
     "../up: a folder inside"),
    (f'[[paper]]\n{BASE}commit = "{C}"\ntrust = "no.pub"\n', '[[paper]] 1 (a): trust = '
     '"no.pub": no such file'),
    (f'[[paper]]\n{BASE}commit = "{C}"\n[[paper]]\n{BASE}commit = "{C}"\n',
     '[[paper]] 2 (a): name = "a" is used twice'),
    (f'format = 2\n[[paper]]\n{BASE}commit = "{C}"\n', "format = 2: this samebits reads "
     "format 1"),
    ('[defaults]\nurl = "x"\n', "[defaults]: only require, timeout, trust"),
    ("[[paper]\n", "papers.toml: not TOML"),
], ids=["empty", "neither", "both", "short-commit", "short-sha", "not-a-url", "bad-name",
        "reserved-name", "unknown-key", "bad-require", "bad-timeout", "path-up", "no-key",
        "twice", "format", "defaults", "not-toml"])
def test_a_bad_list_names_the_entry_and_key(tmp_path: Path, text: str, message: str) -> None:
    """Each problem as an error naming the entry (number and name) and the key's value."""
    with pytest.raises(InputError) as err:
        read_papers(write(tmp_path, text))
    assert message in err.value.message
    assert err.value.hint == "nothing was run" or "TOML" in message


def test_every_problem_of_a_list_at_once(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        read_papers(write(tmp_path, f'[[paper]]\n{BASE}\n[[paper]]\nname = "b"\n'
                          f'url = "https://h/b"\ncommit = "x"\n'))
    assert err.value.message.startswith(f"{tmp_path / 'papers.toml'}: 2 problems:\n  ")


@pytest.mark.parametrize(("text", "url"), [
    ("https://github.com/lab/paper", True), ("ssh://git@host/lab/paper.git", True),
    ("file:///srv/git/paper", True), ("git@github.com:lab/paper.git", True),
    ("paper/", False), ("lockfiles/hopper.conda-lock.yml", False), ("hopper", False),
    ("C:/x", False), (None, False)])
def test_what_a_url_is(text: str | None, url: bool) -> None:
    assert looks_like_url(text) is url


def test_commit_and_path_rules() -> None:
    assert check_commit(C.upper()) == C
    with pytest.raises(InputError, match="--commit 4e5c4d8: not a full commit id"):
        check_commit("4e5c4d8")
    assert [check_path(p) for p in (None, ".", "/", "a/b/", "a")] == [None, None, None, "a/b",
                                                                     "a"]
    for bad in ("/etc", "a/../../b", ".."):
        with pytest.raises(InputError, match="a folder inside the repository"):
            check_path(bad)
    assert source_words({"url": "u", "commit": C, "path": "p"}) == ["u", "--commit", C,
                                                                    "--path", "p"]
    assert source_words({"url": "u", "commit": None, "sha256": H}) == ["u", "--sha256", H]


ROWS = [
    {"name": "a", "url": "https://h/a", "commit": C, "sha256": None, "path": None,
     "require": "within-tolerance", "level": "bit-identical", "accepted": True, "reason": "",
     "exit_code": 0, "report": "a/report/audit.html", "log": "a/log.txt", "status": "verdict"},
    {"name": "b", "url": "https://h/b", "commit": None, "sha256": H, "path": "x",
     "require": None, "level": None, "accepted": False,
     "reason": "https://h/b: sha256 is 00, --sha256 says ab | <b>", "exit_code": 2,
     "report": None, "log": "b/log.txt", "status": "failed"},
]


def test_the_summary_is_fixed_by_its_rows() -> None:
    """Counts of each outcome, no time and no path of this machine; the same rows give the
    same bytes; a reason's | and < are escaped in the table and the page."""
    doc = summary_doc(ROWS, b"the list")
    assert doc["counts"] == {"bit-identical": 1, "failed": 1} and doc["accepted"] == 1
    md, html = render_markdown(doc), render_html(doc)
    assert render_markdown(summary_doc(ROWS, b"the list")) == md
    assert "| b | `failed` | no | https://h/b: sha256 is 00, --sha256 says ab \\| <b> | " \
        "[log](b/log.txt) | https://h/b at sha256 " + H + ", folder x |" in md
    assert "&lt;b&gt;" in html and "<a href=\"a/report/audit.html\">report</a>" in html
    assert "2 papers: 1 bit-identical, 1 failed; 1 of 2 accepted" in md

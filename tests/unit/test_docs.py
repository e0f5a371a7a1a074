"""The docs follow the code: every command's --help names pages that exist, the generated CLI
reference is the parser's, every repository path the pages name exists, and every `samebits ...`
line of their code blocks still parses. `nox -s docs` builds the site itself (strict: broken
links, anchors and snippets fail it)."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path

import pytest

from samebits.cli.options import DEPRECATED_MARK, CommandLineError
from samebits_app.cli import build_parser
from samebits_app.docpages import (
    DOC_PAGES,
    cli_page,
    commands,
    doc_line,
    hidden_commands,
    stands_for,
)

# the checkout: found upwards, so the file may move within tests/
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
DOCS = ROOT / "docs"


def _gen_cli():
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _gen_cli()
GENERATED = GEN.pages()
# the hand-written pages: not those a build left in docs/reference/cli/ (the parser's, tested
# below), so the tests are the same before and after `nox -s docs`
PAGES = sorted(p for p in DOCS.rglob("*.md")
               if p.relative_to(DOCS).as_posix() not in GENERATED
               and not p.read_text().startswith(GEN.HEADER))
TEXTS = [ROOT / "README.md", *PAGES]


def _exists(rel: str) -> bool:
    """A page under docs/: hand-written, or one docs/gen_cli.py generates."""
    return (DOCS / rel).is_file() or rel in GENERATED


def test_every_command_has_a_docs_entry() -> None:
    paths = {" ".join(path) for path, _ in commands(build_parser())}
    assert sorted(paths - DOC_PAGES.keys()) == [], "add these commands to DOC_PAGES"
    assert sorted(DOC_PAGES.keys() - paths) == [], "DOC_PAGES names commands that are gone"


@pytest.mark.parametrize("path", [p for p, _ in commands(build_parser())], ids=" ".join)
def test_every_epilog_names_pages_that_exist(path: tuple[str, ...]) -> None:
    parser = dict(commands(build_parser()))[path]
    epilog = parser.epilog or ""
    assert epilog.endswith(doc_line(path)), epilog
    named = re.findall(r"docs/(\S+?\.md)", epilog)
    assert named and all(_exists(rel) for rel in named), named
    assert cli_page(path) in GENERATED
    assert "README" not in epilog  # its sections live in docs/ now


def test_help_shows_the_docs_line() -> None:
    """What a user sees: `samebits lock --help` ends with its guide and its reference page."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["lock", "--help"])
    text = " ".join(out.getvalue().split())
    assert text.endswith("docs: docs/how-to/lock.md; every option: docs/reference/cli/lock.md.")
    assert "exit codes: 0 done or fresh" in text  # the module's own epilog is kept


def test_python_m_verify_help_shows_the_docs_line() -> None:
    """`python -m verify ... --help` ends as `samebits verify ... --help` does."""
    import verify.cli

    for path, parser in commands(verify.cli.build_parser()):
        assert (parser.epilog or "").endswith(doc_line(("verify", *path))), path
        assert "README" not in (parser.epilog or "")


def test_old_command_names_have_no_page_of_their_own() -> None:
    """`samebits lock-diff` (hidden from --help) is `samebits lock diff`: no entry, no page,
    and its --help ends with lock diff's docs line."""
    parser = build_parser()
    hidden = dict(hidden_commands(parser))
    assert hidden, "no old command names left: drop this test"
    for path, sub in hidden.items():
        new = stands_for(parser)[path]
        assert " ".join(path) not in DOC_PAGES and cli_page(path) not in GENERATED
        assert (sub.epilog or "").endswith(doc_line(new)), path
        assert f"`samebits {' '.join(path)}`" in GENERATED[cli_page(new)]


def test_generated_pages_are_the_parsers_and_byte_stable(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Every option of every parser is on its page, an old spelling (hidden from --help)
    under "Old spellings" only; the terminal's width changes nothing."""
    for path, parser in commands(build_parser()):
        page = GENERATED[cli_page(path)]
        listed, _, old = page.partition("\n## Old spellings\n")
        options = {word.rstrip(",") for row in re.findall(r"^\| `([^`]*)` \|", listed, re.M)
                   for word in row.split()}
        old_rows = {row.split()[0] for row in re.findall(r"^\| `([^`]*)` \|", old, re.M)}
        for action in parser._actions:
            for flag in action.option_strings:
                if getattr(action, DEPRECATED_MARK, None) is None:
                    assert flag in options, (path, flag)
                else:
                    assert flag in old_rows and flag not in options, (path, flag)
    monkeypatch.setenv("COLUMNS", "37")
    assert GEN.pages() == GENERATED


def test_write_keeps_unchanged_pages_and_drops_stale_ones(tmp_path: Path) -> None:
    assert {p.relative_to(tmp_path).as_posix() for p in GEN.write(tmp_path)} == set(GENERATED)
    stale = tmp_path / "reference/cli/gone.md"
    stale.write_text(GEN.HEADER + "# samebits gone\n")
    mine = tmp_path / "reference/cli/notes.md"
    mine.write_text("# hand-written\n")
    assert GEN.write(tmp_path) == []  # nothing changed: nothing rewritten (mkdocs serve)
    assert not stale.exists() and mine.exists()


def test_the_nav_lists_every_generated_page() -> None:
    config = {"nav": [{"Reference": [{"Spec format": "reference/spec.md"},
                                     {"Command line": "reference/cli/index.md"}]}]}
    nav = GEN.on_config(config)["nav"]
    listed = [next(iter(e.values())) for e in nav[0]["Reference"][1]["Command line"]]
    assert sorted(listed) == sorted(GENERATED)


def test_the_architecture_table_names_each_commands_module() -> None:
    text = (DOCS / "explanation/architecture.md").read_text()
    table = dict(re.findall(r"^\| `samebits ([a-z -]+)` \| `([\w/.]+)` \|$", text, re.M))
    real = {}
    for path, parser in commands(build_parser()):
        func = parser.get_default("func")
        if path and func is not None:
            real[" ".join(path)] = func.__module__.replace(".", "/") + ".py"
    assert table == real


# repository paths the pages name, in code spans or links
PATH_RE = re.compile(r"(?<![\w/.-])((?:samebits|samebits_app|verify|tests|examples|docs|\.ci)"
                     r"/[\w./-]*)")
PLACEHOLDER = re.compile(r"[<*{…]|\.\.\.")


def _named_paths(text: str) -> set[str]:
    spans = re.findall(r"`([^`\n]+)`", text) + re.findall(r"\]\(([^)#\s]+)", text)
    out = set()
    for span in spans:
        for m in PATH_RE.finditer(span):
            tail = span[m.end():m.end() + 1]
            if not PLACEHOLDER.search(m.group(1) + tail):
                out.add(m.group(1).rstrip(".,;:"))
    return out


@pytest.mark.parametrize("page", TEXTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_paths_named_in_the_docs_exist(page: Path) -> None:
    missing = []
    for rel in sorted(_named_paths(page.read_text())):
        inner = rel[len("docs/"):].rstrip("/")
        generated = rel.startswith("docs/") and (inner in GENERATED or any(
            g.startswith(inner + "/") for g in GENERATED))  # docs/reference/cli/, generated
        env_id = (ROOT / "environments" / f"{rel}.toml").is_file()  # examples/paper-cpu
        if not ((ROOT / rel).exists() or generated or env_id):
            missing.append(rel)
    assert missing == [], f"{page.relative_to(ROOT)} names paths that do not exist"


def _command_lines(text: str) -> list[str]:
    """`samebits ...` and `... -m verify ...` lines of the fenced blocks (continuations
    joined, comments, prompts, VAR=value prefixes and [optional] parts removed)."""
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"^\$ ", "", line.strip())
            line = re.sub(r"\s+#.*$", "", line)
            line = re.sub(r"\[[^\]]*\]", "", line)
            line = re.sub(r"^(?:[A-Z_]+=\S+\s+)+", "", line)
            line = " ".join(re.sub(r"\s[>|].*$", "", line).split())  # redirections, pipes
            if line.startswith("samebits ") or re.search(r"-m verify \w", line):
                lines.append(line)
    return lines


@pytest.mark.parametrize("page", TEXTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_documented_commands_parse(page: Path) -> None:
    """Each command line shown parses with today's parser: an option renamed in a cmd_*.py
    module fails here, naming the page and the line."""
    import verify.cli

    bad = []
    for line in _command_lines(page.read_text()):
        words = shlex.split(line)
        if words[0] == "samebits":
            parser, argv = build_parser(), words[1:]
        else:
            parser, argv = verify.cli.build_parser(), words[words.index("verify") + 1:]
        for _, sub in commands(parser):
            sub.allow_abbrev = False  # the docs spell every option in full
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(argv)
        except SystemExit as exc:
            if exc.code == 0:  # --help, --version
                continue
            bad.append(f"{line}\n    {err.getvalue().strip().splitlines()[-1]}")
            continue
        except CommandLineError as exc:  # samebits.cli.options.Parser raises, never exits
            bad.append(f"{line}\n    {exc.message}")
            continue
        if "deprecated" in err.getvalue():  # the docs speak today's vocabulary
            bad.append(f"{line}\n    {err.getvalue().strip().splitlines()[-1]}")
    assert bad == [], f"{page.relative_to(ROOT)}:\n" + "\n".join(bad)


def test_the_readme_is_short_and_gives_both_five_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    for section in ("## Authors: five commands", "## Reviewers: five commands"):
        block = text.split(section, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
        assert len([ln for ln in block.splitlines() if ln.startswith("samebits ")]) == 5


def test_commands_are_found_in_code_blocks() -> None:
    """The extraction itself: continuations, comments, prompts and [options]."""
    text = ("```sh\nsamebits lock --check   # exit 1\nOMP_NUM_THREADS=1 samebits audit p/ \\\n"
            "    --prefix e [--json]\ntorchrun -m verify fleet --out f.json\n```\n"
            "```\n$ samebits keygen --out k\nnot a command\n"
            "samebits verify env --json > m.json\n```\n")
    assert _command_lines(text) == ["samebits lock --check", "samebits audit p/ --prefix e",
                                    "torchrun -m verify fleet --out f.json",
                                    "samebits keygen --out k", "samebits verify env --json"]
    assert isinstance(build_parser(), argparse.ArgumentParser)

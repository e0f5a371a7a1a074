"""A command line builds only its own command's parser (``samebits_app.cli.build_parser`` and
``verify.cli.build_parser`` with the words): it must be the very parser the full one has for
that command, and every command word must lead to the module that registers it."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import verify.cli
from samebits_app import cli


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _helps(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """Every parser's help text under ``parser``, by command path."""
    out = {path: parser.format_help()}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                out.update(_helps(sub, (*path, name)))
    return out


FULL = cli.build_parser()
WORDS = sorted(_subparsers(FULL))
VERIFY_WORDS = sorted(_subparsers(_subparsers(FULL)["verify"]))


def test_every_command_word_is_mapped() -> None:
    """The map names each command the full parser has (hidden old names included), no more."""
    assert sorted([*cli.COMMANDS, *cli.OLD_NAMES]) == WORDS
    assert sorted(verify.cli.WORDS) == VERIFY_WORDS
    assert set(verify.cli.WORDS.values()) == set(verify.cli.SUBCOMMANDS)


@pytest.mark.parametrize("word", WORDS, ids=lambda w: f"samebits-{w}")
def test_one_command_parser_is_the_full_ones(word: str) -> None:
    """Built from a command line, the parser has that command (its old name's too, when the
    module registers both) with the same help, word for word, as the full parser."""
    one = cli.build_parser([word, "--json"])
    full_helps = _helps(FULL)
    for path, text in _helps(one).items():
        if path:
            assert text == full_helps[path], path
    assert word in _subparsers(one)


@pytest.mark.parametrize("word", VERIFY_WORDS, ids=lambda w: f"verify-{w}")
def test_one_verify_subcommand(word: str) -> None:
    """``samebits verify WORD`` and ``python -m verify WORD`` build that subcommand alone, with
    the full parser's help."""
    one = cli.build_parser(["verify", word])
    assert _helps(one)[("verify", word)] == _helps(FULL)[("verify", word)]
    full = verify.cli.build_parser()
    assert _helps(verify.cli.build_parser([word]))[(word,)] == _helps(full)[(word,)]


def test_unknown_word_gets_every_command() -> None:
    """A word that names no command (a typo, an option) gets the full parser, whose error
    lists the commands."""
    assert sorted(_subparsers(cli.build_parser(["lokc"]))) == WORDS
    assert sorted(_subparsers(cli.build_parser(["--version"]))) == WORDS


def test_a_command_does_not_import_the_others() -> None:
    """``verify env --help`` loads neither the other commands nor an install's steps."""
    code = ("import sys\nfrom samebits_app.cli import build_parser\n"
            "build_parser(['verify', 'env'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('samebits_app.cmd_', "
            "'verify.gpu.cmd_', 'samebits.install.fetch', 'samebits.install.prefix'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "[]"

"""The documentation page of each command, and the ``--help`` epilogs that name it.

Both parsers end every ``--help`` with a docs line: the guide under ``docs/`` that explains the
command and its reference page, which ``docs/gen_cli.py`` generates from ``samebits``' own
parser (``cli_page``: ``reference/cli/lock.md``, ``reference/cli/lock/diff.md``). The walk and
the epilogs live here, in the core, so that ``python -m verify`` (which may not import the
composition layer) ends its help the way ``samebits verify`` does; ``VERIFY_PAGES`` is the
guide of each verify command. The composition's table of every command is
``samebits_app.docpages.DOC_PAGES``; ``tests/unit/test_docs.py`` holds both to the parsers.

A command path is a tuple of words: ``()`` for ``samebits`` itself, ``("lock", "diff")``. A
hidden subcommand (registered without ``help=``: an old name kept for a release, like
``samebits lock-diff``) is not listed by ``commands``, so it has no page of its own; its epilog
names the page of the command its ``prog`` says it is.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Iterator, Mapping

# verify's commands (a path under `verify`) -> the page, relative to docs/, that explains it
VERIFY_PAGES = {
    "": "explanation/verify-env.md",
    "env": "how-to/verify-env.md",
    "gpu": "how-to/verify-gpu.md",
    "compare": "how-to/verify-gpu.md",
    "fleet": "tutorials/cluster-admin.md",
    "node": "how-to/slurm.md",
    "fleet-report": "tutorials/cluster-admin.md",
    "nix-store": "how-to/nix.md",
    "attestation": "how-to/sign-and-verify.md",
}

CLI_FOLDER = "reference/cli"  # under docs/: the generated pages
# "See README.md." / 'See README "The install cache".': the README no longer holds these
_README_POINTER = re.compile(r'\s*See README(?:\.md| "[^"]*")\.')

CommandPath = tuple[str, ...]


def _children(parser: argparse.ArgumentParser
              ) -> Iterator[tuple[str, argparse.ArgumentParser, bool]]:
    """(name, parser, listed) of each subcommand, in help order; an alias once. ``listed`` is
    False for one registered without ``help=`` (hidden from ``--help``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {a.dest for a in action._choices_actions}
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield name, child, name in listed


def commands(parser: argparse.ArgumentParser,
             path: CommandPath = ()) -> Iterator[tuple[CommandPath, argparse.ArgumentParser]]:
    """Every command under ``parser`` (itself first) that its ``--help`` lists, with its
    path, in help order: hidden old names are left out."""
    yield path, parser
    for name, child, listed in _children(parser):
        if listed:
            yield from commands(child, (*path, name))


def _every_parser(parser: argparse.ArgumentParser, path: CommandPath = ()
                  ) -> Iterator[tuple[CommandPath, argparse.ArgumentParser, bool]]:
    """Every parser under ``parser``, hidden ones too: (path, parser, listed)."""
    yield path, parser, True
    for name, child, listed in _children(parser):
        for sub_path, sub, shown in _every_parser(child, (*path, name)):
            yield sub_path, sub, listed and shown


def hidden_commands(parser: argparse.ArgumentParser
                    ) -> Iterator[tuple[CommandPath, argparse.ArgumentParser]]:
    """The subcommands ``--help`` does not list (old names), with their own paths."""
    for path, sub, listed in _every_parser(parser):
        if not listed:
            yield path, sub


def stands_for(parser: argparse.ArgumentParser) -> dict[CommandPath, CommandPath]:
    """Each hidden command's path -> the listed command it is an old name of: the one whose
    ``prog`` it shares (``samebits lock-diff`` runs as ``samebits lock diff``), else its
    parent's."""
    progs = {sub.prog: path for path, sub in commands(parser)}
    return {path: progs.get(sub.prog, path[:-1]) for path, sub in hidden_commands(parser)}


def cli_page(path: CommandPath) -> str:
    """The generated reference page of a command, relative to docs/: a subcommand's page is
    in its command's folder (``reference/cli/lock/diff.md`` beside ``reference/cli/lock.md``),
    so no two paths share a page (``lock diff``, an old ``lock-diff``)."""
    return f"{CLI_FOLDER}/{'/'.join(path) or 'index'}.md"


def guide_page(path: CommandPath, pages: Mapping[str, str]) -> str:
    """The guide of a command in ``pages`` (command path -> page): its own entry, else its
    parent's (a command added without an entry still points somewhere; the test asks for the
    entry)."""
    for n in range(len(path), -1, -1):
        page = pages.get(" ".join(path[:n]))
        if page is not None:
            return page
    return pages[""]


def doc_line(path: CommandPath, pages: Mapping[str, str]) -> str:
    what = "every option" if path else "every command"
    return f"docs: docs/{guide_page(path, pages)}; {what}: docs/{cli_page(path)}."


def verify_pages() -> dict[str, str]:
    """``VERIFY_PAGES`` as paths of ``samebits``: ``verify``, ``verify env``, ..."""
    return {" ".join(("verify", *key.split())): page for key, page in VERIFY_PAGES.items()}


class WholePaths(argparse.HelpFormatter):
    """argparse's formatter, but the description, the epilog and each option's help are
    wrapped at spaces only, so a page's path (docs/how-to/render-oci.md) or an id
    (conda-forge/hopper) is never cut at a hyphen across two lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False,
                             break_long_words=False)


def add_doc_epilogs(parser: argparse.ArgumentParser, pages: Mapping[str, str], *,
                    under: CommandPath = ()) -> argparse.ArgumentParser:
    """End every parser's epilog (hidden old names' too) with its docs line, the module's own
    text kept first. ``under`` is where ``parser`` sits in ``samebits``: ``("verify",)`` for
    ``python -m verify``, whose commands have ``samebits verify ...``'s pages."""
    old_names = stands_for(parser)
    for path, sub, _ in _every_parser(parser):
        own = _README_POINTER.sub("", sub.epilog or "").strip()
        if own and own[-1] not in ".;:!?":
            own += "."
        line = doc_line((*under, *old_names.get(path, path)), pages)
        sub.epilog = f"{own} {line}" if own else line
        if sub.formatter_class is argparse.HelpFormatter:
            sub.formatter_class = WholePaths
    return parser

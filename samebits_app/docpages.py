"""Which documentation page explains each command, and the ``--help`` epilogs that say so.

``DOC_PAGES`` maps a command path (``""`` for ``samebits`` itself, ``"lock"``, ``"verify
env"``, ``"render oci"``) to the guide under ``docs/`` that explains it. Every command also has
a reference page generated from this parser by ``docs/gen_cli.py`` (``cli_page``): its usage,
every option and its help. ``add_doc_epilogs`` walks a built parser and ends each epilog with
both, keeping what the command's own module wrote (its exit codes) and dropping the older
"See README ..." pointers, whose sections now live in the docs. ``tests/test_docs.py`` fails
when a command has no entry or an entry names a page that does not exist.
"""

from __future__ import annotations

import argparse
import re
import textwrap
from collections.abc import Iterator

# command path -> the page (relative to docs/) that explains it
DOC_PAGES = {
    "": "index.md",
    "init": "how-to/start-from-your-files.md",
    "lock": "how-to/lock.md",
    "lock-diff": "how-to/lock.md",
    "freeze": "how-to/start-from-your-files.md",
    "verify": "explanation/verify-env.md",
    "verify env": "how-to/verify-env.md",
    "verify gpu": "how-to/verify-gpu.md",
    "verify compare": "how-to/verify-gpu.md",
    "verify fleet": "tutorials/cluster-admin.md",
    "verify fleet-report": "tutorials/cluster-admin.md",
    "verify nix-store": "how-to/nix.md",
    "verify attestation": "how-to/sign-and-verify.md",
    "render": "how-to/render.md",
    "render conda": "how-to/render.md",
    "render containerfile": "how-to/render.md",
    "render nix": "how-to/nix.md",
    "render oci": "how-to/render-oci.md",
    "install": "how-to/install.md",
    "bundle": "how-to/bundle.md",
    "attest": "tutorials/author.md",
    "audit": "tutorials/reviewer.md",
    "check": "how-to/check-kernels.md",
    "keygen": "how-to/sign-and-verify.md",
}

CLI_FOLDER = "reference/cli"  # under docs/: the generated pages
# "See README.md." / 'See README "The install cache".': the README no longer holds these
_README_POINTER = re.compile(r'\s*See README(?:\.md| "[^"]*")\.')


def commands(parser: argparse.ArgumentParser,
             path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                           argparse.ArgumentParser]]:
    """Every parser under ``parser`` (itself first) with its command path, in help order;
    an alias is not listed twice."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield from commands(child, (*path, name))


def cli_page(path: tuple[str, ...]) -> str:
    """The generated reference page of a command, relative to docs/."""
    return f"{CLI_FOLDER}/{'-'.join(path) or 'index'}.md"


def guide_page(path: tuple[str, ...]) -> str:
    """The guide of a command: its own entry, else its parent's (a command added without an
    entry still points somewhere; the test asks for the entry)."""
    for n in range(len(path), -1, -1):
        page = DOC_PAGES.get(" ".join(path[:n]))
        if page is not None:
            return page
    return DOC_PAGES[""]


def doc_line(path: tuple[str, ...]) -> str:
    what = "every option" if path else "every command"
    return f"docs: docs/{guide_page(path)}; {what}: docs/{cli_page(path)}."


class _WholePaths(argparse.HelpFormatter):
    """argparse's formatter, but the description and epilog are wrapped at spaces only, so a
    page's path (docs/how-to/lock.md) is never cut at a hyphen across two lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


def add_doc_epilogs(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """End every parser's epilog with its docs line (the module's own text kept first)."""
    for path, sub in commands(parser):
        own = _README_POINTER.sub("", sub.epilog or "").strip()
        if own and own[-1] not in ".;:!?":
            own += "."
        sub.epilog = f"{own} {doc_line(path)}" if own else doc_line(path)
        if sub.formatter_class is argparse.HelpFormatter:
            sub.formatter_class = _WholePaths
    return parser

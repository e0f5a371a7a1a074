"""Which documentation page explains each command of ``samebits``.

``DOC_PAGES`` maps a command path (``""`` for ``samebits`` itself, ``"lock"``, ``"lock
diff"``, ``"verify env"``, ``"render oci"``) to the guide under ``docs/`` that explains it;
verify's entries are the core's (``samebits.cli.docpages.VERIFY_PAGES``, which ``python -m
verify`` uses too). Every command also has a reference page generated from this parser by
``docs/gen_cli.py`` (``cli_page``): its usage, every option and its help. ``add_doc_epilogs``
walks a built parser and ends each epilog with both, keeping what the command's own module
wrote (its exit codes) and dropping the older "See README ..." pointers, whose sections now
live in the docs. ``tests/unit/test_docs.py`` fails when a command has no entry or an entry names a
page that does not exist.
"""

from __future__ import annotations

import argparse

from samebits.cli import docpages
from samebits.cli.docpages import CLI_FOLDER, cli_page, commands, hidden_commands, stands_for

__all__ = ["CLI_FOLDER", "DOC_PAGES", "add_doc_epilogs", "cli_page", "commands", "doc_line",
           "guide_page", "hidden_commands", "stands_for"]

# command path -> the page (relative to docs/) that explains it
DOC_PAGES = {
    "": "index.md",
    "init": "how-to/start-from-your-files.md",
    "lock": "how-to/lock.md",
    "lock diff": "how-to/lock.md",
    "freeze": "how-to/start-from-your-files.md",
    **docpages.verify_pages(),
    "render": "how-to/render.md",
    "render conda": "how-to/render.md",
    "render containerfile": "how-to/render.md",
    "render nix": "how-to/nix.md",
    "render oci": "how-to/render-oci.md",
    "install": "how-to/install.md",
    "cache": "explanation/install-cache.md",
    "cache verify": "explanation/install-cache.md",
    "bundle": "how-to/bundle.md",
    "bundle check": "how-to/bundle.md",
    "paper": "reference/paper-manifest.md",
    "paper init": "reference/paper-manifest.md",
    "attest": "tutorials/author.md",
    "audit": "tutorials/reviewer.md",
    "check": "how-to/check-kernels.md",
    "keygen": "how-to/sign-and-verify.md",
}


def guide_page(path: tuple[str, ...]) -> str:
    """The guide of a command: its own entry, else its parent's."""
    return docpages.guide_page(path, DOC_PAGES)


def doc_line(path: tuple[str, ...]) -> str:
    """``docs: docs/GUIDE; every option: docs/reference/cli/PAGE.`` (``--help``'s last line)."""
    return docpages.doc_line(path, DOC_PAGES)


def add_doc_epilogs(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """End every parser's epilog with its docs line (the module's own text kept first)."""
    return docpages.add_doc_epilogs(parser, DOC_PAGES)

"""The command-line toolkit of the core: what ``samebits`` and ``python -m verify`` share.

    samebits.cli.options    every option more than one command takes, defined once; the parser
                            class whose usage errors honour --json; deprecated spellings

The commands themselves live above the core (``verify/<area>/cmd_*.py``,
``samebits_app/cmd_*.py``); lock-reading code (``samebits.lock.read``) takes no argparse.
"""

"""samebits' command-line vocabulary: every option more than one command takes, defined once.

A command never writes ``p.add_argument("--prefix", ...)`` itself; it calls the function here
(``add_prefix(p, ...)``), which adds the flag with its one dest, metavar and help (a template:
only the ``{slots}`` differ from command to command) and marks the action with the option's
name. ``tests/unit/test_cli_vocabulary.py`` walks the real parser and holds every command to this.

    LOCK              the lock, positional: an environment id or a lockfile's path (LOCK_RULE)
    --prefix DIR      an environment that exists, to read (verify env, check, attest, audit,
                      freeze)
    --target DIR      an environment to create (install; audit's install step)
    --image-prefix P  where the environment lives inside an image (render containerfile, oci)
    --platform P      the lock's platform: one (install, verify env, ...) or repeatable
    --out FILE|DIR    where a command's result is written: a file or a folder, as its metavar
    --json, --quiet   every command (``common()``)
    --sign KEY        sign what is written with an Ed25519 private key
    --trust PUB       the public key a signature must be by
    --python PATH     the base interpreter a venv is made on (install, render oci)
    --workload-python PATH   what runs the workloads and a paper's commands (attest, audit)
    --root, --lockfiles, --environments   the project (``Project``)
    --cache-dir DIR   samebits' cache (``samebits.host.cache_dir``)
    --find-links, --mirror   where install finds locked files by hash
    --lock-env, --lock-python   how a lock of another format is read
    --check           always a flag: write nothing, exit 1 when something is out of date
    --store URI       a local Nix store

Old spellings (``--lockfile L``, install's ``--prefix``, audit's ``--install``, ...) stay for one
release: ``deprecated()`` adds them hidden from --help, and using one prints one line on
stderr (never on stdout, so ``--json`` output stays one document).

``Parser`` is the ``argparse.ArgumentParser`` every command uses: a usage error raises
``CommandLineError`` instead of exiting, so that ``samebits.ui.run_cli`` can write it as the
``--json`` error document when the command line asked for JSON.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from samebits.errors import LockfileError, UsageError
from samebits.foreign.model import DEFAULT_GLIBC, ReadOptions
from samebits.host import CACHE_DIR_TEXT
from samebits.install.sources import FIND_LINKS_ENV
from samebits.project import Project, unknown_environment
from samebits.render import DEFAULT_PREFIX

REMOVED_IN = "0.3"
MARK = "samebits_option"          # on an action: the name of the Option it was made from
DEPRECATED_MARK = "samebits_deprecated"  # on a hidden alias: the spelling it stands in for

Container = argparse._ActionsContainer  # an ArgumentParser or an argument group


@dataclass(frozen=True, slots=True)
class Option:
    """One shared option: its flags (none for a positional), dest, metavar and help. The help
    is a template; ``{what}``, ``{default}``, ... are filled in by each command."""

    name: str
    flags: tuple[str, ...]
    dest: str
    metavar: str | None
    help: str
    meaning: str = ""  # options of one meaning may share a flag (--platform: one or many)

    @property
    def sense(self) -> str:
        return self.meaning or self.name

    def help_pattern(self) -> re.Pattern[str]:
        """A regex every help text made from this template matches."""
        parts = re.split(r"\{\w+\}", self.help)
        return re.compile("(?s)" + ".*".join(re.escape(p) for p in parts) + r"\Z")


OPTIONS: dict[str, Option] = {}


def _option(name: str, flags: tuple[str, ...], dest: str, metavar: str | None, help: str,
            meaning: str = "") -> Option:
    opt = Option(name=name, flags=flags, dest=dest, metavar=metavar, help=help, meaning=meaning)
    OPTIONS[name] = opt
    return opt


LOCK_SUFFIXES = (".yml", ".yaml", ".lock", ".toml", ".txt")
LOCK_RULE = (
    "LOCK is an environment id (hopper, conda-forge/hopper: ROOT/lockfiles/<id>.conda-lock.yml) "
    "or a lockfile's path in any format samebits reads (conda-lock, pixi.lock, uv.lock, "
    "pylock.toml, requirements.txt with --hash, a conda explicit file): a path is what starts "
    "with /, ./, ../ or ~ or ends in .yml, .yaml, .lock, .toml or .txt; anything else is an id")

LOCK_PATH_HINT = ("or give a lockfile's path (conda-lock, pixi.lock, uv.lock, pylock.toml, "
                  "requirements.txt with --hash, conda explicit): one that starts with / or "
                  "./, or ends in .yml, .yaml, .lock, .toml or .txt")

LOCK = _option("lock", (), "lock", "LOCK", "{what}. " + LOCK_RULE)
LOCKS = _option("locks", (), "locks", "LOCK", "{what} (repeatable; default: {default}). "
                + LOCK_RULE, meaning="lock")
PAPER_OR_LOCK = _option(
    "paper_or_lock", (), "paper", "PAPER|LOCK",
    "{what}: a paper folder (a folder that exists or a path ending in /, or its "
    "samebits-paper.toml, whose manifest names the lock and the attestation), else a LOCK. "
    + LOCK_RULE, meaning="lock")
OLD_LOCK = _option("old_lock", (), "old", "OLD", "the old lock. " + LOCK_RULE, meaning="lock")
NEW_LOCK = _option("new_lock", (), "new", "NEW", "the new lock, the same way", meaning="lock")

PREFIX = _option("prefix", ("--prefix",), "prefix", "DIR",
                 "an environment that exists, {what}: a conda prefix, a venv or a Python "
                 "installation ({default})")
TARGET = _option("target", ("--target",), "target", "DIR",
                 "{what}: a folder to create (one that exists is replaced only with --replace)")
IMAGE_PREFIX = _option("image_prefix", ("--image-prefix",), "image_prefix", "PATH",
                       "where the environment lives inside the image: an absolute path "
                       f"(default {DEFAULT_PREFIX})")
PLATFORM = _option("platform", ("--platform",), "platform", "P",
                   "{what}: linux-64 or linux-aarch64 (default: {default})")
PLATFORMS = _option("platforms", ("--platform",), "platform", "P",
                    "{what}: linux-64 or linux-aarch64 (repeatable; default: {default})",
                    meaning="platform")
OUT_FILE = _option("out_file", ("--out",), "out", "FILE", "{what}: a file ({default})",
                   meaning="out")
OUT_DIR = _option("out_dir", ("--out",), "out", "DIR", "{what}: a folder ({default})",
                  meaning="out")
JSON = _option("json", ("--json",), "json", None,
               "print one JSON document on stdout instead of text (errors and usage errors "
               "too)")
QUIET = _option("quiet", ("-q", "--quiet"), "quiet", None, "no progress or notes")
SIGN = _option("sign", ("--sign",), "sign", "KEY",
               "sign {what}: write it as a DSSE envelope signed with this Ed25519 private key "
               "(samebits keygen)")
SIGN_TORCHRUN = _option(
    "sign_torchrun", ("--sign", "--sign-key"), "sign", "KEY",
    "sign {what}: write it as a DSSE envelope signed with this Ed25519 private key "
    "(samebits keygen). Under torchrun write --sign-key: torchrun takes --sign for its own "
    "--signals-to-handle and stops before any rank starts", meaning="sign")
TRUST = _option("trust", ("--trust",), "trust", "PUB",
                "{what}: the signer's Ed25519 public key (PEM: the KEY.pub samebits keygen "
                "writes)")
PYTHON = _option("python", ("--python",), "python", "PATH",
                 "for a lock without conda Python: the base interpreter of the venv{where} "
                 "(default: {default})")
WORKLOAD_PYTHON = _option(
    "workload_python", ("--workload-python",), "workload_python", "PATH",
    "the interpreter that runs the workloads and the paper's commands (default: the "
    "environment's bin/python; this interpreter for the running environment)")
ROOT = _option("root", ("--root",), "root", "DIR", "the project root (default: .)")
LOCKFILES = _option("lockfiles", ("--lockfiles",), "lockfiles", "DIR",
                    "the lockfile folder, where a LOCK id is looked up (default: "
                    "ROOT/lockfiles)")
ENVIRONMENTS = _option("environments", ("--environments",), "environments", "DIR",
                       "the spec folder (default: ROOT/environments)")
CACHE_DIR = _option("cache_dir", ("--cache-dir",), "cache_dir", "DIR",
                    "samebits' cache: {what} (default: " + CACHE_DIR_TEXT + ")")
FIND_LINKS = _option(
    "find_links", ("--find-links",), "find_links", "DIR",
    "a folder of archives to take locked files from, by name or DIR/<sha256>/<name>, whatever "
    "host the lock's URL names: a file is used only when its sha256 is the lock's, and one of "
    "the locked name with another hash is refused (repeatable; searched before the spec's "
    f"[install] find-links and ${FIND_LINKS_ENV}). The lock's own file:// URLs are read only "
    "from below such folders, the cache, the lock's folder and a project spec's file:// "
    "channels and indexes{where}")
MIRROR = _option("mirror", ("--mirror",), "mirror", "FROM=TO",
                 "fetch URLs that start with FROM from TO instead (a URL prefix rewrite; hashes "
                 "are still checked; repeatable, the longest FROM wins){where}")
LOCK_ENV = _option("lock_env", ("--lock-env",), "lock_env", "NAME",
                   "a pixi.lock's environment (default: default)")
LOCK_PYTHON = _option("lock_python", ("--lock-python",), "lock_python", "X.Y",
                      "for uv.lock, pylock.toml and requirements.txt: the Python the wheels "
                      f"are chosen for (default: {{default}}); the glibc floor is "
                      f"{DEFAULT_GLIBC}")
CHECK = _option("check", ("--check",), "check", None, "write nothing: exit 1 when {what}")
STORE = _option("store", ("--store",), "store", "URI",
                "{what}a local Nix store other than the default (/path or local?root=/path)")


def _add(p: Container, opt: Option, /, slots: dict[str, str] | None = None,
         **kwargs: Any) -> argparse.Action:
    """``opt`` added to ``p``, its help filled with ``slots``, its action marked."""
    text = opt.help.format(**(slots or {}))
    if opt.metavar is not None:
        kwargs["metavar"] = opt.metavar
    if opt.flags:
        action = p.add_argument(*opt.flags, dest=opt.dest, help=text, **kwargs)
    else:
        action = p.add_argument(opt.dest, help=text, **kwargs)
    setattr(action, MARK, opt.name)
    return action


# ------------------------------------------------------------------------ the parser


class CommandLineError(UsageError):
    """A usage error argparse found (an unknown flag, a missing argument)."""

    def __init__(self, message: str, parser: argparse.ArgumentParser) -> None:
        super().__init__(message, hint=f"see `{parser.prog} --help`")
        self.parser = parser

    def print_text(self) -> None:
        """argparse's own text: the usage line, then ``PROG: error: MESSAGE``, on stderr."""
        self.parser.print_usage(sys.stderr)
        sys.stderr.write(f"{self.parser.prog}: error: {self.message}\n")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised (``CommandLineError``), not printed and exited
    on: ``run_cli`` writes it as text, or as the JSON error document with --json. Subparsers
    are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(message, self)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, _Commands):
            return  # a word that names no subcommand is the command's own (_Commands.words)
        super()._check_value(action, value)


def after_dashes(dest: str) -> type[Parser]:
    """A ``Parser`` class that puts what follows the first ``--`` into ``args.<dest>`` (None
    without ``--``), never read as the command's own options: a paper's command (``paper
    init``), a launcher's (``verify fleet``), sbatch's options (``audit --many --slurm``)."""

    class TailParser(Parser):
        def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                             namespace: argparse.Namespace | None = None
                             ) -> tuple[argparse.Namespace, list[str]]:
            words = list(sys.argv[1:] if args is None else args)
            tail = None
            if "--" in words:
                at = words.index("--")
                words, tail = words[:at], words[at + 1:]
            ns, extra = super().parse_known_args(words, namespace)
            setattr(ns, dest, tail)
            return ns, extra

    return TailParser


def add_tail_parser(sub: argparse._SubParsersAction, name: str, dest: str,  # type: ignore[type-arg]
                    **kwargs: Any) -> argparse.ArgumentParser:
    """``sub.add_parser(name, **kwargs)``, of an ``after_dashes(dest)`` class: what follows
    that command's first ``--`` goes to ``args.<dest>``."""
    make = sub._parser_class
    sub._parser_class = after_dashes(dest)
    try:
        parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    finally:
        sub._parser_class = make
    return parser


def common() -> argparse.ArgumentParser:
    """The options every command takes (``--json``, ``--quiet``), as an argparse parent."""
    p = argparse.ArgumentParser(add_help=False)
    _add(p, JSON, action="store_true")
    _add(p, QUIET, action="store_true")
    return p


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Named subcommands beside a command's own positional words: ``samebits lock hopper``
    solves, ``samebits lock diff OLD NEW`` diffs. A first word that is not a subcommand's name
    is parsed, with what follows it, by ``words`` (the command's positionals and options)."""

    def __init__(self, *args: Any, words: argparse.ArgumentParser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.words = words

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        first, *rest = values
        chosen = self._name_parser_map.get(first)
        if chosen is None:
            # the command's own words: one namespace, so options before them stay given
            _, extra = self.words.parse_known_args(list(values), namespace)
        else:
            # a subcommand: its own defaults (func) win, as for argparse's subcommands
            setattr(namespace, self.dest, first)
            sub, extra = chosen.parse_known_args(rest, None)
            for key, value in vars(sub).items():
                setattr(namespace, key, value)
        if extra:
            vars(namespace).setdefault(argparse._UNRECOGNIZED_ARGS_ATTR, []).extend(extra)


def add_commands(p: argparse.ArgumentParser, *, dest: str, metavar: str, help: str,
                 parents: Sequence[argparse.ArgumentParser]) -> Any:
    """Subcommands of ``p`` beside its own positionals; returns the subparsers action, whose
    ``words`` parser takes the command's positionals (add them there, with ``parents``)."""
    words = type(p)(prog=p.prog, parents=list(parents), add_help=False)
    return p.add_subparsers(action=_Commands, dest=dest, metavar=metavar,  # type: ignore[call-overload]
                            help=help, required=False, words=words, prog=p.prog)


# ------------------------------------------------------------------------ deprecated spellings


def note_deprecated(text: str) -> None:
    """One line on stderr: ``samebits: TEXT (removed in 0.3)``. Never on stdout."""
    sys.stderr.write(f"samebits: {text} (removed in {REMOVED_IN})\n")
    sys.stderr.flush()


def _given(parser: argparse.ArgumentParser, namespace: argparse.Namespace, dest: str,
           name: str) -> None:
    """Record that ``name`` set ``dest``; two spellings of one value are a usage error."""
    seen: dict[str, str] = vars(namespace).setdefault("_samebits_given", {})
    if dest in seen and seen[dest] != name:
        parser.error(f"{seen[dest]} and {name} are two spellings of one argument: pass one")
    seen[dest] = name


class _Once(argparse._StoreAction):
    """A store action whose value may also come from a deprecated spelling, but not both."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if option_string is None and values is None:
            return  # an optional positional not given: argparse calls it with its default
        _given(parser, namespace, self.dest, option_string or str(self.metavar))
        setattr(namespace, self.dest, values)


class _Deprecated(argparse.Action):
    """An old spelling: hidden from --help, still accepted, noted on stderr when used."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, instead: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.instead = instead

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        note_deprecated(f"{option_string} is deprecated, {self.instead}")
        _given(parser, namespace, self.dest, str(option_string))
        setattr(namespace, self.dest, values)


def deprecated(p: Container, flag: str, *, dest: str, instead: str,
               **kwargs: Any) -> argparse.Action:
    """``flag``, an old spelling of ``dest`` kept for one release: hidden from --help; using
    it writes ``samebits: FLAG is deprecated, INSTEAD (removed in 0.3)`` on stderr."""
    kwargs.setdefault("default", None)
    action = p.add_argument(flag, dest=dest, action=_Deprecated, instead=instead,
                            help=argparse.SUPPRESS, **kwargs)
    setattr(action, DEPRECATED_MARK, instead)
    return action


def deprecated_command(old: str, new: str,
                       func: Callable[[Any, Any], int]) -> Callable[[Any, Any], int]:
    """``func`` run by an old command name (``samebits lock-diff``), with the note first."""
    def run(args: Any, out: Any) -> int:
        note_deprecated(f"`{old}` is deprecated, write `{new}`")
        return func(args, out)

    return run


def deprecated_lockfile(p: Container, *, dest: str = "lock") -> argparse.Action:
    """``--lockfile L``, the old way to name the lock: now the first argument."""
    return deprecated(p, "--lockfile", dest=dest, metavar="L",
                      instead="pass the lock as the first argument")


# ------------------------------------------------------------------------ the lock


def add_lock(p: Container, *, what: str, optional: bool = False,
             once: bool = False) -> argparse.Action:
    """The LOCK positional (dest ``lock``); ``optional`` for ``[LOCK]``; ``once`` when a
    deprecated ``--lockfile`` may give it instead."""
    kwargs: dict[str, Any] = {}
    if optional:
        kwargs.update(nargs="?", default=None)
    if once:
        kwargs["action"] = _Once
    return _add(p, LOCK, {"what": what}, **kwargs)


def add_locks(p: Container, *, what: str, default: str) -> argparse.Action:
    """LOCK ..., any number (dest ``locks``, a list)."""
    return _add(p, LOCKS, {"what": what, "default": default}, nargs="*")


def add_paper_or_lock(p: Container, *, what: str) -> argparse.Action:
    """``PAPER|LOCK`` (dest ``paper``): a paper folder or a lock (``paper_or_lock``)."""
    return _add(p, PAPER_OR_LOCK, {"what": what}, nargs="?")


def add_lock_pair(p: Container) -> None:
    """OLD NEW: two locks (dests ``old``, ``new``)."""
    _add(p, OLD_LOCK)
    _add(p, NEW_LOCK)


def is_lock_path(value: str) -> bool:
    """Whether a LOCK argument is a path (else an environment id): LOCK_RULE, which looks at
    the text alone, never at what exists."""
    return (value.startswith(("/", "./", "../", "~")) or value in (".", "..")
            or Path(value).name.endswith(LOCK_SUFFIXES))


def lock_file(value: str, project: Project) -> Path:
    """The lockfile a LOCK argument names: a path as given, or the id's
    ``ROOT/lockfiles/<id>.conda-lock.yml``, which must exist (else the known ids are named)."""
    if is_lock_path(value):
        return Path(value).expanduser()
    path = project.lock_path(value)
    if path.is_file():
        return path
    if project.spec_path(value).is_file():
        raise LockfileError(f"{value}: no lockfile {path}", hint=f"run `samebits lock {value}` "
                            "first")
    raise unknown_environment(value, project.lock_ids(), path, hint=LOCK_PATH_HINT)


def lock_arg(path: Path) -> str:
    """``path`` as a LOCK argument that reads as a path whatever its name (for a command line
    samebits writes: ``python -m verify env LOCK``)."""
    text = str(path)
    return text if is_lock_path(text) else f"./{text}"


def paper_or_lock(value: str | None) -> tuple[Path | None, str | None]:
    """(the paper folder or manifest, the LOCK) a ``PAPER|LOCK`` argument is: a paper when it
    is an existing folder, ends in / or names a samebits-paper.toml; else a LOCK."""
    if value is None:
        return None, None
    path = Path(value).expanduser()
    if path.is_dir() or value.endswith("/") or path.name == "samebits-paper.toml":
        return path, None
    return None, value


# ------------------------------------------------------------------------ environments


def add_prefix(p: Container, *, what: str, default: str, **kwargs: Any) -> argparse.Action:
    """``--prefix DIR``: an environment that exists, to read."""
    return _add(p, PREFIX, {"what": what, "default": default}, type=Path, **kwargs)


def add_target(p: Container, *, what: str) -> argparse.Action:
    """``--target DIR``: an environment to create (``once``: the old spellings may give it)."""
    return _add(p, TARGET, {"what": what}, type=Path, action=_Once, default=None)


def add_image_prefix(p: Container) -> argparse.Action:
    """``--image-prefix PATH``: where the environment lives inside an image."""
    return _add(p, IMAGE_PREFIX, action=_Once, default=DEFAULT_PREFIX)


def add_python(p: Container, *, default: str, where: str = "") -> argparse.Action:
    """``--python PATH``: the base interpreter a venv is made on."""
    return _add(p, PYTHON, {"default": default, "where": where})


def add_workload_python(p: Container) -> argparse.Action:
    """``--workload-python PATH``: what runs the workloads (attest, audit)."""
    return _add(p, WORKLOAD_PYTHON, action=_Once, default=None)


def add_platform(p: Container, *, what: str = "the lock platform", default: str,
                 **kwargs: Any) -> argparse.Action:
    """``--platform P``, one."""
    return _add(p, PLATFORM, {"what": what, "default": default}, **kwargs)


def add_platforms(p: Container, *, what: str = "a platform of the lock", default: str,
                  **kwargs: Any) -> argparse.Action:
    """``--platform P``, repeatable (a list, None when not given)."""
    return _add(p, PLATFORMS, {"what": what, "default": default}, action="append", **kwargs)


# ------------------------------------------------------------------------ outputs and keys


def add_out_file(p: Container, *, what: str, default: str, value: Path | None = None,
                 **kwargs: Any) -> argparse.Action:
    """``--out FILE``; ``default`` says what it is when not given, ``value`` is that value
    when the parser gives it (else None, the command decides)."""
    return _add(p, OUT_FILE, {"what": what, "default": default}, type=Path, default=value,
                **kwargs)


def add_out_dir(p: Container, *, what: str, default: str, value: Path | None = None,
                **kwargs: Any) -> argparse.Action:
    """``--out DIR``; ``default`` and ``value`` as for ``add_out_file``."""
    return _add(p, OUT_DIR, {"what": what, "default": default}, type=Path, default=value,
                **kwargs)


def add_sign(p: Container, *, what: str, torchrun: bool = False) -> argparse.Action:
    """``--sign KEY`` (also ``--sign-key KEY`` for a command run under torchrun)."""
    return _add(p, SIGN_TORCHRUN if torchrun else SIGN, {"what": what}, type=Path)


def add_trust(p: Container, *, what: str, **kwargs: Any) -> argparse.Action:
    """``--trust PUB``."""
    return _add(p, TRUST, {"what": what}, type=Path, action=_Once, **kwargs)


def add_check(p: Container, *, what: str) -> argparse.Action:
    """``--check``: a flag, always."""
    return _add(p, CHECK, {"what": what}, action="store_true")


# ------------------------------------------------------------------------ project and cache


def add_project(p: Container, *, environments: bool = False, lockfiles: bool = True) -> None:
    """``--root DIR``, ``--lockfiles DIR`` (and ``--environments DIR``)."""
    _add(p, ROOT, type=Path, default=Path("."))
    if environments:
        _add(p, ENVIRONMENTS, type=Path)
    if lockfiles:
        _add(p, LOCKFILES, type=Path)


def project_of(args: argparse.Namespace) -> Project:
    """The project ``--root``/``--lockfiles``/``--environments`` name."""
    return Project.at(getattr(args, "root", None) or Path("."),
                      environments=getattr(args, "environments", None),
                      lockfiles=getattr(args, "lockfiles", None))


def add_cache_dir(p: Container, *, what: str) -> argparse.Action:
    """``--cache-dir DIR``: samebits' cache (``samebits.host.cache_dir``)."""
    return _add(p, CACHE_DIR, {"what": what}, type=Path)


def cache_of(args: argparse.Namespace) -> Path:
    """``--cache-dir``, else samebits' cache folder; absolute, because helpers run in other
    folders (bytecode compilers write their pycs into it from a private working folder)."""
    from samebits.host import cache_dir

    given = getattr(args, "cache_dir", None)
    return Path(given).absolute() if given else cache_dir()


def add_sources(p: Container, *, where: str = "") -> None:
    """``--find-links DIR`` and ``--mirror FROM=TO`` (``samebits.install.sources``)."""
    _add(p, FIND_LINKS, {"where": where}, action="append", default=[])
    _add(p, MIRROR, {"where": where}, action="append", default=[])


def add_store(p: Container, *, what: str = "") -> argparse.Action:
    """``--store URI``: a local Nix store."""
    return _add(p, STORE, {"what": what})


# ------------------------------------------------------------------------ reading locks


def add_read_flags(p: Container, *, python_default: str = "this interpreter's") -> None:
    """``--lock-env`` and ``--lock-python``: how to read a lock of another format."""
    _add(p, LOCK_ENV)
    _add(p, LOCK_PYTHON, {"default": python_default})


def read_options(args: Any, *, platforms: tuple[str, ...] = (),
                 python: str | None = None) -> ReadOptions:
    """ReadOptions from parsed flags; ``python`` is the command's default for --lock-python."""
    return ReadOptions(environment=getattr(args, "lock_env", None), platforms=platforms,
                       python=getattr(args, "lock_python", None) or python)


def read_flags(options: ReadOptions) -> list[str]:
    """The ``--lock-env``/``--lock-python`` flags that read a lock as ``options`` says (for
    ``python -m verify env`` run in another process)."""
    return [*(["--lock-env", options.environment] if options.environment else []),
            *(["--lock-python", options.python] if options.python else [])]


def need(value: Any, message: str, hint: str | None = None) -> Any:
    """``value``, or a usage error when it is None (an argument argparse cannot require
    because a deprecated spelling may give it)."""
    if value is None:
        raise UsageError(message, hint=hint)
    return value

"""One command-line vocabulary (issue 25): every shared option comes from samebits.cli.options.

The real parsers (``samebits`` and ``python -m verify``) are walked, every command and
subcommand: an option that uses a shared flag (``--prefix``, ``--sign``, ``--platform``, ...)
must be the one the options module made, with its flags, dest, metavar and help template; no
flag means two things in two commands; every command that reads a lock takes it as LOCK; the
old spellings are hidden from --help and still accepted, with one note on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import samebits_app.cli as app_cli
import verify.cli as verify_cli
from samebits.cli import options
from samebits.cli.options import DEPRECATED_MARK, MARK, OPTIONS
from samebits.errors import SamebitsError
from samebits.project import Project

SHARED_FLAGS = {flag for opt in OPTIONS.values() for flag in opt.flags}
POSITIONAL_METAVARS = {opt.metavar for opt in OPTIONS.values() if not opt.flags}
SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)

# every command that reads a lock takes it as a positional LOCK (or PAPER|LOCK, OLD NEW)
READS_A_LOCK = {"lock diff", "lock-diff", "render conda", "render containerfile", "render nix",
                "render oci", "install", "bundle", "attest", "audit", "check", "verify env",
                "verify gpu", "verify fleet", "verify nix-store", "verify node"}


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command, parser) for the parser and every subcommand below it; a command's own words
    beside its subcommands (``samebits lock ENV``, ``samebits bundle LOCK``) count as it."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words = getattr(action, "words", None)
            if words is not None:
                yield " ".join(path), words
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def problems(parser: argparse.ArgumentParser) -> list[str]:
    """Everything in ``parser`` that breaks the vocabulary, one line each."""
    found: list[str] = []
    meanings: dict[str, dict[tuple, set[str]]] = {}
    for cmd, p in commands(parser):
        for a in p._actions:
            if isinstance(a, SKIP):
                continue
            if hasattr(a, DEPRECATED_MARK):
                if a.help is not argparse.SUPPRESS:
                    found.append(f"{cmd}: the old spelling {a.option_strings} is shown in --help")
                continue
            name = getattr(a, MARK, None)
            shared = sorted(f for f in a.option_strings if f in SHARED_FLAGS)
            if name is None:
                if shared:
                    found.append(f"{cmd}: {'/'.join(shared)} is the command's own, not "
                                 "samebits.cli.options'")
                if not a.option_strings and a.metavar in POSITIONAL_METAVARS:
                    found.append(f"{cmd}: positional {a.metavar} is the command's own")
                for flag in a.option_strings:
                    key = ("own", a.dest, a.nargs == 0)
                    meanings.setdefault(flag, {}).setdefault(key, set()).add(cmd)
                continue
            opt = OPTIONS[name]
            where = f"{cmd}: {'/'.join(a.option_strings) or a.metavar} ({name})"
            if tuple(a.option_strings) != opt.flags:
                found.append(f"{where}: flags {a.option_strings}, the module's {opt.flags}")
            if a.dest != opt.dest:
                found.append(f"{where}: dest {a.dest!r}, the module's {opt.dest!r}")
            if a.metavar != opt.metavar:
                found.append(f"{where}: metavar {a.metavar!r}, the module's {opt.metavar!r}")
            if not opt.help_pattern().match(a.help or ""):
                found.append(f"{where}: help {a.help!r} is not the module's {opt.help!r}")
            for flag in a.option_strings:
                meanings.setdefault(flag, {}).setdefault(("shared", opt.sense), set()).add(cmd)
    for flag, senses in sorted(meanings.items()):
        if len(senses) > 1:
            found.append(f"{flag} means {len(senses)} things: " + "; ".join(
                f"{k} in {', '.join(sorted(v))}" for k, v in senses.items()))
    return found


def lock_positionals(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """command -> the shared lock positionals it takes."""
    out: dict[str, set[str]] = {}
    for cmd, p in commands(parser):
        for a in p._actions:
            name = getattr(a, MARK, None)
            if name is not None and not a.option_strings and OPTIONS[name].sense == "lock":
                out.setdefault(cmd, set()).add(name)
    return out


# ------------------------------------------------------------------------ the walk


@pytest.mark.parametrize("build", [app_cli.build_parser, verify_cli.build_parser],
                         ids=["samebits", "python -m verify"])
def test_every_shared_option_comes_from_the_module(build: Callable[[], argparse.ArgumentParser]
                                                   ) -> None:
    """No command defines --prefix, --sign, --platform, ... itself; each is the module's, with
    its dest, metavar and help; and no flag means two things in two commands."""
    parser = build()
    assert len(list(commands(parser))) > 5
    assert problems(parser) == []


def test_every_command_that_reads_a_lock_takes_LOCK() -> None:
    taken = lock_positionals(app_cli.build_parser())
    assert set(taken) == READS_A_LOCK
    assert taken["lock diff"] == {"old_lock", "new_lock"}
    assert taken["audit"] == taken["attest"] == {"paper_or_lock"}
    assert all(taken[c] in ({"lock"}, {"locks"}) for c in READS_A_LOCK
               if c not in ("lock diff", "lock-diff", "audit", "attest"))
    # and nothing takes --lockfile any more but as a hidden old spelling
    for cmd, p in commands(app_cli.build_parser()):
        for a in p._actions:
            if "--lockfile" in a.option_strings:
                assert hasattr(a, DEPRECATED_MARK) and a.help is argparse.SUPPRESS, cmd


def _with(monkeypatch: pytest.MonkeyPatch, module: object, command: str,
          add: Callable[[argparse.ArgumentParser], object]) -> argparse.ArgumentParser:
    """The real parser, after ``module.add_parser`` also ran ``add`` on ``command``'s parser:
    what a cmd module that defines an option of its own builds."""
    real = module.add_parser  # type: ignore[attr-defined]

    def patched(sub: argparse._SubParsersAction, parents: list) -> None:
        real(sub, parents)
        add(sub.choices[command])

    monkeypatch.setattr(module, "add_parser", patched)
    return app_cli.build_parser()


@pytest.mark.parametrize(("command", "add", "named"), [
    ("keygen", lambda p: p.add_argument("--prefix", type=Path, help="where the keys go"),
     "keygen: --prefix is the command's own"),
    ("keygen", lambda p: p.add_argument("--sign", help="sign it"),
     "keygen: --sign is the command's own"),
    ("keygen", lambda p: p.add_argument("--check", type=Path, metavar="FILE"),
     "keygen: --check is the command's own"),
    ("keygen", lambda p: p.add_argument("lock", metavar="LOCK"),
     "keygen: positional LOCK is the command's own"),
    ("keygen", lambda p: setattr(options.add_prefix(p, what="x", default="y"), "help", "mine"),
     "help 'mine' is not the module's"),
    ("keygen", lambda p: p.add_argument("--device", action="store_true"),
     "--device means 2 things"),
    ("keygen", lambda p: _shown(p, "--lockfile"),
     "the old spelling ['--lockfile'] is shown in --help"),
])
def test_a_command_of_its_own_is_named(monkeypatch: pytest.MonkeyPatch, command: str,
                                       add: Callable[[argparse.ArgumentParser], object],
                                       named: str) -> None:
    """The check is real: a cmd module that adds its own --prefix (or --sign, a --check that
    takes a file, its own LOCK, a shown old spelling, a flag with another meaning) fails it."""
    import samebits_app.cmd_keygen

    assert problems(app_cli.build_parser()) == []
    found = problems(_with(monkeypatch, samebits_app.cmd_keygen, command, add))
    assert found and any(named in f for f in found), found


def _shown(p: argparse.ArgumentParser, flag: str) -> argparse.Action:
    """An old spelling, but in --help."""
    action = p.add_argument(flag, dest="lock", help="the old way")
    setattr(action, DEPRECATED_MARK, "pass the lock as the first argument")
    return action


# ------------------------------------------------------------------------ old spellings

OLD = [  # old command line, the new dest, its value, the new spelling the note names
    (["verify", "env", "--lockfile", "a.yml"], "lock", "a.yml", "first argument"),
    (["verify", "gpu", "--lockfile", "a.yml"], "lock", "a.yml", "first argument"),
    (["verify", "fleet", "--lockfile", "a.yml"], "lock", "a.yml", "first argument"),
    (["verify", "nix-store", "--lockfile", "a.yml"], "lock", "a.yml", "first argument"),
    (["attest", "--lockfile", "a.yml"], "lockfile", "a.yml", "first argument"),
    (["audit", "--lockfile", "a.yml"], "lockfile", "a.yml", "first argument"),
    (["install", "cpu", "--prefix", "/t"], "target", Path("/t"), "--target DIR"),
    (["audit", "p/", "--install", "/t"], "target", Path("/t"), "--target DIR"),
    (["audit", "p/", "--python", "/py"], "workload_python", "/py", "--workload-python"),
    (["attest", "p/", "--python", "/py"], "workload_python", "/py", "--workload-python"),
    (["render", "containerfile", "--prefix", "/x"], "image_prefix", "/x", "--image-prefix"),
    (["render", "oci", "cpu", "--prefix", "/x"], "image_prefix", "/x", "--image-prefix"),
    (["verify", "attestation", "f", "--key", "k.pub"], "trust", Path("k.pub"), "--trust PUB"),
    (["init", "n", "--from", "r.txt", "--python", "3.11"], "python_version", "3.11",
     "--python-version"),
    (["bundle", "--check", "b.tar"], "check_file", Path("b.tar"), "samebits bundle check"),
]


@pytest.mark.parametrize(("argv", "dest", "value", "instead"), OLD,
                         ids=[" ".join(o[0]) for o in OLD])
def test_old_spellings_are_accepted_with_a_note(capsys: pytest.CaptureFixture[str],
                                                argv: list[str], dest: str, value: object,
                                                instead: str) -> None:
    """Each old spelling still parses into the new dest, and says once, on stderr, what to
    write instead and when it goes; stdout stays empty."""
    args = app_cli.build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("samebits: ") and " is deprecated, " in line, line
    assert instead in line and line.endswith(f"(removed in {options.REMOVED_IN})"), line


def test_the_lockfile_note_is_the_documented_line(capsys: pytest.CaptureFixture[str]) -> None:
    app_cli.build_parser().parse_args(["verify", "env", "--lockfile", "a.yml"])
    assert capsys.readouterr().err == ("samebits: --lockfile is deprecated, pass the lock as "
                                       "the first argument (removed in 0.3)\n")


@pytest.mark.parametrize("argv", [["verify", "env", "--lockfile", "a.yml", "b.yml"],
                                  ["verify", "env", "b.yml", "--lockfile", "a.yml"],
                                  ["install", "cpu", "--target", "/a", "--prefix", "/b"]])
def test_old_and_new_spelling_together_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(SamebitsError, match="two spellings of one argument: pass one"):
        app_cli.build_parser().parse_args(argv)


@pytest.mark.parametrize(("command", "old"), [
    (["verify", "env"], "--lockfile"), (["install"], "--prefix"), (["audit"], "--install"),
    (["audit"], "--python"), (["verify", "attestation"], "--key"), (["bundle"], "--check"),
    (["render", "oci"], "--prefix"), (["init"], "--python"),
])
def test_old_spellings_are_hidden_from_help(capsys: pytest.CaptureFixture[str],
                                            command: list[str], old: str) -> None:
    with pytest.raises(SystemExit):
        app_cli.build_parser().parse_args([*command, "--help"])
    shown = capsys.readouterr().out
    assert not re.search(rf"(?m)^\s+{re.escape(old)}(?![-\w])", shown), shown


def test_lock_diff_is_one_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """`samebits --help` lists lock once (no lock-diff); `samebits lock --help` lists diff
    once; `samebits lock diff --help` is diff's own."""
    parser = app_cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    top = capsys.readouterr().out
    assert "lock-diff" not in top and len(re.findall(r"(?m)^    lock\b", top)) == 1
    with pytest.raises(SystemExit):
        app_cli.build_parser().parse_args(["lock", "--help"])
    lock = capsys.readouterr().out
    assert len(re.findall(r"(?m)^    diff\b", lock)) == 1, lock
    with pytest.raises(SystemExit):
        app_cli.build_parser().parse_args(["lock", "diff", "--help"])
    assert capsys.readouterr().out.startswith("usage: samebits lock diff ")
    args = app_cli.build_parser().parse_args(["lock", "hopper", "--check"])
    assert (args.names, args.check, args.lock_command) == (["hopper"], True, None)
    args = app_cli.build_parser().parse_args(["lock", "diff", "a.yml", "b.yml"])
    assert (args.old, args.new, args.lock_command) == ("a.yml", "b.yml", "diff")


def test_the_old_lock_diff_still_runs_with_a_note(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """`samebits lock-diff A B --json`: the note on stderr, one JSON document on stdout."""
    rc = app_cli.main(["lock-diff", str(tmp_path / "a.yml"), str(tmp_path / "b.yml"), "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and json.loads(out)["error"]["kind"] == "lockfile"
    assert err == ("samebits: `samebits lock-diff` is deprecated, write `samebits lock diff` "
                   "(removed in 0.3)\n")


def test_bundle_check_is_a_subcommand() -> None:
    args = app_cli.build_parser().parse_args(["bundle", "check", "b.tar"])
    assert (args.bundle_command, args.file) == ("check", Path("b.tar"))
    args = app_cli.build_parser().parse_args(["bundle", "cpu", "--platform", "linux-64"])
    assert (args.lock, args.platform, args.bundle_command) == ("cpu", ["linux-64"], None)


# ------------------------------------------------------------------------ usage errors


@pytest.mark.parametrize("main", [app_cli.main, verify_cli.main], ids=["samebits", "verify"])
@pytest.mark.parametrize("argv", [["--bogus"], ["a.yml", "b.yml"], ["--platform"]])
def test_usage_errors_honour_json(capsys: pytest.CaptureFixture[str], main: Callable,
                                  argv: list[str]) -> None:
    """A usage error with --json is the error document every other error is, on stdout,
    exit 2; without it, argparse's usage line and message on stderr, exit 2."""
    head = ["verify", "env"] if main is app_cli.main else ["env"]
    rc = main([*head, *argv, "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 2 and err == ""
    assert set(doc) == {"error", "exit_code"} and doc["exit_code"] == 2
    assert doc["error"]["kind"] == "usage" and doc["error"]["message"]
    rc = main([*head, *argv, "--bogus"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.startswith("usage: ") and ": error: " in err


def test_a_missing_argument_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = app_cli.main(["lock", "diff", "a.yml", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 2
    assert doc["error"]["message"] == "the following arguments are required: NEW"
    assert doc["error"]["hint"] == "see `samebits lock diff --help`"


# ------------------------------------------------------------------------ LOCK


@pytest.mark.parametrize(("value", "is_path"), [
    ("hopper", False), ("conda-forge/hopper", False), ("examples/paper-cpu", False),
    ("py3.11", False), ("lockfiles/hopper.conda-lock.yml", True), ("uv.lock", True),
    ("pixi.lock", True), ("pylock.toml", True), ("requirements.txt", True), ("env.yaml", True),
    ("./explicit", True), ("/abs/explicit", True), ("../up/x", True), ("~/x", True),
])
def test_the_lock_rule(value: str, is_path: bool) -> None:
    """A path starts with /, ./, ../ or ~ or ends in a lockfile's suffix; else an id. The text
    alone decides, never what exists."""
    assert options.is_lock_path(value) is is_path


def test_an_id_and_a_path(tmp_path: Path) -> None:
    project = Project.at(tmp_path)
    (tmp_path / "lockfiles" / "conda-forge").mkdir(parents=True)
    lock = tmp_path / "lockfiles" / "conda-forge" / "hopper.conda-lock.yml"
    lock.write_text("")
    assert options.lock_file("conda-forge/hopper", project) == lock
    assert options.lock_file("./elsewhere/x", project) == Path("./elsewhere/x")
    (tmp_path / "hopper").write_text("")  # a file named like an id is still not read as one
    with pytest.raises(SamebitsError, match="unknown environment 'hopper'.*known: "
                       "conda-forge/hopper") as err:
        options.lock_file("hopper", project)
    assert "one that starts with / or ./" in str(err.value.hint)
    assert options.lock_arg(Path("explicit")) == "./explicit"
    assert options.lock_arg(Path("/a/explicit")) == "/a/explicit"


def test_help_states_the_lock_rule(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["install"], ["verify", "env"], ["render", "conda"], ["audit"]):
        with pytest.raises(SystemExit):
            app_cli.build_parser().parse_args([*command, "--help"])
        shown = " ".join(capsys.readouterr().out.split())
        assert "a path is what starts with /, ./, ../ or ~ or ends in .yml, .yaml, .lock, " \
            ".toml or .txt; anything else is an id" in shown, command


def test_one_host_platform_and_one_cache_folder(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """Every name for "this machine's platform" and "samebits' cache" is the one function."""
    import samebits.host
    import samebits.install
    import samebits.install.fetch
    import samebits.solve.indexcache

    assert samebits.install.host_platform is samebits.host.host_platform
    assert samebits.install.default_cache_dir is samebits.host.cache_dir
    assert samebits.solve.indexcache.default_cache_root is samebits.host.cache_dir
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert samebits.host.cache_dir() == tmp_path / "samebits"
    args = argparse.Namespace(cache_dir=None)
    assert options.cache_of(args) == tmp_path / "samebits"
    assert samebits.host.platform_of_machine("arm64") == "linux-aarch64"
    assert samebits.host.platform_of_machine("riscv64") == "linux-riscv64"

"""A new paper command run three times for ``samebits paper init``, each in a fresh scratch
copy, exactly as attest runs it.

    run 1   as the manifest will declare it: the ``[run]`` defaults, and no thread variable
            set by samebits unless ``[run]`` says ``threads`` (the caller's OMP_NUM_THREADS
            passes, as it does for attest)
    run 2   the same again
    run 3   perturbed (``perturb``): OMP_NUM_THREADS = MKL_NUM_THREADS = 1 (the command's
            ``threads = 1``), or 2 where the default already is one thread

Each copy is made as attest makes its one, by ``runner.prepare_workdir`` (the paper folder
without the outputs folder, the attestation and every declared output; fetched ``[[inputs]]``
put in place by ``inputs.place``); where the manifest has commands before this one, they run
first, once, in a base copy that each run's copy is cloned from, so the command finds what they
wrote, as it does when attest runs them all in order. Each run is ``runner.run_command``, in
this machine's sandbox, under the attested settings (the deterministic profile's hook), with
``trace``: its stdout, stderr and every file its Python processes opened (``hook``). The copy
is snapshotted before and after (``draft.snapshot``), so ``draft.written`` can say what the
command wrote.

A command that fails stops paper init (``session.PaperRunError``, exit 1: its last lines and
the hint ``failures.failure_hint`` gives); one that changed the bytes of the paper's own code
too (``PaperCodeChanged``, exit 1, every file named), right after run 1. Where run 1 wrote
files the paper folder already holds (the outputs of the authors' own earlier run), attest
would not have had them in its copy: they are left out, as declared outputs, of every copy
made after, and run 1 runs again.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from samebits.errors import EXIT_DIFFERENT, SamebitsError
from samebits_app.paper import inputs as inputs_mod
from samebits_app.paper.draft import Opens, Snapshot, Written, read_opens, snapshot, written
from samebits_app.paper.manifest import CommandSpec, OutputSpec, PaperManifest
from samebits_app.paper.runner import Host, prepare_workdir, run_command
from samebits_app.paper.sandbox import Sandbox
from samebits_app.paper.session import PaperRunError, attest_problems


class PaperCodeChanged(SamebitsError):
    """``paper init`` refuses: the command changed the paper's own code."""

    exit_code = EXIT_DIFFERENT
    kind = "paper"


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    manifest: PaperManifest        # the earlier commands and this one (no outputs declared)
    spec: CommandSpec              # this command as it will be declared
    perturbed: CommandSpec         # run 3's
    host: Host
    settings: Mapping[str, Any]    # the attested torch settings
    sandbox: Sandbox
    inputs: tuple[inputs_mod.InputState, ...] = ()
    skip: tuple[Path, ...] = ()    # never copied: the environment, when inside the folder


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    label: str
    spec: CommandSpec
    root: Path                     # its scratch copy (the paper folder's layout)
    record: Mapping[str, Any]
    before: Snapshot
    after: Snapshot
    streams: Mapping[str, str]
    opens: Opens
    written: Written
    seconds: float


def perturb(spec: CommandSpec, environ: Mapping[str, str]) -> tuple[CommandSpec, str]:
    """Run 3's command and its words: one thread, or two where the default is one."""
    now = str(spec.threads) if spec.threads is not None else environ.get("OMP_NUM_THREADS")
    n = 2 if now == "1" else 1
    return replace(spec, threads=n), f"OMP_NUM_THREADS={n} MKL_NUM_THREADS={n}"


def _leaving(manifest: PaperManifest, name: str, paths: Sequence[str]) -> PaperManifest:
    """``manifest`` with ``paths`` declared as the command ``name``'s outputs: left out of a
    copy, as attest leaves them."""
    outs = tuple(OutputSpec(kind="file", path=p) for p in paths)
    return replace(manifest, commands=tuple(replace(c, outputs=outs) if c.name == name else c
                                            for c in manifest.commands))


class _Copies:
    """Fresh scratch copies: prepared from the folder, or cloned from a base copy in which
    the earlier commands ran."""

    def __init__(self, plan: Plan, work: Path, progress: Callable[[str], None]) -> None:
        self.plan, self.work, self.progress = plan, work, progress
        self.leave: tuple[str, ...] = ()
        self.base: Path | None = None
        self.made = 0

    def _prepare(self, dest: Path) -> None:
        manifest = _leaving(self.plan.manifest, self.plan.spec.name, self.leave)
        prepare_workdir(manifest, dest, skip=self.plan.skip)
        inputs_mod.place(self.plan.inputs, dest)

    def fresh(self) -> Path:
        self.made += 1
        dest = self.work / f"run-{self.made}" / "paper"
        dest.parent.mkdir(parents=True)
        commands = self.plan.manifest.commands
        earlier = commands[:[c.name for c in commands].index(self.plan.spec.name)]
        if not earlier:
            self._prepare(dest)
            return dest
        if self.base is None:
            self.base = self.work / f"base-{self.made}" / "paper"
            self.base.parent.mkdir(parents=True)
            self._prepare(self.base)
            for cmd in earlier:
                self.progress(f"{cmd.name} (an earlier command, once, for the runs to find "
                              "what it writes)")
                rec = run_command(replace(cmd, outputs=()), workdir=self.base,
                                  host=self.plan.host, settings=self.plan.settings,
                                  tensor_records=lambda files: {}, sandbox=self.plan.sandbox)
                if rec.get("status") != "ok":
                    raise PaperRunError("paper init: the earlier command " + attest_problems(
                        {cmd.name: rec})[0], hint="fix it first: `samebits attest` runs it "
                        "before this one; nothing was written")
        shutil.copytree(self.base, dest, symlinks=True)
        return dest


def _one(plan: Plan, copies: _Copies, spec: CommandSpec, label: str) -> Run:
    root = copies.fresh()
    trace = root.parent / "trace"
    before = snapshot(root)
    start = time.perf_counter()
    rec = run_command(spec, workdir=root, host=plan.host, settings=plan.settings,
                      tensor_records=lambda files: {}, sandbox=plan.sandbox, trace=trace)
    seconds = time.perf_counter() - start
    if rec.get("status") != "ok":
        raise PaperRunError(f"paper init: run {label}: " + attest_problems({spec.name: rec})[0],
                            hint="fix the command (it must run as `samebits attest` runs it: "
                            "in a scratch copy of the paper folder, in the sandbox); nothing "
                            "was written")
    after = snapshot(root)
    opens = read_opens(trace / "opens.jsonl")
    done = written(before, after, opens, root=root, paper=plan.manifest.folder)
    if done.changed_code:
        raise PaperCodeChanged(
            f"paper init: `{' '.join(spec.argv)}` changed the paper's own code: "
            + ", ".join(done.changed_code) + " (their bytes differ from the paper folder's "
            "after the run)", hint="a command must not write its code: attest records the "
            "code before it runs; write generated files elsewhere (an output folder)")
    streams = {s: (trace / s).read_text(errors="replace") for s in ("stdout", "stderr")}
    return Run(label=label, spec=spec, root=root, record=rec, before=before, after=after,
               streams=streams, opens=opens, written=done, seconds=seconds)


def run_three(plan: Plan, work: Path, *, progress: Callable[[str], None],
              info: Callable[[str], None], words: str) -> tuple[Run, Run, Run]:
    """Runs 1, 2 and 3 (module doc) in folders under ``work``; ``words`` says run 3's
    change."""
    copies = _Copies(plan, work, progress)
    progress("run 1/3 (as attest runs it)")
    first = _one(plan, copies, plan.spec, "1/3")
    again = tuple(p for p in first.written.existed if (plan.manifest.folder / p).is_file())
    if again:
        info(f"paper init: the paper folder holds files the command writes ("
             f"{', '.join(again[:5])}{', ...' if len(again) > 5 else ''}): attest leaves a "
             "declared output out of its copy, so run 1 runs again without them")
        copies.leave, copies.base = again, None
        progress("run 1/3 again (without the files an earlier run left)")
        first = _one(plan, copies, plan.spec, "1/3")
    info(f"paper init: run 1/3 took {first.seconds:.1f} s; two more to go")
    progress("run 2/3 (the same again)")
    second = _one(plan, copies, plan.spec, "2/3")
    progress(f"run 3/3 ({words})")
    third = _one(plan, copies, plan.perturbed, "3/3")
    return first, second, third

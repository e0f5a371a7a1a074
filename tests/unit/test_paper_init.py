"""``samebits paper init``'s pure parts: the kinds known from content, the proposed log regex,
the leave-out rule, the measured noise and the tolerance chosen from it, the manifest text
written (byte-stable, composed into an existing one), and the command line's bad input."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from samebits.errors import UsageError
from samebits_app import cli
from samebits_app.cmd_paper import choose_lock, default_name, parse_env
from samebits_app.paper import draft, kinds, manifestwrite, noise
from samebits_app.paper.manifest import CommandSpec, OutputSpec, read_manifest
from samebits_app.paper.runner import output_records

PNG = b"\x89PNG\r\n\x1a\n" + bytes(32)


def torch_zip() -> bytes:
    """What torch.save writes: a zip whose first entry is ``archive/data.pkl``."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    return out.getvalue()


# ---- the tolerance: |Δ| x margin, rounded up to one significant digit ---------------------


@pytest.mark.parametrize(("measured", "margin", "want"), [
    (2.5e-4, 10, 3e-3),      # the example
    (3e-4, 10, 3e-3),        # in decimal: 3e-4 x 10 is 3e-3, not 4e-3
    (9.5e-5, 10, 1e-3),      # rounding up carries into the next power of ten
    (1.0, 10, 10.0),
    (1.2e-7, 2, 3e-7),
    (0.0, 10, 0.0),          # bit-identical: zero
])
def test_round_up(measured: float, margin: float, want: float) -> None:
    """A tolerance is the measured difference times the margin, rounded up, 0 for 0."""
    assert noise.round_up(measured, margin) == want


# ---- kinds from content ------------------------------------------------------------------


@pytest.mark.parametrize(("path", "data", "tensors", "kind", "extra"), [
    ("out/m.json", b'{"loss": 0.5, "eval": {"acc": 0.9}}', None, "metrics", {"fmt": "json"}),
    ("out/log.jsonl", b'{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n', None, "curve",
     {"fmt": "jsonl", "step": "step"}),
    ("out/history.csv", b"epoch,loss\n1,0.5\n2,0.4\n", None, "curve",
     {"fmt": "csv", "step": "epoch"}),
    ("out/result.csv", b"mae,mse\n0.1,0.2\n", None, "metrics", {"fmt": "csv"}),
    ("data/sines.csv", b"a,b\n" + b"0.1,0.2\n" * 101, None, "file", {}),  # data: by bytes
    ("out/r.yaml", b"loss: 0.5\nacc: 0.9\n", None, "metrics", {"fmt": "yaml"}),
    ("out/run.log", b"epoch 1 loss 0.5\nepoch 2 loss 0.4\n", None, "curve", {"fmt": "regex"}),
    ("out/fig.png", PNG, None, "file", {}),
    ("out/notes.txt", b"trained\n", None, "file", {}),
    ("out/labels.json", b'{"a": "cat"}', None, "file", {}),       # JSON, no number in it
    ("out/pytorch_model.bin", torch_zip(), None, "file", {}),     # read by suffix only
    ("out/w.npy", b"\x93NUMPY", {"tensors": {"": {}}}, "tensors", {}),
    ("out/w.pt", b"junk", {"error": "not a zip file"}, "file", {}),
])
def test_kind_of(path: str, data: bytes, tensors: dict | None, kind: str, extra: dict) -> None:
    """Each output's kind comes from its content, proved by the reader attest uses."""
    found = kinds.kind_of(path, data, tensors)
    assert found.spec.kind == kind, found.what
    assert {k: getattr(found.spec, k) for k in extra} == extra
    assert found.spec.path == path


def test_kind_of_says_why_a_file_is_a_file() -> None:
    """A torch.save zip under another suffix, a PNG and an unreadable .pt each say what they
    are and why they compare by bytes."""
    assert "torch.save" in kinds.kind_of("m.bin", torch_zip()).what
    assert kinds.kind_of("a.png", PNG).what == "a PNG image: compared by bytes"
    assert "not a zip file" in kinds.kind_of("w.pt", b"x", {"error": "not a zip file"}).what


def test_proposed_regex_reads_every_series_and_shows_captures() -> None:
    """A log of two-word names gets one named group each; timing values and a line shape seen
    less often are not the proposal; its captures are the first such line's."""
    text = ("Epoch: 1 cost time: 12.3\n"
            "Epoch: 1, Steps: 40 | Train Loss: 0.5123 Vali Loss: 0.6 Test Loss: 0.7\n"
            "Epoch: 2 cost time: 11.3\n"
            "Epoch: 2, Steps: 40 | Train Loss: 0.4123 Vali Loss: 0.5 Test Loss: 0.6\n")
    p = kinds.propose_regex(text)
    assert p is not None
    assert (p.step, p.series, p.lines) == ("epoch", ("Steps", "Train_Loss", "Vali_Loss",
                                                     "Test_Loss"), 2)
    assert p.captures == (("epoch", "1"), ("Steps", "40"), ("Train_Loss", "0.5123"),
                          ("Vali_Loss", "0.6"), ("Test_Loss", "0.7"))
    spec = OutputSpec(kind="curve", stream="stdout", fmt="regex", regex=p.regex, step=p.step,
                      series=p.series)
    from samebits_app.paper.values import curve

    assert curve(text, spec)["series"]["Test_Loss"] == [0.7, 0.6]


@pytest.mark.parametrize(("text", "want"), [
    ("step=30 loss=0.25 lr=1e-3 time=0.5s\n", ("step", ("loss", "lr"))),
    ("Epoch [3/10] loss: 0.25\n", ("epoch", ("loss",))),
    ("iteration 7: acc 0.9\n", ("iteration", ("acc",))),
    # cleanrl's ppo.py prints each return as a one-element array (the corpus paper's stdout)
    ("global_step=44, episodic_return=[11.]\nSPS: 1234\n",
     ("global_step", ("episodic_return",))),
    ("loss 0.25\nno step here\n", None),
    ("step 3 done\n", None),
])
def test_proposed_regex_shapes(text: str, want: tuple | None) -> None:
    """A step word and its number, then name/number pairs; none without both."""
    p = kinds.propose_regex(text)
    assert (None if p is None else (p.step, p.series)) == want


# ---- the leave-out rule ----------------------------------------------------------------------


@pytest.mark.parametrize(("rel", "why"), [
    ("__pycache__/train.cpython-311.pyc", "under __pycache__/"),
    ("src/.cache/x/y.bin", "under .cache/"),
    ("wandb/run-20240101_000000-abc/files/config.yaml", "under wandb/"),
    ("runs/events.out.tfevents.1700000000.host.1.0", "events.out.tfevents.*"),
    ("out/part.tmp", "*.tmp"),
    ("out/metrics.json", None),
    ("lightning_logs/version_0/metrics.csv", None),
])
def test_left_out_rule(rel: str, why: str | None) -> None:
    """Caches and temporary files are never outputs, by a written rule that says why."""
    got = draft.left_out(rel)
    assert (got if got is None else got.split(" (")[0]) == why


# ---- measuring three runs and choosing tolerances ------------------------------------------


def three_runs(tmp_path: Path, *values: dict) -> list[noise.Side]:
    """The records attest writes of ``out/m.json`` holding each of ``values`` in turn."""
    spec = CommandSpec(name="train", argv=("python", "train.py"), outputs=(
        OutputSpec(kind="metrics", path="out/m.json", fmt="json"),))
    sides = []
    for k, v in enumerate(values):
        root = tmp_path / f"run-{k}"
        (root / "out").mkdir(parents=True)
        (root / "out" / "m.json").write_text(json.dumps(v))
        (rec,) = output_records(spec, root=root, streams={"stdout": "", "stderr": ""},
                                tensor_records=lambda files: {})
        sides.append(noise.Side(record=rec, file=root / "out" / "m.json"))
    return sides


def metrics_kind() -> kinds.Kinded:
    return kinds.kind_of("out/m.json", b'{"loss": 0.5, "acc": 0.9}')


def test_decide_measures_the_perturbed_run(tmp_path: Path) -> None:
    """Alike runs the same, the perturbed one 2.5e-4 away in one metric: that metric gets
    3e-3 and a comment saying so, the other 0."""
    sides = three_runs(tmp_path, {"loss": 0.5, "acc": 0.9}, {"loss": 0.5, "acc": 0.9},
                       {"loss": 0.50025, "acc": 0.9})
    d = noise.decide(metrics_kind(), sides, compared=[None, None], margin=10, accept=False,
                     perturbation="OMP=1 vs 2")
    assert d.spec is not None and not d.noisy and d.alike is None
    assert {n: t.atol for n, t in d.spec.metrics} == {"loss": 3e-3, "acc": 0.0}
    assert dict(d.comments)["loss"].startswith("OMP=1 vs 2: max |Δ| 2.5e-04 (rel 5.0e-04)")
    assert dict(d.comments)["loss"].endswith("; x10")
    assert dict(d.comments)["acc"] == "the same in all three runs"


def test_decide_names_noise_between_alike_runs(tmp_path: Path) -> None:
    """Two alike runs that disagree: the metric is named with its first differing values and
    left out (kept, its tolerance covering the noise, with accept)."""
    sides = three_runs(tmp_path, {"loss": 0.5, "acc": 0.9}, {"loss": 0.75, "acc": 0.9},
                       {"loss": 0.6, "acc": 0.9})
    d = noise.decide(metrics_kind(), sides, compared=[None, None], margin=10, accept=False,
                     perturbation="OMP=1 vs 2")
    (n,) = d.noisy
    assert (n.element, n.first, n.accepted) == ("loss", "loss: 0.5 vs 0.75", False)
    assert "unseeded randomness" in n.cause
    assert d.spec is not None and [m for m, _ in d.spec.metrics] == ["acc"]
    kept = noise.decide(metrics_kind(), sides, compared=[None, None], margin=10, accept=True,
                        perturbation="OMP=1 vs 2")
    assert kept.spec is not None and dict(kept.spec.metrics)["loss"].atol == 3.0
    assert kept.noisy[0].accepted


def test_decide_a_file_whose_bytes_change_is_left_out(tmp_path: Path) -> None:
    """A file output compares by bytes: one whose bytes change between alike runs is left out,
    with the byte and the line where they first differ and a timestamp named as the cause."""
    spec = CommandSpec(name="t", argv=("x",), outputs=(OutputSpec(kind="file", path="o.txt"),))
    sides = []
    for k, text in enumerate(["run at 2024-01-01 10:00:01\n", "run at 2024-01-01 10:00:07\n",
                              "run at 2024-01-01 10:00:09\n"]):
        root = tmp_path / str(k)
        root.mkdir()
        (root / "o.txt").write_text(text)
        (rec,) = output_records(spec, root=root, streams={"stdout": "", "stderr": ""},
                                tensor_records=lambda files: {})
        sides.append(noise.Side(record=rec, file=root / "o.txt"))
    d = noise.decide(kinds.kind_of("o.txt", b"run at"), sides, compared=[None, None],
                     margin=10, accept=True, perturbation="OMP=1 vs 2")
    assert d.spec is None
    (n,) = d.noisy
    assert n.first == "byte 25: 'run at 2024-01-01 10:00:01' vs 'run at 2024-01-01 10:00:07'"
    assert n.cause == "usually a timestamp written into the output"


# ---- the manifest text -----------------------------------------------------------------------


def measured(tmp_path: Path, name: str = "train") -> manifestwrite.Measured:
    sides = three_runs(tmp_path / name, {"loss": 0.5, "acc": 0.9}, {"loss": 0.5, "acc": 0.9},
                       {"loss": 0.50025, "acc": 0.9})
    d = noise.decide(metrics_kind(), sides, compared=[None, None], margin=10, accept=False,
                     perturbation="OMP=1 vs 2")
    return manifestwrite.Measured(name=name, argv=("python", f"{name}.py", "--out", "o u t"),
                                  perturbation="OMP_NUM_THREADS=1 MKL_NUM_THREADS=1",
                                  margin=10, decisions=(d,), env=(("SEED", "0"),),
                                  timeout=900.0)


def test_command_block_is_read_back_by_the_manifest_reader(tmp_path: Path) -> None:
    """A new manifest: format 1, the lock, the command as a shell would split it, its env and
    timeout, each tolerance with its comment, the inputs; the real reader reads it back."""
    block = manifestwrite.command_block(measured(tmp_path))
    inputs = manifestwrite.inputs_block([("data/x.csv", "ab" * 32, "read by train")])
    text = manifestwrite.compose(None, lockfile="conda-lock.yml", name="train", block=block,
                                 inputs=inputs)
    assert "loss = { atol = 0.003 }  # OMP=1 vs 2: max |Δ| 2.5e-04 (rel 5.0e-04); x10\n" in text
    assert "acc = { atol = 0.0 }  # the same in all three runs\n" in text
    assert "[[inputs]]  # read by train\n" in text
    (tmp_path / "samebits-paper.toml").write_text(text)
    m = read_manifest(tmp_path)
    (c,) = m.commands
    assert (c.argv, c.env, c.timeout) == (("python", "train.py", "--out", "o u t"),
                                          (("SEED", "0"),), 900.0)
    assert [(i.path, i.sha256) for i in m.inputs] == [("data/x.csv", "ab" * 32)]
    assert dict(c.outputs[0].metrics)["loss"].atol == 0.003


def test_manifest_text_is_byte_stable(tmp_path: Path) -> None:
    """The same measurements give the same bytes (golden digest: change it deliberately)."""
    texts = []
    for k in range(2):
        block = manifestwrite.command_block(measured(tmp_path / str(k)))
        texts.append(manifestwrite.compose(None, lockfile="conda-lock.yml", name="train",
                                           block=block, inputs=""))
    assert texts[0] == texts[1]
    assert hashlib.sha256(texts[0].encode()).hexdigest()[:16] == "2dca6f0e8b7d001d"


def test_compose_appends_a_second_command_and_replaces_in_place(tmp_path: Path) -> None:
    """An existing hand-written manifest keeps its text: a new command goes after the last
    one, a command of the same name is replaced where it was, comments above it included."""
    old = ('# my paper\nformat = 1\ntitle = "x"\n\n[run]\nenv = { SEED = "0" }\n\n'
           '# train it\n[[commands]]\nname = "train"\nrun = "python train.py"\n\n'
           '[[commands.outputs]]\npath = "out/a.json"\nkind = "file"\n\n'
           '[[inputs]]\npath = "d.txt"\nsha256 = "' + "0" * 64 + '"\n')
    eval_block = manifestwrite.command_block(measured(tmp_path, "eval"))
    text = manifestwrite.compose(old, lockfile="conda-lock.yml", name="eval", block=eval_block,
                                 inputs="")
    assert text.startswith('# my paper\nformat = 1\ntitle = "x"\n\n[run]\nenv = { SEED = "0" }\n')
    assert text.index('name = "train"') < text.index('name = "eval"') < text.index("[[inputs]]")
    import tomllib

    assert tomllib.loads(text) == manifestwrite.expected(tomllib.loads(old), lockfile="x",
                                                         block=eval_block, inputs=[])
    train_block = manifestwrite.command_block(measured(tmp_path, "train"))
    again = manifestwrite.compose(text, lockfile="conda-lock.yml", name="train",
                                  block=train_block, inputs="")
    assert "# train it" not in again and again.count("[[commands]]") == 2
    assert again.index('name = "train"') < again.index('name = "eval"')


def test_check_text_refuses_a_layout_it_cannot_compose(tmp_path: Path) -> None:
    """Commands written inline: the composed text would not parse to the document wanted;
    refused by name, nothing written."""
    import tomllib

    old = 'format = 1\ncommands = [{ name = "train", run = "python t.py" }]\n'
    block = manifestwrite.command_block(measured(tmp_path, "eval"))
    text = manifestwrite.compose(old, lockfile="conda-lock.yml", name="eval", block=block,
                                 inputs="")
    want = manifestwrite.expected(tomllib.loads(old), lockfile="x", block=block, inputs=[])
    with pytest.raises(manifestwrite.ManifestTextError, match="samebits-paper.toml: its text"):
        manifestwrite.check_text(text, want, where=tmp_path / "samebits-paper.toml")


# ---- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "want"), [
    (["python", "train.py", "--steps", "3"], "train"),
    (["python", "-u", "scripts/eval_model.py"], "eval_model"),
    (["python", "-m", "pkg.finetune"], "finetune"),
    (["python", "run all.py"], "run-all"),
    (["bash", "run.sh"], "bash"),
    (["./go"], "go"),
])
def test_default_name(argv: list[str], want: str) -> None:
    """The command's name in the manifest defaults to its script's."""
    assert default_name(argv) == want


def test_parse_env() -> None:
    """--env NAME=VALUE pairs in order, a repeated name keeping its last value; bad ones and
    samebits' own variables refused by name."""
    assert parse_env(["A=1", "B=x=y", "A=2"]) == (("B", "x=y"), ("A", "2"))
    with pytest.raises(UsageError, match=r"--env 'A': expected NAME=VALUE"):
        parse_env(["A"])
    with pytest.raises(UsageError, match=r"--env 'PATH=/x': samebits sets PATH"):
        parse_env(["PATH=/x"])


def test_choose_lock(tmp_path: Path) -> None:
    """The one lock in the folder or its lockfiles/; conda-lock.yml when there is none yet;
    two is a question (exit 2)."""
    assert choose_lock(tmp_path, None, None) == "conda-lock.yml"
    (tmp_path / "lockfiles").mkdir()
    (tmp_path / "lockfiles" / "p.conda-lock.yml").write_text("x")
    assert choose_lock(tmp_path, None, None) == "lockfiles/p.conda-lock.yml"
    (tmp_path / "pixi.lock").write_text("x")
    with pytest.raises(UsageError, match=r"2 locks: lockfiles/p.conda-lock.yml, pixi.lock"):
        choose_lock(tmp_path, None, None)
    assert choose_lock(tmp_path, Path("pixi.lock"), None) == "pixi.lock"


def bad(tmp_path: Path) -> Path:
    paper = tmp_path / "paper"
    paper.mkdir()
    (paper / "train.py").write_text("print('step 1 loss 0.5')\n")
    return paper


@pytest.mark.parametrize(("args", "message"), [
    (["{missing}", "--", "python", "train.py"], "error: {missing}: no such folder"),
    (["{paper}"], "error: no command to run: give it after --"),
    (["{paper}", "--margin", "0", "--", "python", "train.py"], "error: --margin 0: expected a "
     "number > 0"),
    (["{paper}", "--timeout", "-1", "--", "python", "train.py"], "error: --timeout -1: expected "
     "seconds > 0"),
    (["{paper}", "--name", "a b", "--", "python", "train.py"], "error: --name 'a b': expected "
     "letters"),
    (["{paper}", "--input", "/etc/hostname", "--", "python", "train.py"],
     "error: --input /etc/hostname: not inside the paper folder"),
    (["{paper}", "--input", "nope.csv", "--", "python", "train.py"],
     "error: --input nope.csv: no such file"),
    (["{paper}", "--lock", "nope.yml", "--", "python", "train.py"],
     "error: --lock nope.yml: no such file"),
])
def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                            message: str) -> None:
    """Bad input: exit 2, the flag and its value named, a hint, no traceback."""
    paper = bad(tmp_path)
    fill = {"paper": str(paper), "missing": str(tmp_path / "missing")}
    rc = cli.main(["paper", "init", *(a.format(**fill) for a in args)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message.format(**fill) in err and "hint: " in err and "Traceback" not in err


def test_existing_manifest_problems_are_listed(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """An existing manifest with problems: exit 2, each named by file, key and value."""
    paper = bad(tmp_path)
    (paper / "samebits-paper.toml").write_text(
        'format = 1\n[[commands]]\nname = "t"\nrun = "python t.py"\n'
        '[[commands.outputs]]\npath = "o"\nkind = "image"\n')
    rc = cli.main(["paper", "init", str(paper), "--", "python", "train.py"])
    err = capsys.readouterr().err
    assert rc == 2
    assert (f'{paper / "samebits-paper.toml"}: commands[0].outputs[0].kind = "image": expected '
            "one of file, tensors, metrics, curve") in err


def test_a_declared_name_needs_replace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A command the manifest already declares is not measured again without --replace."""
    paper = bad(tmp_path)
    (paper / "samebits-paper.toml").write_text(
        'format = 1\n[[commands]]\nname = "train"\nrun = "python train.py"\n')
    rc = cli.main(["paper", "init", str(paper), "--", "python", "train.py"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{paper / 'samebits-paper.toml'}: a command named 'train' is already declared" in err
    assert "--replace" in err


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """--help: the usage with the command after --, every option, the exit codes, an example
    and the docs page."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["paper", "init", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert out.startswith("usage: samebits paper init PAPER [options] -- COMMAND [ARGS...]")
    for word in ("--prefix", "--name", "--margin", "--accept-noise", "--input", "--env",
                 "--timeout", "--replace", "--lock", "--json", "exit codes: 0 written",
                 "1 not reproducible", "2 bad input", "docs/reference/paper-manifest.md"):
        assert word in " ".join(out.split()), word


def test_a_log_whose_steps_repeat_says_so() -> None:
    """An ensemble's second model logs its epochs again: the table says that the last line of
    a step is the one compared."""
    text = "".join(f"epoch: {e}, loss: {1 / e:.3f}, accuracy: 0.5\n" for m in (1, 2)
                   for e in (1, 2, 3))
    found = kinds.stream_kind("stdout", text)
    assert found is not None and found.spec.series == ("loss", "accuracy")
    assert found.what.endswith("2 series over 3 steps; 3 lines repeat a step, and the last "
                               "line of a step is the one compared")


def test_a_binary_file_shows_its_bytes_where_they_differ(tmp_path: Path) -> None:
    """Two PDFs that differ in their creation date: the bytes there are shown, and the cause
    named is the timestamp, not randomness."""
    for name, stamp in (("a.pdf", b"20261205214512"), ("b.pdf", b"20261205214519")):
        (tmp_path / name).write_bytes(b"%PDF-1.4\n\xff\xfe" + b"x" * 100
                                      + b"/CreationDate (D:" + stamp + b"Z)\n")
    gap = noise.Gap(first=noise.first_byte(tmp_path / "a.pdf", tmp_path / "b.pdf"),
                    comparable=False)
    assert gap.first == r"byte 141: b'(D:20261205214512Z)\n' vs b'(D:20261205214519Z)\n'"
    assert noise.cause("", gap, tmp_path / "a.pdf", tmp_path / "b.pdf") == (
        "usually a timestamp written into the output: a plot's creation date (matplotlib "
        "writes SOURCE_DATE_EPOCH's instead where it is set: --env SOURCE_DATE_EPOCH=0, with "
        "--replace)")
    for name in ("a.bin", "b.bin"):  # no plot: the timestamp alone
        (tmp_path / name).write_bytes((tmp_path / name.replace("bin", "pdf")).read_bytes())
    assert noise.cause("", gap, tmp_path / "a.bin", tmp_path / "b.bin") == (
        "usually a timestamp written into the output")

"""The corpus runner (tests/papers/corpus_runs.py) on the real scheduler of ``audit --many``
(samebits_app.audit.many): the table is rendered from the result files in the corpus' order,
byte for byte the format of tests/papers/RESULTS.md, whatever --jobs; a result that stands is
not run again; a crash or a timeout is its paper's reason and stops no other; a bad corpus
file is named by file, entry and key. The papers' commands here are small real processes
(the real paper process only where its first step fails at once: no download)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import pytest

from samebits.errors import InputError
from samebits_app.audit.many import run_tasks, task_record
from tests.papers import corpus_runs
from tests.papers.corpus import HERE, STEPS, InitResult, Result, table
from tests.papers.corpus_runs import (
    RESULT,
    RUNS,
    paper_key,
    paper_task,
    paper_timeout,
    parser,
    read_corpus,
    read_result,
    render,
    write_result,
)

NAMES = ("alpha", "beta", "gamma")


def write_corpus(folder: Path, names: tuple[str, ...] = NAMES, *, source: str = "nothing.txt",
                 manifest: tuple[str, ...] | None = None, extra: str = "") -> Path:
    """A corpus file and a folder per paper (a manifest in those of ``manifest``, default
    all)."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, name in enumerate(names):
        (folder / name).mkdir(exist_ok=True)
        if manifest is None or name in manifest:
            (folder / name / "samebits-paper.toml").write_text("# a manifest\n")
        entries.append(f'[[paper]]\nname = "{name}"\nrepo = "authors/{name}"\n'
                       f'commit = "{i:040d}"\nfrom = "{source}"\ntorch = "2.{i}.0"\n')
    path = folder / "corpus.toml"
    path.write_text("\n".join(entries) + extra)
    return path


def args_for(corpus: Path, out: Path, *more: str) -> argparse.Namespace:
    return parser().parse_args(["--corpus", str(corpus), "--out", str(out), *more])


def finished(i: int, name: str) -> Result:
    """A paper's row as a whole run leaves it."""
    return Result(name=name, torch=f"2.{i}.0", source="nothing.txt", python="3.11",
                  steps={s: (0, 10.4 + i + k) for k, s in enumerate(STEPS)},
                  verdicts={"audit": "bit-identical", "omp1": "within-tolerance"})


def copier(src: Path, after: Path | None = None) -> tuple[str, ...]:
    """A paper's process that leaves the row ``src`` as its result (its last word: where),
    once the file ``after`` is there (at most 60 s)."""
    code = ("import os, shutil, sys, time\n"
            "end = time.monotonic() + 60\n"
            "while sys.argv[1] and not os.path.exists(sys.argv[1]) and time.monotonic() < end:\n"
            "    time.sleep(0.05)\n"
            "shutil.copy(sys.argv[2], sys.argv[3])\n")
    return (sys.executable, "-c", code, str(after or ""), str(src))


def test_a_row_is_the_format_of_results_md() -> None:
    """The table of a finished paper is RESULTS.md's header and row, character for
    character (the committed file's first row, rebuilt from its cells)."""
    committed = (HERE / "RESULTS.md").read_text().splitlines()
    start = next(i for i, line in enumerate(committed) if line.startswith("| paper |"))
    header, rule, first = committed[start:start + 3]
    cells = [c.strip() for c in first.strip("|").split("|")]
    steps = {s: (int(c.split()[0]), float(c.split("(")[1].split()[0]))
             for s, c in zip(STEPS, cells[4:11], strict=True) if c != "-"}
    row = Result(name=cells[0], source=cells[1].strip("`"), torch=cells[2], python=cells[3],
                 steps=steps, verdicts={"audit": cells[11], "omp1": cells[12]})
    assert table([row]) == f"{header}\n{rule}\n{first}\n"


def test_a_result_file_is_byte_stable(tmp_path: Path) -> None:
    """The same row, the same bytes; read back, the same row and table."""
    row = finished(1, "beta")
    write_result(tmp_path / "a.json", row, paper_init=False)
    write_result(tmp_path / "b.json", dataclasses.replace(row), paper_init=False)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    back = read_result(tmp_path / "a.json", paper_init=False)
    assert back == row and table([back]) == table([row])
    assert read_result(tmp_path / "a.json", paper_init=True) is None  # another mode's
    init = InitResult(name="beta", steps={"init": (0, 1.5)}, rows=[("train", "loss", "0",
                                                                     "rtol 1e-06")])
    write_result(tmp_path / "i.json", init, paper_init=True)
    assert read_result(tmp_path / "i.json", paper_init=True) == init


def test_the_table_does_not_depend_on_jobs(tmp_path: Path) -> None:
    """Three papers ending in the corpus' order with --jobs 1, in its reverse with --jobs 3
    (each one waits for the next one's result): the same table bytes, rows in the corpus'
    order; a second run skips every paper; --cold is another key, no result yet."""
    corpus = write_corpus(tmp_path / "corpus")
    papers = read_corpus(corpus)
    for i, name in enumerate(NAMES):
        write_result(tmp_path / "rows" / f"{name}.json", finished(i, name), paper_init=False)
    texts = []
    for jobs in (1, 3):
        out = tmp_path / f"out{jobs}"
        args = args_for(corpus, out, "--jobs", str(jobs))
        tasks = [paper_task(p, args) for p in papers]
        tasks = [dataclasses.replace(t, argv=(*copier(
            tmp_path / "rows" / f"{t.name}.json",
            tasks[i + 1].proof if jobs > 1 and i + 1 < len(tasks) else None), str(t.proof)))
            for i, t in enumerate(tasks)]
        results = run_tasks(tasks, out / RUNS, jobs=jobs, clear=(RESULT,))
        assert [r.status for r in results] == ["done"] * 3
        ended = sorted(NAMES, key=lambda n: (out / RUNS / n / RESULT).stat().st_mtime_ns)
        assert ended == (list(NAMES) if jobs == 1 else list(reversed(NAMES)))
        text, ok = render(papers, out, paper_init=False, cold=False)
        texts.append(text)
        again = run_tasks(tasks, out / RUNS, jobs=jobs, clear=(RESULT,))
        assert [r.status for r in again] == ["skipped"] * 3
        assert render(papers, out, paper_init=False, cold=False) == (text, True)
    assert texts[0] == texts[1] == table([finished(i, n) for i, n in enumerate(NAMES)])
    cold = render(papers, tmp_path / "out1", paper_init=False, cold=True)[0]
    assert cold.count("no result for this samebits version, mode and corpus entry yet") == 3


def test_a_crash_and_a_timeout_are_their_rows_reasons(tmp_path: Path) -> None:
    """One paper crashes in its lock step, one runs past its timeout in its audit (its
    environment removed all the same), one finishes: the two reasons under the table, the
    finished row as it is, the run not accepted."""
    corpus = write_corpus(tmp_path / "corpus")
    papers = read_corpus(corpus)
    out = tmp_path / "out"
    args = args_for(corpus, out)
    write_result(tmp_path / "alpha.json", finished(0, "alpha"), paper_init=False)
    env = out / "gamma" / "env"
    crash = "print('  lock     samebits lock beta', flush=True); raise RuntimeError('boom')"
    hang = (f"import os, time; os.makedirs({str(env)!r}); "
            "print('  audit    samebits audit gamma', flush=True); time.sleep(120)")
    a, b, c = (paper_task(p, args) for p in papers)
    tasks = [dataclasses.replace(a, argv=(*copier(tmp_path / "alpha.json"), str(a.proof))),
             dataclasses.replace(b, argv=(sys.executable, "-c", crash)),
             dataclasses.replace(c, argv=(sys.executable, "-c", hang), timeout=2)]
    results = run_tasks(tasks, out / RUNS, jobs=3, clear=(RESULT,))
    assert [r.status for r in results] == ["done", "failed", "timeout"]
    assert not env.exists()
    text, ok = render(papers, out, paper_init=False, cold=False)
    assert not ok
    assert text.splitlines()[2] == table([finished(0, "alpha")]).splitlines()[2]
    assert text.splitlines()[3:] == [
        "| beta | `nothing.txt` | 2.1.0 | ? | - | - | - | - | - | - | - | - | - |",
        "| gamma | `nothing.txt` | 2.2.0 | ? | - | - | - | - | - | - | - | - | - |",
        "",
        "- beta: failed (exit 1), in lock: RuntimeError: boom: see runs/beta/log.txt",
        "- gamma: stopped after 2 s (its timeout), in audit: see runs/gamma/log.txt"]


def test_main_runs_a_small_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole runner on a corpus of two papers, each in its real process: alpha's init
    finds no authors' file (exit 2, its row), beta has no manifest (its process crashes: its
    reason); run again, alpha stands, beta runs again, the same RESULTS.md bytes."""
    corpus = write_corpus(tmp_path / "corpus", NAMES[:2], manifest=("alpha",))
    out = tmp_path / "out"
    argv = ["--corpus", str(corpus), "--out", str(out), "--jobs", "2"]
    assert corpus_runs.main(argv) == 1
    first = (out / "RESULTS.md").read_text()
    lines = first.splitlines()
    assert lines[2].startswith("| alpha | `nothing.txt` | 2.0.0 | ? | 2 (")
    assert lines[2].endswith(" s) | - | - | - | - | - | - | - | - |")
    assert lines[3] == "| beta | `nothing.txt` | 2.1.0 | ? | - | - | - | - | - | - | - | - | - |"
    assert lines[5].startswith("- beta: failed (exit 1): FileNotFoundError: ")
    assert lines[5].endswith("samebits-paper.toml': see runs/beta/log.txt")
    rec = task_record(out / RUNS / "alpha")
    assert rec is not None and rec["status"] == "done"
    assert rec["key"] == paper_key(read_corpus(corpus)[0], paper_init=False, cold=False)
    assert rec["timeout"] == paper_timeout(read_corpus(corpus)[0], paper_init=False) == 11400
    assert "$ samebits init alpha --from " in (out / "alpha" / "log.txt").read_text()
    capsys.readouterr()
    assert corpus_runs.main(argv) == 1
    said = capsys.readouterr().out
    assert "alpha: skipped, its result stands" in said and "beta: failed" in said
    assert (out / "RESULTS.md").read_text() == first


@pytest.mark.parametrize(("text", "folders", "expected"), [
    ('[[paper]]\nname = "a"\n', ("a",),
     'corpus.toml: [[paper]] 1: repo = null: expected a string'),
    ('[[paper]]\nname = "a b"\nrepo = "r"\ncommit = "c"\nfrom = "f"\ntorch = "t"\n', (),
     "corpus.toml: [[paper]] 1: name = \"a b\": a folder name of letters, digits, '.', '_' "
     "and '-' (not 'slurm'), at most 100 characters"),
    ('[[paper]]\nname = "runs"\nrepo = "r"\ncommit = "c"\nfrom = "f"\ntorch = "t"\n',
     ("runs",), 'corpus.toml: [[paper]] 1: name = "runs": the runner\'s own name in OUT; '
     "choose another"),
    ('[[paper]]\nname = "a"\nrepo = "r"\ncommit = "c"\nfrom = "f"\ntorch = "t"\n', (),
     'corpus.toml: [[paper]] 1: name = "a": no folder a'),
    ("[[paper]\n", (), "corpus.toml: not TOML: "),
    ('title = "none"\n', (), "corpus.toml: expected [[paper]] tables, one per paper"),
])
def test_a_bad_corpus_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    text: str, folders: tuple[str, ...],
                                    expected: str) -> None:
    """Each bad corpus file: one error naming the file, the entry and the key."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.toml").write_text(text)
    for name in folders:
        (tmp_path / name).mkdir()
    with pytest.raises(InputError) as got:
        read_corpus(tmp_path / "corpus.toml")
    assert str(got.value).startswith(expected)


def test_a_second_paper_of_one_name(tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path, ("a", "a"))
    with pytest.raises(InputError, match=r'\[\[paper\]\] 2: name = "a": a second paper of '):
        read_corpus(corpus)


@pytest.mark.parametrize(("argv", "expected"), [
    (["nosuch"], "error: not in corpus.toml: nosuch\n"),
    (["--corpus", "missing.toml"], "error: missing.toml: No such file or directory\n"),
])
def test_a_bad_name_runs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str], argv: list[str],
                                 expected: str) -> None:
    """An unknown paper or corpus file: exit 2, one line, nothing written."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path)
    assert corpus_runs.main(["--corpus", "corpus.toml", "--out", "out", *argv]) == 2
    assert capsys.readouterr().err == expected
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("argv", "expected"), [
    (["--jobs", "0"], "--jobs 0: expected 1 or more"),
    (["--wait"], "--max-running, --wait and --sbatch go with --slurm"),
    (["--slurm", "--gather"], "--slurm and --gather: one at a time"),
    (["a", "b", "--task-result", "r.json"], "--task-result runs one paper: give its NAME"),
])
def test_bad_options(capsys: pytest.CaptureFixture[str], argv: list[str],
                     expected: str) -> None:
    with pytest.raises(SystemExit) as got:
        corpus_runs.main(argv)
    assert got.value.code == 2 and expected in capsys.readouterr().err


def test_a_paper_s_timeout_is_its_steps_limits() -> None:
    """The default run's seven steps, paper init's per call, and ten minutes."""
    paper = {"name": "a", "paper_init": [["--name", "x"], ["--name", "y"]]}
    assert paper_timeout(paper, paper_init=False) == 300 + 600 + 1800 + 900 + 1800 + 3600 \
        + 1800 + 600
    assert paper_timeout(paper, paper_init=True) == 300 + 600 + 1800 + 900 + 2 * 3600 \
        + 1800 + 3600 + 1800 + 600

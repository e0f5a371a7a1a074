"""``samebits audit URL --commit SHA``: the example paper audited from a real git repository made
in the test (``file://``, tests/fixtures/paper_repo.py), at the commit its authors published
and at a later one; a commit the repository does not have; a branch resolved once; the same
paper deposited as a .tar.gz and proved by its sha256."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.audit import environ
from tests.fixtures.paper_repo import (  # noqa: F401  (fixtures)
    PaperRepo,
    elves,
    paper_repo,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)

pytestmark = pytest.mark.slow  # the paper attested once, then audited: a minute or two


def audit(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samebits", "audit", *args], cwd=cwd,
                          env=environ(OMP_NUM_THREADS="2"), capture_output=True, text=True,
                          timeout=timeout)


def here(repo: PaperRepo) -> list[str]:
    return ["--prefix", str(repo.prefix), "--workload-python", sys.executable]


def test_the_published_commit_is_its_verdict(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """The commit the authors published, fetched alone into the cache: the paper's command and
    the workloads rerun, bit-identical; the report and the reviewer's attestation name the URL
    and the commit, and the verdict says the attestation names the commit before it."""
    res = audit(paper_repo.url, "--commit", paper_repo.published, "--path", "paper",
                *here(paper_repo), "--cache-dir", str(tmp_path / "cache"), "--out", "out",
                cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stdout.startswith(f"source: {paper_repo.url} at commit {paper_repo.published}, "
                                 "folder paper (fetched)\n")
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert doc["verdict"]["level"] == "bit-identical"
    source = {"kind": "git", "url": paper_repo.url, "commit": paper_repo.published,
              "ref": None, "sha256": None, "path": "paper"}
    assert doc["inputs"]["source"] == source
    note = doc["verdict"]["notes"][0]
    assert note.startswith("the authors' attestation names another commit of the code: they "
                           f"attested git commit {paper_repo.attested}; this audit is of commit "
                           f"{paper_repo.published} of {paper_repo.url}")
    assert not any(n.startswith("the authors attested at git commit")
                   for n in doc["verdict"]["notes"])
    reviewer = json.loads((tmp_path / "out" / "reviewer.attestation.json").read_text())
    assert reviewer["predicate"]["source"] == source
    assert f"{paper_repo.url} --commit {paper_repo.published} --path paper" in \
        (tmp_path / "out" / "audit.md").read_text()
    assert paper_repo.published in (tmp_path / "out" / "audit.html").read_text()
    checkout = tmp_path / "cache" / "sources" / "git" / paper_repo.published
    assert subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], text=True,
                          capture_output=True, timeout=60).stdout.strip() == paper_repo.published
    assert not (checkout / ".git" / "FETCH_HEAD").exists()  # it would name the URL as given


def test_a_later_commit_is_its_own_verdict(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """The commit after the attestation changed train.py: not reproduced, the code named."""
    res = audit(paper_repo.url, "--commit", paper_repo.changed, "--path", "paper",
                *here(paper_repo), "--no-workloads", "--cache-dir", str(tmp_path / "cache"),
                "--out", "out", "--json", cwd=tmp_path)
    assert res.returncode == 1, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["verdict"]["level"] == "not-reproduced"
    first = doc["verdict"]["reasons"][0]
    assert first["cause"] == "code" and first["text"].startswith("code differs: train.py")
    assert doc["inputs"]["source"]["commit"] == paper_repo.changed


def test_a_missing_commit_is_exit_2_and_nothing_written(paper_repo: PaperRepo,
                                                        tmp_path: Path) -> None:
    """A commit the repository does not have: one error naming the URL and the commit, exit 2;
    no report, no cache entry."""
    missing = "0123456789abcdef0123456789abcdef01234567"
    res = audit(paper_repo.url, "--commit", missing, *here(paper_repo), "--cache-dir",
                str(tmp_path / "cache"), "--out", "out", cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    assert f"error: {paper_repo.url}: no commit {missing} there" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "cache" / "sources" / "git" / missing).exists()
    assert [p.name for p in (tmp_path / "cache" / "sources" / "git").iterdir()] == []


def test_a_branch_is_resolved_once_and_said(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """--ref main: resolved with git ls-remote to the newest commit, said, recorded."""
    res = audit(paper_repo.url, "--ref", "main", "--path", "paper", *here(paper_repo),
                "--no-workloads", "--cache-dir", str(tmp_path / "cache"), "--out", "out",
                cwd=tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]
    assert (f"--ref main is refs/heads/main at commit {paper_repo.changed} ({paper_repo.url})"
            in res.stderr)
    src = json.loads((tmp_path / "out" / "audit.json").read_text())["inputs"]["source"]
    assert (src["ref"], src["commit"]) == ("main", paper_repo.changed)


def test_an_archive_proved_by_its_sha256(paper_repo: PaperRepo, tmp_path: Path) -> None:
    """The published commit as a deposit (.tar.gz): downloaded through samebits.net with its
    size said, proved, unpacked; its one folder is the root. The verdict says the archive
    names no commit while the attestation does. Another sha256: exit 2, nothing kept."""
    url = paper_repo.archive.as_uri()
    cache = tmp_path / "cache"
    res = audit(url, "--sha256", paper_repo.archive_sha256, "--path", "paper",
                *here(paper_repo), "--no-workloads", "--cache-dir", str(cache), "--out", "out",
                cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"downloading {url} ({paper_repo.archive.stat().st_size:,} bytes)" in res.stderr
    doc = json.loads((tmp_path / "out" / "audit.json").read_text())
    assert doc["verdict"]["level"] == "environment-identical"
    assert doc["inputs"]["source"]["sha256"] == paper_repo.archive_sha256
    assert any(f"they attested git commit {paper_repo.attested}" in n and "which names no commit"
               in n for n in doc["verdict"]["notes"])
    code = next(s for s in doc["steps"] if s["name"] == "code")
    assert code["status"] == "ok", code
    wrong = "f" * 64
    res = audit(url, "--sha256", wrong, *here(paper_repo), "--cache-dir", str(cache),
                "--out", "out2", cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    assert f"sha256 is {paper_repo.archive_sha256}, --sha256 says {wrong}" in res.stderr
    assert not (cache / "sources" / "archives" / wrong).exists() or not any(
        (cache / "sources" / "archives" / wrong).iterdir())
    assert not (tmp_path / "out2").exists()


def test_a_bundle_in_the_paper_folder_makes_the_install_offline(paper_repo: PaperRepo,
                                                               tmp_path: Path) -> None:
    """The authors also committed their bundle: with --target, its archives go into the
    (empty) cache first, every hash checked, and the lock installs from there, with no
    --find-links (without the bundle, the lock's file:// archives are not read: exit 1)."""
    from tests.fixtures.paper_repo import commit_all, git

    repo = tmp_path / "repo"
    git(tmp_path, "clone", "-q", str(paper_repo.repo), str(repo))
    git(repo, "checkout", "-q", "--detach", paper_repo.published)
    made = subprocess.run(
        [sys.executable, "-m", "samebits", "bundle", "paper/conda-lock.yml", "--platform",
         "linux-64", "--out", "paper/paper.bundle.tar", "--find-links", paper_repo.find_links],
        cwd=repo, env=environ(), capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    with_bundle = commit_all(repo, "the bundle")
    args = ["--path", "paper", "--target", "env", "--workload-python", sys.executable,
            "--no-workloads", "--json"]
    res = audit(repo.as_uri(), "--commit", with_bundle, *args, "--cache-dir",
                str(tmp_path / "cache"), "--out", "out", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:] + res.stdout[-3000:]
    assert "paper.bundle.tar: " in res.stderr and "the install takes them from there" in \
        res.stderr
    assert json.loads(res.stdout)["verdict"]["level"] == "environment-identical"
    without = audit(repo.as_uri(), "--commit", paper_repo.published, *args, "--replace",
                    "--cache-dir",
                    str(tmp_path / "cache2"), "--out", "out2", cwd=tmp_path)
    assert without.returncode == 1, without.stderr[-2000:] + without.stdout[-2000:]
    doc = json.loads(without.stdout)
    assert [r["cause"] for r in doc["verdict"]["reasons"]] == ["install"], doc["verdict"]

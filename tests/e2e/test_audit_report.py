"""The audit reports: Markdown and HTML read the document; the HTML looked at in a real
browser (headless Chromium), decoded with the standard library; the real audit's SBOM."""
# ruff: noqa: F811  (pytest fixtures are imported by name and requested by name)

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from samebits_app.audit.report_html import CELL_COLOURS, render_html
from samebits_app.audit.report_md import render_markdown
from samebits_app.audit.verdict import LEVELS
from tests.fixtures.audit import (  # noqa: F401  (fixtures)
    TAMPERED,
    Run,
    audits,
    elves,
    paper,
    pristine,
    rattler_cache,
    vchannel,
    wheel,
)
from tests.fixtures.browser import CHROMIUM, chromium, png_pixels, rgb


@pytest.mark.reads("tampered-digest")
@pytest.mark.requires(CHROMIUM)
def test_html_in_a_real_browser(audits: dict[str, Run], tmp_path: Path) -> None:
    """Chromium draws the report (not blank; the verdict banner's red at the top) and its DOM
    holds the verdict and the workloads x machines matrix, the unexplained cell in red."""
    run = audits["tampered-digest"]
    shot = tmp_path / "audit.png"
    dom = chromium(run.file("audit.html"), shot)
    width, height, rows = png_pixels(shot.read_bytes(), rows=320)
    assert (width, height) == (1280, 1600)
    pixels = {row[i:i + 3] for row in rows for i in range(0, len(row), 3)}
    assert len(pixels) > 50, f"a blank page: {len(pixels)} distinct pixel values"
    assert rgb(LEVELS["not-reproduced"].colour) in pixels
    verdict = re.search(r'<section id="verdict" data-level="not-reproduced"[^>]*>(.*?)</section>',
                        dom, re.S)
    assert verdict and "Not reproduced" in verdict.group(1)
    assert "different bits with no recorded fact to explain them: sum_fp32" in verdict.group(1)
    matrix = re.search(r'<table id="matrix">(.*?)</table>', dom, re.S)
    assert matrix is not None
    body = matrix.group(1)
    assert [m for m in re.findall(r'<tr class="([a-z-]+)">', body)] == [
        "same", "unexplained", "same"]
    assert f"background:{CELL_COLOURS['unexplained']}" in body
    assert all(name in body for name in ("gemm_fp32", "sum_fp32", "randn"))


@pytest.mark.reads("threads")
def test_html_is_self_contained(audits: dict[str, Run]) -> None:
    """No script, no external resource: the page is one file that needs no network."""
    html = audits["threads"].file("audit.html").read_text()
    assert "<script" not in html
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert "@import" not in html and "url(" not in html


@pytest.mark.reads("threads")
def test_markdown_report(audits: dict[str, Run]) -> None:
    """Markdown: the verdict first, the matrix, the differing facts, and the commands."""
    md = audits["threads"].file("audit.md").read_text()
    assert md.startswith("# Paper audit: Reproduced: runtime differs only where recorded "
                         "facts explain it\n\n**Verdict: `explained`** (exit 0)")
    assert "| sum_fp32 | ok " in md and "| differs, explained | " in md
    assert "2 facts differ: threads.intra_op, env.OMP_NUM_THREADS." in md
    assert "| **threads.intra_op** | class | 2 | 1 | ≠ |" in md
    assert "\n```sh\n# install the lock's exact files" in md
    assert "\nsamebits audit /" in md and " --attestation " in md and " --out threads\n" in md


@pytest.mark.reads("tampered-file")
def test_drift_in_both_reports(audits: dict[str, Run]) -> None:
    """The tampered file is in the Markdown and the HTML drift lists."""
    run = audits["tampered-file"]
    assert f"- `modified        {TAMPERED} [conda:vfa-1.0-h0_0]: sha256 " in \
        run.file("audit.md").read_text()
    html = run.file("audit.html").read_text()
    drift = re.search(r'<ul id="drift">(.*?)</ul>', html, re.S)
    assert drift and TAMPERED in drift.group(1)


@pytest.mark.reads("identical")
def test_renderers_are_pure(audits: dict[str, Run]) -> None:
    """The files are exactly what the renderers make of audit.json."""
    run = audits["identical"]
    doc = run.doc()
    assert render_markdown(doc) == run.file("audit.md").read_text()
    assert render_html(doc) == run.file("audit.html").read_text()


@pytest.mark.reads("identical")
def test_real_sbom(audits: dict[str, Run]) -> None:
    """The audited environment's SBOM: valid CycloneDX, every package hashed and named."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = audits["identical"].file("sbom.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    names = sorted(c["name"] for c in doc["components"])
    assert names == ["python", "sbtest", "typing-extensions", "vfa"]
    assert all(any(h["alg"] == "SHA-256" for h in c["hashes"]) for c in doc["components"])
    props = {p["name"]: p["value"] for p in doc["metadata"]["component"]["properties"]}
    report = audits["identical"].doc()["environment"]
    assert props["samebits:packages-digest"] == report["digests"]["packages"]

"""The built site at a 1280 px window: no code block wider than the content column.

    python docs/check_layout.py build/docs      (after `mkdocs build`; `nox -s docs` runs it)

Each page with a code block is opened in headless Chromium (Debian's ``chromium``) with a
script that counts the ``pre > code`` elements whose content is wider than the box they are
drawn in, i.e. cut off at the column's edge behind a scrollbar (issue 45: the tutorials' long
commands were). Exit 1 naming every page and its count; without Chromium on PATH it says so
and exits 0 (``.ci/run`` installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WIDTH = 1280
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--window-size={WIDTH},1600", "--virtual-time-budget=3000", "--dump-dom")
COUNT = ('<script>window.addEventListener("load", () => {const n = [...document.'
         'querySelectorAll("pre > code")].filter(c => c.scrollWidth > c.clientWidth + 1).'
         'length; document.body.setAttribute("data-overflow", String(n));});</script>')


def overflowing(chromium: str, page: Path) -> int:
    """How many code blocks of ``page`` are wider than their box at WIDTH px."""
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=page.parent) as probe:
        probe.write(page.read_text(encoding="utf-8").replace("</body>", COUNT + "</body>"))
        probe.flush()
        out = subprocess.run([chromium, *FLAGS, Path(probe.name).as_uri()], capture_output=True,
                             text=True, timeout=120).stdout
    found = re.search(r'data-overflow="(\d+)"', out)
    if found is None:
        raise SystemExit(f"{page}: Chromium drew no page (its output: {out[:200]!r})")
    return int(found.group(1))


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "build/docs")
    chromium = shutil.which("chromium")
    if chromium is None:
        print("check_layout: chromium is not on PATH (apt-get install chromium): not checked")
        return 0
    pages = sorted(p for p in site.rglob("*.html") if "<pre" in p.read_text(encoding="utf-8"))
    with ThreadPoolExecutor(max_workers=2) as pool:  # two browsers at a time
        counts = list(pool.map(lambda p: overflowing(chromium, p), pages))
    bad = [(p, n) for p, n in zip(pages, counts, strict=True) if n]
    for page, n in bad:
        print(f"{page.relative_to(site)}: {n} code block(s) wider than the column at {WIDTH} px")
    print(f"check_layout: {len(pages)} pages with code at {WIDTH} px, {len(bad)} cut off")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

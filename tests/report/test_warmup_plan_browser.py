"""The report shows the warmup plan beside warmup coverage, in a real browser (headless
Chromium, as tests/report/test_browser.py): on a real LightX2V server recording
(tests/data/lightx2v/server.tar.gz) kept under a folder whose name is HTML, the Warmup section
holds the coverage finding and the plan diag warmup-plan gives (the lines the TUI shows), the
planted name shows as text and runs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.findings.analysis import analyze
from diag.report.build import build_report, write_report
from diag.trace.load import load_trace
from tests.archives import unpack
from tests.report.browser import chromium_path, open_page

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (bash .ci/setup installs it)"
)

DATA = Path(__file__).resolve().parents[1] / "data" / "lightx2v" / "server.tar.gz"
PLANTED = "<img src=x onerror=alert(1)>srv"
READY = "document.querySelector('table.warmup-plan') !== null"


def test_warmup_section_shows_coverage_and_plan(tmp_path: Path) -> None:
    unpack(DATA, tmp_path)
    trace_dir = tmp_path / PLANTED.replace("/", "_")
    (tmp_path / "server").rename(trace_dir)
    trace = load_trace(trace_dir)
    page = tmp_path / "report.html"
    write_report(build_report(trace, analyze(trace), hta=False), page)
    work = tmp_path / "chromium"
    work.mkdir()
    report, browser = open_page(page, work, READY, screenshot=False)
    try:
        cells = browser.evaluate(
            "[...document.querySelectorAll('table.warmup-plan td')].map(td => td.innerText)"
        )
        images = browser.evaluate("document.images.length")
    finally:
        browser.close()
    assert report.exceptions == [] and report.dialogs == [] and report.requests == []
    coverage, plan = cells
    assert "Warmup covered 2 of 3 live shape(s); not covered: 16x2x8x12" in coverage
    assert "width never warmed" in coverage
    assert "warmup plan: 2 request(s)" in plan
    assert "1. 16x2x8x12 [specialise]: covers 0/2" in plan
    assert "2. 16x2x16x8 [generalise]" in plan
    assert "paste: _WARMUP_RESOLUTIONS = ((64, 96), (128, 64))" in plan
    assert f"verify: diag warmup-plan {trace_dir} --verify" in plan  # the name, as text
    assert images == 0

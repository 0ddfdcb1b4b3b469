"""The report in a real browser: headless Chromium (Debian's package, installed by .ci/setup)
opens the hostile report offline; no JavaScript error, no dialog, no network request; every
plot rendered; the planted markup shows as text. A screenshot is kept as an artefact."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.browser import chromium_path, open_page
from tests.report.conftest import FRAME_PAYLOAD, REQUEST_PAYLOAD

pytestmark = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (bash .ci/setup installs it)"
)

#: Every plot div holds plotly's rendered SVG.
READY = (
    "(() => { const d = [...document.querySelectorAll('.plotly-graph-div')];"
    " return d.length > 0 && d.every(p => p.querySelector('svg.main-svg')); })()"
)

_PLOTS = """
[...document.querySelectorAll('.plotly-graph-div')].map(d => ({
  id: d.id,
  svgs: d.querySelectorAll('svg.main-svg').length,
  marks: d.querySelectorAll('.scatterlayer .point, .barlayer .point').length,
}))
"""

_LABELS = """
[...document.querySelectorAll('.xtick text, .ytick text, .legendtext')].map(t => t.textContent)
"""


def test_report_renders_without_errors(
    hostile_html: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    work = tmp_path_factory.mktemp("chromium")
    report, browser = open_page(hostile_html, work, READY)
    try:
        plots = browser.evaluate(_PLOTS)
        labels = browser.evaluate(_LABELS)
        text = browser.evaluate("document.body.innerText")
        images = browser.evaluate("document.images.length")
        scripts = browser.evaluate("document.scripts.length")
    finally:
        browser.close()
    assert report.screenshot is not None
    request.node.user_properties.append(("screenshot", str(report.screenshot)))
    print(f"screenshot: {report.screenshot}")

    assert report.exceptions == []
    assert report.console_errors == []
    assert report.dialogs == []
    assert report.requests == []  # offline: plotly.js is in the page, nothing is fetched
    ids = {p["id"] for p in plots}
    assert {"plot-steps", "plot-compiles", "plot-cache", "plot-regions"} <= ids
    for plot in plots:
        assert plot["svgs"] >= 1, plot
        assert plot["marks"] > 0, plot  # points or bars were drawn, not just axes
    # The planted markup is on screen as text, in the findings table and in plot labels.
    assert FRAME_PAYLOAD in text
    assert REQUEST_PAYLOAD in text
    assert any(FRAME_PAYLOAD in label for label in labels)
    assert images == 0
    assert scripts == 1 + len(plots)  # plotly.js and one per figure: none was injected
    assert report.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.screenshot.stat().st_size > 20_000


def test_the_harness_sees_errors_and_dialogs(tmp_path: Path) -> None:
    """The checks above can fail: a page with an error, a console error and an alert."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>bad</p><script>"
        "console.error('diag-test-error'); alert('diag-test-alert');"
        "setTimeout(() => { document.body.dataset.done = '1'; no_such_function(); }, 0);"
        "</script></body></html>"
    )
    report, browser = open_page(
        page, tmp_path, "document.body.dataset.done === '1'", timeout=120, screenshot=False
    )
    browser.close()
    assert any("diag-test-error" in e for e in report.console_errors)
    assert any("diag-test-alert" in d for d in report.dialogs)
    assert any("no_such_function" in e for e in report.exceptions)

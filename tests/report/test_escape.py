"""Trace strings stay text: in the page's HTML and in every figure's labels and hover text."""

from __future__ import annotations

import re
from typing import Any

from diag.report.build import Report
from diag.report.escape import html_text, plot_text, shorten
from tests.report.conftest import FRAME_PAYLOAD, GUARD_PAYLOAD, PAYLOADS, REQUEST_PAYLOAD

#: Markup a payload would become if it were not escaped (the report's own hover text uses only
#: bare <b> and <br>).
_LIVE_MARKUP = re.compile(r"<(script|img)\b|<[a-z]+\s[^>]*\bon[a-z]+=", re.IGNORECASE)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def test_escape_helpers() -> None:
    assert html_text('<a href="x">&') == "&lt;a href=&quot;x&quot;&gt;&amp;"
    assert plot_text('<b>"x"</b> & y') == '&lt;b&gt;"x"&lt;/b&gt; &amp; y'
    assert plot_text("a" * 200, 10) == "a" * 9 + "…"
    assert shorten("short") == "short"


def test_the_hostile_trace_reaches_the_report(hostile_report: Report) -> None:
    """The payloads really are in what the report shows (else the other tests prove nothing)."""
    html = hostile_report.html
    assert html_text(FRAME_PAYLOAD) in html  # findings table, frame names
    assert html_text(REQUEST_PAYLOAD) in html  # findings evidence: live request ids
    figures = {s.key: s.plot.figure for s in hostile_report.sections if s.plot is not None}
    assert {"steps", "compiles", "cache", "regions"} <= set(figures)
    texts = [s for f in figures.values() for s in _strings(f.to_plotly_json()["data"])]
    assert any(plot_text(FRAME_PAYLOAD) in t for t in texts)
    assert any(plot_text(REQUEST_PAYLOAD) in t for t in texts)
    assert any(plot_text(GUARD_PAYLOAD.strip()) in t for t in texts)


def test_no_payload_is_markup_in_the_page(hostile_report: Report) -> None:
    html = hostile_report.html
    for payload in PAYLOADS:
        assert payload.strip() not in html
    # Outside the scripts (plotly.js and figure JSON), the only tags are the page's own.
    outside = re.sub(r"<script\b.*?</script>", "", html, flags=re.DOTALL)
    assert not re.search(r"<img\b|<[a-z]+\b[^>]*\son(error|mouseover)=", outside)
    assert outside.count("<script") == 0
    # Inside the figure JSON, plotly writes < and > as \u escapes: no payload ends a script.
    figure_json = re.findall(r"Plotly\.newPlot\((.*?)\)\s*};", html, flags=re.DOTALL)
    assert figure_json
    assert not any("</script" in chunk or "<img" in chunk for chunk in figure_json)


def test_no_payload_is_markup_in_any_figure(hostile_report: Report) -> None:
    for section in hostile_report.sections:
        if section.plot is None:
            continue
        figure = section.plot.figure.to_plotly_json()
        for text in _strings(figure["data"]) + _strings(figure["layout"]):
            assert not _LIVE_MARKUP.search(text), (section.key, text)
        # Templates would interpret %{...} inside trace strings: hover text is plain text.
        assert all("hovertemplate" not in trace for trace in figure["data"]), section.key


def test_the_page_allows_only_its_own_scripts(hostile_report: Report) -> None:
    policy = re.search(
        r'http-equiv="Content-Security-Policy" content="([^"]+)"', hostile_report.html
    )
    assert policy is not None
    assert "default-src 'none'" in policy.group(1)
    hashes = re.findall(r"'sha256-[A-Za-z0-9+/=]+'", policy.group(1))
    figures = sum(1 for s in hostile_report.sections if s.plot is not None)
    assert len(hashes) == 1 + figures  # plotly.js, then one script per figure

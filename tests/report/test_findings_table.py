"""The findings table: every field escaped, and very long lists cut with a note."""

from __future__ import annotations

from diag.findings.model import Finding
from diag.report.findings_table import findings_table


def _finding(i: int, severity: str = "error") -> Finding:
    return Finding(
        id=f"live-compile:f:r{i}",
        analyzer="live-compile",
        severity=severity,
        title=f"frame recompiled in request r{i} <b>",
        evidence=[f"evidence {i} & more"],
        fix="warm it up",
        location="model.py:1",
    )


def test_rows_are_sorted_and_escaped() -> None:
    html = findings_table([_finding(1, "info"), _finding(2)])
    assert html.index("r2 &lt;b&gt;") < html.index("r1 &lt;b&gt;")  # errors first
    assert "evidence 2 &amp; more" in html and "<b>" not in html
    assert "2 finding(s): 1 error, 0 warning, 1 info" in html


def test_long_lists_are_cut_and_say_so() -> None:
    html = findings_table([_finding(i) for i in range(30)], full=5, listed=10)
    assert html.count("<li>") == 5  # evidence only for the rows shown whole
    assert html.count('<td colspan="3">') == 10
    assert "Aggregated: 30 findings; the first 5 are shown whole, the next 10 by title only" in html
    assert "and 15 more are left out" in html


def test_no_findings() -> None:
    assert "No findings" in findings_table([])


def test_backticked_code_is_set_as_code_and_stays_escaped() -> None:
    finding = Finding(
        id="kernel-routing:x",
        analyzer="kernel-routing",
        severity="warning",
        title="`_rms_norm<4>` runs in eager but not under torch.compile",
        evidence=["replaced by `triton_red_fused_rsqrt`"],
        fix="register it with `torch.library.custom_op`; a lone ` stays",
    )
    html = findings_table([finding])
    assert "<code>_rms_norm&lt;4&gt;</code> runs in eager" in html
    assert "<code>triton_red_fused_rsqrt</code>" in html
    assert "<code>torch.library.custom_op</code>; a lone ` stays" in html
    assert "`" not in html.replace("a lone ` stays", "")

"""The findings as an HTML table: the same Finding objects `diag analyze` prints."""

from __future__ import annotations

from diag.findings.model import SEVERITIES, Finding, sort_findings
from diag.perfetto.hint import finding_step
from diag.perfetto.timeline import step_name
from diag.report.escape import html_inline, html_text
from diag.trace.paths import shown_location


def findings_table(
    findings: list[Finding], full: int = 150, listed: int = 2000, all_clear: bool = True
) -> str:
    """Escaped HTML: a count line, then one row per finding (evidence as a list).

    A pathological run can hold thousands of findings (one per live recompile): the first
    `full` are shown whole, the next `listed` by title only, and the page says so.
    """
    counts = ", ".join(f"{sum(1 for f in findings if f.severity == s)} {s}" for s in SEVERITIES)
    if not findings and not all_clear:  # diag.evidence.status: something was not seen
        return (
            '<p class="counts">No findings in what was recorded, which is not an all-clear: '
            "see what was not seen in the header.</p>"
        )
    if not findings:
        return (
            '<p class="counts">No findings: nothing compiled after warmup and no problem was '
            "detected.</p>"
        )
    ordered = sort_findings(findings)
    rows = [_row(finding) for finding in ordered[:full]]
    rows += [_short_row(finding) for finding in ordered[full : full + listed]]
    note = ""
    if len(ordered) > full:
        left = max(0, len(ordered) - full - listed)
        note = (
            f'<p class="note">Aggregated: {len(ordered)} findings; the first {full} are shown '
            f"whole, the next {min(listed, len(ordered) - full)} by title only"
            + (f", and {left} more are left out" if left else "")
            + ". diag analyze --json lists every one.</p>\n"
        )
    return (
        f'<p class="counts">{len(findings)} finding(s): {counts}</p>\n{note}'
        '<table class="findings"><thead><tr><th>severity</th><th>finding</th>'
        "<th>evidence</th><th>fix</th></tr></thead><tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table>"
    )


def _short_row(finding: Finding) -> str:
    severity = finding.severity if finding.severity in SEVERITIES else "info"
    return (
        f'<tr class="sev-{severity}"><td class="sev">{html_text(severity)}</td>'
        f'<td colspan="3">{html_inline(finding.title)} <span class="id">'
        f"<code>{html_text(finding.id)}</code></span></td></tr>"
    )


def _row(finding: Finding) -> str:
    severity = finding.severity if finding.severity in SEVERITIES else "info"
    location = (
        f'<div class="where">at <code>{html_text(shown_location(finding.location))}</code></div>'
        if finding.location
        else ""
    )
    evidence = "".join(f"<li>{html_inline(item)}</li>" for item in finding.evidence)
    return (
        f'<tr class="sev-{severity}">'
        f'<td class="sev">{html_text(severity)}</td>'
        f'<td><div class="title">{html_inline(finding.title)}</div>{location}'
        f'<div class="id">[{html_text(finding.analyzer)}] <code>{html_text(finding.id)}</code>'
        f" &middot; {html_text(finding.run)} run</div>{_group_line(finding)}"
        f"{_timeline_line(finding)}</td>"
        f"<td><ul>{evidence}</ul></td>"
        f"<td>{html_inline(finding.fix)}</td></tr>"
    )


def _group_line(finding: Finding) -> str:
    """One root cause, one headline (diag.findings.grouping): the headline counts its related
    findings,
    each of those names its headline."""
    if finding.related:
        ids = ", ".join(f"<code>{html_text(i)}</code>" for i in finding.related)
        return f'<div class="id">same root cause: {len(finding.related)} related ({ids})</div>'
    if finding.group:
        return f'<div class="id">part of <code>{html_text(finding.group)}</code></div>'
    return ""


def _timeline_line(finding: Finding) -> str:
    """Where the finding's step is in the timeline `diag export --perfetto` writes (the header
    names the command)."""
    found = finding_step(finding)
    if found is None:
        return ""
    name = html_text(step_name(*found))
    return f'<div class="id">timeline: search <code>{name}</code> in Perfetto</div>'

"""Findings as text for a terminal, as compilers print diagnostics, headed by the run's status.

Kept apart from the model (diag.findings.model) because it reads grouping, shared advice and the
recording's status, which themselves read the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diag.findings.model import SEVERITIES, Finding, sort_findings
from diag.trace.printable import one_line, printable

if TYPE_CHECKING:
    from diag.evidence.status import Visibility


#: Evidence lines a finding shows in text by default; -v shows them all (JSON always has all).
MAX_EVIDENCE = 5


def findings_to_text(
    findings: list[Finding],
    visibility: Visibility | None = None,
    only: list[str] | None = None,
    verbose: bool = False,
    color: bool = False,
) -> str:
    """The findings, headed by the recording's status and what diag could not see in it, as
    compilers print diagnostics: per finding a headline, its location, at most MAX_EVIDENCE
    evidence lines (all with `verbose`) and one `fix:` line; advice several findings share
    (diag.findings.advice) once at the end; the summary line last. `color`: ANSI colour for a
    terminal.

    "No findings" is an all-clear only when the recording is complete, nothing stands in its
    way and every analyzer ran; otherwise it says what was seen and what was not (`only`: the
    analyzers `--only` chose, whose silence says nothing of the others)."""
    lines = []
    if visibility is not None:
        from diag.evidence.status import status_lines

        lines.extend(status_lines(visibility))
        lines.append("")
    if not findings:
        if only:
            lines.append(
                f"No findings from {', '.join(only)} (--only: the other analyzers did not run, "
                "so this is no all-clear)."
            )
            if visibility is not None and not visibility.all_clear_possible:
                from diag.evidence.status import not_seen_summary

                lines.append(f"not seen: {not_seen_summary(visibility)} (see the notices above)")
        else:
            lines.append(_no_findings(visibility))
        return _finish(lines, color)
    from diag.findings.grouping import group_note, related_lines
    from diag.trace.paths import shown_location

    shared = _Shared()
    hidden = 0
    shown = {f.id for f in findings}
    for finding in sort_findings(findings):
        if finding.group in shown:
            continue  # listed under its headline
        # Each field on its own line, whatever a trace's name in it holds (diag.trace.printable).
        title = one_line(finding.title)
        lines.append(f"{finding.severity.upper():7} [{finding.analyzer}] {title}")
        if finding.location:
            lines.append(f"        at {one_line(shown_location(finding.location))}")
        evidence = [one_line(shared.pointed(item)) for item in finding.evidence]
        if not verbose and len(evidence) > MAX_EVIDENCE:
            more = len(evidence) - (MAX_EVIDENCE - 1)
            hidden += more
            evidence = [*evidence[: MAX_EVIDENCE - 1], f"... {more} more line(s) of evidence"]
        lines.extend(f"        - {item}" for item in evidence)
        if finding.fix:  # an info finding that needs no action has no fix
            lines.append(f"        fix: {one_line(shared.pointed(finding.fix))}")
        lines.append(f"        id: {one_line(finding.id)}")
        lines.extend(related_lines(finding, findings))
        lines.append("")
    for name, text in shared.used():
        lines.append(f"{name}: {text}")
        lines.append("")
    if hidden:
        lines.append(f"({hidden} line(s) of evidence not shown: diag analyze -v shows them all)")
    if visibility is not None and not visibility.all_clear_possible:
        from diag.evidence.status import not_seen_summary

        lines.append(f"not seen: {not_seen_summary(visibility)} (see the notices above)")
    counts = ", ".join(f"{sum(1 for f in findings if f.severity == s)} {s}" for s in SEVERITIES)
    lines.append(f"{len(findings)} finding(s): {counts}{group_note(findings)}")
    return _finish(lines, color)


class _Shared:
    """Replaces the advice of diag.findings.advice by a pointer to its name, and remembers which."""

    def __init__(self) -> None:
        from diag.findings.advice import SHARED

        self._advice = SHARED
        self._used: list[str] = []

    def pointed(self, text: str) -> str:
        for name, advice in self._advice:
            if advice in text:
                text = text.replace(advice, f"see '{name}' below")
                if name not in self._used:
                    self._used.append(name)
        return text

    def used(self) -> list[tuple[str, str]]:
        return [(name, text) for name, text in self._advice if name in self._used]


def _finish(lines: list[str], color: bool) -> str:
    # Trace strings (frame names, guards, reasons) reach a terminal: escape what is not text,
    # then colour (the escapes diag adds are its own, after the trace's were made harmless).
    text = printable("\n".join(lines))
    if not color:
        return text
    from diag.findings.colors import colorize

    return colorize(text)


def _no_findings(visibility: Visibility | None) -> str:
    from diag.evidence.status import IMPORTED, not_seen_summary

    if visibility is not None and visibility.status.status == IMPORTED and not visibility.notices:
        return "No findings: no problem was detected in what the imported trace holds."
    if visibility is None:  # the caller did not say what the recording could show
        return "No findings: no problem was detected."
    if visibility.all_clear_possible:
        return "No findings: nothing compiled after warmup and no problem was detected."
    return (
        "No findings in what was recorded, which is not an all-clear: "
        f"{not_seen_summary(visibility)} (see the notices above)."
    )

"""One Finding shape for every analyzer; text and JSON renderings of a list of them.

Text, JSON, JUnit (check), the TUI and the report all render these same objects.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from diag.printable import one_line, printable

if TYPE_CHECKING:
    from diag.status import Visibility

SEVERITIES = ("error", "warning", "info")
_RANK = {name: i for i, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Finding:
    """What happened, the evidence, where in the user's code, and what to do about it.

    `id` is stable across re-analysis of the same trace and across runs of the same program
    (it is built from the analyzer, the frame and the source expression, never from times),
    so CI allowlists and baselines can refer to it.
    """

    id: str
    analyzer: str
    severity: str
    title: str
    evidence: list[str]
    fix: str
    location: str | None = None
    run: str = "compiled"
    data: dict[str, Any] = field(default_factory=dict)
    #: One root cause, one headline (diag.grouping): the headline lists the ids of the findings
    #: that echo it; each of those names its headline in `group`.
    related: list[str] = field(default_factory=list)
    group: str | None = None
    #: The checkable statements behind the text (docs/FINDINGS.md, "Claims"): what happened
    #: where, and the cause diag read off its evidence. bench/fidelity.py checks them against
    #: torch's own record.
    claims: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(f"bad severity {self.severity!r}")


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_RANK[f.severity], f.analyzer, f.id))


def findings_to_json(
    findings: list[Finding],
    trace: str,
    warnings: list[str] | None = None,
    visibility: Visibility | None = None,
) -> str:
    """The JSON document of docs/FINDINGS.md: the recording's `status` and `notices` (with a
    visibility), the counts, the findings, and the reader's `warnings` about the input."""
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    payload: dict[str, Any] = {
        "format": "diag-findings",
        "version": 1,
        "trace": trace,
    }
    if visibility is not None:
        payload.update(visibility.as_dict())
    payload["counts"] = counts
    payload["findings"] = [asdict(f) for f in sort_findings(findings)]
    payload["warnings"] = list(warnings or [])
    return json.dumps(payload, indent=1, default=str)


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
    (diag.advice) once at the end; the summary line last. `color`: ANSI colour for a terminal.

    "No findings" is an all-clear only when the recording is complete, nothing stands in its
    way and every analyzer ran; otherwise it says what was seen and what was not (`only`: the
    analyzers `--only` chose, whose silence says nothing of the others)."""
    lines = []
    if visibility is not None:
        from diag.status import status_lines

        lines.extend(status_lines(visibility))
        lines.append("")
    if not findings:
        if only:
            lines.append(
                f"No findings from {', '.join(only)} (--only: the other analyzers did not run, "
                "so this is no all-clear)."
            )
            if visibility is not None and not visibility.all_clear_possible:
                from diag.status import not_seen_summary

                lines.append(f"not seen: {not_seen_summary(visibility)} (see the notices above)")
        else:
            lines.append(_no_findings(visibility))
        return _finish(lines, color)
    from diag.grouping import group_note, related_lines
    from diag.paths import shown_location

    shared = _Shared()
    hidden = 0
    shown = {f.id for f in findings}
    for finding in sort_findings(findings):
        if finding.group in shown:
            continue  # listed under its headline
        # Each field on its own line, whatever a trace's name in it holds (diag.printable).
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
        from diag.status import not_seen_summary

        lines.append(f"not seen: {not_seen_summary(visibility)} (see the notices above)")
    counts = ", ".join(f"{sum(1 for f in findings if f.severity == s)} {s}" for s in SEVERITIES)
    lines.append(f"{len(findings)} finding(s): {counts}{group_note(findings)}")
    return _finish(lines, color)


class _Shared:
    """Replaces the advice of diag.advice by a pointer to its name, and remembers which."""

    def __init__(self) -> None:
        from diag.advice import SHARED

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
    from diag.colors import colorize

    return colorize(text)


def _no_findings(visibility: Visibility | None) -> str:
    from diag.status import IMPORTED, not_seen_summary

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

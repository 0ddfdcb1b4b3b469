"""One Finding shape for every analyzer; text and JSON renderings of a list of them.

Text, JSON, JUnit (check), the TUI and the report all render these same objects.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

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

    def __post_init__(self) -> None:
        if self.severity not in _RANK:
            raise ValueError(f"bad severity {self.severity!r}")


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_RANK[f.severity], f.analyzer, f.id))


def findings_to_json(
    findings: list[Finding], trace: str, warnings: list[str] | None = None
) -> str:
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    payload = {
        "format": "diag-findings",
        "version": 1,
        "trace": trace,
        "counts": counts,
        "findings": [asdict(f) for f in sort_findings(findings)],
        # What the reader skipped or could not see (the lines `diag: warning:` on stderr).
        "warnings": list(warnings or []),
    }
    return json.dumps(payload, indent=1, default=str)


def findings_to_text(findings: list[Finding]) -> str:
    if not findings:
        return "No findings: nothing compiled after warmup and no problem was detected."
    lines = []
    for finding in sort_findings(findings):
        lines.append(f"{finding.severity.upper():7} [{finding.analyzer}] {finding.title}")
        if finding.location:
            lines.append(f"        at {finding.location}")
        lines.extend(f"        - {item}" for item in finding.evidence)
        lines.append(f"        fix: {finding.fix}")
        lines.append(f"        id: {finding.id}")
        lines.append("")
    counts = ", ".join(f"{sum(1 for f in findings if f.severity == s)} {s}" for s in SEVERITIES)
    lines.append(f"{len(findings)} finding(s): {counts}")
    return "\n".join(lines)

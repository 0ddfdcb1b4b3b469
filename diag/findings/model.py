"""One Finding shape for every analyzer, its order, and its JSON document.

Text (diag.findings.text), JSON, JUnit (check), the TUI and the report all render these same
objects.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diag.evidence.status import Visibility

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
    #: One root cause, one headline (diag.findings.grouping): the headline lists the ids of the
    #: findings
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

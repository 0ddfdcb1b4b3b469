"""What `diag check` decided: one result per rule, each violation with its evidence.

Built by the rules (rules.py, baseline.py), rendered by render.py and junit.py. Kept apart from
both so that every output format shows the very same verdict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from diag.findings.rank_merge import Entry, merge_entries

PASS = "pass"
FAIL = "fail"
SKIP = "skip"


@dataclass(frozen=True)
class Violation:
    """One thing the policy does not accept, with what shows it and where in the user's code."""

    message: str
    evidence: list[str]
    location: str | None = None  # file:line, relative to the recording's cwd when under it
    key: str = ""  # stable: a finding id or a frame/guard key, for people and baselines


@dataclass(frozen=True)
class Allowed:
    """A violation the policy's allowlist accepted, and the reason it gave."""

    message: str
    reason: str
    entry: int  # index of the allowlist entry, from 1 as people count them


@dataclass
class RuleResult:
    name: str
    summary: str  # one line: what was counted against what limit
    status: str = PASS
    violations: list[Violation] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass
class Verdict:
    trace: str
    policy: str  # where the policy came from
    baseline: str | None
    rules: list[RuleResult]
    unused_allow: list[str] = field(default_factory=list)  # entries that matched nothing
    #: What reading the trace (and the baseline) skipped, one line each (diag.trace.inputs).
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(rule.failed for rule in self.rules)

    @property
    def failed_rules(self) -> list[RuleResult]:
        return [rule for rule in self.rules if rule.failed]


def merge_rank_violations(
    items: list[tuple[Violation, int | None]], world: int | None
) -> list[Violation]:
    """`diag check`'s violations of one run, each with its process's rank (None: no rank),
    those alike on several ranks merged into one that names them."""
    entries = [Entry(rank, (v.location, v.key), v.message, v.evidence) for v, rank in items]
    out = []
    for merged in merge_entries(entries, world):
        head = items[merged.indexes[0]][0]
        if len(merged.indexes) == 1:
            out.append(head)
        else:
            out.append(dataclasses.replace(head, message=merged.title, evidence=merged.evidence))
    return out

"""The verdict as text (for people), JSON (for tools) and GitHub Actions workflow commands.

Everything here may carry strings from the trace (frame names, guard text), which is untrusted:
text output replaces control characters, JSON escapes by construction, and the GitHub form
escapes data and properties by the runner's rules and fences the human-readable part with
`::stop-commands::` so that no trace string can be read as a workflow command.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from diag.check.verdict import SKIP, RuleResult, Verdict, Violation
from diag.trace.numerals import parse_int
from diag.trace.printable import annotation as annotation_text
from diag.trace.printable import one_line

#: Enough to act on; the JSON and JUnit forms keep everything.
SHOWN_VIOLATIONS = 10
SHOWN_EVIDENCE = 8
#: GitHub shows at most 10 error annotations per step; more would only be dropped.
ANNOTATIONS = 10


def clean(text: str) -> str:
    """One printable line: no terminal escapes, no line breaks from the trace."""
    return one_line(text)


def verdict_text(verdict: Verdict) -> str:
    failed = verdict.failed_rules
    head = (
        f"diag check: FAIL ({len(failed)} of {len(verdict.rules)} rules failed)"
        if failed
        else f"diag check: PASS ({len(verdict.rules)} rules)"
    )
    lines = [head, f"trace:    {clean(verdict.trace)}", f"policy:   {clean(verdict.policy)}"]
    if verdict.baseline is not None:
        lines.append(f"baseline: {clean(verdict.baseline)}")
    for rule in failed:
        lines.append("")
        lines.append(f"FAIL {rule.name}: {clean(rule.summary)}")
        for violation in rule.violations[:SHOWN_VIOLATIONS]:
            lines.extend(_violation_lines(violation))
        hidden = len(rule.violations) - SHOWN_VIOLATIONS
        if hidden > 0:
            lines.append(f"  ... and {hidden} more (all of them: --format json)")
    lines.append("")
    lines.extend(
        f"{rule.status:4} {rule.name}: {clean(rule.summary)}"
        for rule in verdict.rules
        if not rule.failed
    )
    allowed = [(rule, item) for rule in verdict.rules for item in rule.allowed]
    if allowed:
        lines.append("")
        lines.append("allowed by the policy:")
        lines.extend(
            f"  - [{rule.name}] {clean(item.message)} (allow #{item.entry}: {clean(item.reason)})"
            for rule, item in allowed
        )
    if verdict.unused_allow:
        lines.append("")
        lines.append("allowlist entries that matched nothing (stale?):")
        lines.extend(f"  - {clean(text)}" for text in verdict.unused_allow)
    return "\n".join(lines)


def _violation_lines(violation: Violation) -> list[str]:
    lines = [f"  x {clean(violation.message)}"]
    if violation.location:
        lines.append(f"    at {clean(violation.location)}")
    shown = violation.evidence[:SHOWN_EVIDENCE]
    lines.extend(f"    - {clean(item)}" for item in shown)
    if len(violation.evidence) > len(shown):
        lines.append(f"    - ... {len(violation.evidence) - len(shown)} more line(s)")
    return lines


def verdict_json(verdict: Verdict, policy: dict[str, Any]) -> str:
    payload = {
        "format": "diag-check",
        "version": 1,
        "passed": verdict.passed,
        "trace": verdict.trace,
        "baseline": verdict.baseline,
        "policy": policy,
        "rules": [_rule_json(rule) for rule in verdict.rules],
        "unused_allow": verdict.unused_allow,
        "warnings": verdict.warnings,
    }
    # No indent: CPython only uses its C encoder without one, and a verdict on a large trace
    # holds thousands of violations (bench/check_latency.py).
    return json.dumps(payload)


def _rule_json(rule: RuleResult) -> dict[str, Any]:
    return {
        "name": rule.name,
        "status": rule.status,
        "summary": rule.summary,
        "violations": [
            {
                "message": v.message,
                "evidence": v.evidence,
                "location": v.location,
                "key": v.key,
            }
            for v in rule.violations
        ],
        "allowed": [
            {"message": a.message, "reason": a.reason, "entry": a.entry} for a in rule.allowed
        ],
    }


# --- GitHub Actions ---------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message (actions/toolkit `escapeData`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (actions/toolkit `escapeProperty`)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def split_location(location: str | None) -> tuple[str | None, int | None]:
    """`path/to/file.py:12` -> ("path/to/file.py", 12); a bare name is no file."""
    if not location:
        return None, None
    file, sep, line = location.rpartition(":")
    number = parse_int(line) if sep else None
    if number is not None and file:
        return file, number
    return (location, None) if "/" in location or location.endswith(".py") else (None, None)


def annotation(rule: RuleResult, violation: Violation) -> str:
    properties: list[str] = []
    file, line = split_location(violation.location)
    if file is not None:
        properties.append(f"file={escape_property(one_line(file))}")
        if line is not None:
            properties.append(f"line={line}")
    properties.append(f"title={escape_property(f'diag check: {rule.name}')}")
    body = "\n".join([violation.message, *violation.evidence[:SHOWN_EVIDENCE]])
    return f"::error {','.join(properties)}::{escape_data(annotation_text(body))}"


def verdict_github(verdict: Verdict, token: str | None = None) -> str:
    lines: list[str] = []
    for rule in verdict.failed_rules:
        lines.extend(annotation(rule, v) for v in rule.violations[:ANNOTATIONS])
    skipped = [r.name for r in verdict.rules if r.status == SKIP]
    if skipped:
        notice = annotation_text("skipped: " + ", ".join(skipped))
        lines.append(f"::notice title=diag check::{escape_data(notice)}")
    # The readable verdict holds trace strings: stop the runner from parsing it for commands.
    fence = token or secrets.token_hex(16)
    lines.append(f"::stop-commands::{fence}")
    lines.append(verdict_text(verdict))
    lines.append(f"::{fence}::")
    return "\n".join(lines)

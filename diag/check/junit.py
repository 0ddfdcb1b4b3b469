"""The verdict as JUnit XML: one test case per rule, so CI dashboards list each rule on its own.

A failed rule carries a <failure> with every violation and its evidence, a rule that could not
be evaluated (baseline-step-time without steady steps) a <skipped>. ElementTree escapes markup,
but XML 1.0 forbids most control characters outright, so trace strings are filtered first.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from diag.check.verdict import FAIL, SKIP, Verdict
from diag.errors import DiagError

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
SUITE = "diag check"


def xml_safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def verdict_junit(verdict: Verdict) -> str:
    failures = len(verdict.failed_rules)
    skipped = sum(1 for rule in verdict.rules if rule.status == SKIP)
    counts = {
        "tests": str(len(verdict.rules)),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
    }
    root = ET.Element("testsuites", {"name": SUITE, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": SUITE, **counts})
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("trace", verdict.trace),
        ("policy", verdict.policy),
        ("baseline", verdict.baseline),
    ):
        if value is not None:
            ET.SubElement(properties, "property", {"name": name, "value": xml_safe(value)})
    for rule in verdict.rules:
        case = ET.SubElement(suite, "testcase", {"classname": "diag.check", "name": rule.name})
        if rule.status == FAIL:
            failure = ET.SubElement(
                case, "failure", {"message": xml_safe(rule.summary), "type": rule.name}
            )
            blocks = []
            for violation in rule.violations:
                block = [violation.message]
                if violation.location:
                    block.append(f"  at {violation.location}")
                block.extend(f"  - {item}" for item in violation.evidence)
                blocks.append("\n".join(block))
            failure.text = xml_safe("\n\n".join(blocks))
        elif rule.status == SKIP:
            ET.SubElement(case, "skipped", {"message": xml_safe(rule.summary)})
        else:
            ET.SubElement(case, "system-out").text = xml_safe(rule.summary)
        if rule.allowed:
            ET.SubElement(case, "system-err").text = xml_safe(
                "\n".join(
                    f"allowed by allow #{item.entry} ({item.reason}): {item.message}"
                    for item in rule.allowed
                )
            )
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(verdict: Verdict, path: Path) -> None:
    try:
        path.write_text(verdict_junit(verdict), encoding="utf-8")
    except OSError as exc:
        raise DiagError(f"{path}: cannot write the JUnit report: {exc.strerror}") from None

"""Where a statement of the reference service is: tests name fixture lines by their text, so
that an edit above them (a new plant) does not break every test that quotes a location."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_line(relative: str, text: str) -> int:
    """The 1-based line of `fixtures/<relative>` that holds `text` (exactly one must)."""
    lines = (FIXTURES / relative).read_text(encoding="utf-8").splitlines()
    found = [number for number, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, f"{text!r} is on lines {found} of fixtures/{relative}"
    return found[0]


def fixture_location(relative: str, text: str) -> str:
    """`fixtures/<relative>:<line>` as findings print it from the repository root."""
    return f"fixtures/{relative}:{fixture_line(relative, text)}"

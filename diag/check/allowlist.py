"""Matching violations against the policy's allowlist.

Every rule describes what it is about to report as a Subject (frame, guards, phases); an
allowlist entry accepts it when every field the entry sets matches. A field the subject lacks
never matches, so an entry with a guard pattern cannot accept a first compile (it has no failing
guard) and a phase entry cannot accept a finding that does not say where it happened.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from diag.check.policy import AllowEntry
from diag.findings.model import Finding
from diag.trace.run import Compile, Guard


@dataclass(frozen=True)
class Subject:
    frame: str | None = None  # function name of the compiled frame
    location: str | None = None  # its file:line
    guards: tuple[str, ...] = ()  # kinds, sources and texts of the guards involved
    phases: frozenset[str] = field(default_factory=frozenset)


def guard_texts(guards: Iterable[Guard]) -> tuple[str, ...]:
    texts: list[str] = []
    for guard in guards:
        texts.append(guard.kind)
        if guard.source:
            texts.append(guard.source)
        if guard.raw:
            texts.append(guard.raw)
    return tuple(dict.fromkeys(texts))


def compiles_subject(compiles: list[Compile], location: str | None = None) -> Subject:
    """The subject of a violation about these compiles (of one frame)."""
    frame = next((c.frame for c in compiles if c.frame is not None), None)
    return Subject(
        frame=frame.name if frame is not None else None,
        location=location or (frame.location if frame is not None else None),
        guards=guard_texts(g for c in compiles for g in c.guards),
        phases=frozenset(c.phase for c in compiles),
    )


def finding_subject(finding: Finding) -> Subject:
    """The subject of an analyzer finding, from the structured data analyzers attach:
    `frame`, `kind`/`source` or `guards` (a list of {kind, source}), `phase` or `where`."""
    data = finding.data
    frame = data.get("frame")
    texts = [data[key] for key in ("kind", "source", "reason") if isinstance(data.get(key), str)]
    for item in data.get("guards") or []:
        if isinstance(item, dict):
            texts.extend(str(item[k]) for k in ("kind", "source") if item.get(k) is not None)
    return Subject(
        frame=frame if isinstance(frame, str) else None,
        location=finding.location,
        guards=tuple(dict.fromkeys(texts)),
        phases=_finding_phases(finding),
    )


def _finding_phases(finding: Finding) -> frozenset[str]:
    data: dict[str, Any] = finding.data
    if isinstance(data.get("phase"), str):
        return frozenset([data["phase"]])
    where = data.get("where")
    if isinstance(where, list):
        return frozenset(w["phase"] for w in where if isinstance(w, dict) and "phase" in w)
    if finding.analyzer == "live-compile" and data.get("request_id") is not None:
        return frozenset(["live"])
    return frozenset()


def matches(entry: AllowEntry, subject: Subject) -> bool:
    if entry.frame is not None:
        names = [n for n in (subject.frame, subject.location) if n]
        if not any(fnmatch.fnmatchcase(name, entry.frame) for name in names):
            return False
    if entry.guard is not None:
        pattern = entry.guard
        if not any(pattern.search(text) for text in subject.guards):
            return False
    if entry.phase is not None:
        if not subject.phases or any(p != entry.phase for p in subject.phases):
            return False
    return True


class Allowlist:
    """The policy's entries, and which of them accepted something in this check."""

    def __init__(self, entries: tuple[AllowEntry, ...]) -> None:
        self.entries = entries
        self.used: set[int] = set()

    def match(self, subject: Subject) -> AllowEntry | None:
        for entry in self.entries:
            if matches(entry, subject):
                self.used.add(entry.index)
                return entry
        return None

    def unused(self) -> list[str]:
        return [e.describe() for e in self.entries if e.index not in self.used]

"""Messages between the screens and the app, in one place."""

from __future__ import annotations

from textual.message import Message

from diag.findings.model import Finding


class OpenEvidence(Message):
    """A person chose a finding: show its evidence."""

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

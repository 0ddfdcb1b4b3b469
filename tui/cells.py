"""How values read in the UI, and the one way a trace string reaches the screen.

Trace strings (frame names, guard text, kernel names, commands) are untrusted: Textual parses
markup in plain `str` cells and labels, so a guard text like `[bold red]x[/]` or `[@click=...]`
would be interpreted. Every such string goes through `text()`, which builds a Rich `Text`
(never parsed as markup). And a trace string may hold terminal escapes (`\x1b[2J` blanks the
screen) that Rich passes on: every module of the UI builds its Text from `Text` below, whose
content goes through diag.trace.printable, so control characters show escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import text as rich_text
from rich.style import Style

from diag.trace.printable import printable


class Text(rich_text.Text):
    """Rich's Text, its characters always printable (diag.trace.printable escapes the others)."""

    def __init__(self, text: str = "", *args: Any, **kwargs: Any) -> None:
        super().__init__(printable(text), *args, **kwargs)

    def append(self, text: rich_text.Text | str, style: str | Style | None = None) -> Text:
        super().append(printable(text) if isinstance(text, str) else text, style)
        return self


def text(value: object, style: str = "") -> Text:
    """A literal cell: `None` reads as an empty cell, everything else as `str(value)`."""
    return Text("" if value is None else str(value), style=style, no_wrap=True)


def seconds(value: float | None) -> str:
    """Seconds as people read them: `2.45 s`, `136 ms`, `8.8 ms`, `35 µs`."""
    if value is None:
        return ""
    if value >= 0.9995:
        return f"{value:.2f} s"
    if value >= 0.01:
        return f"{value * 1000:.0f} ms"
    if value >= 0.0001:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def size(value: int | None) -> str:
    """Bytes in binary units: `512 B`, `3.0 MiB`."""
    if not value:
        return ""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def shape(value: Sequence[int] | None) -> str:
    """`4x48x96`, or empty when the request had no shape."""
    return "x".join(str(v) for v in value) if value else ""


def yes(flag: bool) -> str:
    return "yes" if flag else ""


def lines(*parts: Text | str) -> Text:
    """Join lines into one Text without parsing any of them as markup."""
    out = Text()
    for index, part in enumerate(parts):
        if index:
            out.append("\n")
        out.append(part if isinstance(part, Text) else Text(part))
    return out


def field(label: str, value: object) -> Text:
    """`label: value` with the label dimmed; the value is literal."""
    out = Text(f"{label}: ", style="bold")
    out.append("" if value is None else str(value))
    return out

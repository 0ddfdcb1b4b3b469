"""Escaping for every string that comes from a trace directory (untrusted input).

Two sinks: the page's own HTML (`html_text`), and plotly labels and hover text (`plot_text`),
which plotly renders as a subset of HTML (`<b>`, `<br>`, `<a href>`...). Plotly decodes
`&lt;`/`&gt;`/`&amp;` back for display, so escaped text reads as written and never turns into
markup. Quotes are left alone in plot text: plotly shows `&quot;` literally.
"""

from __future__ import annotations

import html
import re

#: Longest trace string shown in a label (kernel names run to kilobytes of C++ templates).
LABEL_CHARS = 90


def html_text(value: object) -> str:
    """Any value as HTML text, safe in element content and in quoted attributes."""
    return html.escape(str(value), quote=True)


_CODE = re.compile(r"`([^`\n]+)`")


def html_inline(value: object) -> str:
    """Finding text as HTML: escaped, with `backticked` spans set as <code> (findings quote
    code that way in text output; a page shows the backticks literally otherwise)."""
    return _CODE.sub(r"<code>\1</code>", html_text(value))


def plot_text(value: object, limit: int | None = None) -> str:
    """A trace string for a plotly label or hover line, shortened to `limit` characters first."""
    text = shorten(str(value), limit) if limit else str(value)
    return html.escape(text, quote=False)


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    """Keep the start of a long name (a kernel's template arguments add little)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def hover(lines: list[str]) -> str:
    """Join already-escaped hover lines with plotly's line break."""
    return "<br>".join(lines)

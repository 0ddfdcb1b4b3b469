"""Text for a terminal: control characters from a trace shown escaped, never sent raw.

A trace is untrusted, and any string in it (a frame name, a guard, a kernel, a file name) may
hold terminal escapes: `\\x1b[2J` clears the screen, `\\x1b]0;...\\x07` retitles the window,
C1 controls (`\\x9b`) and bidi overrides reorder what is read. Every text renderer (analyze,
check, record's summary, error and warning lines, the progress bar and the TUI's Text) passes
what it prints through `printable`, the one place that decides: a character that is not
printable (C0 and C1 controls, DEL, escapes, line and paragraph separators, bidi and other
format characters) is written as `\\xNN` (`\\uNNNN`, `\\UNNNNNNNN`). A newline stays a line break in
multi-line text; `one_line` makes it, a tab and a carriage return a space, as a message of one
line needs. JSON output escapes by construction and HTML has its own escaping
(diag.report.escape).

The other faces take their text from here too: `one_line` for a value that must stay on its
line (a finding's title, evidence, fix and id in analyze's text, so that a frame name holding
a newline cannot forge a finding line), `label` for a Prometheus label value of the live
metrics (one line, bounded) and `annotation` for `check --format github` (escapes shown, line
breaks kept for escape_data to encode). A lone surrogate (half a UTF-16 pair, which no
encoder writes) is not printable either: it is shown as `\\udXXX`, never written raw.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

_WHITESPACE = {"\n": " ", "\t": " ", "\r": " "}


def printable(text: str, one_line: bool = False) -> str:
    """`text` with every non-printable character escaped (newlines kept unless `one_line`)."""
    if text.isprintable():
        return text
    if one_line:
        return _escape(text, one_line=True)
    return "\n".join(line if line.isprintable() else _escape(line) for line in text.split("\n"))


def one_line(text: str, limit: int | None = None) -> str:
    """`text` printable on one line (newlines, tabs and carriage returns as spaces), cut to
    `limit` characters (the last one an ellipsis) when it is longer."""
    line = printable(text, one_line=True)
    if limit is not None and len(line) > limit:
        return line[: max(0, limit - 1)] + "\u2026"
    return line


def label(value: object, limit: int) -> str:
    """A Prometheus label value: printable, one line, at most `limit` characters (the
    exposition then escapes backslashes and quotes)."""
    return one_line(value if isinstance(value, str) else str(value))[:limit]


def annotation(text: str) -> str:
    """A GitHub workflow command's message: escapes shown, line breaks kept (escape_data
    encodes them as %0A, which GitHub shows as line breaks inside the one annotation)."""
    return printable(text.replace("\r\n", "\n"))


def _escape(text: str, one_line: bool = False) -> str:
    out = []
    for char in text:
        if char.isprintable():
            out.append(char)
        elif one_line and char in _WHITESPACE:
            out.append(_WHITESPACE[char])
        else:
            code = ord(char)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            else:
                out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def print_warnings(warnings: Iterable[str]) -> None:
    """The reader's warnings (diag.trace.inputs.input_warnings) on stderr, one `diag: warning:` line
    each, as analyze, check and report print them."""
    for warning in warnings:
        print(f"diag: warning: {printable(warning, one_line=True)}", file=sys.stderr)

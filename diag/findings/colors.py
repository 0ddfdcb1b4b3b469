"""Colour for diag's text on a terminal, as compilers print diagnostics: the severity, the
location, `fix:`, the summary line. Never when piped, nor with NO_COLOR set (no-color.org);
FORCE_COLOR forces it (CI logs that render ANSI)."""

from __future__ import annotations

import os
import re
from typing import TextIO

_RESET = "\x1b[0m"
_STYLES = {
    "ERROR": "\x1b[1;31m",
    "WARNING": "\x1b[1;33m",
    "INFO": "\x1b[1;36m",
    "NOTICE": "\x1b[1;35m",
}
_BOLD, _DIM, _CYAN = "\x1b[1m", "\x1b[2m", "\x1b[36m"
_HEADLINE = re.compile(r"^(ERROR|WARNING|INFO|NOTICE)(\s+)")
_AT = re.compile(r"^(\s+at )(.*)$")
_FIX = re.compile(r"^(\s+)(fix:|how:)")
_ID = re.compile(r"^(\s+id: .*)$")
_SUMMARY = re.compile(r"^\d+ finding\(s\): ")


def use_color(stream: TextIO, choice: str = "auto") -> bool:
    """`choice` always/never, or auto: a terminal, NO_COLOR unset, TERM not dumb."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def colorize(text: str) -> str:
    """`text` (already printable: no escape of its own) with ANSI styles on its known parts."""
    out = []
    for line in text.split("\n"):
        if match := _HEADLINE.match(line):
            word = match.group(1)
            line = f"{_STYLES[word]}{word}{_RESET}{line[len(word) :]}"
        elif match := _AT.match(line):
            line = f"{match.group(1)}{_CYAN}{match.group(2)}{_RESET}"
        elif match := _FIX.match(line):
            line = f"{match.group(1)}{_BOLD}{match.group(2)}{_RESET}{line[match.end() :]}"
        elif match := _ID.match(line):
            line = f"{_DIM}{line}{_RESET}"
        elif _SUMMARY.match(line):
            line = f"{_BOLD}{line}{_RESET}"
        out.append(line)
    return "\n".join(out)

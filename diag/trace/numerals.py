"""The one reader of integers written as text in a trace: ASCII digits only, bounded length.

A trace is untrusted, and numbers reach diag as text in many places: a line number after a
file name, a compile id's frame, a size in a guard message, a rank in torchrun's report, the
n of a `steps-<n>.jsonl` file name, a glog prefix. `str.isdigit()` is true for "²" (which
`int()` refuses) and `\\d` in a regex matches "٣" (which `int()` reads as 3); past 4 300
digits `int()` raises (CPython's limit on str-to-int conversion). Each of these once stopped a
command with a traceback. `parse_int` is the one place that decides: an optional sign (when
asked for), then 1 to `max_digits` ASCII digits, nothing else; anything other is None, and
the caller treats it as "not recorded".
"""

from __future__ import annotations

import re

#: Enough for any count, size, id, line, pid or nanosecond time a trace holds (2**63 has 19).
MAX_DIGITS = 20

_UNSIGNED = re.compile(r"[0-9]+", re.ASCII)
_SIGNED = re.compile(r"[-+]?[0-9]+", re.ASCII)


def parse_int(text: object, signed: bool = False, max_digits: int = MAX_DIGITS) -> int | None:
    """`text` as an int when it is ASCII digits (with a leading sign when `signed`) of at most
    `max_digits` digits; None for anything else (other digits, spaces, too long, not a str)."""
    if not isinstance(text, str) or not text or len(text) > max_digits + 1:
        return None
    if (_SIGNED if signed else _UNSIGNED).fullmatch(text) is None:
        return None
    if len(text.lstrip("+-")) > max_digits:
        return None
    return int(text)


def is_int(text: object, signed: bool = False) -> bool:
    """Whether `parse_int` reads `text`."""
    return parse_int(text, signed) is not None

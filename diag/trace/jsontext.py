"""JSON text msgspec refused, read as the json module reads it, with no lone surrogates.

msgspec decodes valid lines 3-5x faster and refuses NaN, Infinity, 1e400, bytes that are not
UTF-8 and lone surrogates; for those lines the readers fall back on json, which accepts a
`\\ud800` escape as a str that holds half a UTF-16 pair. Such a str cannot be encoded: it
stopped msgspec's validator (which encodes the value into its message), the report, and
`check --format github`. `loads` is the one fallback decoder: bytes that are not UTF-8 and
lone surrogates both become U+FFFD, in keys and values, so no text read from a trace holds
one. Raises what json.loads raises (ValueError, RecursionError).
"""

from __future__ import annotations

import json
from typing import Any


def loads(raw: bytes | str) -> Any:
    """`raw` as json.loads reads it (invalid UTF-8 replaced), every lone surrogate U+FFFD."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
    value = json.loads(text)
    # Only an escape (`\ud8xx`..`\udfxx`) gives json a surrogate: skip the walk without one.
    if "\\ud" not in text and "\\uD" not in text:
        return value
    return _clean(value)


def clean_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (a valid pair is kept as its char)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(key): _clean(item) for key, item in value.items()}
    return value

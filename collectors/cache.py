"""Cache entries per compiled code object, at the end of each step and at exit.

Per-block compile (LightX2V's run_block, diffusers' block.compile()) sends every block through
one code object, so that code object's entry count is the number to watch. Only changes are
written per step; the exit snapshot is complete.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session


class CacheCollector:
    def __init__(self, session: Session) -> None:
        import torch._dynamo.convert_frame as convert_frame
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

        self.session = session
        self._tracker = convert_frame.input_codes
        self._entries_of = _debug_get_cache_entry_list
        self._last: dict[tuple[str, str, int], int] = {}

    def counts(self) -> dict[tuple[str, str, int], int]:
        result: dict[tuple[str, str, int], int] = {}
        for ref in list(self._tracker.seen):
            code = ref() if callable(ref) else ref
            if not isinstance(code, types.CodeType):
                continue
            count = len(self._entries_of(code))
            if count:
                key = (code.co_name, code.co_filename, code.co_firstlineno)
                result[key] = result.get(key, 0) + count
        return result

    def snapshot(self, when: str, full: bool = False, **where: Any) -> None:
        counts = self.counts()
        changed = counts if full else {k: v for k, v in counts.items() if self._last.get(k) != v}
        self._last = counts
        if not changed and not full:
            return
        self.session.emit(
            "cache_entries",
            when=when,
            full=full,
            codes=[
                {"name": name, "file": file, "line": line, "entries": entries}
                for (name, file, line), entries in sorted(changed.items())
            ],
            **where,
        )

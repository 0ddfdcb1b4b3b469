"""Cache entries per compiled code object, at the end of each step and at exit.

Per-block compile (LightX2V's run_block, diffusers' block.compile()) sends every block through
one code object, so that code object's entry count is the number to watch. Only changes are
written per step, and only steps after a compile or reset (or every 32nd) are looked at; the
exit snapshot is complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .torch_api import cache_entries, compiled_codes

if TYPE_CHECKING:
    from .protocol import Session


#: A step end snapshots the cache entries at least this often, compile or not.
RECHECK_STEPS = 32


class CacheCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._last: dict[tuple[str, str, int], int] = {}
        self._generation: tuple[int, int] | None = None
        self._steps = 0

    def step_due(self) -> bool:
        """Whether this step end needs a snapshot: entries only appear by a compile and go by
        `torch._dynamo.reset()`, both of which the compile collector counts, so a step with
        neither since the last snapshot is skipped (the walk over every compiled code object
        is most of a fast step's boundary cost); every `RECHECK_STEPS`th step is taken anyway,
        for anything that changes entries unseen (a collector that failed, a code object
        freed)."""
        compiles = self.session.compiles
        generation = (compiles.compiles, compiles.epoch) if compiles is not None else None
        self._steps += 1
        if generation is not None and generation == self._generation:
            return self._steps % RECHECK_STEPS == 0
        self._generation = generation
        return True

    def counts(self) -> dict[tuple[str, str, int], int]:
        result: dict[tuple[str, str, int], int] = {}
        for code in compiled_codes():
            count = len(cache_entries(code))
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

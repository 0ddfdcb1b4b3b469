"""Python's garbage-collector pauses the program did not ask for.

A full collection (generation 2) scans every object the process holds; after warmup those are
many (compiled graphs, guards, caches, the model's modules), and one full collection can stop
a step for hundreds of milliseconds with no compile, kernel or allocator event to show for it.
`gc.callbacks` tells of every collection: each full one, and any other that took at least
LONG_NS, becomes a `gc_pause` event with where it ran. Collections inside `gc.collect()` are the
program's own call (hygiene.py records those as `gc_collect`) and are not repeated here.

The callback runs wherever the collector does, inside any allocation, diag's own event writer
included while it holds its lock; so it only appends to a list, and the list is written at the
next step boundary and at exit (`flush`). A callback costs two clock reads per collection.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

from . import hygiene
from .hooks import ENV_FAULTS, InjectedFault

if TYPE_CHECKING:
    from .protocol import Session

#: A collection of a younger generation this long is recorded too.
LONG_NS = 10_000_000
#: This hook's name in collector_error events and DIAG_FAULTS.
HOOK = "gc_pauses.callback"
#: Pauses held between flushes at most (a process that never reaches a step boundary).
MAX_PENDING = 1024


class GcPauses:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._started = 0
        self.pending: list[dict[str, Any]] = []
        #: What the callback raised, if anything: it is off from then on (collectors/hooks.py).
        self.failed: BaseException | None = None
        self._reported = False
        self._faults = session.hooks.injects(HOOK)

    @classmethod
    def install(cls, session: Session) -> GcPauses:
        pauses = cls(session)
        gc.callbacks.append(pauses.callback)
        return pauses

    def callback(self, phase: str, info: dict[str, Any]) -> None:
        """gc.callbacks entry. Python prints what a callback raises on the program's stderr, so
        nothing may escape it. Its error is only noted here: writing an event inside a
        collection could re-enter the event writer's lock; `flush` writes it."""
        if self.failed is not None:
            return
        try:
            if self._faults:
                raise InjectedFault(f"{ENV_FAULTS} names the hook {HOOK!r}")
            self._collected(phase, info)
        except Exception as exc:  # noqa: BLE001
            self.pending.clear()
            self.failed = exc.with_traceback(None)

    def _collected(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.monotonic_ns()
            return
        started, self._started = self._started, 0
        if not started or hygiene.explicit_collects or self.session.paused:
            return
        duration = time.monotonic_ns() - started
        generation = info.get("generation")
        if (generation != 2 and duration < LONG_NS) or len(self.pending) >= MAX_PENDING:
            return
        steps = self.session.steps
        self.pending.append(
            {
                "t": started,
                "duration_s": duration / 1e9,
                "generation": generation,
                "collected": info.get("collected"),
                **(steps.position() if steps is not None else {}),
            }
        )

    def flush(self) -> None:
        """Write the pauses seen since the last flush (outside any collection)."""
        if self.failed is not None and not self._reported:
            self._reported = True
            self.session.collector_error(HOOK, self.failed)
            self.session.hooks.off.add(HOOK)
        while self.pending:
            self.session.emit("gc_pause", **self.pending.pop(0))

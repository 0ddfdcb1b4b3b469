"""Calls that undo warmup: `torch.cuda.empty_cache()` and `gc.collect()`, with where they ran.

Both are wrapped in place (the originals still run); each call becomes an event carrying the
phase, request and step, so analyzers can flag the ones made during live requests.
"""

from __future__ import annotations

import functools
import gc
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import Session

#: gc.collect() calls in progress: the collections they run are the program's own call, which
#: gc_pauses.py leaves to the `gc_collect` event.
explicit_collects = 0


def _wrap(session: Session, owner: Any, attr: str, event: str) -> None:
    original = getattr(owner, attr)
    if getattr(original, "__diag_wrapped__", False):
        return

    def caller_of(frame: Any) -> dict[str, Any]:
        return {
            "file": frame.f_code.co_filename,
            "line": frame.f_lineno,
            "name": frame.f_code.co_name,
        }

    def record(started: int, caller: dict[str, Any] | None) -> None:
        steps = session.steps
        where = steps.position() if steps is not None else {}
        session.emit(
            event,
            t=started,
            duration_s=(time.monotonic_ns() - started) / 1e9,
            caller=caller,
            **where,
        )

    hook = f"hygiene.{event}"

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if session.paused or not session.hooks.is_on(hook):  # no per-call work
            return original(*args, **kwargs)
        started = time.monotonic_ns()
        # Who called it: a library's own call (diffusers' model offload empties the cache after
        # every request) is not the user's to remove, and the fix says so.
        caller = session.guarded(hook, caller_of, sys._getframe(1))
        global explicit_collects
        explicit = event == "gc_collect"
        explicit_collects += explicit
        try:
            return original(*args, **kwargs)
        finally:
            explicit_collects -= explicit
            session.guarded(hook, record, started, caller)

    wrapper.__diag_wrapped__ = True  # type: ignore[attr-defined]
    setattr(owner, attr, wrapper)


def install(session: Session) -> None:
    _wrap(session, session.torch.cuda, "empty_cache", "empty_cache")
    _wrap(session, gc, "collect", "gc_collect")

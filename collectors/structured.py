"""One way into torch's structured trace for every collector that reads it.

torch emits its structured events (compiles, guards, symbols, metrics) to the `torch.__trace`
logger, in process and with no TORCH_TRACE file (FACTS: 3-8 ms per aot_eager compile, nothing
per step). `listen()` adds a handler there that passes each record's metadata to a collector,
and turns anything the collector raises into a `collector_error` event: a logging handler runs
inside torch and must never raise into the program.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import Session

TRACE_LOGGER = "torch.__trace"

Callback = Callable[[dict[str, Any], logging.LogRecord], None]


class _Handler(logging.Handler):
    def __init__(self, session: Session, where: str, callback: Callback) -> None:
        super().__init__(level=logging.DEBUG)
        self.session = session
        self.where = where
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        # A logging handler runs inside torch and must never raise (collectors/hooks.py).
        self.session.guarded(self.where, self.callback, metadata, record)


def listen(session: Session, where: str, callback: Callback) -> None:
    """Call `callback(metadata, record)` for each structured trace event from now on."""
    logger = logging.getLogger(TRACE_LOGGER)
    logger.setLevel(logging.DEBUG)
    logger.addHandler(_Handler(session, where, callback))

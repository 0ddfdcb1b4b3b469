"""CUDA-graph recordings and skips (`cudagraph_record`, `cudagraph_skip` events).

Under `mode="reduce-overhead"` Inductor's cudagraph trees run a new graph eagerly once, then
record it, and record again for each distinct input size of a dynamic graph and whenever a
recorded graph's invariants fail (a static input moved). A recording stops the program for a
synchronize, a capture and a pool allocation, so one in live traffic costs like a small compile.
torch runs each recording inside `callback_handler.install_callbacks(CUDAGRAPH_RECORDING, id)`:
a start and an end callback there time it, place it in the step, and read the allocator's
reserved bytes around it (the cudagraph pool grows with each recording).

Skips at run time (an input mutated outside the graph's pool, the re-record limit reached, the
distinct-size warning) are logged at WARNING on the `cudagraphs` artifact loggers and never
reach compilation_metrics; a handler added to those two loggers reads them without changing any
level, so torch prints exactly what it printed before. With `TORCH_LOGS=cudagraphs` the same
handler also reads torch's debug lines that say why a graph was re-recorded.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import Session

#: The `cudagraphs` artifact loggers (torch names them `<module>.__cudagraphs`).
LOGGERS = (
    "torch._inductor.cudagraph_utils.__cudagraphs",
    "torch._inductor.cudagraph_trees.__cudagraphs",
)
#: Debug lines worth keeping when TORCH_LOGS=cudagraphs is on: why a graph was re-recorded.
_DEBUG_KEEP = re.compile(r"Re-recording function|Recording cudagraph tree for")
_COMPILE_ID = re.compile(r"^\[(\d+/\d+(?:_\d+)?)\]\s*")
_MESSAGE_CHARS = 2000


class CudaGraphCollector:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._open: dict[str, tuple[int, int | None]] = {}

    @classmethod
    def install(cls, session: Session) -> CudaGraphCollector | None:
        collector = cls(session)
        handler = _SkipHandler(collector)
        for name in LOGGERS:
            logging.getLogger(name).addHandler(handler)
        # Dynamo's callbacks are registered when the program imports Dynamo (importing it now
        # would change what some programs compile), and again after each
        # torch._dynamo.reset(), which clears them.
        from .importhook import on_import

        def register(module: Any) -> None:
            session.install("cudagraphs.register", collector._register)

        on_import("torch._dynamo", register)
        if session.compiles is not None:
            session.compiles.after_reset.append(collector._register)
        return collector

    def _register(self) -> None:
        from .torch_api import register_compile_callbacks

        hooks = self.session.hooks
        register_compile_callbacks(
            hooks.callback("cudagraphs.start", self.on_start),
            hooks.callback("cudagraphs.end", self.on_end),
        )

    def _position(self) -> dict[str, Any]:
        steps = self.session.steps
        return steps.position() if steps is not None else {}

    def on_start(self, args: Any) -> None:
        """Dynamo's compile-start callback (`args` is None on torch before 2.8: no trigger, so
        nothing to time; collectors/torch_api.py)."""
        if _trigger(args) != "CUDAGRAPH_RECORDING":
            return
        now = time.monotonic_ns()
        self._open[str(args.compile_id)] = (now, self._reserved())
        # Its begin on its own line: a capture the process never finishes is still seen.
        self.session.emit(
            "cudagraph_record_start", t=now, compile_id=str(args.compile_id), **self._position()
        )

    def on_end(self, args: Any) -> None:
        if _trigger(args) != "CUDAGRAPH_RECORDING":
            return
        compile_id = str(args.compile_id)
        start, before = self._open.pop(compile_id, (None, None))
        after = self._reserved()
        now = time.monotonic_ns()
        self.session.emit(
            "cudagraph_record",
            t=now,
            compile_id=compile_id,
            start_t=start,
            duration_s=(now - start) / 1e9 if start is not None else None,
            reserved_before=before,
            reserved_after=after,
            **self._position(),
        )

    def on_log(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING and not _DEBUG_KEEP.search(str(record.msg)):
            return
        message = record.getMessage()
        match = _COMPILE_ID.match(message)
        self.session.emit(
            "cudagraph_skip" if record.levelno >= logging.WARNING else "cudagraph_log",
            compile_id=match.group(1) if match else None,
            message=message[match.end() if match else 0 :][:_MESSAGE_CHARS],
            **self._position(),
        )

    def _reserved(self) -> int | None:
        """The caching allocator's reserved bytes on the current device, which include the
        cudagraph trees' private pool (one nested-stats call, as the step tracker reads)."""
        cuda = self.session.torch.cuda
        if not cuda.is_initialized():
            return None
        stats = cuda.memory_stats_as_nested_dict()
        try:
            return int(stats["reserved_bytes"]["all"]["current"])
        except (KeyError, TypeError):
            return None


def _trigger(args: Any) -> str:
    trigger = getattr(args, "callback_trigger", None)
    return str(getattr(trigger, "name", trigger))


class _SkipHandler(logging.Handler):
    """Passes the cudagraphs loggers' records to the collector; never raises into torch."""

    def __init__(self, collector: CudaGraphCollector) -> None:
        super().__init__(logging.DEBUG)
        self.collector = collector

    def emit(self, record: logging.LogRecord) -> None:
        # A logging handler must never raise: the hook guard catches and turns it off.
        self.collector.session.guarded("cudagraphs.log", self.collector.on_log, record)

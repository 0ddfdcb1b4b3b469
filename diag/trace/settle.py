"""The last pass of reading a run: what only the whole run's events settle.

Called once by the loader (diag.trace.run) after every event file of a run is read:

- a request whose first step reports another shape than the request was opened with takes the
  step's: steps carry the request's shape unless an adapter found it wrong at the first step
  and corrected it (writing a `collector_error` that says so, where `adapter.request_shape`);
- what processes began and never ended (diag.trace.inflight).
"""

from __future__ import annotations

from diag.trace.inflight import add_unfinished
from diag.trace.run import RunData


def settle(run: RunData) -> None:
    correct_request_shapes(run)
    add_unfinished(run)


def correct_request_shapes(run: RunData) -> None:
    for request in run.requests:
        step = request.first_step
        first = step.shape if step is not None else None
        if isinstance(first, list) and first and first != request.shape:
            request.shape = first

"""Phase, request and step boundaries, whoever reports them (an adapter, the generic hooks, or
the public API in diag.api), and what is measured at each step end.

Step times are host wall times on the shared monotonic clock. Where the program uses CUDA, each
step also gets CUDA events at its edges, resolved later without a synchronize, so recording
adds no sync to the program's step loop.
"""

from __future__ import annotations

import os
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from diag.trace.format import ENV_WARMUP_REQUESTS, env_count

if TYPE_CHECKING:
    from .session import Session

PHASE_WARMUP = "warmup"
PHASE_LIVE = "live"
#: A request label longer than this is cut (a client can choose LightX2V's task id).
LABEL_MAX = 128


def warmup_requests_from_env() -> int:
    """`diag record --warmup-requests N`: N, or 0 (none counted) when unset or malformed."""
    value = os.environ.get(ENV_WARMUP_REQUESTS, "")
    return env_count(value)


class StepTracker:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.torch = session.torch
        self.phase = PHASE_LIVE
        self.request_id: str | None = None
        self.request_shape: list[int] | None = None
        self.request_steps: int | None = None
        self.request_seq = 0
        self.step_index: int | None = None
        self.next_step = 0
        self.step_start_t: int | None = None
        self.steps_done = 0
        self.region_calls: dict[str, int] = {}
        self._gpu_start: Any = None
        self._cpu_start = 0
        self._pending_gpu: deque[tuple[str | None, int, Any, Any]] = deque()
        # The CUDA event recorded at the end of the open step's latest outermost compiled call
        # (`call_ended`), and that moment: where an inferred step that ends there ends on the GPU.
        self._call_event: Any = None
        self._call_event_at: tuple[int, int] | None = None
        # --warmup-requests: how many of the first requests are warmup, and whether the open
        # request is one that this count (not the program) put in the warmup phase.
        self.warmup_requests = warmup_requests_from_env()
        self._counted_warmup = False

    # -- position, attached to compile events ---------------------------------------------------

    def position(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "request_id": self.request_id,
            "step": self.step_index,
        }

    # -- boundaries -------------------------------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.session.emit("phase", phase=phase)

    def request_start(
        self,
        request_id: str | None = None,
        shape: list[int] | None = None,
        steps: int | None = None,
        label: str | None = None,
    ) -> str:
        """Open a request. `label` is the program's own name for it (LightX2V's task id): shown
        beside diag's id, never in place of it, since finding ids must not change run to run."""
        if self.session.paused:  # Session.pause: no request is recorded
            return request_id or ""
        if self.request_id is not None:
            self.request_end()
        self.request_seq += 1
        if self.request_seq <= self.warmup_requests and self.phase != PHASE_WARMUP:
            # One of the first N requests of the process (every request counts, those the
            # program itself marks as warmup too): warmup, whoever reported it.
            self.set_phase(PHASE_WARMUP)
            self._counted_warmup = True
        self.request_id = (
            request_id or f"{'w' if self.phase == PHASE_WARMUP else 'r'}{self.request_seq}"
        )
        self.request_shape = shape
        self.request_steps = steps  # as the adapter declared it; None when unknown
        self.next_step = 0
        self.session.emit(
            "request_start",
            request_id=self.request_id,
            phase=self.phase,
            shape=shape,
            steps=steps,
            **({"label": label[:LABEL_MAX]} if label else {}),
        )
        profiler = self.session.profiler
        if profiler is not None:
            self.session.guarded("profiling.request", profiler.on_request_start, self)
        return self.request_id

    def request_end(self) -> None:
        if self.session.paused:
            return
        if self.step_index is not None:
            self.step_end()
        if self.request_id is None:
            return
        self.session.emit("request_end", request_id=self.request_id, phase=self.phase)
        profiler = self.session.profiler
        if profiler is not None:
            self.session.guarded("profiling.request_end", profiler.on_request_end, self)
        self.request_id = None
        self.request_shape = None
        if self._counted_warmup:
            self._counted_warmup = False
            self.set_phase(PHASE_LIVE)

    def step_start(self, index: int | None = None, shape: list[int] | None = None) -> None:
        if self.session.paused:
            return
        if self.step_index is not None:
            self.step_end()
        if self.request_id is None:
            self.request_start(shape=shape)
        if shape is not None and self.request_shape is None:
            self.request_shape = shape
        self.step_index = self.next_step if index is None else index
        self.next_step = self.step_index + 1
        self.region_calls.clear()
        profiler = self.session.profiler
        profiled = bool(profiler is not None and profiler.before_step(self))
        # A request's first step: the allocator's figures at its start too, so that growth is
        # measured inside the step (after an empty_cache() the previous step's end says
        # nothing). Only there: a stats read costs ~100 us on an H200 host.
        memory = self._memory() if self.step_index == 0 else None
        self.step_start_t = time.monotonic_ns()
        self._cpu_start = time.process_time_ns()
        self._gpu_start = self._cuda_event()
        self.session.emit(
            "step_start",
            t=self.step_start_t,
            request_id=self.request_id,
            step=self.step_index,
            phase=self.phase,
            shape=self.request_shape,
            profiled=profiled,
            **({"memory": memory} if memory else {}),
        )

    def step_end(self, at: tuple[int, int] | None = None) -> None:
        """End the open step now, or at `at` (monotonic ns, process CPU ns) when an adapter
        learns only later that the step ended earlier (inferred steps end at their last call)."""
        if self.step_index is None or self.session.paused:
            return
        t, cpu_ns = at if at is not None else (time.monotonic_ns(), time.process_time_ns())
        cpu_s = (cpu_ns - self._cpu_start) / 1e9
        if at is None:
            gpu_end = self._cuda_event()
        else:
            # Ended at its last call: its GPU time ends at the event recorded there, never at
            # now (which would add the loop's tail, a sync, a print, the next request's set-up).
            # Without one the step has no GPU time rather than a wrong one.
            gpu_end = self._call_event if self._call_event_at == at else None
            self._call_event, self._call_event_at = None, None
        profiler = self.session.profiler
        profiled = bool(profiler is not None and profiler.active)
        fields: dict[str, Any] = {}
        memory = self._memory()
        if memory:
            fields["memory"] = memory
        self.session.emit(
            "step_end",
            t=t,
            request_id=self.request_id,
            step=self.step_index,
            phase=self.phase,
            wall_s=(t - (self.step_start_t or t)) / 1e9,
            cpu_s=cpu_s,
            host_load=_host_load(),
            profiled=profiled,
            **fields,
        )
        if self._gpu_start is not None and gpu_end is not None:
            self._pending_gpu.append((self.request_id, self.step_index, self._gpu_start, gpu_end))
        self._resolve_gpu(block=False)
        pauses = self.session.gc_pauses
        if pauses is not None and pauses.pending:  # collected during the step: written now
            self.session.guarded("gc_pauses", pauses.flush)
        step = self.step_index
        self.step_index = None
        self.steps_done += 1
        cache = self.session.cache
        if cache is not None and cache.step_due():
            self.session.guarded(
                "cache.step",
                lambda: cache.snapshot("step_end", False, request_id=self.request_id, step=step),
            )
        if profiler is not None:
            self.session.guarded("profiling.after", profiler.after_step, self)

    def close(self) -> None:
        if self.request_id is not None:
            self.request_end()
        self._resolve_gpu(block=True)

    # -- measurements -----------------------------------------------------------------------------

    def call_ended(self, may_end_step: bool = True) -> tuple[int, int]:
        """An outermost call into compiled code ended now: the moment (monotonic ns, process
        CPU ns) an inferred step may later be found to have ended at (`step_end(at)`). When the
        call `may_end_step` and a GPU step time is being measured, a CUDA event is recorded at
        it too (one event per step, recorded again: about 10 us a call on an H200 host, so the
        adapters ask only for calls that can end a step). A step that ends at a call without
        one gets no GPU time rather than a wrong one."""
        at = (time.monotonic_ns(), time.process_time_ns())
        if may_end_step and self.step_index is not None and self._gpu_start is not None:
            try:  # runs in the program's call path: a CUDA error here is the program's to see
                if self._call_event is None:
                    self._call_event = self.torch.cuda.Event(enable_timing=True)
                self._call_event.record()
                self._call_event_at = at
            except Exception:  # noqa: BLE001
                self._call_event, self._call_event_at = None, None
        return at

    def _cuda_event(self) -> Any:
        cuda = self.torch.cuda
        if not cuda.is_initialized():
            return None
        event = cuda.Event(enable_timing=True)
        event.record()
        return event

    def _resolve_gpu(self, block: bool) -> None:
        """Emit GPU step times whose end events have completed (all of them when `block`)."""
        while self._pending_gpu:
            request_id, step, start, end = self._pending_gpu[0]
            if block:
                end.synchronize()
            elif not end.query():
                return
            self._pending_gpu.popleft()
            self.session.emit(
                "step_gpu", request_id=request_id, step=step, gpu_s=start.elapsed_time(end) / 1e3
            )

    def _memory(self) -> dict[str, int] | None:
        """Allocator figures at the step end, from one nested-stats call: memory_allocated() and
        friends each flatten and sort the whole stats dict (about 100 us apiece on an H200
        host), which would make this the most expensive thing diag does per step."""
        cuda = self.torch.cuda
        if not cuda.is_initialized():
            return None
        stats = cuda.memory_stats_as_nested_dict()
        try:
            allocated = stats["allocated_bytes"]["all"]
            return {
                "allocated": int(allocated["current"]),
                "reserved": int(stats["reserved_bytes"]["all"]["current"]),
                "max_allocated": int(allocated["peak"]),
            }
        except (KeyError, TypeError):  # an allocator backend without these stats
            return None


#: (monotonic seconds when read, value) of the last load-average read.
_load_read: tuple[float, float | None] = (-1e9, None)
#: The kernel recomputes the load average every 5 s: reading it more often than once a second
#: (a /proc read, ~15 us) would cost a fast step's boundary a third of its time for nothing.
_LOAD_EVERY_S = 1.0


def _host_load() -> float | None:
    """Runnable tasks per CPU over the last minute (os.getloadavg over os.cpu_count): above 1,
    other work waited for a CPU, and step times carry the host's noise. None where unknown."""
    global _load_read
    now = time.monotonic()
    if now - _load_read[0] < _LOAD_EVERY_S:
        return _load_read[1]
    try:
        value: float | None = round(os.getloadavg()[0] / (os.cpu_count() or 1), 3)
    except (AttributeError, OSError):
        value = None
    _load_read = (now, value)
    return value

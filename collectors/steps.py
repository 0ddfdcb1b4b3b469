"""Phase, request and step boundaries, whoever reports them (an adapter, the generic hooks, or
the public API in diag.api), and what is measured at each step end.

Step times are host wall times on the shared monotonic clock. Where the program uses CUDA, each
step also gets CUDA events at its edges, resolved later without a synchronize, so recording
adds no sync to the program's step loop.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from diag.trace.format import ENV_WARMUP_REQUESTS, env_count

if TYPE_CHECKING:
    from .protocol import Session

PHASE_WARMUP = "warmup"
PHASE_LIVE = "live"
#: A request label longer than this is cut (a client can choose LightX2V's task id).
LABEL_MAX = 128


def warmup_requests_from_env() -> int:
    """`diag record --warmup-requests N`: N, or 0 (none counted) when unset or malformed."""
    value = os.environ.get(ENV_WARMUP_REQUESTS, "")
    return env_count(value)


class Lane:
    """One thread's request and step: a request is the thread's that serves it, and what
    happens in a thread (a step boundary, a compile) belongs to the step open in that thread."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.request_id: str | None = None
        self.request_shape: list[int] | None = None
        self.request_steps: int | None = None
        #: The process-wide number of the lane's latest request (lightx2v.py compares it).
        self.request_seq = 0
        self.step_index: int | None = None
        self.next_step = 0
        self.step_start_t: int | None = None
        self.region_calls: dict[str, int] = {}
        self.gpu_start: Any = None
        self.cpu_start = 0
        # The CUDA event recorded at the end of the open step's latest outermost compiled call
        # (`call_ended`), and that moment: where an inferred step that ends there ends on the GPU.
        self.call_event: Any = None
        self.call_event_at: tuple[int, int] | None = None
        #: The open request is one of the first --warmup-requests N: warmup, in this lane only.
        self.counted_warmup = False

    @property
    def idle(self) -> bool:
        return self.request_id is None and not self.thread.is_alive()


class StepTracker:
    """Phase (process-wide, as the program or its adapter sets it) and, per thread, the open
    request and step (`Lane`). The attributes below read and write the calling thread's lane,
    so an adapter, the profiler windows and the API see the thread they run in."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.torch = session.torch
        self.process_phase = PHASE_LIVE
        self.steps_done = 0
        #: diag's own work at step ends, on the program's thread after the step's end was
        #: taken (its event, allocator stats, gc and cache writes; a profiler window's stop is
        #: timed on its own, profile_window_end.export_s): total and longest, monotonic ns.
        self.end_work_ns = 0
        self.end_work_max_ns = 0
        self._seq = 0
        self._lock = threading.Lock()
        self._local = threading.local()
        #: Every thread's lane (those of finished threads are dropped once idle).
        self.lanes: list[Lane] = []
        self._pending_gpu: deque[tuple[str | None, int, Any, Any]] = deque()
        self._resolving = threading.Lock()
        # --warmup-requests: how many of the first requests (in the order the program starts
        # them, in any thread) are warmup.
        self.warmup_requests = warmup_requests_from_env()

    def lane(self) -> Lane:
        """The calling thread's lane."""
        lane: Lane | None = getattr(self._local, "lane", None)
        if lane is None:
            lane = Lane(threading.current_thread())
            with self._lock:
                self.lanes = [kept for kept in self.lanes if not kept.idle]
                self.lanes.append(lane)
            self._local.lane = lane
        return lane

    # -- the calling thread's state -------------------------------------------------------------

    @property
    def phase(self) -> str:
        return PHASE_WARMUP if self.lane().counted_warmup else self.process_phase

    @property
    def request_id(self) -> str | None:
        return self.lane().request_id

    @property
    def request_shape(self) -> list[int] | None:
        return self.lane().request_shape

    @request_shape.setter
    def request_shape(self, shape: list[int] | None) -> None:
        self.lane().request_shape = shape

    @property
    def request_steps(self) -> int | None:
        return self.lane().request_steps

    @property
    def request_seq(self) -> int:
        return self.lane().request_seq

    @property
    def step_index(self) -> int | None:
        return self.lane().step_index

    @property
    def next_step(self) -> int:
        return self.lane().next_step

    @property
    def step_start_t(self) -> int | None:
        return self.lane().step_start_t

    @property
    def region_calls(self) -> dict[str, int]:
        return self.lane().region_calls

    # -- position, attached to compile events ---------------------------------------------------

    def position(self) -> dict[str, Any]:
        """Where the calling thread is: a compile belongs to the step open in its thread."""
        lane = self.lane()
        return {
            "phase": self._phase(lane),
            "request_id": lane.request_id,
            "step": lane.step_index,
            "thread": lane.thread.name,
        }

    def _phase(self, lane: Lane) -> str:
        return PHASE_WARMUP if lane.counted_warmup else self.process_phase

    # -- boundaries -------------------------------------------------------------------------------

    def set_phase(self, phase: str) -> None:
        if phase != self.process_phase:
            self.process_phase = phase
            self.session.emit("phase", phase=phase)

    def request_start(
        self,
        request_id: str | None = None,
        shape: list[int] | None = None,
        steps: int | None = None,
        label: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> str:
        """Open a request in the calling thread. `label` is the program's own name for it
        (LightX2V's task id): shown beside diag's id, never in place of it, since finding ids
        must not change run to run. `params`: the scalar arguments the call site passed
        besides the shape (a diffusers pipeline call's `guidance_scale`)."""
        if self.session.paused:  # Session.pause: no request is recorded
            return request_id or ""
        lane = self.lane()
        if lane.request_id is not None:
            self.request_end_in(lane)
        with self._lock:
            self._seq += 1
            seq = self._seq
        lane.request_seq = seq
        # One of the first N requests of the process (every request counts, those the program
        # itself marks as warmup too): warmup, whoever reported it, in whichever thread.
        lane.counted_warmup = seq <= self.warmup_requests and self.process_phase != PHASE_WARMUP
        phase = self._phase(lane)
        lane.request_id = request_id or f"{'w' if phase == PHASE_WARMUP else 'r'}{seq}"
        lane.request_shape = shape
        lane.request_steps = steps  # as the adapter declared it; None when unknown
        lane.next_step = 0
        self.session.emit(
            "request_start",
            request_id=lane.request_id,
            phase=phase,
            shape=shape,
            steps=steps,
            thread=lane.thread.name,
            **({"label": label[:LABEL_MAX]} if label else {}),
            **({"params": params} if params else {}),
        )
        profiler = self.session.profiler
        if profiler is not None:
            self.session.guarded("profiling.request", profiler.on_request_start, self)
        return lane.request_id

    def request_end(self) -> None:
        if not self.session.paused:
            self.request_end_in(self.lane())

    def request_end_in(self, lane: Lane) -> None:
        """End `lane`'s request; the profiler hears of it only from the lane's own thread."""
        if lane.step_index is not None:
            self.step_end_in(lane)
        if lane.request_id is None:
            return
        self.session.emit(
            "request_end",
            request_id=lane.request_id,
            phase=self._phase(lane),
            thread=lane.thread.name,
        )
        profiler = self.session.profiler
        if profiler is not None and lane is self.lane():
            self.session.guarded("profiling.request_end", profiler.on_request_end, self)
        lane.request_id = None
        lane.request_shape = None
        lane.counted_warmup = False

    def step_start(self, index: int | None = None, shape: list[int] | None = None) -> None:
        if self.session.paused:
            return
        lane = self.lane()
        if lane.step_index is not None:
            self.step_end_in(lane)
        if lane.request_id is None:
            self.request_start(shape=shape)
        if shape is not None and lane.request_shape is None:
            lane.request_shape = shape
        lane.step_index = lane.next_step if index is None else index
        lane.next_step = lane.step_index + 1
        lane.region_calls.clear()
        profiler = self.session.profiler
        profiled = bool(profiler is not None and profiler.before_step(self))
        # A request's first step: the allocator's figures at its start too, so that growth is
        # measured inside the step (after an empty_cache() the previous step's end says
        # nothing). Only there: a stats read costs ~100 us on an H200 host.
        memory = self._memory() if lane.step_index == 0 else None
        lane.step_start_t = time.monotonic_ns()
        lane.cpu_start = time.process_time_ns()
        lane.gpu_start = self._cuda_event()
        self.session.emit(
            "step_start",
            t=lane.step_start_t,
            request_id=lane.request_id,
            step=lane.step_index,
            phase=self._phase(lane),
            shape=lane.request_shape,
            profiled=profiled,
            thread=lane.thread.name,
            **({"memory": memory} if memory else {}),
        )

    def step_end(self, at: tuple[int, int] | None = None) -> None:
        """End the calling thread's open step now, or at `at` (monotonic ns, process CPU ns)
        when an adapter learns only later that the step ended earlier (inferred steps end at
        their last call)."""
        if not self.session.paused:
            self.step_end_in(self.lane(), at)

    def step_end_in(self, lane: Lane, at: tuple[int, int] | None = None) -> None:
        if lane.step_index is None or self.session.paused:
            return
        work_started = time.monotonic_ns()
        t, cpu_ns = at if at is not None else (work_started, time.process_time_ns())
        # Process CPU time: with several threads serving at once it is theirs together.
        cpu_s = (cpu_ns - lane.cpu_start) / 1e9
        if at is None:
            gpu_end = self._cuda_event()
        else:
            # Ended at its last call: its GPU time ends at the event recorded there, never at
            # now (which would add the loop's tail, a sync, a print, the next request's set-up).
            # Without one the step has no GPU time rather than a wrong one.
            gpu_end = lane.call_event if lane.call_event_at == at else None
            lane.call_event, lane.call_event_at = None, None
        own = lane is self.lane()
        profiler = self.session.profiler
        profiled = bool(profiler is not None and profiler.active)
        fields: dict[str, Any] = {}
        memory = self._memory()
        if memory:
            fields["memory"] = memory
        self.session.emit(
            "step_end",
            t=t,
            request_id=lane.request_id,
            step=lane.step_index,
            phase=self._phase(lane),
            wall_s=(t - (lane.step_start_t or t)) / 1e9,
            cpu_s=max(cpu_s, 0.0),
            host_load=_host_load(),
            profiled=profiled,
            thread=lane.thread.name,
            **fields,
        )
        if lane.gpu_start is not None and gpu_end is not None:
            self._pending_gpu.append((lane.request_id, lane.step_index, lane.gpu_start, gpu_end))
        self._resolve_gpu(block=False)
        pauses = self.session.gc_pauses
        if pauses is not None and pauses.pending:  # collected during the step: written now
            self.session.guarded("gc_pauses", pauses.flush)
        step = lane.step_index
        request_id = lane.request_id
        lane.step_index = None
        self.steps_done += 1
        cache = self.session.cache
        if cache is not None and cache.step_due():
            self.session.guarded(
                "cache.step",
                lambda: cache.snapshot("step_end", False, request_id=request_id, step=step),
            )
        work = time.monotonic_ns() - work_started
        self.end_work_ns += work
        self.end_work_max_ns = max(self.end_work_max_ns, work)
        if profiler is not None and own:
            self.session.guarded("profiling.after", profiler.after_step, self)

    def close(self) -> None:
        """At exit: every thread's open request ends (a worker may still hold one)."""
        for lane in list(self.lanes):
            if lane.request_id is not None:
                self.request_end_in(lane)
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
        lane = self.lane()
        if may_end_step and lane.step_index is not None and lane.gpu_start is not None:
            try:  # runs in the program's call path: a CUDA error here is the program's to see
                if lane.call_event is None:
                    lane.call_event = self.torch.cuda.Event(enable_timing=True)
                lane.call_event.record()
                lane.call_event_at = at
            except Exception:  # noqa: BLE001
                lane.call_event, lane.call_event_at = None, None
        return at

    def _cuda_event(self) -> Any:
        cuda = self.torch.cuda
        if not cuda.is_initialized():
            return None
        event = cuda.Event(enable_timing=True)
        event.record()
        return event

    def _resolve_gpu(self, block: bool) -> None:
        """Emit GPU step times whose end events have completed (all of them when `block`).
        One thread at a time; another thread's step end finds the rest."""
        if not self._resolving.acquire(blocking=block):
            return
        try:
            while self._pending_gpu:
                request_id, step, start, end = self._pending_gpu[0]
                if block:
                    end.synchronize()
                elif not end.query():
                    return
                self._pending_gpu.popleft()
                self.session.emit(
                    "step_gpu",
                    request_id=request_id,
                    step=step,
                    gpu_s=start.elapsed_time(end) / 1e3,
                )
        finally:
            self._resolving.release()

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

"""One trial read from its trace: its live steps with their times on every clock, and the events
that can spoil a measurement (compiles, CUDA-graph recordings, autotuning, recompile-limit hits,
empty_cache calls, allocator figures). Standard library and the trace reader only: `diag check
--bench` imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from diag.benchmark.capture import read_output
from diag.benchmark.program_clock import Alignment, align, parse_infer_main
from diag.errors import DiagError
from diag.evidence.fallback import eager_extent
from diag.evidence.own_pauses import StepKey, paid_steps
from diag.trace.format import STATUS_COMPLETE
from diag.trace.load import load_trace
from diag.trace.run import Compile, Event, Process, RunData, Step

Shape = tuple[int, ...] | None


@dataclass(frozen=True)
class TimedStep:
    """A live step and its time on each clock diag may use (None: that clock has no figure)."""

    request_id: str
    index: int
    shape: Shape
    start_t: int
    end_t: int
    wall_s: float | None
    gpu_s: float | None
    program_s: float | None
    profiled: bool
    reserved: int | None  # allocator bytes at the step's end (CUDA only)
    allocated: int | None
    cpu_s: float | None = None  # the process's CPU time in the step
    host_load: float | None = None  # runnable tasks per CPU when it ended
    #: Seconds of diag's own pauses (a profiler window's stop) a program's timer holds in this
    #: step (diag/evidence/own_pauses.py): such a step is left out of every figure, as a profiled
    #: one.
    diag_pause_s: float = 0.0

    @property
    def counted(self) -> bool:
        """Neither profiled nor holding diag's own pause: the program's time alone."""
        return not self.profiled and not self.diag_pause_s


@dataclass(frozen=True)
class LiveRequest:
    request_id: str
    shape: Shape
    start_t: int
    end_t: int | None
    steps: tuple[TimedStep, ...]


@dataclass(frozen=True)
class LimitHit:
    """A frame of the measured process that hit the recompile limit, and which of its later
    calls ran eagerly (diag.evidence.fallback: the recorder's guard checks, or unknown)."""

    frame: str
    where: str  # `w3 step 0`, `warmup`
    t: int
    known: bool  # the recorder checked the later calls' guards
    eager: dict[str, int]  # request id -> calls that matched no entry and ran eagerly


@dataclass
class Trial:
    """One trial of one configuration, as read from its trace directory."""

    config: str
    number: int  # from 1
    trace: Path
    problem: str | None = None  # why the trial cannot be used at all
    requests: list[LiveRequest] = field(default_factory=list)
    compiles: list[Compile] = field(default_factory=list)  # of the measured process
    events: list[Event] = field(default_factory=list)  # of the measured process
    program_clock: Alignment = field(default_factory=lambda: Alignment({}, "not read"))
    has_gpu_times: bool = False
    has_memory: bool = False
    pid: int | None = None
    limit_hits: list[LimitHit] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return self.problem is None

    @property
    def steps(self) -> list[TimedStep]:
        return [step for request in self.requests for step in request.steps]


def _shape(value: list[int] | None) -> Shape:
    if not value:
        return None
    try:
        return tuple(int(d) for d in value)
    except (TypeError, ValueError):
        return None


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _main_process(run: RunData) -> Process | None:
    """The process whose steps are measured: the one with most live steps (rank 0 on a tie).
    Under torchrun the ranks wait for each other at every step, so any one rank's steps time
    the service; a launcher process with no steps is never it."""
    counts: dict[int, int] = {}
    for step in run.steps:
        if step.phase == "live":
            counts[step.pid] = counts.get(step.pid, 0) + 1
    if not counts:
        return None
    return max(
        (p for p in run.processes if p.pid in counts),
        key=lambda p: (counts[p.pid], -(p.rank or 0)),
        default=None,
    )


def load_trial(config: str, number: int, trace: Path) -> Trial:
    trial = Trial(config, number, trace)
    try:
        loaded = load_trace(trace)
    except (DiagError, OSError) as exc:
        trial.problem = f"unreadable trace: {getattr(exc, 'message', exc)}"
        return trial
    run = loaded.compiled
    if run is None:
        trial.problem = "the trace holds no run"
        return trial
    status = run.status or loaded.manifest.get("status")
    if status != STATUS_COMPLETE:
        trial.problem = f"the recording is {status or 'of unknown status'}, not complete"
        return trial
    process = _main_process(run)
    if process is None:
        trial.problem = "no live steps (diag found no requests after warmup)"
        return trial
    trial.pid = process.pid
    steps = sorted((s for s in run.steps if s.pid == process.pid), key=lambda s: s.start_t)
    output = read_output(trace, run.label)
    if output is None:
        trial.program_clock = Alignment({}, "no captured program output in the trace")
    else:
        logged = parse_infer_main(output[1]) or parse_infer_main(output[0])
        trial.program_clock = align(logged, steps)
    trial.requests = _live_requests(run, process.pid, trial.program_clock, paid_steps(run))
    if not trial.requests:
        trial.problem = "no finished live steps"
        return trial
    trial.compiles = [c for c in run.compiles if c.pid == process.pid]
    trial.events = [e for e in run.events if e.pid == process.pid]
    trial.limit_hits = [_limit_hit(run, e) for e in trial.events if e.kind == "recompile_limit"]
    live = trial.steps
    trial.has_gpu_times = all(s.gpu_s is not None for s in live)
    trial.has_memory = any(s.reserved is not None for s in live)
    return trial


def _limit_hit(run: RunData, event: Event) -> LimitHit:
    extent = eager_extent(run, event)
    frame = extent.frame.name if extent.frame is not None else "a frame"
    phase, request, index = event.position
    where = (
        phase if request is None else f"{request} step {index}" if index is not None else request
    )
    eager: dict[str, int] = {}
    for (_, rid, _), calls in extent.eager.items():
        if rid is not None:
            eager[rid] = eager.get(rid, 0) + calls
    return LimitHit(frame, where, event.t, extent.known, eager)


def _live_requests(
    run: RunData, pid: int, clock: Alignment, paid: dict[StepKey, float]
) -> list[LiveRequest]:
    """The process's live requests in order, each with its finished steps in order."""
    by_request: dict[str, list[Step]] = {}
    for step in run.steps:
        if step.pid == pid and step.phase == "live" and step.end_t is not None:
            by_request.setdefault(step.request_id, []).append(step)
    requests: list[LiveRequest] = []
    for request in run.requests:
        if request.pid != pid or request.phase != "live":
            continue
        steps = sorted(by_request.get(request.request_id, []), key=lambda s: s.start_t)
        # The request's shape, else its first step's (a diffusers pipeline call reports its
        # shape per step): every step of a request counts under one shape, the request's.
        shape = _shape(request.shape) or next((_shape(s.shape) for s in steps if s.shape), None)
        if steps:
            timed = tuple(
                _timed(step, shape, clock, paid.get((pid, step.request_id, step.index), 0.0))
                for step in steps
            )
            requests.append(
                LiveRequest(request.request_id, shape, request.start_t, request.end_t, timed)
            )
    return requests


def _timed(step: Step, request_shape: Shape, clock: Alignment, paused_s: float) -> TimedStep:
    memory = step.memory if isinstance(step.memory, dict) else {}
    reserved, allocated = memory.get("reserved"), memory.get("allocated")
    assert step.end_t is not None
    return TimedStep(
        request_id=step.request_id,
        index=step.index,
        shape=request_shape,
        start_t=step.start_t,
        end_t=step.end_t,
        wall_s=_number(step.wall_s),
        gpu_s=_number(step.gpu_s),
        program_s=clock.seconds.get((step.request_id, step.index)),
        profiled=step.profiled,
        reserved=reserved if isinstance(reserved, int) else None,
        allocated=allocated if isinstance(allocated, int) else None,
        cpu_s=_number(step.cpu_s),
        host_load=_number(step.host_load),
        diag_pause_s=paused_s,
    )

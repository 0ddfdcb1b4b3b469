"""Profiled steps: each Kineto window of a run, cut into the steps it covers.

A window (docs/FORMAT.md) holds one or more steps. Steps are cut on the trace's own clock:
each window (else the process, in older traces) writes `wall_ns` beside its monotonic `t` when
it starts, and Kineto stamps events in unix time (`baseTimeNanoseconds` + `ts`), so a step's
`[start_t, end_t)` maps onto the trace to within microseconds. GPU work belongs to the step
whose CPU side launched it, however late it ran. Traces without the anchor fall back to the
order of `diag.region:<fn>#0` markers.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.trace.confine import MAX_WINDOW_BYTES, OutsideTrace, inside
from diag.trace.progress import ProgressCallback
from diag.trace.run import Event, Process, RunData, Step

REGION_PREFIX = "diag.region:"
# torch writes `ProfilerStep#<int>`; a hand-made or foreign trace may not (`#abc`, `#1.5`).
_STEP_NUMBER = re.compile(r"ProfilerStep#([0-9]{1,18})")


@dataclass
class StepProfile:
    """One profiled step, with the Kineto records that belong to it."""

    run: str
    pid: int
    rank: int | None
    request_id: str
    step: int
    phase: str
    window: str
    platform: str
    start_ts: float
    end_ts: float
    activities: list[Any] = field(default_factory=list)  # diag.trace.kineto.Activity
    cpu_ops: list[Any] = field(default_factory=list)  # diag.trace.kineto.CpuOp
    syncs: list[Any] = field(default_factory=list)  # diag.trace.kineto.Sync
    annotations: list[Any] = field(default_factory=list)  # diag.trace.kineto.Annotation
    #: When the GPU could start on this step: the end of the previous step's GPU work when the
    #: GPU runs behind the CPU, or the first GPU activity of a trace cut into no steps. GPU time
    #: before it belongs to earlier work, not to this step's idle.
    gpu_from_ts: float | None = None
    #: GPU names from the trace's deviceProperties (empty when the trace has none).
    devices: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int | None, str, int]:
        """What aligns this step with the same step of another run."""
        return (self.rank, self.request_id, self.step)

    @property
    def kernels(self) -> list[Any]:
        return [a for a in self.activities if a.kind == "kernel"]

    @property
    def span_s(self) -> float:
        """From the step's start to the end of the last GPU work it launched."""
        end: float = max([self.end_ts, *(a.ts + a.dur for a in self.activities)])
        return max(0.0, end - self.start_ts) / 1e6

    @property
    def gpu_end_ts(self) -> float | None:
        """The end of the last GPU work this step launched; None without GPU work."""
        return max((a.ts + a.dur for a in self.activities), default=None)

    @property
    def gpu_span_s(self) -> float:
        """The step's GPU window: from when the GPU could start on it (its start, or later when
        earlier work still ran) to the end of its GPU work. Idle is measured inside it."""
        end = self.gpu_end_ts
        if end is None:
            return 0.0
        start = max(self.start_ts, self.gpu_from_ts or self.start_ts)
        return max(0.0, end - start) / 1e6


def step_profiles(run: RunData, progress: ProgressCallback | None = None) -> list[StepProfile]:
    """The run's profiled steps (parsed once per RunData; Kineto parses are cached on disk)."""
    if run.profiles is None:
        run.profiles = _load(run, progress)
    return run.profiles


def _load(run: RunData, progress: ProgressCallback | None) -> list[StepProfile]:
    cache = importlib.import_module("diag.trace.kinetocache")
    windows = window_files(run)
    total = sum(_size(path) for _, _, path, _ in windows) or 1
    done = 0
    profiles: list[StepProfile] = []

    # Many windows to parse (many ranks): parsed in worker processes first, the rest below.
    parallel = importlib.import_module("diag.trace.parallel")

    def parsed_one(size: int) -> None:
        nonlocal done
        done += size
        if progress is not None:
            progress(done, total)

    jobs = [
        (process, window, path, steps, run.window_cache(process))
        for process, window, path, steps in windows
    ]
    cut = parallel.profile_windows(run.label, jobs, parsed_one)
    for process, window, path, steps in windows:
        if path in cut:  # counted in `done` when its worker finished
            profiles.extend(cut[path])
            continue
        base = done

        def forward(part: int, _whole: int, base: int = base) -> None:
            if progress is not None:
                progress(base + part, total)

        try:
            trace = cache.load_kineto(
                path, run.window_cache(process), forward if progress else None
            )
        except DiagError as exc:  # one bad window: the others are still read
            skip_window(run, process, window, exc)
        else:
            profiles.extend(cut_window(run.label, process, window, trace, steps))
        done += _size(path)
        if progress is not None:
            progress(done, total)
    return profiles


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def warn(run: RunData, text: str) -> None:
    """Add a reader's warning to the run once (several views ask for the same windows)."""
    if text not in run.warnings:
        run.warnings.append(text)


def skip_window(run: RunData, process: Process, window: str, exc: DiagError) -> None:
    """One window that cannot be read: skipped with one warning on the run, the same from
    every view that reads windows (the kernel analyses, the TUI, the report, export)."""
    warn(run, f"{_where(run, process, window)}: {exc.message}; skipped")


def _where(run: RunData, process: Process, window: str) -> str:
    """`compiled/pid420: Kineto window r0-s0-new-shape` (`window` its name or its file)."""
    return f"{run.folder.name}/{process.folder.name}: Kineto window {window}"


def anchored(process: Process, window_start: Event | None) -> Process:
    """The process with the clock anchor the window recorded when it started (docs/FORMAT.md,
    Kineto traces), or unchanged when the window has none (traces before the field)."""
    if window_start is None:
        return process
    wall_ns = window_start.data.get("wall_ns")
    if not isinstance(wall_ns, int) or isinstance(wall_ns, bool):
        return process
    return replace(process, start_t=window_start.t, wall_ns=wall_ns)


def window_spans(run: RunData) -> dict[int, list[tuple[Event | None, Event]]]:
    """pid -> (profile_window_start, profile_window_end) of each window the process closed, in
    time order; the start is None when its event is missing (a torn line)."""
    spans: dict[int, list[tuple[Event | None, Event]]] = {}
    # By process first: at hundreds of ranks a pass over every event per process is quadratic.
    starts: dict[tuple[int, str], Event] = {}
    for event in run.events:
        name = str(event.data.get("window"))
        if event.kind == "profile_window_start":
            starts[(event.pid, name)] = event
        elif event.kind == "profile_window_end":
            spans.setdefault(event.pid, []).append((starts.pop((event.pid, name), None), event))
    return spans


def window_files(run: RunData) -> list[tuple[Process, str, Path, list[Step]]]:
    """(process, window file, path, profiled steps inside it) for every window written; the
    process carries the window's own clock anchor (`anchored`), so `process.unix_ns` places
    the window's steps on its Kineto clock. A window whose file is not a regular file inside
    the trace (diag.trace.confine) is skipped with a warning on the run."""
    root = run.root or run.folder.parent.parent
    result = []
    spans = window_spans(run)
    profiled: dict[int, list[Step]] = {}
    for step in run.steps:
        if step.profiled:
            profiled.setdefault(step.pid, []).append(step)
    for process in run.processes:
        for start, end in spans.get(process.pid, []):
            file = end.data.get("file")
            if not file:
                continue
            try:
                path = inside(root, process.folder, file, MAX_WINDOW_BYTES)
            except OutsideTrace as exc:
                name = str(end.data.get("window"))
                warn(run, f"{_where(run, process, name)}: {exc.message}; skipped")
                continue
            begin = start.t if start is not None else 0
            steps = [s for s in profiled.get(process.pid, []) if begin <= s.start_t <= end.t]
            result.append((anchored(process, start), str(file), path, steps))
    return result


_windows = window_files


def cut_window(
    label: str,
    process: Process,
    window: str,
    trace: Any,
    steps: list[Step],
    bounds: list[tuple[float, float]] | None = None,
) -> list[StepProfile]:
    """Split one parsed window into per-step profiles (bounds on the trace clock, or derived)."""
    if not steps:
        return []
    if bounds is None:
        bounds = _bounds_from_anchor(process, trace, steps) or _bounds_from_regions(trace, steps)
    profiles = [
        StepProfile(
            label,
            process.pid,
            process.rank,
            step.request_id,
            step.index,
            step.phase,
            f"{process.folder.name}/{window}",
            trace.platform,
            start,
            end,
            devices=tuple(getattr(trace, "devices", ())),
        )
        for step, (start, end) in zip(steps, bounds, strict=True)
    ]
    starts = [p.start_ts for p in profiles]

    def owner(ts: float) -> StepProfile | None:
        index = _bisect_right(starts, ts) - 1
        if index < 0:
            return None
        profile = profiles[index]
        return profile if ts <= profile.end_ts else None

    # GPU work belongs to the step that launched it, however late it ran. Work with no launch
    # record in a trace that has launches was launched before the profiler started: it
    # belongs to no step here (HTA drops it too); diag.trace.inputs.kineto_notices counts it.
    launched = any(a.launch_ts >= 0 for a in trace.activities)
    for activity in trace.activities:
        if activity.launch_ts < 0 and launched:
            continue
        found = owner(activity.launch_ts if activity.launch_ts >= 0 else activity.ts)
        if found is not None:
            found.activities.append(activity)
    for attr in ("cpu_ops", "syncs", "annotations"):
        for record in getattr(trace, attr):
            found = owner(record.ts)
            if found is not None:
                getattr(found, attr).append(record)
    # A GPU that runs a step behind the CPU starts a step when the previous one's work ends.
    previous_end: float | None = None
    for profile in profiles:
        if previous_end is not None and previous_end > profile.start_ts:
            profile.gpu_from_ts = previous_end
        end = profile.gpu_end_ts
        if end is not None:
            previous_end = end if previous_end is None else max(previous_end, end)
    return profiles


def _bisect_right(values: list[float], x: float) -> int:
    low, high = 0, len(values)
    while low < high:
        mid = (low + high) // 2
        if x < values[mid]:
            high = mid
        else:
            low = mid + 1
    return low


def _bounds_from_anchor(
    process: Process, trace: Any, steps: list[Step]
) -> list[tuple[float, float]] | None:
    """Step bounds on the trace clock, from the process's monotonic/unix anchor."""
    bounds = []
    for step in steps:
        start = process.unix_ns(step.start_t)
        end = process.unix_ns(step.end_t if step.end_t is not None else step.start_t)
        if start is None or end is None:
            return None
        bounds.append(((start - trace.base_ns) / 1000.0, (end - trace.base_ns) / 1000.0))
    # The last step of a killed process has no end: it runs to the end of the window.
    last = steps[-1]
    if last.end_t is None:
        bounds[-1] = (bounds[-1][0], trace.end_ts)
    # Plausible only if the steps land inside the window (a second of slack for clock steps).
    slack = 1e6
    if not all(trace.start_ts - slack <= s and e <= trace.end_ts + slack for s, e in bounds):
        return None
    return bounds


def _bounds_from_regions(trace: Any, steps: list[Step]) -> list[tuple[float, float]]:
    """Without an anchor: each step starts at a `#0` region marker (the first compiled call)."""
    firsts = sorted(
        a.ts
        for a in trace.annotations
        if a.name.startswith(REGION_PREFIX) and a.name.endswith("#0")
    )
    if len(firsts) != len(steps):
        firsts = [trace.start_ts] + [trace.end_ts] * (len(steps) - 1)
    firsts[0] = min(firsts[0], trace.start_ts)
    ends = [*firsts[1:], trace.end_ts]
    return list(zip(firsts, ends, strict=True))


def profiles_from_kineto(label: str, trace: Any, pid: int = 0) -> list[StepProfile]:
    """Profiles of a plain torch.profiler trace (no diag recording): one per `ProfilerStep#N`
    annotation, or one for the whole trace when it has none."""
    marks = sorted(
        (a for a in trace.annotations if a.name.startswith("ProfilerStep#")), key=lambda a: a.ts
    )
    bounds = [(a.ts, a.ts + a.dur, step_number(a.name, n)) for n, a in enumerate(marks)]
    whole = not bounds
    if whole:
        bounds = [(trace.start_ts, trace.end_ts, 0)]
    process = Process(pid, None, Path(trace.path).parent, [], {}, ended=True)
    steps = [
        Step("trace", index, "live", 0, 0, (end - start) / 1e6, None, True, None, None, pid)
        for start, end, index in bounds
    ]
    spans = [(start, end) for start, end, _ in bounds]
    profiles = cut_window(label, process, Path(trace.path).name, trace, steps, spans)
    if whole and profiles and profiles[0].activities:
        # No steps: the CPU side before the first GPU work (start-up, data loading) is not GPU
        # idle; the window is the GPU's own, first activity to last, as HTA measures it.
        profiles[0].gpu_from_ts = min(a.ts for a in profiles[0].activities)
    return profiles


def step_number(name: str, ordinal: int) -> int:
    """The N of `ProfilerStep#N`; a suffix that is not a plain integer gives the mark's ordinal."""
    match = _STEP_NUMBER.fullmatch(name)
    return int(match.group(1)) if match else ordinal

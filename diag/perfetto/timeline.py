"""A Trace as tracks on one timeline: per process, its requests, steps, compiles, CUDA-graph
recordings, profiler windows and notable instants (read off the event files by diag's reader),
and each profiler window's own CPU and GPU events (diag's Kineto parser) on the same clock.

Clocks (docs/FORMAT.md): events carry CLOCK_MONOTONIC ns; a process's timeline is unix time
through its `process_start` anchor (`Process.unix_ns`), so processes of one host line up, and
ranks of other hosts line up as well as their clocks agree. A Kineto event's unix time is first
taken back to the event clock through the anchor its window recorded when it started (the one
the step cuts of every kernel analysis use, diag.trace.profiles.window_files), then placed like
any other event of its process: steps, compiles and kernels of one process nest exactly as
recorded.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from diag.errors import DiagError
from diag.evidence.request_names import request_name, request_thread
from diag.perfetto.tracks import Instant, ProcessTracks, Slice, Track
from diag.trace.compile_metrics import compile_timings
from diag.trace.guards import condition_text
from diag.trace.run import Compile, Event, Process, RunData, Trace

#: Track order within a process: diag's own rows first, then CPU threads, then GPU streams.
REQUESTS, STEPS, COMPILES, CUDA_GRAPHS, WINDOWS, EVENTS = 1, 2, 3, 4, 5, 6
CPU, GPU = 100, 200
#: Kineto args kept per GPU activity (the rest of the record is diag's join).
_ACTIVITY_ARGS = ("region", "op", "launcher", "annotation", "correlation", "bytes", "direction")
_INSTANTS = {
    "recompile_limit": "recompile limit",
    "eager_fallback": "eager fallback",
    "graph_break": "graph break",
    "crash": "crash",
}
#: Calls and pauses with a duration, stamped at their start (collectors/hygiene.py, gc_pauses.py).
_TIMED = {
    "empty_cache": "torch.cuda.empty_cache()",
    "gc_collect": "gc.collect()",
    "gc_pause": "garbage-collector pause",
}

Clock = Callable[[float], int]  # Kineto µs -> timeline ns


@dataclass
class Timeline:
    processes: list[ProcessTracks] = field(default_factory=list)
    #: What could not be placed, one line each (written into the file's otherData).
    notes: list[str] = field(default_factory=list)
    anchored: bool = True  # every process had a unix anchor: the timeline is unix time

    def origin_ns(self) -> int:
        times = [
            t
            for process in self.processes
            for track in process.tracks.values()
            for t in [*(s.start_ns for s in track.slices), *(i.at_ns for i in track.instants)]
        ]
        return min(times, default=0)


def step_name(request_id: str, step: int) -> str:
    """How a step's slice is named (`r3 s0`): what to search for in Perfetto."""
    return f"{request_id} s{step}"


def build_timeline(trace: Trace, kineto: bool = True) -> Timeline:
    timeline = Timeline()
    imported_kineto = trace.manifest.get("format") == "kineto"
    for sort, (label, run) in enumerate(trace.runs.items()):
        if imported_kineto:
            _add_kineto_file(timeline, label, run, sort)
            continue
        tracks = _RunTracks(timeline, label, run, sort)
        tracks.add_events()
        if kineto:
            tracks.add_windows()
    return timeline


class _RunTracks:
    """The tracks of one run's processes."""

    def __init__(self, timeline: Timeline, label: str, run: RunData, sort: int) -> None:
        self.timeline = timeline
        self.run = run
        self.processes: dict[int, tuple[Process, ProcessTracks]] = {}
        for index, process in enumerate(run.processes):
            who = f"pid {process.pid}"
            if process.rank is not None:
                who = f"rank{process.rank} ({who})"
            tracks = ProcessTracks(f"{label} · {who}", sort * 10_000 + (process.rank or index))
            timeline.processes.append(tracks)
            self.processes.setdefault(process.pid, (process, tracks))
            if process.wall_ns is None:
                timeline.anchored = False
        self.last_t = _last_times(run)

    def _at(self, pid: int, t: int) -> int:
        process = self.processes[pid][0]
        placed = process.unix_ns(t)
        return t if placed is None else placed

    def _track(self, pid: int, name: str, sort: int) -> Track | None:
        found = self.processes.get(pid)
        return None if found is None else found[1].track(name, sort)

    def _slice(self, pid: int, track: str, sort: int, item: Slice) -> None:
        found = self._track(pid, track, sort)
        if found is not None:
            found.slices.append(item)

    def _instant(self, pid: int, item: Instant) -> None:
        found = self._track(pid, "events", EVENTS)
        if found is not None:
            found.instants.append(item)

    def _end(self, pid: int, end_t: int | None) -> int:
        """An end, or the process's last recorded instant for what never ended (a crash)."""
        return end_t if end_t is not None else self.last_t.get(pid, 0)

    # -- the event files ----------------------------------------------------------------------

    def add_events(self) -> None:
        run = self.run
        for request in run.requests:
            if request.pid not in self.processes:
                continue
            start, end = request.start_t, self._end(request.pid, request.end_t)
            # Requests served at once by several threads overlap: a pair of tracks per thread.
            thread = request_thread(run, request.pid, request.request_id)
            where = f" ({thread})" if thread else ""
            self._slice(
                request.pid,
                "requests" + where,
                REQUESTS,
                Slice(
                    request_name(run, request.pid, request.request_id),
                    self._at(request.pid, start),
                    self._at(request.pid, max(start, end)),
                    "diag.request",
                    _clean(
                        {
                            "phase": request.phase,
                            "shape": request.shape,
                            "steps": len(request.steps),
                            "ended": request.end_t is not None,
                        }
                    ),
                ),
            )
            for step in request.steps:
                end = self._end(step.pid, step.end_t)
                self._slice(
                    step.pid,
                    "steps" + where,
                    STEPS,
                    Slice(
                        step_name(step.request_id, step.index),
                        self._at(step.pid, step.start_t),
                        self._at(step.pid, max(step.start_t, end)),
                        "diag.step",
                        _clean(
                            {
                                "phase": step.phase,
                                "shape": step.shape,
                                "wall_s": step.wall_s,
                                "cpu_s": step.cpu_s,
                                "gpu_s": step.gpu_s,
                                "profiled": step.profiled,
                            }
                        ),
                    ),
                )
        timings = compile_timings(run)
        for item in run.compiles:
            self._add_compile(item, timings.get((item.pid, item.epoch, item.compile_id), {}))
        for event in run.events:
            self._add_event(event)

    def _add_compile(self, item: Compile, timing: dict[str, Any]) -> None:
        if item.pid not in self.processes:
            return
        start = item.start_t if isinstance(item.start_t, int) else None
        if start is None:
            start = item.t - round((item.duration_s or 0.0) * 1e9)
        frame = item.frame.name if item.frame else "?"
        what = "recompile" if item.is_recompile else "compile"
        guards = [
            f"entry {g.compile_id or '?'}: {condition_text(g.raw) or g.source} ({g.kind})"
            for g in item.guards[:32]
        ]
        args = _clean(
            {
                "frame": frame,
                "location": item.frame.location if item.frame and item.frame.file else None,
                "compile_id": item.compile_id,
                "epoch": item.epoch,
                "result": item.result,
                "duration_s": item.duration_s,
                "request": item.request_id,
                "step": item.step,
                "phase": item.phase,
                "failing_guards": guards or None,
                "fail_type": item.fail_type,
                "fail_reason": (item.fail_reason or "")[:2000] or None,
                **timing,
            }
        )
        at = self._at(item.pid, start)
        name = f"{what} {item.compile_id} {frame}"
        if item.result != "ok":
            name += f" ({item.result})"
        self._slice(
            item.pid,
            "compiles",
            COMPILES,
            Slice(name, at, self._at(item.pid, max(start, item.t)), "diag.compile", args),
        )
        if item.guards:
            self._instant(
                item.pid,
                Instant(
                    f"guard failure -> {what} {item.compile_id} {frame}",
                    at,
                    "diag.guard_failure",
                    {"frame": frame, "compile_id": item.compile_id, "failing_guards": guards},
                ),
            )

    def _add_event(self, event: Event) -> None:
        pid, data = event.pid, event.data
        if pid not in self.processes:
            return
        phase, request, step = event.position
        where = _clean({"phase": phase, "request": request, "step": step})
        if event.kind == "cudagraph_record" or event.kind == "magi_compile_end":
            start = data.get("start_t") if isinstance(data.get("start_t"), int) else None
            seconds = data.get("duration_s")
            if start is None and isinstance(seconds, (int, float)):
                start = event.t - round(seconds * 1e9)
            start = event.t if start is None else start
            keep = {k: v for k, v in data.items() if k in _EVENT_ARGS}
            if event.kind == "cudagraph_record":
                name = f"CUDA graph recording {data.get('compile_id') or ''}".strip()
                track, sort = "CUDA graphs", CUDA_GRAPHS
            else:
                name = f"magi compile {data.get('name') or ''}".strip()
                track, sort = "compiles", COMPILES
            self._slice(
                pid,
                track,
                sort,
                Slice(
                    name,
                    self._at(pid, start),
                    self._at(pid, max(start, event.t)),
                    "diag." + event.kind,
                    {**where, **_clean(keep)},
                ),
            )
        elif event.kind in _TIMED and isinstance(data.get("duration_s"), (int, float)):
            end = event.t + round(float(data["duration_s"]) * 1e9)
            self._slice(
                pid,
                "events",
                EVENTS,
                Slice(
                    _TIMED[event.kind],
                    self._at(pid, event.t),
                    self._at(pid, end),
                    "diag.call",
                    where,
                ),
            )
        elif event.kind in _INSTANTS:
            frame = data.get("frame")
            name = _INSTANTS[event.kind]
            if isinstance(frame, dict) and frame.get("name"):
                name += f": {frame['name']}"
            keep = {k: v for k, v in data.items() if k in _EVENT_ARGS}
            self._instant(
                pid,
                Instant(name, self._at(pid, event.t), "diag." + event.kind, {**where, **keep}),
            )

    # -- the profiler windows -------------------------------------------------------------------

    def add_windows(self) -> None:
        profiles = importlib.import_module("diag.trace.profiles")
        cache = importlib.import_module("diag.trace.kinetocache")
        for pid, spans in profiles.window_spans(self.run).items():
            for start, end in spans if pid in self.processes else ():
                self._slice(
                    pid,
                    "profiler windows",
                    WINDOWS,
                    Slice(
                        str(end.data.get("window")),
                        self._at(pid, start.t if start is not None else end.t),
                        self._at(pid, end.t),
                        "diag.profile_window",
                        _clean({"file": end.data.get("file"), "steps": end.data.get("steps")}),
                    ),
                )
        # The step that launched each GPU activity, as every kernel analysis attributes it.
        launched_in = {
            _activity_key(activity): step_name(profile.request_id, profile.step)
            for profile in profiles.step_profiles(self.run)
            for activity in profile.activities
        }
        for anchored, file, path, _ in profiles.window_files(self.run):
            if anchored.pid not in self.processes:
                continue
            if anchored.wall_ns is None:
                self.timeline.notes.append(
                    f"{anchored.folder.name}/{file}: no clock anchor in the process: left out"
                )
                continue
            try:
                parsed = cache.load_kineto(path, self.run.window_cache(anchored))
            except DiagError as exc:  # one bad window: the rest of the timeline is written
                profiles.skip_window(self.run, anchored, file, exc)
                continue
            tracks = self.processes[anchored.pid][1]
            place = self._kineto_clock(anchored, parsed.base_ns)
            _add_window_events(tracks, parsed, place, launched_in)

    def _kineto_clock(self, anchored: Process, base_ns: int) -> Clock:
        """Kineto µs of one window -> the timeline: back to the event clock through the
        window's anchor, then placed as the process's own events are."""
        assert anchored.wall_ns is not None
        offset = anchored.start_t - anchored.wall_ns
        pid = anchored.pid

        def place(ts: float) -> int:
            return self._at(pid, base_ns + round(ts * 1000) + offset)

        return place


_EVENT_ARGS = (
    "compile_id",
    "duration_s",
    "reserved_before",
    "reserved_after",
    "reason",
    "user_location",
    "type",
    "message",
    "inside",
    "name",
    "result",
    "cache",
)


def _activity_key(activity: Any) -> tuple[float, int, int, str]:
    return (activity.ts, activity.device, activity.stream, activity.name)


def _add_window_events(
    tracks: ProcessTracks,
    parsed: Any,
    place: Clock,
    launched_in: dict[tuple[float, int, int, str], str] | None = None,
) -> None:
    """One window's CPU side (annotations, ops, syncs per thread) and GPU side (kernels, copies,
    memsets per device and stream, each with the step that launched it) onto the process's
    tracks."""
    for kind, records in (
        ("annotation", parsed.annotations),
        ("cpu_op", parsed.cpu_ops),
        ("sync", parsed.syncs),
    ):
        for record in records:
            start = place(record.ts)
            tracks.track(f"CPU thread {record.tid}", CPU).slices.append(
                Slice(
                    record.name, start, max(start, place(record.ts + record.dur)), "kineto." + kind
                )
            )
    for activity in parsed.activities:
        start = place(activity.ts)
        args = {
            key: getattr(activity, key)
            for key in _ACTIVITY_ARGS
            if getattr(activity, key) not in ("", 0, -1.0)
        }
        if activity.launch_ts >= 0:
            # Its launch on the CPU is this long before it ran: where the step that owns it is.
            args["queued_us"] = round(activity.ts - activity.launch_ts, 3)
        step = (launched_in or {}).get(_activity_key(activity))
        if step is not None:
            args["step"] = step
        tracks.track(f"GPU {activity.device} stream {activity.stream}", GPU).slices.append(
            Slice(
                activity.name,
                start,
                max(start, place(activity.ts + activity.dur)),
                "kineto." + activity.kind,
                args,
            )
        )


def _add_kineto_file(timeline: Timeline, label: str, run: RunData, sort: int) -> None:
    """A plain profiler trace (diag analyze --kineto): its own events on its own unix clock."""
    cache = importlib.import_module("diag.trace.kinetocache")
    names = {PurePosixPath(p.window).name for p in run.profiles or []}
    for name in sorted(names):
        path = Path(run.folder) / name
        parsed = cache.load_kineto(path, None)
        tracks = ProcessTracks(f"{label} · {name}", sort * 10_000)
        timeline.processes.append(tracks)
        _add_window_events(tracks, parsed, parsed.unix_ns)


def _last_times(run: RunData) -> dict[int, int]:
    """Each process's last recorded instant on the event clock."""
    last: dict[int, int] = {}

    def see(pid: int, t: int | None) -> None:
        if t is not None and t > last.get(pid, 0):
            last[pid] = t

    for step in run.steps:
        see(step.pid, step.end_t or step.start_t)
    for request in run.requests:
        see(request.pid, request.end_t or request.start_t)
    for item in run.compiles:
        see(item.pid, item.t)
    for event in run.events:
        see(event.pid, event.t)
    return last


def _clean(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in args.items() if v is not None}

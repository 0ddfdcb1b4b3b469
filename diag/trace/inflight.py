"""What was still open when a process's events stop: begins that have no end.

A process that skips diag's exit hook (killed, a fault in native code, `os._exit` as a server's
shutdown handler calls it) or is still running when the trace is read leaves begin events whose
end never came. The reader builds most records at their end (a compile at `compile_end`), so
without this module a compile cut off by a shutdown would vanish, its recompile with it. Called
once by the loader (diag.trace.run) after every event file of a run is read, it adds:

- each `compile_start` with no `compile_end` as a Compile of result `cut-off`: the guards of its
  `recompile` event (diag.evidence.causes decides its cause as for any recompile), its frame (from
  `compile_start`, else an earlier compile of the same Dynamo frame) and position (from
  `compile_start`; older traces: its recompile's, or the step open at its start), and as
  `duration_s` the time from its start to the process's last event, a lower bound;
- `run.unfinished`: that compile, and the steps, requests, profiler windows
  (`profile_window_start` without `profile_window_end`) and CUDA-graph recordings
  (`cudagraph_record_start` without `cudagraph_record`) that began and never ended.

Only processes that did not reach diag's exit hook are read for this (a process that did closed
its steps, requests and windows at exit, and torch ends every compile it starts). Their event
files are read once more, looking only at the lines whose event names a compile.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diag.trace.confine import OutsideTrace, open_regular
from diag.trace.format import EVENTS_FILE
from diag.trace.lines import decode_event
from diag.trace.run import Compile, Frame, Guard, Process, RunData

#: The result of a compile that started and never ended (docs/FORMAT.md).
CUT_OFF = "cut-off"
#: The tail of an event file read for the process's last event.
_TAIL_BYTES = 1 << 16

Key = tuple[int, str]  # epoch, compile id


@dataclass(frozen=True)
class Unfinished:
    """Something a process began and never ended, as far as its events go."""

    kind: str  # compile, step, request, profile-window, cudagraph-record
    pid: int
    start_t: int
    #: The process's last event: the moment diag last saw it open.
    last_t: int
    phase: str
    request_id: str | None
    step: int | None
    #: The compile id, the window's name, or the request id.
    name: str
    #: For a compile: its recompile's failing guards (none for a first compile).
    recompile: bool = False

    @property
    def open_s(self) -> float:
        """How long it was open before the process's events stop (a lower bound)."""
        return max(0, self.last_t - self.start_t) / 1e9


def add_unfinished(run: RunData) -> None:
    """Find what each process of `run` left open; add cut-off compiles to `run.compiles`."""
    found: list[Unfinished] = []
    # A process whose recording stopped (a full disk) ran on unrecorded: its missing ends say
    # nothing of the process (the recording-truncated notice says what happened instead).
    stopped = {event.pid for event in run.of("recording_stopped")}
    for process in run.processes:
        if process.ended or process.pid in stopped:
            continue
        path = process.folder / EVENTS_FILE
        starts, recompiles, scanned = _scan(path)
        # The file's last line is the process's last event (events are appended as they happen);
        # with --max-size, steps go on in step segments, whose times the reader already holds.
        last_t = max(scanned or 0, _last_seen(run, process.pid))
        found.extend(_compiles(run, process, starts, recompiles, last_t))
        found.extend(_open_pairs(run, process.pid, last_t))
    if found:
        run.compiles.sort(key=lambda c: c.t)
        run.unfinished.extend(sorted(found, key=lambda u: (u.pid, u.start_t)))


# --- compiles ---------------------------------------------------------------------------------


#: The event names the scan looks for, as they appear in a line.
_MARKS = (b'"compile_start"', b'"compile_end"', b'"recompile"')
#: Bytes read at a time: the markers are searched in the whole block at C speed (compile events
#: are rare among a server's step events), and only the lines holding one are decoded.
_BLOCK = 16 << 20


def _scan(
    path: Path,
) -> tuple[dict[Key, dict[str, Any]], dict[Key, dict[str, Any]], int | None]:
    """The compile_start events with no compile_end, the recompile events, and the t of the
    file's last complete line."""
    starts: dict[Key, dict[str, Any]] = {}
    recompiles: dict[Key, dict[str, Any]] = {}
    last: bytes = b""
    try:
        with open_regular(path, follow=False) as handle:  # never a FIFO nor a link
            rest = b""
            while block := handle.read(_BLOCK):
                data = rest + block
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
                if data:
                    last = data[data.rfind(b"\n", 0, len(data) - 1) + 1 :]
                for event in _compile_events(data):
                    kind = event.get("ev")
                    if kind == "compile_start":
                        starts[_key(event)] = event
                    elif kind == "compile_end":
                        starts.pop(_key(event), None)
                    elif kind == "recompile":
                        recompiles[_key(event)] = event
    except (OSError, OutsideTrace):
        return {}, {}, None
    final = decode_event(last) if last else None
    t = final.get("t") if final is not None else None
    return starts, recompiles, t if isinstance(t, int) else None


def _compile_events(data: bytes) -> list[dict[str, Any]]:
    """The compile events among `data`'s complete lines, in file order."""
    found: dict[int, dict[str, Any]] = {}
    for mark in _MARKS:
        at = data.find(mark)
        while at >= 0:
            begin = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            if begin not in found:
                event = decode_event(data[begin:end])
                if event is not None and event.get("ev") in (
                    "compile_start",
                    "compile_end",
                    "recompile",
                ):
                    found[begin] = event
            at = data.find(mark, end)
    return [found[begin] for begin in sorted(found)]


def _key(event: dict[str, Any]) -> Key:
    epoch = event.get("epoch")
    return (epoch if isinstance(epoch, int) else 0, str(event.get("compile_id")))


def _guards(items: Any) -> list[Guard]:
    fields = ("kind", "source", "expected", "actual", "user_location", "raw", "compile_id")
    guards = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        values = {k: item.get(k) for k in fields}
        guards.append(
            Guard(
                kind=str(values["kind"] or "unknown"),
                source=_text(values["source"]),
                expected=_text(values["expected"]),
                actual=_text(values["actual"]),
                user_location=_text(values["user_location"]),
                raw=str(values["raw"] or ""),
                compile_id=_text(values["compile_id"]),
            )
        )
    return guards


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _compiles(
    run: RunData,
    process: Process,
    starts: dict[Key, dict[str, Any]],
    recompiles: dict[Key, dict[str, Any]],
    last_t: int,
) -> list[Unfinished]:
    found = []
    for (epoch, compile_id), event in starts.items():
        raw_t = event.get("t")
        start_t: int = raw_t if isinstance(raw_t, int) else last_t
        recompile = recompiles.get((epoch, compile_id))
        failing = _guards(recompile.get("guards")) if recompile is not None else []
        placed = event if _placed(event) or recompile is None else recompile
        phase, request_id, step = _position(run, process.pid, placed, start_t)
        run.compiles.append(
            Compile(
                compile_id=compile_id,
                epoch=epoch,
                frame=Frame.from_event(event.get("frame"))
                or _earlier_frame(run, process.pid, epoch, compile_id),
                result=CUT_OFF,
                duration_s=max(0, last_t - start_t) / 1e9,
                t=start_t,
                start_t=start_t,
                phase=phase,
                request_id=request_id,
                step=step,
                pid=process.pid,
                guards=failing,
            )
        )
        found.append(
            Unfinished(
                "compile",
                process.pid,
                start_t,
                last_t,
                phase,
                request_id,
                step,
                compile_id,
                recompile=bool(failing),
            )
        )
    return found


def _position(
    run: RunData, pid: int, event: dict[str, Any], t: int
) -> tuple[str, str | None, int | None]:
    """The event's own position (compile_start's, or before it carried one, its recompile's);
    else the request and step open in that process at `t`."""
    if _placed(event):
        request_id = event.get("request_id")
        step = event.get("step")
        return (
            str(event.get("phase") or "live"),
            request_id if isinstance(request_id, str) else None,
            step if isinstance(step, int) and not isinstance(step, bool) else None,
        )
    for request in run.requests:
        if request.pid != pid or request.start_t > t:
            continue
        if request.end_t is not None and request.end_t < t:
            continue
        step = next(
            (
                s.index
                for s in request.steps
                if s.start_t <= t and (s.end_t is None or s.end_t >= t)
            ),
            None,
        )
        return request.phase, request.request_id, step
    return "live", None, None


def _placed(event: dict[str, Any]) -> bool:
    return "request_id" in event or "phase" in event


def _earlier_frame(run: RunData, pid: int, epoch: int, compile_id: str) -> Frame | None:
    """The frame an earlier compile of the same Dynamo frame id (`3/` of `3/2`) named."""
    prefix = compile_id.split("/", 1)[0] + "/"
    for item in reversed(run.compiles):
        if (
            item.pid == pid
            and item.epoch == epoch
            and item.compile_id.startswith(prefix)
            and item.frame is not None
        ):
            return item.frame
    return None


# --- steps, requests, windows, CUDA-graph recordings ------------------------------------------


def _last_seen(run: RunData, pid: int) -> int:
    last = 0
    for request in run.requests:
        if request.pid == pid:
            last = max(last, request.end_t or request.start_t)
            for step in request.steps:
                last = max(last, step.end_t or step.start_t)
    return last


def _open_pairs(run: RunData, pid: int, last_t: int) -> list[Unfinished]:
    found = []
    # A request ends its open step (and a new one ends the open request) before its own end is
    # written, so only a request with no end can hold a step with none.
    for request in [r for r in run.requests if r.end_t is None and r.pid == pid]:
        found.append(
            Unfinished(
                "request",
                pid,
                request.start_t,
                last_t,
                request.phase,
                request.request_id,
                None,
                request.request_id,
            )
        )
        found.extend(
            Unfinished(
                "step",
                pid,
                step.start_t,
                last_t,
                step.phase,
                step.request_id,
                step.index,
                f"{step.request_id} step {step.index}",
            )
            for step in request.steps
            if step.end_t is None
        )
    found.extend(_unmatched(run, pid, last_t, "profile_window_start", "profile_window_end"))
    found.extend(_unmatched(run, pid, last_t, "cudagraph_record_start", "cudagraph_record"))
    return found


_KINDS = {"profile_window_start": "profile-window", "cudagraph_record_start": "cudagraph-record"}
_NAMES = {"profile_window_start": "window", "cudagraph_record_start": "compile_id"}


def _unmatched(run: RunData, pid: int, last_t: int, begin: str, end: str) -> list[Unfinished]:
    """Begin events of `pid` that no later end event of the same name closed."""
    field = _NAMES[begin]
    open_: dict[str, Any] = {}
    for event in run.events:
        if event.pid != pid or event.kind not in (begin, end):
            continue
        name = str(event.data.get(field))
        if event.kind == begin:
            open_[name] = event
        else:
            open_.pop(name, None)
    found = []
    for name, event in open_.items():
        phase, request_id, step = event.position
        found.append(
            Unfinished(
                _KINDS[begin],
                pid,
                event.t,
                last_t,
                phase,
                request_id,
                step if isinstance(step, int) else None,
                name,
            )
        )
    return found

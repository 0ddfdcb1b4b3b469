"""Processes, tracks and slices of a Trace Event Format file, kept well-nested.

A viewer draws the slices of one track (a pid/tid pair) as a stack: each slice must lie wholly
inside, or wholly after, the ones before it. Times here are integer nanoseconds on one timeline,
so nesting is decided exactly; a slice that would overlap another only partly (two compiles on
two threads, a kernel that starts before the previous one on its stream ended) goes onto the
next lane of its track ("compiles (2)"), never into a broken stack. Written as µs with three
decimals: the file's numbers nest exactly as the nanoseconds did.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Slice:
    name: str
    start_ns: int
    end_ns: int
    cat: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Instant:
    name: str
    at_ns: int
    cat: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Track:
    """One named row of a process: its slices and instants, packed into lanes on output."""

    name: str
    sort: int
    slices: list[Slice] = field(default_factory=list)
    instants: list[Instant] = field(default_factory=list)


@dataclass
class ProcessTracks:
    name: str
    sort: int
    tracks: dict[str, Track] = field(default_factory=dict)

    def track(self, name: str, sort: int) -> Track:
        found = self.tracks.get(name)
        if found is None:
            found = self.tracks[name] = Track(name, sort)
        return found


def lanes(slices: list[Slice]) -> list[list[Slice]]:
    """The slices in as few lanes as keep each lane well-nested: each goes onto the first lane
    where it fits inside the open slice or after it, longest first among those that start
    together (so a parent precedes its children)."""
    result: list[list[Slice]] = []
    stacks: list[list[int]] = []  # per lane: end times of the open slices, innermost last
    for item in sorted(slices, key=lambda s: (s.start_ns, -s.end_ns)):
        for lane, stack in zip(result, stacks, strict=True):
            while stack and stack[-1] <= item.start_ns:
                stack.pop()
            if not stack or item.end_ns <= stack[-1]:
                lane.append(item)
                stack.append(item.end_ns)
                break
        else:
            result.append([item])
            stacks.append([item.end_ns])
    return result


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


class EventWriter:
    """Numbers processes and threads and turns tracks into Trace Event Format dicts."""

    def __init__(self, origin_ns: int) -> None:
        self.origin_ns = origin_ns

    def events(self, processes: list[ProcessTracks]) -> Iterator[dict[str, Any]]:
        for pid, process in enumerate(processes, start=1):
            yield _meta("process_name", pid, 0, {"name": process.name})
            yield _meta("process_sort_index", pid, 0, {"sort_index": process.sort})
            tid = 0
            for track in sorted(process.tracks.values(), key=lambda t: (t.sort, t.name)):
                packed = lanes(track.slices) or [[]]
                for index, lane in enumerate(packed):
                    tid += 1
                    name = track.name if index == 0 else f"{track.name} ({index + 1})"
                    yield _meta("thread_name", pid, tid, {"name": name})
                    yield _meta("thread_sort_index", pid, tid, {"sort_index": tid})
                    yield from (self._slice(pid, tid, s) for s in lane)
                    if index == 0:
                        yield from (self._instant(pid, tid, i) for i in track.instants)

    def _slice(self, pid: int, tid: int, item: Slice) -> dict[str, Any]:
        start = item.start_ns - self.origin_ns
        event: dict[str, Any] = {
            "ph": "X",
            "name": item.name,
            "cat": item.cat,
            "pid": pid,
            "tid": tid,
            "ts": _us(start),
            "dur": _us(item.end_ns - item.start_ns),
        }
        if item.args:
            event["args"] = item.args
        return event

    def _instant(self, pid: int, tid: int, item: Instant) -> dict[str, Any]:
        event: dict[str, Any] = {
            "ph": "i",
            "s": "t",
            "name": item.name,
            "cat": item.cat,
            "pid": pid,
            "tid": tid,
            "ts": _us(item.at_ns - self.origin_ns),
        }
        if item.args:
            event["args"] = item.args
        return event


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}

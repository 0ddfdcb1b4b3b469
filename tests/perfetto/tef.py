"""A checker of the Trace Event Format as diag export writes it (the JSON Object Format of
Google's "Trace Event Format" document): what Perfetto's and chrome://tracing's JSON importers
need to draw every slice where the file puts it."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

PHASES = {"X", "i", "M"}  # complete slices, instants, metadata: all diag writes
METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index"}


@dataclass(frozen=True)
class Slice:
    pid: int
    tid: int
    name: str
    cat: str
    start: Decimal  # µs, exactly as written
    end: Decimal
    args: dict[str, Any]

    def inside(self, other: Slice) -> bool:
        return other.start <= self.start and self.end <= other.end


@dataclass
class Checked:
    document: dict[str, Any]
    slices: list[Slice]
    instants: list[dict[str, Any]]
    process_names: dict[int, str]
    thread_names: dict[tuple[int, int], str]

    def on(self, pid: int, track: str) -> list[Slice]:
        """The slices of one named track of a process (its lanes included)."""
        return [
            s
            for s in self.slices
            if s.pid == pid and self.thread_names[(s.pid, s.tid)].split(" (")[0] == track
        ]


def load(path: Path) -> dict[str, Any]:
    """The file as written: numbers as Decimal, so µs with three decimals compare exactly."""
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    document: dict[str, Any] = json.loads(raw, parse_float=Decimal)
    return document


def as_written(document: dict[str, Any]) -> dict[str, Any]:
    """A document built in memory, read back as load() reads the file."""
    written: dict[str, Any] = json.loads(json.dumps(document), parse_float=Decimal)
    return written


def check(document: dict[str, Any]) -> Checked:
    """Every event well-formed, every track named, every track's slices well-nested."""
    assert isinstance(document.get("traceEvents"), list)
    slices: list[Slice] = []
    instants: list[dict[str, Any]] = []
    process_names: dict[int, str] = {}
    thread_names: dict[tuple[int, int], str] = {}
    used: set[tuple[int, int]] = set()
    for event in document["traceEvents"]:
        assert event["ph"] in PHASES, event
        assert isinstance(event["name"], str) and event["name"], event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        if event["ph"] == "M":
            assert event["name"] in METADATA, event
            if event["name"] == "process_name":
                process_names[event["pid"]] = event["args"]["name"]
            elif event["name"] == "thread_name":
                thread_names[(event["pid"], event["tid"])] = event["args"]["name"]
            continue
        used.add((event["pid"], event["tid"]))
        assert isinstance(event.get("cat"), str), event
        assert isinstance(event.get("args", {}), dict), event
        ts = _micros(event["ts"])
        if event["ph"] == "i":
            assert event["s"] in ("t", "p", "g"), event
            instants.append(event)
            continue
        dur = _micros(event["dur"])
        assert dur >= 0, event
        slices.append(
            Slice(
                event["pid"],
                event["tid"],
                event["name"],
                event["cat"],
                ts,
                ts + dur,
                event.get("args", {}),
            )
        )
    for pid, tid in used:
        assert pid in process_names, f"pid {pid} has no process_name"
        assert (pid, tid) in thread_names, f"pid {pid} tid {tid} has no thread_name"
    by_track: dict[tuple[int, int], list[Slice]] = defaultdict(list)
    for item in slices:
        by_track[(item.pid, item.tid)].append(item)
    for key, items in by_track.items():
        _nested(thread_names[key], items)
    return Checked(document, slices, instants, process_names, thread_names)


def _micros(value: Any) -> Decimal:
    """A timestamp or duration in µs: a number with at most nanosecond precision."""
    assert isinstance(value, (int, Decimal)) and not isinstance(value, bool), value
    number = Decimal(value)
    assert number == number.quantize(Decimal("0.001")), value
    return number


def _nested(track: str, items: list[Slice]) -> None:
    """Each slice lies wholly inside the open one or after it: a stack a viewer can draw."""
    open_ends: list[Decimal] = []
    for item in sorted(items, key=lambda s: (s.start, -s.end)):
        while open_ends and open_ends[-1] <= item.start:
            open_ends.pop()
        assert not open_ends or item.end <= open_ends[-1], (
            f"{track}: {item.name} [{item.start}, {item.end}] overlaps an open slice ending "
            f"at {open_ends[-1]}"
        )
        open_ends.append(item.end)

"""`diag export --perfetto`: a trace as one Trace Event Format file for ui.perfetto.dev.

Per process: tracks of requests, steps (`r3 s0`), compiles (frame, compile id, failing guards
and seconds by phase in args), CUDA-graph recordings, profiler windows and instants (guard
failures, recompile-limit hits, eager fallbacks, graph breaks, a crash), then each profiler
window's own CPU threads and GPU streams on the same clock (diag.perfetto.timeline). Times are
µs from the earliest event; `otherData.diag` says where that is in unix time.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.perfetto.timeline import Timeline, build_timeline, step_name
from diag.perfetto.tracks import EventWriter
from diag.trace.run import Trace

__all__ = ["Export", "export_perfetto", "step_name", "trace_events"]


@dataclass(frozen=True)
class Export:
    output: Path
    events: int
    processes: int
    notes: list[str]


def trace_events(trace: Trace, kineto: bool = True) -> dict[str, Any]:
    """The whole Trace Event Format document (a JSON object) for `trace`."""
    timeline = build_timeline(trace, kineto)
    origin = timeline.origin_ns()
    events = list(EventWriter(origin).events(timeline.processes))
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"diag": _about(trace, timeline, origin)},
    }


def _about(trace: Trace, timeline: Timeline, origin: int) -> dict[str, Any]:
    clock = (
        "unix time through each process's anchor; ts is µs after origin_unix_ns"
        if timeline.anchored
        else "diag's event clock (a process wrote no unix anchor); ts is µs after origin_t"
    )
    return {
        "trace": str(trace.path),
        "clock": clock,
        "origin_unix_ns" if timeline.anchored else "origin_t": origin,
        "notes": timeline.notes,
    }


def export_perfetto(trace: Trace, output: Path, kineto: bool = True) -> Export:
    """Write the file (gzip'd when `output` ends in .gz) atomically: a viewer never opens half
    of it."""
    if output.is_dir():
        raise DiagError(f"{output}: is a directory; give a file name (OUT.json or OUT.json.gz)")
    document = trace_events(trace, kineto)
    data = json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode()
    if output.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    folder = output.parent if str(output.parent) else Path(".")
    temp: str | None = None
    try:
        handle, temp = tempfile.mkstemp(prefix=".diag-export-", suffix=".tmp", dir=folder)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp, 0o666 & ~_umask())
        os.replace(temp, output)
    except OSError as exc:
        if temp is not None and os.path.exists(temp):
            os.unlink(temp)
        raise DiagError(f"{output}: cannot write ({exc.strerror or exc})") from None
    events = document["traceEvents"]
    return Export(
        output,
        sum(1 for e in events if e["ph"] != "M"),
        len({e["pid"] for e in events}),
        list(document["otherData"]["diag"]["notes"]),
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

"""Counters a fleet scrapes from a recording in progress, in Prometheus' text format.

A server recorded for days is not analyzed every minute; its fleet's monitoring scrapes
counters. These are read off the event files as they grow (`EventTail`: only the complete lines
appended since the last read), by whoever serves them: `diag record --metrics-port PORT`
(diag/live/server.py, in the launcher: the program is not touched) or, with
`--metrics-join`, the program's own Prometheus registry (collectors/metrics_join.py, in the
recorded process, reading its own event file when scraped). One reading, one set of rules:

- `diag_compiles_total{run,phase,frame}`: compiles that ended (ok or failed);
- `diag_recompiles_total{run,phase,frame}`: recompiles (a cache entry's guards failed);
- `diag_live_compiles_total{run,frame}`: compiles that began during a live request, counted
  when they begin (a compile cut off by a shutdown counts too);
- `diag_compiles_in_progress{run}`: compiles begun and not ended;
- `diag_recompile_limit_hits_total{run,frame}`;
- `diag_step0_spikes_total{run}`: live requests whose step 0 took FACTOR x their other steps'
  median and FLOOR more (step0-spike's rule, judged when the request ends: live, without a
  profile, so without a cause);
- `diag_last_live_compile_info{run,finding,request,task}`: 1, for the last live compile: the
  finding id `diag analyze` gives it (`live-compile:FRAME:REQUEST`, when the frame's name is
  unique in the run), its request and task id.

Standard library only: the launcher imports it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.evidence.spikes import is_spike
from diag.evidence.stats import MIN_STEPS, sample
from diag.trace import jsontext
from diag.trace.confine import OutsideTrace, open_regular
from diag.trace.format import EVENTS_FILE, RUNS_DIR
from diag.trace.printable import label

#: Label values are cut to this many characters (a task id is chosen by a client).
MAX_LABEL = 96
#: Bytes read from one file per scrape at most: a scrape of a huge backlog stays bounded.
MAX_READ = 64 << 20

Labels = tuple[tuple[str, str], ...]


@dataclass
class _Process:
    """What one event file has said so far."""

    frames: dict[tuple[int, str], str] = field(default_factory=dict)  # (epoch, frame id) -> name
    open: set[tuple[int, str]] = field(default_factory=set)  # compiles begun, not ended
    live: set[tuple[int, str]] = field(default_factory=set)  # compiles counted as live
    labels: dict[str, str] = field(default_factory=dict)  # request id -> task id
    walls: dict[str, dict[int, float]] = field(default_factory=dict)  # request -> step -> wall
    phases: dict[str, str] = field(default_factory=dict)  # request id -> phase


class LiveCounters:
    """The counters, fed one event (a dict, as written) at a time."""

    def __init__(self) -> None:
        self.counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self.in_progress: dict[str, int] = defaultdict(int)
        self.last_live: dict[str, Labels] = {}
        self._processes: dict[str, _Process] = {}

    def observe(self, run: str, source: str, event: dict[str, Any]) -> None:
        """One event of run `run`, from the event file `source` (a process)."""
        state = self._processes.setdefault(source, _Process())
        kind = event.get("ev")
        if kind in ("compile_start", "compile_end", "recompile", "recompile_limit"):
            self._compile_event(run, state, str(kind), event)
        elif kind == "request_start":
            rid = str(event.get("request_id"))
            state.phases[rid] = str(event.get("phase") or "live")
            label = event.get("label")
            if isinstance(label, str):
                state.labels[rid] = label
            state.walls[rid] = {}
        elif kind == "step_end":
            owner, step, wall = event.get("request_id"), event.get("step"), event.get("wall_s")
            if isinstance(owner, str) and isinstance(step, int) and isinstance(wall, (int, float)):
                if not event.get("profiled"):
                    state.walls.setdefault(owner, {})[step] = float(wall)
        elif kind == "request_end":
            rid = str(event.get("request_id"))
            walls = state.walls.pop(rid, {})
            if state.phases.pop(rid, event.get("phase")) == "live" and step0_spike(walls):
                self.counters["step0_spikes"][(("run", run),)] += 1
            state.labels.pop(rid, None)

    def _compile_event(self, run: str, state: _Process, kind: str, event: dict[str, Any]) -> None:
        epoch = event.get("epoch") if isinstance(event.get("epoch"), int) else 0
        compile_id = str(event.get("compile_id"))
        key = (int(epoch or 0), compile_id)
        frame_key = (int(epoch or 0), compile_id.split("/", 1)[0])
        frame = event.get("frame")
        if isinstance(frame, dict) and isinstance(frame.get("name"), str):
            state.frames[frame_key] = frame["name"]
        name = _label(state.frames.get(frame_key, "?"))
        phase = (
            "live" if event.get("phase") == "live" else _label(str(event.get("phase") or "none"))
        )
        in_request = event.get("request_id") is not None
        if kind == "compile_start":
            if key not in state.open:
                state.open.add(key)
                self.in_progress[run] += 1
        elif kind == "compile_end":
            if key in state.open:
                state.open.discard(key)
                self.in_progress[run] -= 1
            if event.get("result") == "recompile_limit":
                self.counters["limit_hits"][(("run", run), ("frame", name))] += 1
            else:
                self.counters["compiles"][(("run", run), ("phase", phase), ("frame", name))] += 1
        elif kind == "recompile":
            self.counters["recompiles"][(("run", run), ("phase", phase), ("frame", name))] += 1
        elif kind == "recompile_limit":
            return  # counted at its compile_end (result recompile_limit)
        if phase == "live" and in_request and key not in state.live:
            if kind == "compile_end" and event.get("result") == "recompile_limit":
                return  # a limit hit compiles nothing
            state.live.add(key)
            self.counters["live_compiles"][(("run", run), ("frame", name))] += 1
            rid = str(event.get("request_id"))
            self.last_live[run] = (
                ("run", run),
                ("finding", _label(f"live-compile:{name}:{rid}")),
                ("request", _label(rid)),
                ("task", _label(state.labels.get(rid, ""))),
            )

    def exposition(self) -> str:
        """The counters in Prometheus' text exposition format (version 0.0.4)."""
        out: list[str] = []
        for name, (kind, text) in METRICS.items():
            series = self.series(name)
            out.append(f"# HELP diag_{name} {text}")
            out.append(f"# TYPE diag_{name} {kind}")
            for labels, value in sorted(series.items()):
                out.append(f"diag_{name}{_labels(labels)} {_number(value)}")
        return "\n".join(out) + "\n"

    def series(self, name: str) -> dict[Labels, float]:
        if name == "compiles_in_progress":
            return {(("run", run),): float(n) for run, n in self.in_progress.items()}
        if name == "last_live_compile_info":
            return dict.fromkeys(self.last_live.values(), 1.0)
        return dict(self.counters.get(_COUNTER_KEYS.get(name, name), {}))


#: name -> (type, help): what is exposed, in order.
METRICS: dict[str, tuple[str, str]] = {
    "compiles_total": ("counter", "Dynamo compiles that ended (ok or failed), by phase and frame"),
    "recompiles_total": ("counter", "Recompiles (every cache entry's guards failed)"),
    "live_compiles_total": (
        "counter",
        "Compiles that began during a live request (warmup did not cover it)",
    ),
    "compiles_in_progress": ("gauge", "Compiles begun and not ended"),
    "recompile_limit_hits_total": ("counter", "Frames that hit torch's recompile limit"),
    "step0_spikes_total": (
        "counter",
        "Live requests whose step 0 took 2x their other steps' median and 50 ms more",
    ),
    "last_live_compile_info": (
        "gauge",
        "The last live compile: its finding id, request and task id",
    ),
}
_COUNTER_KEYS = {
    "compiles_total": "compiles",
    "recompiles_total": "recompiles",
    "live_compiles_total": "live_compiles",
    "recompile_limit_hits_total": "limit_hits",
    "step0_spikes_total": "step0_spikes",
}


def step0_spike(walls: dict[int, float]) -> bool:
    """step0-spike's rule (analyzers/step0_spike.py decides it) on one request's unprofiled
    step wall times, judged as the request ends."""
    step0 = walls.get(0)
    baseline = sample(wall for step, wall in walls.items() if step != 0)
    if step0 is None or baseline is None or baseline.n < MIN_STEPS:
        return False
    return is_spike(step0, baseline)


def _label(value: str) -> str:
    return label(value, MAX_LABEL)


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    # Every value passes the one sanitiser here too: a newline in any label (a run folder's
    # name, a phase) would end the sample line and make the whole exposition unparseable.
    escaped = (
        f'{key}="{_label(value).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for key, value in labels
    )
    return "{" + ",".join(escaped) + "}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class EventTail:
    """The complete lines appended to a trace directory's event files since the last read."""

    def __init__(self, trace_dir: Path) -> None:
        self.trace_dir = trace_dir
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}

    def files(self) -> list[tuple[str, Path]]:
        """(run label, event file) of every process so far."""
        runs = self.trace_dir / RUNS_DIR
        try:
            return [(p.parent.parent.name, p) for p in sorted(runs.glob(f"*/*/{EVENTS_FILE}"))]
        except OSError:
            return []

    def read(self, counters: LiveCounters) -> None:
        for run, path in self.files():
            self.read_file(counters, run, path)

    def read_file(self, counters: LiveCounters, run: str, path: Path) -> None:
        offset = self._offsets.get(path, 0)
        try:
            with open_regular(path, follow=False) as handle:  # never a FIFO: a scrape waits
                handle.seek(offset)
                data = handle.read(MAX_READ)
        except (OSError, OutsideTrace):
            return
        if not data:
            return
        self._offsets[path] = offset + len(data)
        data = self._partial.pop(path, b"") + data
        lines = data.split(b"\n")
        if lines[-1]:
            self._partial[path] = lines[-1]  # a line still being written: read it next time
        for raw in lines[:-1]:
            try:
                event = jsontext.loads(raw)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                counters.observe(run, str(path), event)

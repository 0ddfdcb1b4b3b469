"""The Run model: a trace directory's events, as plain objects that analyzers query.

Built by `load_trace(path)` (diag.trace.load) from the manifest and the per-process event files
(docs/FORMAT.md) with the standard library only, so `diag check` stays fast. Kineto traces are
not read here: they are opened on demand by the analyses that need kernels (diag.trace.profiles).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.trace import schema as ev
from diag.trace.confine import (
    cache_folder,
)
from diag.trace.schema import Guard
from diag.trace.step_table import Step, StepTable

__all__ = [
    "Compile",
    "Event",
    "Frame",
    "Guard",
    "Process",
    "Request",
    "RunData",
    "Step",
    "Trace",
]

Position = tuple[str, str | None, int | None]  # phase, request id, step


@dataclass(frozen=True)
class Frame:
    name: str
    file: str | None
    line: int | None
    #: `file:line` of the user's call into this frame, when the frame is torch's own (the
    #: shared `inner` of wrap_inline): where a person should look. Not part of its identity.
    called_from: str | None = field(default=None, compare=False)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}" if self.file else self.name

    @staticmethod
    def from_ref(ref: ev.FrameRef | None) -> Frame | None:
        """The frame of a validated event field (diag.trace.schema.FrameRef)."""
        if ref is None or not ref.name:
            return None
        return Frame(ref.name, ref.file, ref.line)

    @staticmethod
    def from_event(data: Any) -> Frame | None:
        if not isinstance(data, dict) or not data.get("name"):
            return None
        line = data.get("line")
        return Frame(
            str(data["name"]), data.get("file"), int(line) if isinstance(line, int) else None
        )


@dataclass
class Compile:
    """One Dynamo compile attempt, with the guards that triggered it if it was a recompile."""

    compile_id: str
    epoch: int
    frame: Frame | None
    result: str  # ok, failed, recompile_limit
    duration_s: float | None
    t: int
    start_t: int | None
    phase: str
    request_id: str | None
    step: int | None
    pid: int
    guards: list[Guard] = field(default_factory=list)
    fail_reason: str | None = None
    #: A failed compile: torch's fail_type (`BackendCompilerFailed`...), the user line torch or its
    #: traceback names (`file:line`), and whether `suppress_errors` let the frame run eagerly
    #: (None: not known, as in TORCH_TRACE logs).
    fail_type: str | None = None
    fail_user_frame: str | None = None
    suppress_errors: bool | None = None
    #: torch's compilation_metrics.cache_size: entries the frame held before this compile.
    cache_size: int | None = None
    #: The thread that compiled (the step it belongs to is the one open in that thread).
    thread: str | None = None

    @property
    def is_recompile(self) -> bool:
        return bool(self.guards)

    @property
    def live(self) -> bool:
        return self.phase == "live" and self.request_id is not None


@dataclass
class Request:
    request_id: str
    phase: str
    shape: list[int] | None
    pid: int
    start_t: int
    end_t: int | None = None
    #: Where its steps are: rows of a StepTable (diag.trace.step_table), made into Step views
    #: on first use and kept.
    _table: StepTable | None = field(default=None, repr=False, compare=False)
    _rows: Sequence[int] | None = field(default=None, repr=False, compare=False)
    _steps: list[Step] | None = field(default=None, repr=False, compare=False)

    @property
    def steps(self) -> list[Step]:
        if self._steps is None:
            table, rows = self._table, self._rows
            self._steps = [] if table is None or rows is None else table.views(rows)
        return self._steps

    @property
    def step_count(self) -> int:
        """len(steps), without making the steps' views (a day holds 900 000)."""
        if self._steps is None and self._rows is not None:
            return len(self._rows)
        return len(self.steps)

    @property
    def first_step(self) -> Step | None:
        """steps[0], without making the other steps' views."""
        if self._steps is None and self._table is not None and self._rows:
            return Step._at(self._table, self._rows[0])
        return self.steps[0] if self.steps else None

    #: The program's own name for the request (LightX2V's task id), shown beside the id.
    label: str | None = None
    #: The name of the thread that served it (None in traces from before threads were recorded).
    thread: str | None = None
    #: The scalar arguments the call site passed besides the shape (a diffusers pipeline call's
    #: `guidance_scale`): what tells two requests of one shape apart. None when not recorded.
    params: dict[str, int | float | bool] | None = None


@dataclass
class Event:
    """Any other event, kept whole (graph breaks, limit hits, hygiene calls, magi_compile...)."""

    kind: str
    t: int
    pid: int
    data: dict[str, Any]

    @property
    def position(self) -> Position:
        return (
            str(self.data.get("phase") or "live"),
            self.data.get("request_id"),
            self.data.get("step"),
        )


@dataclass
class Process:
    pid: int
    rank: int | None
    folder: Path
    argv: list[str]
    versions: dict[str, Any]
    ended: bool
    adapter: str | None = None
    # Anchor between the event clock (`t`, CLOCK_MONOTONIC) and unix time, which Kineto uses.
    start_t: int = 0
    wall_ns: int | None = None
    #: When the process started, in clock ticks since boot (diag.trace.processes); None in older
    #: traces. Tells the recorded process from a later one that got its pid.
    start_ticks: int | None = None

    def unix_ns(self, t: int) -> int | None:
        """Unix time of an event-clock instant, or None if the process wrote no anchor."""
        return None if self.wall_ns is None else self.wall_ns + (t - self.start_t)


@dataclass
class RunData:
    """One run of the command: `compiled` (as given) or `eager` (the baseline)."""

    label: str
    folder: Path
    status: str | None
    processes: list[Process] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    compiles: list[Compile] = field(default_factory=list)
    # (pid, frame) -> entries at that process's exit.
    cache_final: dict[tuple[int, Frame], int] = field(default_factory=dict)
    # (t, pid, request id, step, frame, entries), one row per change reported at a step end.
    cache_history: list[tuple[int, int, str | None, int | None, Frame, int]] = field(
        default_factory=list
    )
    events: list[Event] = field(default_factory=list)
    collector_errors: list[dict[str, Any]] = field(default_factory=list)
    #: What processes began and never ended (diag.trace.inflight.Unfinished).
    unfinished: list[Any] = field(default_factory=list)
    # Where derived data (the parsed Kineto cache) may be written; None: don't cache.
    cache_dir: Path | None = None
    #: The trace directory the run was read from: every file a reader follows from the run
    #: (a Kineto window) must stay inside it (diag.trace.confine). None for imported runs.
    root: Path | None = None
    #: What reading skipped, one line each (corrupt event lines, a window that is not a
    #: readable file inside the trace): the `warnings` of analyze, check, the TUI and report.
    warnings: list[str] = field(default_factory=list)
    #: Event lines skipped as corrupt (docs/FORMAT.md), over all of the run's event files.
    corrupt_lines: int = 0
    # Step profiles (diag.trace.profiles.StepProfile), filled on first use or by an importer.
    profiles: list[Any] | None = None
    # Indexes built on first query (analyzers ask the same questions many times).
    _by_kind: tuple[int, dict[str, list[Event]]] | None = field(default=None, repr=False)
    _entries: tuple[int, dict[Frame, int]] | None = field(default=None, repr=False)
    _tags: tuple[int, dict[int, str]] | None = field(default=None, repr=False)
    #: diag.evidence.causes' memo: each recompile's cause, and the entries' tensors from their
    #: guard trees.
    _causes: dict[int, Any] = field(default_factory=dict, repr=False)
    _tensor_tables: dict[tuple[int, int, str], Any] | None = field(default=None, repr=False)

    @property
    def steps(self) -> list[Step]:
        return [step for request in self.requests for step in request.steps]

    def of(self, kind: str) -> list[Event]:
        """The events of one kind, in time order."""
        if self._by_kind is None or self._by_kind[0] != len(self.events):
            index: dict[str, list[Event]] = {}
            for event in self.events:
                index.setdefault(event.kind, []).append(event)
            self._by_kind = (len(self.events), index)
        return list(self._by_kind[1].get(kind, ()))

    def cache_entries(self) -> dict[Frame, int]:
        """Entries per code object: each process's count at exit (the last one it reported if it
        never exited), the largest over processes (ranks compile the same frames)."""
        size = len(self.cache_history) + len(self.cache_final)
        if self._entries is None or self._entries[0] != size:
            self._entries = (size, self._count_entries())
        return dict(self._entries[1])

    def _count_entries(self) -> dict[Frame, int]:
        latest: dict[tuple[int, Frame], int] = {
            (pid, frame): entries for _, pid, _, _, frame, entries in self.cache_history
        }
        latest.update(self.cache_final)
        result: dict[Frame, int] = {}
        for (_, frame), entries in latest.items():
            result[frame] = max(entries, result.get(frame, 0))
        return result

    def window_cache(self, process: Process) -> Path | None:
        """Where a process's parsed Kineto windows are cached: inside the trace's .diag-cache
        and nowhere else (None: read without caching)."""
        if self.cache_dir is None or self.root is None:
            return None
        return cache_folder(self.root, self.folder.name, process.folder.name)

    @property
    def adapters(self) -> set[str]:
        return {p.adapter for p in self.processes if p.adapter}

    def process_tag(self, pid: int | None) -> str:
        """`rank1` (or `proc0`) when the run has several processes; empty when it has one."""
        if pid is None or len(self.processes) <= 1:
            return ""
        # A table built once: analyzers ask per event, and at 512 ranks a scan per ask was
        # most of an analysis.
        if self._tags is None or self._tags[0] != len(self.processes):
            tags: dict[int, str] = {}
            for index, process in enumerate(self.processes):
                tag = f"rank{process.rank}" if process.rank is not None else f"proc{index}"
                tags.setdefault(process.pid, tag)
            self._tags = (len(self.processes), tags)
        return self._tags[1].get(pid, f"pid{pid}")


@dataclass
class Trace:
    path: Path
    manifest: dict[str, Any]
    runs: dict[str, RunData]

    @property
    def compiled(self) -> RunData | None:
        return self.runs.get("compiled")

    @property
    def eager(self) -> RunData | None:
        return self.runs.get("eager")

    @property
    def subject_runs(self) -> list[RunData]:
        """The runs findings are about: the program as recorded, not the reference runs (the
        eager baseline, `--against`) that exist to be compared with, whose findings would only
        repeat the subject's."""
        return [run for label, run in self.runs.items() if label not in ("eager", "against")]

    @property
    def reference(self) -> RunData | None:
        """The run compiled code is compared against: `--against`'s run, else the eager baseline."""
        return self.runs.get("against") or self.runs.get("eager")

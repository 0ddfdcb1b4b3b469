"""The Run model: a trace directory's events, read into plain objects that analyzers query.

Built by `load_trace(path)` from the manifest and the per-process event files (docs/FORMAT.md)
with the standard library only, so `diag check` stays fast. Kineto traces are not read here:
they are opened on demand by the analyses that need kernels (diag.trace.profiles).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from diag.errors import DiagError
from diag.summary import decode_event
from diag.trace.format import (
    CACHE_DIR,
    EVENTS_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    RUNS_DIR,
)

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
    def from_event(data: Any) -> Frame | None:
        if not isinstance(data, dict) or not data.get("name"):
            return None
        line = data.get("line")
        return Frame(
            str(data["name"]), data.get("file"), int(line) if isinstance(line, int) else None
        )


class Guard(msgspec.Struct, gc=False):
    """One failing guard of a recompile, as diag.guards parsed it (the raw text always kept).

    A msgspec Struct so that recompile events decode straight into guards: a trace with 10 000
    recompiles holds tens of thousands of them, and building them from dicts was most of the
    time `diag check` spent reading such a trace."""

    kind: str = "unknown"
    source: str | None = None
    expected: str | None = None
    actual: str | None = None
    user_location: str | None = None
    raw: str = ""
    compile_id: str | None = None

    def __post_init__(self) -> None:
        # Dynamo's module aliases (`G['__import_a_dot_b']`) read as the module path (`a.b`) in
        # every title, fix and id; `raw` keeps torch's text.
        if self.source is not None and "__import_" in self.source:
            from diag.guards import readable_source

            self.source = readable_source(self.source)

    def describe(self, condition: str, located: str = " at ") -> str:
        """`kind on source: condition (expected E, actual A) at file:line`, as reports quote a
        guard; `condition` is the text to show (e.g. diag.guards.condition_text(raw))."""
        line = f"{self.kind} on {self.source or '?'}: {condition}"
        if self.expected is not None and "expected" not in condition:
            line += f" (expected {self.expected}"
            line += f", actual {self.actual})" if self.actual is not None else ")"
        if self.user_location:
            line += f"{located}{self.user_location}"
        return line


class _Recompile(msgspec.Struct):
    epoch: int | None = None
    compile_id: str | None = None
    guards: list[Guard] = msgspec.field(default_factory=list)


_RECOMPILE = msgspec.json.Decoder(_Recompile)
_RECOMPILE_MARK = b'"recompile"'


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

    @property
    def is_recompile(self) -> bool:
        return bool(self.guards)

    @property
    def live(self) -> bool:
        return self.phase == "live" and self.request_id is not None


@dataclass
class Step:
    request_id: str
    index: int
    phase: str
    start_t: int
    end_t: int | None
    wall_s: float | None
    gpu_s: float | None
    profiled: bool
    shape: list[int] | None
    memory: dict[str, int] | None
    pid: int
    #: The process's CPU time in the step (all threads): wall time it did not run for was
    #: spent waiting (the GPU, I/O) or descheduled (a loaded host). None in older traces.
    cpu_s: float | None = None
    #: Runnable tasks per CPU (1-minute load average / CPUs) when the step ended; None in
    #: older traces. Above 1 the host was loaded: other work waited for a CPU.
    host_load: float | None = None
    #: Allocator figures at the step's start (a request's step 0 only, when CUDA was in use).
    memory_start: dict[str, int] | None = None


@dataclass
class Request:
    request_id: str
    phase: str
    shape: list[int] | None
    pid: int
    start_t: int
    end_t: int | None = None
    steps: list[Step] = field(default_factory=list)
    #: The program's own name for the request (LightX2V's task id), shown beside the id.
    label: str | None = None


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
    # Step profiles (diag.trace.profiles.StepProfile), filled on first use or by an importer.
    profiles: list[Any] | None = None
    # Indexes built on first query (analyzers ask the same questions many times).
    _by_kind: tuple[int, dict[str, list[Event]]] | None = field(default=None, repr=False)
    _entries: tuple[int, dict[Frame, int]] | None = field(default=None, repr=False)
    _tags: tuple[int, dict[int, str]] | None = field(default=None, repr=False)
    #: diag.causes' memo: each recompile's cause, and the entries' tensors from their guard trees.
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


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest, or a DiagError (exit 2) that says which way the directory is not usable."""
    if not path.exists():
        raise DiagError(f"{path}: no such trace directory")
    if not path.is_dir():
        raise DiagError(f"{path}: not a directory")
    manifest_path = path / MANIFEST
    if not manifest_path.exists():
        raise DiagError(f"{path}: not a diag trace directory (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise DiagError(f"{manifest_path}: truncated or corrupt (not valid JSON)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise DiagError(f"{manifest_path}: not a diag trace manifest")
    version = manifest.get("version")
    if not isinstance(version, int):
        raise DiagError(f"{manifest_path}: no format version")
    if version > FORMAT_VERSION:
        raise DiagError(
            f"{path}: written by a newer diag (format version {version}; this diag reads "
            f"up to {FORMAT_VERSION}); upgrade diag"
        )
    return manifest


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a trace is read: reading allocates hundreds of
    thousands of acyclic objects, and the collections they trigger took a third of the time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_trace(path: Path, against: Path | None = None) -> Trace:
    """Read a trace directory; with `against`, that directory's main run becomes the reference."""
    with _collector_paused():
        return _load_trace(path, against)


def _load_trace(path: Path, against: Path | None) -> Trace:
    manifest = read_manifest(path)
    runs: dict[str, RunData] = {}
    statuses = {
        r.get("label"): r.get("status") for r in manifest.get("runs", []) if isinstance(r, dict)
    }
    runs_dir = path / RUNS_DIR
    for folder in sorted(runs_dir.iterdir()) if runs_dir.exists() else []:
        if folder.is_dir():
            runs[folder.name] = _load_run(folder, statuses.get(folder.name), path)
    if against is not None:
        other = load_trace(against)
        if other.compiled is None:
            raise DiagError(f"{against}: the trace holds no run to compare against")
        other.compiled.label = "against"
        runs["against"] = other.compiled
    return Trace(path, manifest, runs)


def _load_run(folder: Path, status: str | None, root: Path) -> RunData:
    run = RunData(folder.name, folder, status, cache_dir=root / CACHE_DIR / folder.name)
    paths = sorted(folder.glob(f"*/{EVENTS_FILE}"))
    # Many ranks' event files: read in worker processes (diag.trace.parallel), same result.
    done = False
    if len(paths) > 1:
        parallel = importlib.import_module("diag.trace.parallel")
        done = parallel.should_read_events_in_parallel(paths)
        done = done and parallel.read_event_files(run, paths)
    if not done:
        for events_path in paths:
            _load_process(run, events_path)
    run.requests.sort(key=lambda r: r.start_t)
    run.compiles.sort(key=lambda c: c.t)
    run.events.sort(key=lambda e: e.t)
    from diag.trace.settle import settle  # begins with no end, corrected request shapes

    settle(run)
    return run


def _position(data: dict[str, Any]) -> tuple[str, str | None, int | None]:
    step = data.get("step")
    return (
        str(data.get("phase") or "live"),
        data.get("request_id") if isinstance(data.get("request_id"), str) else None,
        step if isinstance(step, int) else None,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    """A step index, or -1 (matches no step) when the event has none."""
    return value if isinstance(value, int) else -1


def _optional_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _events_or_recompiles(path: Path) -> Iterator[tuple[_Recompile | None, dict[str, Any]]]:
    """Each event as a dict, except well-formed recompile events, decoded typed (fast path)."""
    with open(path, "rb") as handle:
        for raw in handle:
            # "ev" comes second in every event line diag writes: look near the start only.
            if _RECOMPILE_MARK in raw[:64]:
                try:
                    recompile = _RECOMPILE.decode(raw)
                except msgspec.DecodeError:
                    pass  # torn line or odd field types: the tolerant path below decides
                else:
                    for guard in recompile.guards:
                        guard.kind = guard.kind or "unknown"
                    yield recompile, {}
                    continue
            event = decode_event(raw)
            if event is not None:
                yield None, event


def _guards(items: Any) -> list[Guard]:
    return [
        Guard(
            kind=str(item.get("kind") or "unknown"),
            source=item.get("source"),
            expected=item.get("expected"),
            actual=item.get("actual"),
            user_location=item.get("user_location"),
            raw=str(item.get("raw") or ""),
            compile_id=item.get("compile_id"),
        )
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict)
    ]


def _load_process(run: RunData, events_path: Path) -> None:
    process: Process | None = None
    pid = 0
    requests: dict[str, Request] = {}
    open_steps: dict[tuple[str, int], Step] = {}
    pending_guards: dict[tuple[int, str], list[Guard]] = {}
    for line, data in _events_or_recompiles(events_path):
        if line is not None:
            pending_guards[(line.epoch or 0, str(line.compile_id))] = line.guards
            continue
        kind = data.get("ev")
        raw_t = data.get("t")
        t: int = raw_t if isinstance(raw_t, int) else 0
        if kind == "process_start":
            pid = int(data.get("pid") or 0)
            process = Process(
                pid,
                data.get("rank"),
                events_path.parent,
                list(data.get("argv") or []),
                dict(data.get("versions") or {}),
                ended=False,
                start_t=t,
                wall_ns=data.get("wall_ns") if isinstance(data.get("wall_ns"), int) else None,
            )
            run.processes.append(process)
        elif kind == "process_end" and process is not None:
            process.ended = True
        elif kind == "adapter" and process is not None:
            process.adapter = str(data.get("name"))
        elif kind == "request_start":
            request = Request(
                str(data.get("request_id")),
                str(data.get("phase") or "live"),
                data.get("shape"),
                pid,
                t,
                label=data.get("label") if isinstance(data.get("label"), str) else None,
            )
            requests[request.request_id] = request
            run.requests.append(request)
        elif kind == "request_end":
            found = requests.get(str(data.get("request_id")))
            if found is not None:
                found.end_t = t
        elif kind == "step_start":
            rid = str(data.get("request_id"))
            step = Step(
                rid,
                int(data.get("step") or 0),
                str(data.get("phase") or "live"),
                t,
                None,
                None,
                None,
                bool(data.get("profiled")),
                data.get("shape"),
                None,
                pid,
            )
            memory = data.get("memory")
            if isinstance(memory, dict):
                step.memory_start = memory
            open_steps[(rid, step.index)] = step
            if rid in requests:
                requests[rid].steps.append(step)
        elif kind == "step_end":
            step_found = open_steps.get((str(data.get("request_id")), _int(data.get("step"))))
            if step_found is not None:
                step_found.end_t = t
                step_found.wall_s = data.get("wall_s")
                step_found.profiled = bool(data.get("profiled")) or step_found.profiled
                step_found.memory = data.get("memory")
                cpu = data.get("cpu_s")
                step_found.cpu_s = float(cpu) if isinstance(cpu, (int, float)) else None
                load = data.get("host_load")
                step_found.host_load = float(load) if isinstance(load, (int, float)) else None
        elif kind == "step_gpu":
            step_found = open_steps.get((str(data.get("request_id")), _int(data.get("step"))))
            if step_found is not None:
                step_found.gpu_s = data.get("gpu_s")
        elif kind == "recompile":
            key = (int(data.get("epoch") or 0), str(data.get("compile_id")))
            pending_guards[key] = _guards(data.get("guards"))
        elif kind == "compile_end":
            epoch = int(data.get("epoch") or 0)
            compile_id = str(data.get("compile_id"))
            phase, request_id, step_index = _position(data)
            run.compiles.append(
                Compile(
                    compile_id=compile_id,
                    epoch=epoch,
                    frame=Frame.from_event(data.get("frame")),
                    result=str(data.get("result") or "ok"),
                    duration_s=data.get("duration_s"),
                    t=t,
                    start_t=data.get("start_t"),
                    phase=phase,
                    request_id=request_id,
                    step=step_index,
                    pid=pid,
                    guards=pending_guards.pop((epoch, compile_id), []),
                    fail_reason=data.get("fail_reason"),
                    fail_type=_text(data.get("fail_type")),
                    fail_user_frame=_text(data.get("fail_user_frame")),
                    suppress_errors=data.get("suppress_errors")
                    if isinstance(data.get("suppress_errors"), bool)
                    else None,
                    cache_size=_optional_int(data.get("cache_size")),
                )
            )
        elif kind == "cache_entries":
            phase, request_id, step_index = _position(data)
            for code in data.get("codes") or []:
                frame = Frame.from_event(code)
                if frame is None:
                    continue
                entries = int(code.get("entries") or 0)
                run.cache_history.append((t, pid, request_id, step_index, frame, entries))
                if data.get("when") == "exit":
                    run.cache_final[(pid, frame)] = entries
        elif kind == "collector_error":
            run.collector_errors.append(data)
        elif isinstance(kind, str) and kind not in ("compile_start", "phase"):
            run.events.append(Event(kind, t, pid, data))

"""Read a trace directory into the Run model (diag.trace.run): the manifest, then each process's
event file, in worker processes for many ranks (diag.trace.parallel), then settled
(diag.trace.settle). The standard library and msgspec only, so `diag check` stays fast.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from diag.errors import DiagError
from diag.trace import schema as ev
from diag.trace.confine import (
    MAX_MANIFEST_BYTES,
    OutsideTrace,
    cache_folder,
    checked_file,
    read_small,
)
from diag.trace.format import (
    EVENTS_FILE,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    RUNS_DIR,
    process_event_files,
)
from diag.trace.lines import Batch, Tally, Unknown, decode_object, read_events
from diag.trace.run import Compile, Event, Frame, Process, Request, RunData, Trace
from diag.trace.schema import Guard
from diag.trace.step_builder import StepBuilder, compact_rows


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest, or a DiagError (exit 2) that says which way the directory is not usable.

    The manifest is validated against diag.trace.schema.Manifest, so that every reader can
    trust its types: a field of the wrong type is one line naming it, never a traceback."""
    if not path.exists():
        raise DiagError(f"{path}: no such trace directory")
    if not path.is_dir():
        raise DiagError(f"{path}: not a directory")
    manifest_path = path / MANIFEST
    # lexists: a manifest.json that is a dangling or looping link is still one, refused below
    # as such (not read as "no manifest": diag.open would then try it as a TORCH_TRACE dir).
    if not os.path.lexists(manifest_path):
        raise DiagError(f"{path}: not a diag trace directory (no {MANIFEST})")
    try:
        raw = read_small(path, manifest_path, MAX_MANIFEST_BYTES, "")
    except OutsideTrace as exc:
        raise DiagError(f"{path}: {exc.message}") from None
    manifest = decode_object(raw)
    if isinstance(manifest, str):
        raise DiagError(f"{manifest_path}: truncated or corrupt ({manifest})")
    if manifest.get("format") != FORMAT_NAME:
        raise DiagError(f"{manifest_path}: not a diag trace manifest")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise DiagError(f"{manifest_path}: no format version")
    if version > FORMAT_VERSION:
        raise DiagError(
            f"{path}: written by a newer diag (format version {version}; this diag reads "
            f"up to {FORMAT_VERSION}); upgrade diag"
        )
    try:
        msgspec.convert(manifest, ev.Manifest, strict=True)
    except (msgspec.ValidationError, RecursionError) as exc:
        raise DiagError(f"{manifest_path}: not a valid diag manifest: {_one_line(exc)}") from None
    return manifest


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


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
    statuses = {r.get("label"): r.get("status") for r in manifest.get("runs") or []}
    runs_dir = path / RUNS_DIR
    folders = sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []
    for folder in folders:
        if folder.is_dir() and not folder.name.startswith("."):
            runs[folder.name] = _load_run(folder, statuses.get(folder.name), path)
    if against is not None:
        other = load_trace(against)
        if other.compiled is None:
            raise DiagError(f"{against}: the trace holds no run to compare against")
        other.compiled.label = "against"
        runs["against"] = other.compiled
    return Trace(path, manifest, runs)


def _load_run(folder: Path, status: str | None, root: Path) -> RunData:
    run = RunData(folder.name, folder, status, cache_dir=cache_folder(root, folder.name), root=root)
    paths = []
    for events_path in sorted(folder.glob(f"*/{EVENTS_FILE}")):
        # An event file is the record itself: one that is not a regular file inside the trace
        # refuses the trace (exit 2), where a bad Kineto window is only skipped.
        try:
            paths.append(checked_file(root, events_path, None, "event file"))
        except OutsideTrace as exc:
            raise DiagError(f"{root}: {exc.message}") from None
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


def _label(path: Path) -> str:
    """`runs/compiled/pid42/events.jsonl`, as warnings name an event file."""
    return "/".join(path.parts[-4:])


def _position(event: ev.Positioned) -> tuple[str, str | None, int | None]:
    return (event.phase or "live", event.request_id, event.step)


def _process_batches(events_path: Path, tally: Tally) -> Iterator[Batch]:
    """One process's events in the order written: events.jsonl, then its retained step
    segments (format version 2; docs/FORMAT.md)."""
    for path in process_event_files(events_path):
        yield from read_events(path, tally)


def _load_process(run: RunData, events_path: Path, fast: bool = True) -> None:
    """One process's event file into `run`: every line validated once (diag.trace.lines), its
    steps into a StepTable, each other event into the model object that holds it.

    Steps are matched to their rows here, event by event, and the table is filled in bulk
    (diag.trace.step_builder). A step_end or step_gpu nearly always belongs to the row opened
    last, which is tried first; `fast=False` (for the tests) searches every time and fills
    the table one end at a time, as the events say."""
    tally = Tally()
    process: Process | None = None
    pid = 0
    steps = StepBuilder(fast)
    table = steps.table
    requests: dict[str, Request] = {}
    pending_guards: dict[tuple[int, str], list[Guard]] = {}
    # Locals: this loop runs for every line of a day-long trace. Kinds are told apart by
    # type() (none of the kinds tested here has subclasses), and `event` is Any: the
    # attributes read below are those of the kind just tested.
    step_end, step_start, step_gpu = ev.StepEnd, ev.StepStart, ev.StepGpu
    request_start, request_end, process_start = ev.RequestStart, ev.RequestEnd, ev.ProcessStart
    opened: list[Request] = []
    get_request, find = requests.get, steps.find
    keep_start, keep_index, keep_end, end_row = (
        steps.starts.append,
        steps.index.append,
        steps.ends.append,
        steps.end_rows.append,
    )
    gpu_row, gpu_s = steps.gpu_rows.append, steps.gpu_s.append
    rows = 0
    # The row opened last, its request id and its step: where a step_end or step_gpu nearly
    # always goes. None and -1 since a request began: its rows are searched instead.
    last_rid: str | None = None
    last_index = last_row = -1
    event: Any
    try:
        for batch in _process_batches(events_path, tally):
            for event in batch:
                kind = type(event)
                if kind is step_end:
                    if event.step == last_index and event.request_id == last_rid:
                        end_row(last_row)
                        keep_end(event)
                    else:
                        rid = event.request_id
                        found = get_request("None" if rid is None else rid)
                        row = -1 if found is None else find(found._rows, event.step)
                        if row >= 0:
                            end_row(row)
                            keep_end(event)
                elif kind is step_start:
                    rid = event.request_id
                    if rid is None:
                        rid = "None"
                    # A step outside any request is in no request's steps: not kept.
                    found = get_request(rid)
                    if found is not None:
                        index = event.step or 0
                        found._rows.append(rows)  # type: ignore[union-attr]  # a list here
                        keep_start(event)
                        keep_index(index)
                        if event.memory is not None:
                            steps.start_memory(rows, event.memory)
                        if fast:
                            last_rid, last_index, last_row = rid, index, rows
                        rows += 1
                elif kind is step_gpu:
                    if event.gpu_s is None:
                        continue
                    if event.step == last_index and event.request_id == last_rid:
                        row = last_row
                    else:
                        rid = event.request_id
                        found = get_request("None" if rid is None else rid)
                        row = -1 if found is None else find(found._rows, event.step)
                    if row >= 0:
                        gpu_row(row)
                        gpu_s(event.gpu_s)
                elif kind is request_start:
                    request = Request(
                        str(event.request_id),
                        event.phase or "live",
                        event.shape,
                        pid,
                        event.t,
                        label=event.label,
                        thread=event.thread,
                        params=event.params,
                        _table=table,
                        _rows=[],
                    )
                    requests[request.request_id] = request
                    run.requests.append(request)
                    opened.append(request)
                    last_rid, last_index = None, -1
                elif kind is request_end:
                    ended = requests.get(str(event.request_id))
                    if ended is not None:
                        ended.end_t = event.t
                else:
                    if kind is process_start:
                        steps.flush(pid)  # the starts so far are the previous pid's
                    process, pid = _other_event(
                        run, event, batch, events_path, process, pid, pending_guards
                    )
            steps.flush(pid)
    except OSError as exc:
        raise DiagError(f"{events_path}: cannot read ({exc.strerror or exc})") from None
    steps.finish(pid)
    for request in opened:
        request._rows = compact_rows(request._rows or ())
    run.corrupt_lines += tally.corrupt
    if tally.corrupt:
        run.warnings.append(
            f"{_label(events_path)}: {tally.corrupt} corrupt line(s) skipped (first: {tally.first})"
        )


#: The kinds the Run model keeps whole, as Event.data (and collector_errors): the line as
#: written, once its schema validated it.
KEPT_WHOLE = frozenset(
    kind
    for kind in ev.SCHEMAS.values()
    if kind
    not in (
        ev.ProcessStart,
        ev.ProcessEnd,
        ev.Adapter,
        ev.PhaseChange,
        ev.RequestStart,
        ev.RequestEnd,
        ev.StepStart,
        ev.StepEnd,
        ev.StepGpu,
        ev.CompileStart,
        ev.CompileEnd,
        ev.Recompile,
        ev.CacheEntries,
    )
)


def _other_event(
    run: RunData,
    event: ev.EventBase,
    batch: Batch,
    events_path: Path,
    process: Process | None,
    pid: int,
    pending_guards: dict[tuple[int, str], list[Guard]],
) -> tuple[Process | None, int]:
    """Every event but the step and request boundaries; returns the process and its pid."""
    t = event.t
    if isinstance(event, ev.Recompile):
        pending_guards[(event.epoch or 0, str(event.compile_id))] = event.guards
    elif isinstance(event, ev.CompileEnd):
        epoch = event.epoch or 0
        compile_id = str(event.compile_id)
        phase, request_id, step_index = _position(event)
        run.compiles.append(
            Compile(
                compile_id=compile_id,
                epoch=epoch,
                frame=Frame.from_ref(event.frame),
                result=event.result or "ok",
                duration_s=event.duration_s,
                t=t,
                start_t=event.start_t,
                phase=phase,
                request_id=request_id,
                step=step_index,
                pid=pid,
                guards=pending_guards.pop((epoch, compile_id), []),
                fail_reason=event.fail_reason,
                fail_type=event.fail_type,
                fail_user_frame=event.fail_user_frame,
                suppress_errors=event.suppress_errors,
                cache_size=event.cache_size,
                thread=event.thread,
            )
        )
    elif isinstance(event, ev.CacheEntries):
        phase, request_id, step_index = _position(event)
        for code in event.codes or []:
            if not code.name:
                continue
            frame = Frame(code.name, code.file, code.line)
            run.cache_history.append((t, pid, request_id, step_index, frame, code.entries))
            if event.when == "exit":
                run.cache_final[(pid, frame)] = code.entries
    elif isinstance(event, ev.ProcessStart):
        pid = event.pid
        process = Process(
            pid,
            event.rank,
            events_path.parent,
            list(event.argv),
            dict(event.versions),
            ended=False,
            start_t=t,
            wall_ns=event.wall_ns,
            start_ticks=event.start_ticks,
        )
        run.processes.append(process)
    elif isinstance(event, ev.ProcessEnd):
        if process is not None:
            process.ended = True
    elif isinstance(event, ev.Adapter):
        if process is not None:
            process.adapter = str(event.name)
    elif isinstance(event, Unknown):
        run.events.append(Event(event.kind, t, pid, event.data))
    elif type(event) in KEPT_WHOLE:
        data = batch.written(event)  # the line as written: a newer diag's fields kept too
        if data is None:  # not found again (cannot happen for a line that decoded): the event
            data = msgspec.to_builtins(event)
            data["t"] = t
        if isinstance(event, ev.CollectorError):
            run.collector_errors.append(data)
        else:
            run.events.append(Event(str(data["ev"]), t, pid, data))
    return process, pid

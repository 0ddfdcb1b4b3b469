"""Rows of the frames read off the event files: steps, requests, compiles, guard failures,
cache entries, profiler windows and findings. Plain dicts from the same Run model every other
diag output reads (diag.trace.run); no pandas here, diag.notebook.frame types them."""

from __future__ import annotations

import importlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from diag.evidence.causes import recompile_cause
from diag.evidence.request_names import clean_label
from diag.findings.model import Finding, sort_findings
from diag.trace.compile_metrics import compile_timings
from diag.trace.guards import condition_text
from diag.trace.run import Compile, Process, RunData, Trace

_MEMORY = ("allocated", "reserved", "max_allocated")


def shape_text(shape: Any) -> str | None:
    """`2x8x12`, or None when the adapter reported no shape."""
    if not isinstance(shape, list) or not shape:
        return None
    return "x".join(str(v) for v in shape)


class _Processes:
    """Who a pid is in one run: its folder, rank and clock anchor."""

    def __init__(self, run: RunData) -> None:
        self.run = run
        self.by_pid: dict[int, Process] = {p.pid: p for p in run.processes}

    def who(self, pid: int) -> dict[str, Any]:
        process = self.by_pid.get(pid)
        return {
            "run": self.run.label,
            "process": process.folder.name if process is not None else f"pid{pid}",
            "pid": pid,
            "rank": process.rank if process is not None else None,
        }

    def unix_ns(self, pid: int, t: int | None) -> int | None:
        process = self.by_pid.get(pid)
        if process is None or t is None or not t:
            return None
        return process.unix_ns(t)


def _compiles_by_step(run: RunData) -> dict[tuple[int, str, int], list[Compile]]:
    found: dict[tuple[int, str, int], list[Compile]] = defaultdict(list)
    for item in run.compiles:
        if item.request_id is not None and item.step is not None:
            found[(item.pid, item.request_id, item.step)].append(item)
    return found


def _seconds(compiles: list[Compile]) -> float:
    return sum(c.duration_s or 0.0 for c in compiles)


def _window_spans(run: RunData) -> dict[int, list[tuple[int, int, str, str | None]]]:
    """pid -> (start_t, end_t, window name, file) of each profiler window, in time order."""
    from diag.trace.profiles import window_spans

    return {
        pid: [
            (
                start.t if start is not None else end.t,
                end.t,
                str(end.data.get("window")),
                end.data.get("file") if isinstance(end.data.get("file"), str) else None,
            )
            for start, end in spans
        ]
        for pid, spans in window_spans(run).items()
    }


def _window_of(spans: list[tuple[int, int, str, str | None]], t: int) -> str | None:
    return next((name for begin, end, name, _ in spans if begin <= t <= end), None)


def step_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    for run in trace.runs.values():
        who = _Processes(run)
        compiles = _compiles_by_step(run)
        windows = _window_spans(run)
        for step in sorted(run.steps, key=lambda s: (s.start_t, s.pid)):
            inside = compiles.get((step.pid, step.request_id, step.index), [])
            memory = step.memory if isinstance(step.memory, dict) else {}
            yield {
                **who.who(step.pid),
                "phase": step.phase,
                "request": step.request_id,
                "step": step.index,
                "shape": shape_text(step.shape),
                "start": who.unix_ns(step.pid, step.start_t),
                "start_t": step.start_t or None,
                "end_t": step.end_t or None,
                "wall_s": step.wall_s,
                "cpu_s": step.cpu_s,
                "gpu_s": step.gpu_s,
                "host_load": step.host_load,
                "compiled": any(c.result != "recompile_limit" for c in inside),
                "compiles": len(inside),
                "compile_s": _seconds(inside),
                "profiled": step.profiled,
                "window": _window_of(windows.get(step.pid, []), step.start_t)
                if step.profiled
                else None,
                **{f"{key}_bytes": _int(memory.get(key)) for key in _MEMORY},
            }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def request_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    for run in trace.runs.values():
        who = _Processes(run)
        by_request: dict[tuple[int, str], list[Compile]] = defaultdict(list)
        for item in run.compiles:
            if item.request_id is not None:
                by_request[(item.pid, item.request_id)].append(item)
        for request in run.requests:
            walls = [s.wall_s for s in request.steps if s.wall_s is not None]
            first = next((s.wall_s for s in request.steps if s.index == 0), None)
            inside = by_request.get((request.pid, request.request_id), [])
            end = request.end_t
            yield {
                **who.who(request.pid),
                "phase": request.phase,
                "request": request.request_id,
                "label": clean_label(request.label),
                "thread": clean_label(request.thread),
                "shape": shape_text(request.shape),
                "steps": len(request.steps),
                "start": who.unix_ns(request.pid, request.start_t),
                "start_t": request.start_t or None,
                "end_t": end or None,
                "duration_s": (end - request.start_t) / 1e9 if end else None,
                "step_wall_s": sum(walls) if walls else None,
                "first_step_s": first,
                "compiles": len(inside),
                "compile_s": _seconds(inside),
            }


def compile_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    from diag.notebook.columns import COMPILE_CACHES, COMPILE_PHASES

    wanted = {*COMPILE_PHASES, *(f"{c}_{w}" for c in COMPILE_CACHES for w in ("hit", "miss"))}
    for run in trace.runs.values():
        who = _Processes(run)
        timings = compile_timings(run)
        for item in run.compiles:
            start_t = item.start_t if isinstance(item.start_t, int) else None
            if start_t is None and item.duration_s is not None:
                start_t = item.t - round(item.duration_s * 1e9)
            timing = timings.get((item.pid, item.epoch, item.compile_id), {})
            yield {
                **who.who(item.pid),
                "compile_id": item.compile_id,
                "epoch": item.epoch,
                "frame": item.frame.name if item.frame else None,
                "location": item.frame.location if item.frame and item.frame.file else None,
                "phase": item.phase,
                "request": item.request_id,
                "step": item.step,
                "start": who.unix_ns(item.pid, start_t),
                "start_t": start_t,
                "end_t": item.t or None,
                "duration_s": item.duration_s,
                "result": item.result,
                "recompile": item.is_recompile,
                "failed_guards": len(item.guards),
                "cache_size": item.cache_size,
                "fail_type": item.fail_type,
                "fail_reason": item.fail_reason,
                **{k: v for k, v in timing.items() if k in wanted},
            }


def guard_failure_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    # The analyzer's own reading of the line (diag.analyzers maps to analyzers/ at install).
    reading_line = importlib.import_module("diag.analyzers.guard_churn").reading_line
    cwd = trace.manifest.get("cwd")
    base = cwd if isinstance(cwd, str) else None
    for run in trace.runs.values():
        who = _Processes(run)
        for item in run.compiles:
            cause = recompile_cause(run, item) if item.guards else None
            cause_entry = cause.entry if cause is not None and cause.decided else None
            for guard in item.guards:
                yield {
                    **who.who(item.pid),
                    "compile_id": item.compile_id,
                    "epoch": item.epoch,
                    "frame": item.frame.name if item.frame else None,
                    "entry": guard.compile_id,
                    # diag's cause of the recompile is this entry's failure (diag.evidence.causes:
                    # the
                    # entry that could have served the call); False on every row when undecided.
                    "cause": cause_entry is not None and cause_entry == guard.compile_id,
                    "kind": guard.kind,
                    "source": guard.source,
                    "expected": guard.expected,
                    "actual": guard.actual,
                    "text": condition_text(guard.raw) if guard.raw else None,
                    "line": reading_line(run, item, guard, base),
                    "raw": guard.raw,
                    "phase": item.phase,
                    "request": item.request_id,
                    "step": item.step,
                    "start_t": item.start_t,
                }


def cache_entry_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    for run in trace.runs.values():
        who = _Processes(run)
        for t, pid, request, step, frame, entries in run.cache_history:
            yield {
                **who.who(pid),
                "frame": frame.name,
                "location": frame.location if frame.file else None,
                "entries": entries,
                # The exit snapshot is the one taken outside any step (collectors/cache.py).
                "at_exit": request is None and step is None,
                "request": request,
                "step": step,
                "t": t,
            }


def window_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    for run in trace.runs.values():
        who = _Processes(run)
        profiled: dict[int, list[int]] = defaultdict(list)
        for step in run.steps:
            if step.profiled:
                profiled[step.pid].append(step.start_t)
        for pid, spans in sorted(_window_spans(run).items()):
            for begin, end, name, file in spans:
                yield {
                    **who.who(pid),
                    "window": name,
                    "file": file,
                    "steps": sum(1 for t in profiled[pid] if begin <= t <= end),
                    "start_t": begin,
                    "end_t": end,
                }


def finding_rows(findings: list[Finding]) -> Iterator[dict[str, Any]]:
    for finding in sort_findings(findings):
        row = asdict(finding)
        row["related"] = len(finding.related)
        row["evidence"] = list(finding.evidence)
        yield row

"""Rows of the frames read off the profiler windows: kernels, CPU ops, a kernel summary per
window and region, and the offload breakdown. Built on the step profiles every kernel analysis
reads (diag.trace.profiles: each window cut into its steps, GPU work owned by the step that
launched it), so the numbers are the analyzers' own."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from diag.evidence.offload import offload_breakdown
from diag.evidence.regions import kernel_kind, op_kind
from diag.trace.profiles import StepProfile, step_profiles
from diag.trace.run import RunData, Trace

_DIRECTIONS = ("HtoD", "DtoH", "DtoD", "PtoP")


def window_name(window: str) -> str:
    """`pid425/kineto/r1-s0-new-shape.json.gz` -> `r1-s0-new-shape`."""
    name = PurePosixPath(window).name
    for suffix in (".gz", ".json", ".pt.trace"):
        name = name.removesuffix(suffix)
    return name


def profiles(trace: Trace, window: str | None = None) -> list[tuple[RunData, StepProfile]]:
    """Every run's profiled steps, or those of one window (its name, `r1-s0-new-shape`, or its
    file, `pid425/kineto/r1-s0-new-shape.json.gz`)."""
    return [
        (run, profile)
        for run in trace.runs.values()
        for profile in step_profiles(run)
        if window is None or window in (profile.window, window_name(profile.window))
    ]


def has_kernels(trace: Trace) -> bool:
    return any(profile.kernels for _, profile in profiles(trace))


def _who(run: RunData, profile: StepProfile) -> dict[str, Any]:
    return {
        "run": run.label,
        "process": PurePosixPath(profile.window).parts[0] if "/" in profile.window else None,
        "pid": profile.pid,
        "rank": profile.rank,
        "window": window_name(profile.window),
        "request": profile.request_id,
        "step": profile.step,
    }


def _region(marked: str) -> tuple[str | None, int | None]:
    """`wan_block_forward#3` -> (`wan_block_forward`, 3); empty -> (None, None)."""
    if not marked:
        return None, None
    name, _, call = marked.rpartition("#")
    if not name:
        return marked, None
    return name, int(call) if call.isdigit() else None


def kernel_rows(trace: Trace, window: str | None = None) -> Iterator[dict[str, Any]]:
    for run, profile in profiles(trace, window):
        who = _who(run, profile)
        for activity in profile.activities:
            region, call = _region(activity.region)
            yield {
                **who,
                "kind": activity.kind,
                "name": activity.name,
                "category": kernel_kind(activity.name),
                "region": region,
                "call": call,
                "op": activity.op or None,
                "device": activity.device,
                "stream": activity.stream,
                "ts_us": activity.ts,
                "dur_us": activity.dur,
                "bytes": activity.bytes if activity.kind != "kernel" else None,
                "direction": activity.direction or None,
            }


def cpu_op_rows(trace: Trace, window: str | None = None) -> Iterator[dict[str, Any]]:
    for run, profile in profiles(trace, window):
        who = _who(run, profile)
        for op in profile.cpu_ops:
            yield {
                **who,
                "kind": "cpu_op",
                "name": op.name,
                "category": op_kind(op.name),
                "region": _region(op.region)[0],
                "thread": op.tid,
                "ts_us": op.ts,
                "dur_us": op.dur,
            }


def kernel_summary_rows(trace: Trace, device: str) -> Iterator[dict[str, Any]]:
    """Per run, window, region and kernel (or CPU op, with device "cpu"): count and time over
    the window's profiled steps."""
    totals: dict[tuple[str, str, str | None, str, int | None], list[float]] = defaultdict(list)
    steps: dict[tuple[str, str], int] = defaultdict(int)
    for run, profile in profiles(trace):
        name = window_name(profile.window)
        steps[(run.label, name)] += 1
        if device == "gpu":
            for kernel in profile.kernels:
                key = (run.label, name, _region(kernel.region)[0], kernel.name, kernel.stream)
                totals[key].append(kernel.dur)
        else:
            for op in profile.cpu_ops:
                totals[(run.label, name, _region(op.region)[0], op.name, None)].append(op.dur)
    kind = kernel_kind if device == "gpu" else op_kind
    for (label, name, region, kernel, stream), durations in totals.items():
        total_us = sum(durations)
        yield {
            "run": label,
            "window": name,
            "region": region,
            "name": kernel,
            "category": kind(kernel),
            "stream": stream,
            "count": len(durations),
            "total_s": total_us / 1e6,
            "mean_us": total_us / len(durations),
            "steps": steps[(label, name)],
        }


def offload_rows(trace: Trace) -> Iterator[dict[str, Any]]:
    for run in trace.runs.values():
        folders = {p.pid: p.folder.name for p in run.processes}
        for row in offload_breakdown(run):
            directions: dict[str, Any] = {}
            for direction in _DIRECTIONS:
                directions[f"{direction.lower()}_s"] = row.copy_s.get(direction, 0.0)
                directions[f"{direction.lower()}_bytes"] = row.copy_bytes.get(direction, 0)
            yield {
                "run": run.label,
                "process": folders.get(row.pid),
                "pid": row.pid,
                "rank": row.rank,
                "request": row.request_id,
                "step": row.step,
                "span_s": row.span_s,
                "kernel_s": row.kernel_s,
                "copy_s": row.copy_total_s,
                "copy_bytes": row.copy_total_bytes,
                **directions,
                "sync_s": row.sync_s,
                "idle_s": row.idle_s,
                "bound": row.bound,
                "max_gain_s": row.max_gain_s,
            }

"""What `diag analyze` (and the TUI and the report) can open, read into one Trace.

A diag trace directory is the main input. People also hold artifacts made without diag: a
TORCH_TRACE log directory (compiles, guards, graph breaks; no steps) and plain torch.profiler
trace files (kernels; steps from `ProfilerStep#N`). Each becomes the same Run model, so every
analyzer that has the data it needs works on it unchanged.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from diag.errors import DiagError
from diag.trace.load import load_trace
from diag.trace.printable import one_line
from diag.trace.progress import ProgressCallback
from diag.trace.run import Process, Request, RunData, Step, Trace


def open_input(
    trace_dir: Path | None = None,
    *,
    against: Path | None = None,
    torch_trace: Path | None = None,
    kineto: Path | None = None,
    progress: ProgressCallback | None = None,
) -> Trace:
    """Exactly one of `trace_dir`, `torch_trace` or `kineto`; `against` is a directory of the
    same kind as `trace_dir`, or a second Kineto file for `kineto`."""
    given = [p for p in (trace_dir, torch_trace, kineto) if p is not None]
    if len(given) != 1:
        raise DiagError("give one input: TRACE_DIR, --torch-trace DIR or --kineto FILE")
    if torch_trace is not None:
        if against is not None:
            raise DiagError("--against compares kernels: use it with TRACE_DIR or --kineto")
        module = importlib.import_module("diag.trace.torchtrace")
        trace: Trace = module.load_torch_trace(torch_trace, progress)
        return trace
    if kineto is not None:
        notices: list[str] = []
        runs = {"compiled": kineto_run("compiled", kineto, progress, notices)}
        if against is not None:
            theirs: list[str] = []
            runs["against"] = kineto_run("against", against, progress, theirs)
            notices.extend(f"{against.name} (--against): {line}" for line in theirs)
        manifest = {"format": "kineto", "status": "complete", "warnings": notices}
        return Trace(kineto, manifest, runs)
    assert trace_dir is not None
    trace = load_trace(trace_dir, against)
    if not trace.runs:
        raise DiagError(f"{trace_dir}: the trace holds no runs (was the recording interrupted?)")
    return trace


def kineto_run(
    label: str,
    path: Path,
    progress: ProgressCallback | None = None,
    notices: list[str] | None = None,
) -> RunData:
    """One torch.profiler trace file as a run with one process and its profiled steps; what the
    file does not hold for the analyses is added to `notices`."""
    kineto = importlib.import_module("diag.trace.kinetocache")
    profiles_module = importlib.import_module("diag.trace.profiles")
    _check_kineto_path(path)
    parsed = kineto.load_kineto(path, None, progress)
    profiles = profiles_module.profiles_from_kineto(label, parsed)
    run = RunData(label, path.parent, "complete")
    if notices is not None:
        notices.extend(kineto_notices(parsed))
    run.processes.append(Process(0, None, path.parent, [], {}, ended=True))
    request = Request("trace", "live", None, 0, 0, end_t=0)
    for profile in profiles:
        request.steps.append(
            Step(
                "trace",
                profile.step,
                "live",
                0,
                0,
                (profile.end_ts - profile.start_ts) / 1e6,
                None,
                True,
                None,
                None,
                0,
            )
        )
    run.requests.append(request)
    run.profiles = profiles
    return run


def _check_kineto_path(path: Path) -> None:
    """One line that names what the path is, when it is not a trace file to read."""
    if path.is_file():
        return
    if path.is_dir():
        raise DiagError(
            f"{path}: is a directory; --kineto takes one torch.profiler trace file "
            "(a diag record output is given as TRACE_DIR)"
        )
    if path.exists():
        raise DiagError(f"{path}: not a regular file (a device or a pipe), not a Kineto trace")
    raise DiagError(f"{path}: no such Kineto trace file")


def input_warnings(trace: Trace) -> list[str]:
    """What the reader skipped or could not see, one line each: a TORCH_TRACE import's damage
    counts, the notices of a Kineto file's reader (what the trace does not hold), and what
    reading a trace directory skipped (corrupt event lines, a Kineto window that is not a
    readable file inside the trace). Complete once the windows were read (after analyze)."""
    warnings: list[str] = []
    imported = trace.manifest.get("torch_trace")
    if isinstance(imported, dict):
        warnings.extend(str(w) for w in imported.get("warnings", []))
    warnings.extend(str(w) for w in trace.manifest.get("warnings", []))
    for label, run in trace.runs.items():
        prefix = f"{label} (--against): " if label == "against" else ""
        warnings.extend(prefix + w for w in run.warnings)
    # One line each, whatever a name in them held (a window's file, a frame): every face
    # (the CLI's lines, the TUI's overview, the report, JSON) takes them from here.
    return [one_line(w) for w in warnings]


_DEVICE_PREFIXES = ("mtia", "privateuse1", "xpu", "hpu", "npu", "mps")


def kineto_notices(trace: Any) -> list[str]:
    """What a plain profiler trace does not hold for diag's analyses, one line each: nothing at
    all, device work of an accelerator diag does not read, CUPTI profiler ranges instead of
    kernels, or no GPU activity. Empty for a trace with GPU kernels."""
    if not trace.event_count:
        return ["the trace holds no events (traceEvents is empty): nothing was analyzed"]
    kernels = sum(1 for a in trace.activities if a.kind == "kernel")
    unread: dict[str, int] = trace.unread
    notices: list[str] = []
    device = {c: n for c, n in unread.items() if c.lower().startswith(_DEVICE_PREFIXES)}
    if device:
        listed = ", ".join(f"{c} {n}" for c, n in sorted(device.items(), key=lambda i: -i[1]))
        notices.append(
            f"{sum(device.values())} events of an accelerator diag does not read ({listed}): "
            "its device work is not in any figure (kernels, copies and idle are read for CUDA "
            "and ROCm only)"
        )
    ranges = unread.get("cuda_profiler_range", 0)
    if ranges and not kernels:
        notices.append(
            f"a CUPTI range-profiler trace ({ranges} cuda_profiler_range events) with no kernel "
            "activity: kernel timing needs torch.profiler with ProfilerActivity.CUDA"
        )
    unlaunched = [a for a in trace.activities if a.launch_ts < 0]
    if unlaunched and len(unlaunched) < len(trace.activities):
        busy_ms = sum(a.dur for a in unlaunched) / 1e3
        notices.append(
            f"{len(unlaunched)} GPU activities ({busy_ms:.3f} ms) have no launch record in the "
            "trace (launched before the profiler started, or the trace was cut): they are left "
            "out of every step, as HTA drops them"
        )
    if not trace.activities and not device and not ranges:
        notices.append(
            "no GPU activity in the trace (a CPU-only profile): kernel, copy and idle "
            "analyses had nothing to read; profile with ProfilerActivity.CUDA to see them"
        )
    return notices

"""What the UI calls a recorded event: `gc.collect() 32 µs`, not `gc_collect (32 us)`.

Event kinds are the trace format's names (docs/FORMAT.md), written for programs. A person
reading a step's detail wants what happened, in the words the program would use
(`torch.cuda.empty_cache()`, a compile's time). One mapping, used wherever the UI names an
event; a kind it does not know reads as its words, underscores dropped.
"""

from __future__ import annotations

from typing import Any

from diag.evidence.libraries import library_of
from diag.trace.run import Event

from .cells import seconds

#: Event kind -> what the UI calls it.
EVENT_NAMES: dict[str, str] = {
    "adapter": "step adapter",
    "autotune": "autotuning",
    "cache_entries": "cache entries",
    "call_shapes": "call shapes",
    "collector_error": "diag collector error",
    "collectors_paused": "diag collectors paused",
    "compile_end": "compile",
    "compile_options": "torch.compile options",
    "compile_settings": "Dynamo settings at compile",
    "compile_start": "compile start",
    "compile_timing": "compile time",
    "crash": "crash",
    "cudagraph_log": "CUDA-graph log",
    "cudagraph_record_start": "CUDA graph recording start",
    "cudagraph_record": "CUDA graph recorded",
    "cudagraph_skip": "CUDA graphs skipped",
    "dynamo_reset": "torch._dynamo.reset()",
    "eager_fallback": "eager call after the recompile limit",
    "empty_cache": "torch.cuda.empty_cache()",
    "gc_collect": "gc.collect()",
    "gc_pause": "garbage-collector pause",
    "graph_break": "graph break",
    "guard_sources": "guarded sources",
    "lightx2v_config": "LightX2V config",
    "lightx2v_runner": "LightX2V runner and its warmup entry",
    "limit_calls": "calls after the recompile limit",
    "magi_compile": "magi_compile target",
    "magi_compile_end": "magi compile",
    "magi_compile_start": "magi compile start",
    "magi_guard_check": "magi guard check",
    "magi_runtime_compile": "magi runtime compile",
    "magi_state": "magi state",
    "os_exit": "os._exit",
    "phase": "phase change",
    "pipeline_offload": "diffusers offload",
    "process_end": "process end",
    "process_start": "process start",
    "profile_window_end": "profiler window end",
    "profile_window_skipped": "profiler window not written",
    "profile_window_start": "profiler window start",
    "recompile": "recompile",
    "recompile_limit": "recompile limit hit",
    "recompile_refused": "recompile refused (fail_on_recompile)",
    "recording_stopped": "recording stopped",
    "request_end": "request end",
    "request_start": "request start",
    "shape_specialization": "dim specialised",
    "shape_symbol": "dynamic dim",
    "stance": "torch.compiler stance",
    "step_end": "step end",
    "step_gpu": "step GPU time",
    "step_start": "step start",
    "steps_dropped": "older steps rotated away",
    "traced_code": "traced code",
}


def event_name(kind: str) -> str:
    """The UI's name for an event kind."""
    return EVENT_NAMES.get(kind, kind.replace("_", " "))


def describe(event: Event) -> str:
    """One line for an event in a detail panel: its name and what it says in a few words."""
    data = event.data
    name = event_name(event.kind)
    if event.kind == "compile_timing":
        what = "first-call work" if data.get("runtime") is True else "compile time"
        took = _secs(data.get("total_s"))
        return f"{what} of {data.get('compile_id', '?')}" + (f": {took}" if took else "")
    if event.kind == "magi_guard_check":
        return f"{name}: {'passed' if data.get('ok') is True else 'failed'}"
    if event.kind == "autotune" and isinstance(data.get("kernel"), str):
        return _joined(f"{name} {data['kernel']}", _secs(data.get("duration_s")))
    parts = [name]
    if isinstance(data.get("compile_id"), str):
        parts.append(f"of {data['compile_id']}")
    line = _joined(" ".join(parts), _secs(data.get("duration_s")))
    caller = data.get("caller")
    if isinstance(caller, dict):
        library = library_of(caller.get("file") if isinstance(caller.get("file"), str) else None)
        if library is not None:
            line += f", called by {library.name}"
    return line


def _secs(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    return seconds(float(value))


def _joined(head: str, duration: str) -> str:
    return f"{head} {duration}" if duration else head
